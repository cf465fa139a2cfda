"""One `loaderprof watch`: run the command (`watching`), then analyse what it did."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

from loaderprof.checks.growth import MORE_EPOCHS
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError
from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev
from loaderprof.measure.contention import busy_warning
from loaderprof.measure.hooked import HookedRun
from loaderprof.measure.readings import peak_worker_processes
from loaderprof.model.environment import SCHEMA_VERSION, environment, open_files_limit, tool
from loaderprof.model.results import Finding
from loaderprof.model.watch import WatchReport
from loaderprof.watching.assemble import by_kind, loaders, pools
from loaderprof.watching.findings import find
from loaderprof.watching.run import KILL_AFTER_S, WatchRun, redeliver, run_watch

if TYPE_CHECKING:
    from typing_extensions import Unpack


class WatchOptions(TypedDict, total=False):
    """`watch`'s keywords: `collect`'s, which states their defaults."""

    sample_interval: float | None
    uss_interval: float | None
    on_tick: Callable[[float], None] | None
    kill_after: float


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
    env = dict(environment(imported))
    busy = busy_warning(env, run.other_cores)
    warnings = tuple(str(ev.get("message", "")) for ev in evs.get(Ev.WARNING, []))
    return WatchReport(
        kind="watch",
        schema_version=SCHEMA_VERSION,
        tool=tool(),
        environment=env,
        command=run.command,
        exit_code=exit_code_of(run.returncode),
        returncode=run.returncode,
        wall_s=wall,
        loaders=found,
        pools=spans,
        peak_worker_processes=peak_worker_processes(run.samples, workers) if workers else 0,
        leaked_pids=run.leaked_pids,
        findings=find(
            found, spans, run.leaked_pids, run.command, limit=env.get("open_files_limit")
        ),
        sampler_duty_cycle=round(run.busy_s / wall, 4) if wall > 0 else None,
        interrupted=run.interrupted_by is not None,
        warnings=(*warnings, busy) if busy else warnings,
    )


def run_findings(run: HookedRun) -> tuple[Finding, ...]:
    """watch's findings for one hooked run (a `compare -- COMMAND` trial: NOTE [command
    findings]), by the same assembly and checks as its report."""
    found = loaders(by_kind(run.events), run.samples, run.gone_ns, run.t0_ns, run.t_end_ns)
    # Its epochs are --epochs: loaderprof stops the command after them.
    spans = pools(found, (run.t_end_ns - run.t0_ns) / NS)
    return find(found, spans, run.leaked_pids, more=MORE_EPOCHS, limit=open_files_limit())


# The sampler's shortest honest interval (as `compare` allows), in ms.
_MIN_INTERVAL_MS = 5.0


def check_intervals(sample_ms: float | None, uss_ms: float | None) -> tuple[float, float]:
    """The intervals to sample at, ms (None: compare's defaults, `RunConfig`'s). A real
    run is always sampled: an interval too short to read /proc in would spin the sampler
    on the CPUs the training needs."""
    sample_ms = RunConfig.sample_interval_ms if sample_ms is None else sample_ms
    # Not given, the deep interval follows a longer --sample-interval rather than refuse it.
    uss_ms = max(RunConfig.uss_interval_ms, sample_ms) if uss_ms is None else uss_ms
    for flag, ms in (("--sample-interval", sample_ms), ("--uss-interval", uss_ms)):
        if not math.isfinite(ms):  # nan passes every comparison below
            raise UsageError(f"{flag} {ms:g}: use a finite number of ms")
    if sample_ms < _MIN_INTERVAL_MS:
        raise UsageError(
            f"--sample-interval {sample_ms:g} ms: use ≥ {_MIN_INTERVAL_MS:g} ms (each reading "
            "goes through /proc for every process watched)"
        )
    if uss_ms < sample_ms:
        raise UsageError(
            f"--uss-interval {uss_ms:g} ms must be ≥ --sample-interval ({sample_ms:g} ms)"
        )
    return sample_ms, uss_ms


def check_kill_after(kill_after: float) -> None:
    if not math.isfinite(kill_after) or kill_after < 0:
        raise UsageError(f"--kill-after {kill_after:g}: use a finite number of seconds ≥ 0")


def watch(command: Sequence[str], **options: Unpack[WatchOptions]) -> WatchReport:
    """Run `command` (argv: ["python", "train.py", ...]) unchanged to its end and return
    the WatchReport (what `loaderprof watch -- COMMAND` prints): every DataLoader it
    built, their epochs, workers and memory, and the findings. `sample_interval` and
    `uss_interval` are in ms, as the CLI's options (default: compare's, 50 and 500);
    `on_tick(seconds)` is called about every 0.2 s while the command runs; `kill_after`
    is the seconds the command has to stop by itself after an interrupt is forwarded to
    it (the CLI's `--kill-after`).

    Interrupts: on the main thread, a SIGINT/SIGTERM/SIGHUP to this process while the
    command runs is forwarded to the command; once it stopped and the report is built,
    the signal goes to the caller's own handler: a Ctrl-C raises KeyboardInterrupt
    (its `.report` is the WatchReport, `interrupted=True`). Off the main thread no
    signal handler is installed (signals reach the main thread only)."""
    run = collect(command, **options)
    report = build_watch_report(run)
    if run.interrupted_by is not None:
        redeliver(run.interrupted_by, report)
    return report


def collect(
    command: Sequence[str],
    *,
    sample_interval: float | None = None,
    uss_interval: float | None = None,
    on_tick: Callable[[float], None] | None = None,
    kill_after: float = KILL_AFTER_S,
) -> WatchRun:
    """The run behind `watch`, with a signal kept in `interrupted_by` (the CLI reports
    it as the command's status)."""
    sample_ms, uss_ms = check_intervals(sample_interval, uss_interval)
    check_kill_after(kill_after)
    return run_watch(
        command,
        interval_s=sample_ms / 1000,
        uss_interval_s=uss_ms / 1000,
        on_tick=on_tick,
        kill_after_s=kill_after,
    )
