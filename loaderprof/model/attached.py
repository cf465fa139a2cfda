"""What `loaderprof watch --pid` saw of a running job from outside: typed, frozen results.

See NOTE [pools from outside]. Every figure comes from /proc and psutil, read from
another process: nothing is loaded into the job, and nothing signals it. Times are
seconds from the watch's start (a process born before it has a negative birth).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loaderprof.model.environment import ReportHead
from loaderprof.model.metrics import PauseMemory
from loaderprof.model.results import Finding

KIND = "attach"

# What no reading from outside can tell: said once in every report, and again by
# each finding it limits.
NOT_SEEN = (
    "which DataLoader a pool belongs to, its settings (persistent_workers, batch size) "
    "and where it was built; two loaders whose workers start and end together read as "
    "one pool",
    "epochs: inferred from pool births and CPU activity, not seen",
    "batches, first-batch waits and worker start-up",
    "a worker's Dataset state",
)


@dataclass(frozen=True)
class AttachedWorker:
    pid: int
    born_s: float
    # When it was first seen gone; None: alive when the watch ended.
    exited_s: float | None
    # CPU seconds it used while watched.
    cpu_s: float | None
    peak_uss_bytes: int | None
    peak_pss_bytes: int | None
    peak_rss_bytes: int | None
    # The most regular files open and threads seen at once.
    open_files: int | None
    threads: int | None


@dataclass(frozen=True)
class PoolPoint:
    """A pool's workers together at one time (see NOTE [bounded series]); each value the
    largest of the readings its bucket merged)."""

    t_s: float
    uss_bytes: int | None
    pss_bytes: int | None
    rss_bytes: int | None


@dataclass(frozen=True)
class AttachedGeneration:
    """One pool: workers of one parent born together."""

    born_s: float
    ended_s: float | None
    workers: tuple[AttachedWorker, ...]
    # Runs of CPU activity apart by idle pauses: epochs, inferred.
    busy_runs: int
    peak_uss_bytes: int | None
    peak_pss_bytes: int | None
    # Empty for the oldest of many ended generations (their peaks are kept).
    series: tuple[PoolPoint, ...] = ()


@dataclass(frozen=True)
class AttachedPool(PauseMemory):
    """A lineage: a pool and those that replaced it (NOTE [pools from outside])."""

    id: str
    parent_pid: int
    # "fork", "spawn", "forkserver", or None where the command lines do not tell.
    start_method: str | None
    workers: int
    generations: tuple[AttachedGeneration, ...]
    # True: one generation lived through several inferred epochs; False: rebuilt (its
    # workers were replaced); None: cannot tell (one epoch seen).
    persistent: bool | None
    epochs_inferred: int
    # "pool births" or "CPU activity"; None where no epoch could be inferred.
    epochs_from: str | None
    peak_uss_bytes: int | None
    peak_pss_bytes: int | None
    # Its workers' USS together in the pauses between its inferred epochs, the median.
    idle_uss_bytes: int | None
    # Pauses read, where a long watch merged neighbouring readings (NOTE [bounded
    # series]): more than its series holds. None: a reading each.
    idle_pauses_read: int | None = None

    @property
    def rebuilt(self) -> int:
        """Times its workers were started again while watched."""
        return len(self.generations) - 1


@dataclass(frozen=True)
class Helper:
    """A child that is no worker, named by its command line."""

    pid: int
    role: str
    command: str


@dataclass(frozen=True)
class AttachReport(ReportHead):
    pid: int
    command: tuple[str, ...]
    wall_s: float
    interval_s: float
    # "duration", "interrupt" or "job exit".
    ended_by: str
    job_exited_s: float | None
    pools: tuple[AttachedPool, ...]
    helpers: tuple[Helper, ...]
    # Workers still alive once the job's main process had exited.
    left_behind_pids: tuple[int, ...]
    peak_worker_processes: int
    main_peak_uss_bytes: int | None
    main_peak_pss_bytes: int | None
    shm_size_bytes: int | None
    shm_peak_used_bytes: int | None
    findings: tuple[Finding, ...]
    # Seconds the observer spent reading /proc over the watch's wall.
    duty_cycle: float | None
    not_seen: tuple[str, ...] = NOT_SEEN
    interrupted: bool = False
    warnings: tuple[str, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)
