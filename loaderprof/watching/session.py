"""One `loaderprof watch`: run the command (`watching`), then analyse what it did."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loaderprof.inside.events import Ev
from loaderprof.model.environment import environment
from loaderprof.model.watch import WatchReport
from loaderprof.version import __version__
from loaderprof.watching.assemble import by_kind, loaders, peak_worker_processes, pools
from loaderprof.watching.findings import find
from loaderprof.watching.run import WatchRun, run_watch

NS = 1_000_000_000


def exit_code_of(returncode: int | None) -> int:
    """The command's own status, as a shell reports it (a signal N: 128 + N)."""
    if returncode is None:
        return 1
    return returncode if returncode >= 0 else 128 - returncode


def build_watch_report(run: WatchRun) -> WatchReport:
    evs = by_kind(run.events)
    found = loaders(evs, run.samples, run.gone_ns, run.t0_ns, run.t_end_ns)
    wall = (run.t_end_ns - run.t0_ns) / NS
    spans = pools(found, wall)
    workers = {w.pid for ld in found for w in ld.workers}
    imported = next(iter(evs.get(Ev.IMPORTED, [])), None)
    return WatchReport(
        kind="watch",
        schema_version=1,
        tool={"name": "loaderprof", "version": __version__},
        environment=environment(imported),
        command=run.command,
        exit_code=exit_code_of(run.returncode),
        returncode=run.returncode,
        wall_s=wall,
        loaders=found,
        pools=spans,
        peak_worker_processes=peak_worker_processes(run.samples, workers) if workers else 0,
        leaked_pids=run.leaked_pids,
        findings=find(found, spans, run.leaked_pids),
        sampler_duty_cycle=round(run.busy_s / wall, 4) if wall > 0 else None,
        interrupted=run.interrupted_by is not None,
        warnings=tuple(str(ev.get("message", "")) for ev in evs.get(Ev.WARNING, [])),
    )


def watch(
    command: Sequence[str],
    *,
    interval_ms: float = 50.0,
    uss_interval_ms: float = 500.0,
    on_tick: Callable[[float], None] | None = None,
) -> WatchReport:
    run = run_watch(
        command,
        interval_s=interval_ms / 1000,
        uss_interval_s=uss_interval_ms / 1000,
        on_tick=on_tick,
    )
    return build_watch_report(run)
