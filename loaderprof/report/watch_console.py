"""`loaderprof watch`'s tables: a pure function of the WatchReport."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from loaderprof.model.metrics import Stat
from loaderprof.model.units import fmt_bytes, fmt_seconds, plural
from loaderprof.model.watch import WatchedLoader, WatchReport
from loaderprof.report.console import findings_panel
from loaderprof.report.tables import titled

_REUSED = {True: "yes", False: "no", None: "–"}
_TORCH = "torch.utils.data.dataloader.DataLoader"
# Characters of the pool timeline.
_WIDTH = 40


def _seconds(v: float | None) -> str:
    return "–" if v is None else fmt_seconds(v)


def _settings(ld: WatchedLoader) -> str:
    if not ld.num_workers:
        return "0 (main)"
    return f"{ld.num_workers} {'pers.' if ld.persistent_workers else ''}".strip()


def _pair(cold: float | None, steady: Stat | None) -> str:
    """Cold (the first epoch) / steady (the median of the rest), in one unit."""
    values = [cold, steady.median if steady else None]
    shown = [v for v in values if v is not None]
    if not shown:
        return "–"
    ms = max(shown) < 10
    text = ["–" if v is None else (f"{v * 1e3:.0f}" if ms else f"{v:.1f}") for v in values]
    return f"{text[0]} / {text[1]} {'ms' if ms else 's'}"


def _built_at(ld: WatchedLoader, report: WatchReport) -> str:
    """The site, and which process built it when several did (torchrun's ranks)."""
    if len({other.pid for other in report.loaders}) < 2:
        return ld.site
    return f"{ld.site} (rank {ld.rank})" if ld.rank is not None else f"{ld.site} (pid {ld.pid})"


def loaders_table(report: WatchReport) -> Table:
    t = titled("DataLoaders")
    for col, just in (
        ("loader", "left"),
        ("workers", "left"),
        ("epochs", "right"),
        ("reused", "right"),
        ("epoch\ncold/steady", "right"),
        ("1st batch\ncold/steady", "right"),
        ("worker\nstart-up", "right"),
        ("peak\nUSS", "right"),
        ("idle\nUSS", "right"),
    ):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for ld in report.loaders:
        done = sum(1 for e in ld.epochs if e.end_s is not None)
        epochs = str(done) if done == len(ld.epochs) else f"{done} (+{len(ld.epochs) - done} cut)"
        t.add_row(
            # The class only where it is not torch's own.
            ld.id if ld.cls == _TORCH else f"{ld.id} {ld.cls.rsplit('.', 1)[-1]}",
            _settings(ld),
            epochs,
            _REUSED[ld.workers_reused],
            _pair(ld.cold_epoch_s, ld.steady_epoch_s),
            _pair(ld.cold_first_batch_s, ld.steady_first_batch_s),
            _seconds(ld.worker_startup_s.median if ld.worker_startup_s else None),
            fmt_bytes(ld.peak_worker_uss_bytes) if ld.peak_worker_uss_bytes else "–",
            fmt_bytes(ld.idle_workers_uss_bytes) if ld.idle_workers_uss_bytes else "–",
        )
    return t


def pools_table(report: WatchReport) -> Table:
    """Which worker pools were alive when: one bar per pool over the command's run."""
    most = report.peak_worker_processes
    title = f"Worker pools over the run (most worker processes at once: {most})"
    t = titled(title)
    t.add_column("loader")
    t.add_column("built at", overflow="fold")
    t.add_column("workers", justify="right")
    t.add_column(f"0 … {fmt_seconds(report.wall_s)}")
    scale = _WIDTH / report.wall_s if report.wall_s > 0 else 0
    site = {ld.id: _built_at(ld, report) for ld in report.loaders}
    for p in report.pools:
        lo, hi = int(p.start_s * scale), max(int(p.start_s * scale) + 1, int(p.end_s * scale))
        t.add_row(p.loader, site.get(p.loader, "?"), str(p.workers), " " * lo + "━" * (hi - lo))
    return t


def render(report: WatchReport) -> RenderableType:
    status = "interrupted; " if report.interrupted else ""
    head = Text(
        f"loaderprof watch: {' '.join(report.command)}\n{status}exit status "
        f"{report.exit_code} · {fmt_seconds(report.wall_s)} · "
        f"{plural(len(report.loaders), 'DataLoader')} · "
        f"sampler duty cycle {report.sampler_duty_cycle or 0:.1%}"
    )
    parts: list[RenderableType] = [head]
    if report.loaders:
        parts += [loaders_table(report), pools_table(report)]
    else:
        parts.append(Text("no DataLoader was built (was torch.utils.data imported?)"))
    if report.findings:
        parts.append(findings_panel(report.findings, title="findings"))
    else:
        parts.append(Text("findings: none"))
    return Group(*parts)
