"""One `loaderprof watch --pid`: watch the running job from outside, then say what it did.

See NOTE [pools from outside]. `attach` is the whole of it; `build_attach_report` turns
an `Observer`'s readings into the frozen `AttachReport`.
"""

from __future__ import annotations

from loaderprof.errors import Measuring, UsageError
from loaderprof.model.attached import (
    KIND,
    AttachedGeneration,
    AttachedPool,
    AttachedWorker,
    AttachReport,
    Helper,
    PoolPoint,
)
from loaderprof.model.environment import SCHEMA_VERSION, environment, tool
from loaderprof.watching.attach import Observer, Proc
from loaderprof.watching.attach_findings import find
from loaderprof.watching.pools import Bounded, Pool, lineages

# A command line shown for a helper: its start, enough to tell what it is.
_SHOWN_COMMAND = 60


def _worker(p: Proc) -> AttachedWorker:
    uss, pss, rss = p.peaks
    files, threads = p.held
    return AttachedWorker(
        pid=p.pid,
        born_s=round(p.born_s, 3),
        exited_s=p.exited_s,
        cpu_s=p.cpu_s,
        peak_uss_bytes=uss,
        peak_pss_bytes=pss,
        peak_rss_bytes=rss,
        open_files=files,
        threads=threads,
    )


def _generation(pool: Pool, procs: dict[int, Proc]) -> AttachedGeneration:
    return AttachedGeneration(
        born_s=round(pool.born_s, 3),
        ended_s=pool.ended_s,
        workers=tuple(_worker(procs[pid]) for pid in pool.pids),
        busy_runs=pool.activity.busy_runs,
        peak_uss_bytes=pool.peaks[0],
        peak_pss_bytes=pool.peaks[1],
        series=tuple(PoolPoint(round(t, 3), v[0], v[1], v[2]) for t, v in pool.series.rows),
    )


def _persistent(chain: list[Pool]) -> bool | None:
    """Rebuilt: no. One generation that lived through several of its own busy runs, or
    beside several generations of another pool: yes. Else it cannot be told."""
    if len(chain) > 1:
        return False
    only = chain[0]
    return True if only.activity.busy_runs >= 2 or len(only.idle_beside) >= 2 else None


def _epochs(chain: list[Pool]) -> tuple[int, str | None]:
    if len(chain) > 1:
        return len(chain), "pool births"
    runs = chain[0].activity.busy_runs
    return runs, "CPU activity" if runs else None


def _read(pauses: Bounded) -> int | None:
    """How many pauses were read, where merging left fewer rows (NOTE [bounded series])."""
    return pauses.added if pauses.added > len(pauses.rows) else None


def _pool(index: int, chain: list[Pool], procs: dict[int, Proc]) -> AttachedPool:
    first = chain[0]
    epochs, source = _epochs(chain)
    single = len(chain) == 1
    rows = first.activity.pauses.rows if single else []
    pauses = [(e, v) for e, v in rows if v[0] is not None and v[1] is not None]
    peaks = [g.peaks for g in chain]
    return AttachedPool(
        id=f"P{index}",
        parent_pid=first.parent,
        start_method=first.start_method or None,
        workers=len(first.pids),
        generations=tuple(_generation(g, procs) for g in chain),
        persistent=_persistent(chain),
        epochs_inferred=epochs,
        epochs_from=source,
        peak_uss_bytes=max((p[0] for p in peaks if p[0] is not None), default=None),
        peak_pss_bytes=max((p[1] for p in peaks if p[1] is not None), default=None),
        idle_uss_bytes=first.activity.idle_median() if single else None,
        idle_uss_by_epoch=tuple(v[0] for _, v in pauses if v[0] is not None),
        idle_rss_by_epoch=tuple(v[1] for _, v in pauses if v[1] is not None),
        idle_after_epochs=tuple(int(e) for e, _ in pauses),
        idle_pauses_read=_read(first.activity.pauses) if single else None,
    )


def build_attach_report(obs: Observer, interrupted: bool) -> AttachReport:
    chains = lineages(obs.pools.worker_pools(), tolerance_s=obs.interval_s)
    pools = tuple(_pool(i, c, obs.procs) for i, c in enumerate(chains, 1))
    lineage_of = {g.id: f"P{i}" for i, c in enumerate(chains, 1) for g in c}
    beside = {
        f"P{i}": sorted({lineage_of[o] for g in c for o in g.idle_beside} - {f"P{i}"})
        for i, c in enumerate(chains, 1)
    }
    helpers = tuple(
        Helper(p.pid, p.role, p.command.replace("\0", " ")[:_SHOWN_COMMAND])
        for p in obs.procs.values()
        if p.role != "worker" or p.pid in obs.pools.parents
    )
    wall = obs.end_s
    return AttachReport(
        kind=KIND,
        schema_version=SCHEMA_VERSION,
        tool=tool(),
        environment=environment(None),
        pid=obs.pid,
        command=obs.command,
        wall_s=round(wall, 3),
        interval_s=obs.interval_s,
        ended_by="interrupt" if interrupted else obs.ended_by,
        job_exited_s=obs.job_exited_s,
        pools=pools,
        helpers=helpers,
        left_behind_pids=obs.left_behind,
        peak_worker_processes=obs.peak_workers,
        main_peak_uss_bytes=obs.main_peak[0],
        main_peak_pss_bytes=obs.main_peak[1],
        shm_size_bytes=obs.shm_size,
        shm_peak_used_bytes=obs.shm_peak,
        findings=find(pools, beside, obs.left_behind, obs.command),
        duty_cycle=round(obs.busy_s / wall, 4) if wall > 0 else None,
        interrupted=interrupted,
        warnings=tuple(obs.warnings),
    )


def check_duration(duration_s: float | None) -> None:
    if duration_s is not None and not duration_s > 0:
        raise UsageError(f"--duration {duration_s:g}: use seconds > 0")


def attach(
    pid: int,
    *,
    interval_s: float,
    deep_interval_s: float,
    duration_s: float | None = None,
) -> AttachReport:
    """Watch the running process `pid` and its children from outside until
    `duration_s` passes, the job exits or a signal (`INTERRUPTS`) comes, and return
    what was seen. Nothing is loaded into the job, nothing signals it."""
    if interval_s <= 0:
        raise UsageError(f"--interval {interval_s:g}: use seconds > 0")
    check_duration(duration_s)
    obs = Observer(pid, interval_s, deep_interval_s)
    with Measuring() as span:
        obs.watch(duration_s)
    return build_attach_report(obs, span.interrupted is not None)
