"""`loaderprof watch`'s tables: a pure function of the WatchReport."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from loaderprof.report.console import findings_panel
from loaderprof.report.rows import fmt_stat
from loaderprof.units import fmt_bytes, fmt_seconds
from loaderprof.watch_results import WatchedLoader, WatchReport

_REUSED = {True: "yes", False: "no", None: "–"}
# Characters of the pool timeline.
_WIDTH = 40


def _seconds(v: float | None) -> str:
    return "–" if v is None else fmt_seconds(v)


def _settings(ld: WatchedLoader) -> str:
    parts = [f"{ld.num_workers} workers"]
    if ld.num_workers:
        parts.append("persistent" if ld.persistent_workers else "not persistent")
        parts.append(ld.start_method or "default")
    return ", ".join(parts)


def loaders_table(report: WatchReport) -> Table:
    t = Table(title="DataLoaders", title_justify="left", header_style="bold")
    for col, just in (
        ("loader", "left"),
        ("built at", "left"),
        ("settings", "left"),
        ("epochs", "right"),
        ("workers reused", "right"),
        ("cold epoch", "right"),
        ("steady epoch", "right"),
        ("first batch (cold / steady)", "right"),
        ("worker start-up", "right"),
        ("peak USS / worker", "right"),
        ("idle USS held", "right"),
    ):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for ld in report.loaders:
        done = sum(1 for e in ld.epochs if e.end_s is not None)
        epochs = str(done) if done == len(ld.epochs) else f"{done} (+{len(ld.epochs) - done} cut)"
        first = (
            f"{_seconds(ld.cold_first_batch_s)} / {fmt_stat(ld.steady_first_batch_s, fmt_seconds)}"
        )
        t.add_row(
            f"{ld.id} {ld.cls.rsplit('.', 1)[-1]}",
            ld.site,
            _settings(ld),
            epochs,
            _REUSED[ld.workers_reused],
            _seconds(ld.cold_epoch_s),
            fmt_stat(ld.steady_epoch_s, fmt_seconds),
            first,
            fmt_stat(ld.worker_startup_s, fmt_seconds),
            fmt_bytes(ld.peak_worker_uss_bytes) if ld.peak_worker_uss_bytes else "–",
            fmt_bytes(ld.idle_workers_uss_bytes) if ld.idle_workers_uss_bytes else "–",
        )
    return t


def pools_table(report: WatchReport) -> Table:
    """Which worker pools were alive when: one bar per pool over the command's run."""
    t = Table(
        title=f"Worker pools over the run (most worker processes at once: "
        f"{report.peak_worker_processes})",
        title_justify="left",
        header_style="bold",
    )
    t.add_column("loader")
    t.add_column("workers", justify="right")
    t.add_column(f"0 … {fmt_seconds(report.wall_s)}")
    scale = _WIDTH / report.wall_s if report.wall_s > 0 else 0
    for p in report.pools:
        lo, hi = int(p.start_s * scale), max(int(p.start_s * scale) + 1, int(p.end_s * scale))
        t.add_row(p.loader, str(p.workers), " " * lo + "━" * (hi - lo))
    return t


def render(report: WatchReport) -> RenderableType:
    status = "interrupted; " if report.interrupted else ""
    head = Text(
        f"{' '.join(report.command)}\n{status}exit status {report.exit_code} · "
        f"{fmt_seconds(report.wall_s)} · {len(report.loaders)} DataLoader(s) · sampler "
        f"duty cycle {report.sampler_duty_cycle or 0:.1%}"
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
