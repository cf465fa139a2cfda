"""`loaderprof watch`'s tables: a pure function of the WatchReport."""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from loaderprof.model.metrics import Stat
from loaderprof.model.watch import WatchedLoader, WatchReport
from loaderprof.report.console import findings_panel, num, unit_of
from loaderprof.report.datawait import WATCH_HEAD, watch_wait_text
from loaderprof.report.rows import LOADER_REUSED, epoch_count, most_workers
from loaderprof.units import fmt_pct, fmt_seconds, plural

_TORCH = "torch.utils.data.dataloader.DataLoader"
# The brief tables' look (NOTE [one screen]): no side borders, so figures have the room.
_PLAIN = {"header_style": "bold", "box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False}
# Characters of the pool timeline.
_WIDTH = 32


def _settings(ld: WatchedLoader) -> str:
    if not ld.num_workers:
        return "0 (main)"
    return f"{ld.num_workers} {'pers.' if ld.persistent_workers else ''}".strip()


def _unit(values: list[float | None], kind: str = "time") -> tuple[str, float]:
    """One unit for a whole column, in its header, so its cells are bare figures; none
    over a column with no figure in it."""
    stats = [Stat.of([v]) for v in values if v is not None]
    return unit_of(kind, stats) if stats else ("", 1.0)


def _cold_steady(loaders: tuple[WatchedLoader, ...], cold: str, steady: str) -> list[float | None]:
    out: list[float | None] = []
    for ld in loaders:
        st = getattr(ld, steady)
        out += [getattr(ld, cold), st.median if st else None]
    return out


def _built_at(ld: WatchedLoader, report: WatchReport) -> str:
    """The site, and which process built it when several did (torchrun's ranks)."""
    if len({other.pid for other in report.loaders}) < 2:
        return ld.site
    return f"{ld.site} (rank {ld.rank})" if ld.rank is not None else f"{ld.site} (pid {ld.pid})"


def _figure(v: float | None, k: float) -> str:
    return "–" if v is None else num(v * k)


def loaders_table(report: WatchReport) -> RenderableType:
    """Two tables that fit 80 columns (NOTE [one screen]): each loader's settings, pool
    and memory; then its times, cold (the first epoch) and steady (the median of the
    rest), each column in one unit named in its header."""
    t = Table(**_PLAIN)  # type: ignore[arg-type]
    t.add_column("loader", overflow="fold")
    for col in ("workers", "epochs", "reused"):
        t.add_column(col, no_wrap=True, justify="left" if col == "workers" else "right")
    startup = [ld.worker_startup_s.median if ld.worker_startup_s else None for ld in report.loaders]
    s_unit, s_k = _unit(startup)
    memory = [ld.peak_worker_uss_bytes for ld in report.loaders]
    memory += [ld.idle_workers_uss_bytes for ld in report.loaders]
    # A loader without workers holds none: its 0 is no figure (shown "–").
    b_unit, b_k = _unit([v or None for v in memory], "bytes")
    for col in (
        f"worker\nstart-up\n{s_unit}",
        f"peak USS\n/ worker\n{b_unit}",
        f"idle USS\nheld\n{b_unit}",
    ):
        t.add_column(col, justify="right", no_wrap=True)
    for ld, up in zip(report.loaders, startup, strict=True):
        epochs = epoch_count(ld)
        t.add_row(
            # The class only where it is not torch's own.
            ld.id if ld.cls == _TORCH else f"{ld.id} {ld.cls.rsplit('.', 1)[-1]}",
            _settings(ld),
            epochs,
            LOADER_REUSED[ld.workers_reused],
            _figure(up, s_k),
            _figure(ld.peak_worker_uss_bytes or None, b_k),
            _figure(ld.idle_workers_uss_bytes or None, b_k),
        )
    times = Table(**_PLAIN)  # type: ignore[arg-type]
    times.add_column("loader", no_wrap=True)
    epoch = _cold_steady(report.loaders, "cold_epoch_s", "steady_epoch_s")
    first = _cold_steady(report.loaders, "cold_first_batch_s", "steady_first_batch_s")
    (e_unit, e_k), (f_unit, f_k) = _unit(epoch), _unit(first)
    for col in (
        f"epoch\ncold\n{e_unit}",
        f"\nsteady\n{e_unit}",
        f"1st batch\ncold\n{f_unit}",
        f"\nsteady\n{f_unit}",
    ):
        times.add_column(col, justify="right", no_wrap=True)
    for i, ld in enumerate(report.loaders):
        times.add_row(
            ld.id,
            _figure(epoch[2 * i], e_k),
            _figure(epoch[2 * i + 1], e_k),
            _figure(first[2 * i], f_k),
            _figure(first[2 * i + 1], f_k),
        )
    head = "Epoch times (cold: epoch 1 · steady: median of epochs 2..N)"
    parts: list[RenderableType] = [Text("DataLoaders"), t]
    if unread := unread_idle(report.loaders):
        parts.append(_hanging(unread))
    parts += [Text(head), times]
    waits = [(ld.id, text) for ld in report.loaders if (text := watch_wait_text(ld))]
    if waits:
        # See NOTE [data wait].
        parts += [Text(WATCH_HEAD), _hanging(waits)]
    return Group(*parts)


def _hanging(rows: Sequence[tuple[str, str]]) -> Table:
    """Sentences each after its loader's id: a grid, so that each hangs under its start."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for lid, text in rows:
        grid.add_row(lid, text)
    return grid


def unread_idle(loaders: Sequence[WatchedLoader]) -> list[tuple[str, str]]:
    """Why a persistent pool shows no idle USS: its memory is read in a pause between
    its epochs, and no pause held a whole reading (a walk of its workers' pages)."""
    out = []
    for ld in loaders:
        if not ld.persistent_workers or not ld.num_workers or ld.idle_workers_uss_bytes:
            continue
        gaps = [b.start_s - a.end_s for a, b in itertools.pairwise(ld.epochs) if a.end_s]
        if gaps:
            longest = fmt_seconds(max(gaps))
            out.append(
                (
                    ld.id,
                    "idle USS held –: no pause between its epochs held a whole reading of "
                    f"its workers' memory (the longest pause: {longest})",
                )
            )
    return out


def pools_table(report: WatchReport) -> RenderableType:
    """Which worker pools were alive when: one bar per pool over the command's run."""
    most = most_workers(report.peak_worker_processes)
    title = f"Worker pools over the run (most worker processes at once: {most})"
    t = Table(**_PLAIN)  # type: ignore[arg-type]
    t.add_column("loader", no_wrap=True)
    t.add_column("built at", overflow="fold")
    t.add_column("workers", justify="right", no_wrap=True)
    t.add_column(f"0 … {fmt_seconds(report.wall_s)}", no_wrap=True)
    scale = _WIDTH / report.wall_s if report.wall_s > 0 else 0
    site = {ld.id: _built_at(ld, report) for ld in report.loaders}
    for p in report.pools:
        lo, hi = int(p.start_s * scale), max(int(p.start_s * scale) + 1, int(p.end_s * scale))
        t.add_row(p.loader, site.get(p.loader, "?"), str(p.workers), " " * lo + "━" * (hi - lo))
    return Group(Text(title), t)


def render(report: WatchReport) -> RenderableType:
    status = "interrupted; " if report.interrupted else ""
    head = Text(
        f"loaderprof watch: {shlex.join(report.command)}\n{status}exit status "
        f"{report.exit_code} · {fmt_seconds(report.wall_s)} · "
        f"{plural(len(report.loaders), 'DataLoader')} · "
        f"sampler duty cycle {fmt_pct(report.sampler_duty_cycle or 0, 1)}"
    )
    parts: list[RenderableType] = [head]
    if report.loaders:
        parts += [loaders_table(report), pools_table(report)]
    else:
        parts.append(Text(_no_loader(report)))
    if report.findings:
        parts.append(findings_panel(report.findings, title="findings"))
    else:
        parts.append(Text("findings: none"))
    parts += [Text(f"warning: {w}", style="yellow") for w in report.warnings]
    return Group(*parts)


def _no_loader(report: WatchReport) -> str:
    """Why no loader shows: a command that failed (a script not found, an error before
    its loader) says nothing of torch; one that ran to its end may not have used it."""
    if report.returncode:
        return f"no DataLoader was built: the command exited with status {report.returncode} first"
    return "no DataLoader was built (was torch.utils.data imported?)"
