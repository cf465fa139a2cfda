"""What `loaderprof watch` found in a real training run: typed, frozen results.

See NOTE [watch hook]. Every figure comes from the hook's events in the command's own
process and from the parent's sampler over its process tree; times are seconds
from the command's start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loaderprof.model.datawait import WaitSplit
from loaderprof.model.environment import ReportHead
from loaderprof.model.metrics import PauseMemory, Stat
from loaderprof.model.results import Finding
from loaderprof.model.trials import DatasetState
from loaderprof.units import elapsed


@dataclass(frozen=True)
class WatchedEpoch:
    """One `iter(loader)`: an epoch, or a validation pass."""

    index: int
    start_s: float
    first_batch_s: float | None
    # None: the epoch was cut: its iterator was replaced before its first batch, or the
    # command died (a signal, an uncaught exception) inside it.
    end_s: float | None
    batches: int | None
    worker_pids: tuple[int, ...]
    new_worker_pids: tuple[int, ...]
    # "exhausted": its StopIteration; "left": the loop stopped taking batches and
    # started the loader's next iterator (or the program ended normally) first, as
    # frameworks and a `break` do; it ends at its last batch. None: cut.
    ended: str | None = None
    # len(loader) at its iter(), where the loader knows: the batches to its StopIteration.
    planned_batches: int | None = None
    # See NOTE [data wait]. Its waits inside the loader, and its wall to its end (None:
    # cut, or a report written before they were measured).
    wait: WaitSplit | None = None

    @property
    def wall_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


def whole_epochs(epochs: Sequence[WatchedEpoch]) -> list[WatchedEpoch]:
    """NOTE [epochs left early]: the epochs whose wall is an epoch's. An epoch that
    ended is one, and so is an epoch the loop leaves after a fixed count of batches
    every time (`limit_train_batches`, a `break` at N): that is the user's epoch. One
    left with fewer batches than the loader's other epochs ran is part of an epoch:
    Lightning's sanity check (2 validation batches before training), `max_steps`
    ending the last epoch, a run stopped by Ctrl-C. Its wall is kept out of the cold
    and steady figures and the data wait (its first batch still counts: it was
    waited for)."""
    ended = [e for e in epochs if e.wall_s is not None]
    most = max((e.batches or 0 for e in ended), default=0)
    return [e for e in ended if not (e.ended == "left" and (e.batches or 0) < most)]


@dataclass(frozen=True)
class WatchedWorker:
    pid: int
    worker_id: int
    # Process start (/proc, 10 ms resolution), and its init probe's entry (exact).
    started_s: float | None
    init_s: float
    ready_s: float | None
    exited_s: float | None
    peak_uss_bytes: int | None
    peak_pss_bytes: int | None
    # What it held (files, inet, threads, children) between its loader's epochs: as it
    # began each later epoch, by its own count (no pause needed); else the sampler's
    # last reading inside each pause.
    handles_by_pause: tuple[Mapping[str, int], ...] = ()
    # See NOTE [copy-on-read]. From its first USS reading after its epoch's first batch and
    # its own ready to its USS peak: where USS started, how much USS and RSS grew, and
    # about how many samples it read in between (its share of its loader's batches, pro
    # rata over epochs); None where no such window tells (a one-step rise: a one-off).
    read_start_uss_bytes: int | None = None
    read_uss_growth_bytes: int | None = None
    read_rss_growth_bytes: int | None = None
    read_samples: int | None = None

    @property
    def startup_s(self) -> float | None:
        return elapsed(self.started_s, self.ready_s)


@dataclass(frozen=True)
class WatchedLoader(PauseMemory):
    # L1, L2... in the order the command built them, across all its processes.
    id: str
    site: str
    # The process that built it, and its torchrun rank (RANK) where it had one.
    pid: int
    rank: int | None
    cls: str
    num_workers: int
    persistent_workers: bool
    prefetch_factor: int | None
    pin_memory: bool
    batch_size: int | None
    start_method: str | None
    dataset_type: str
    dataset_len: int | None
    created_s: float
    epochs: tuple[WatchedEpoch, ...]
    workers: tuple[WatchedWorker, ...]
    # True: epochs 2..N ran on epoch 1's workers; False: fresh ones; None: cannot tell.
    workers_reused: bool | None
    cold_epoch_s: float | None
    steady_epoch_s: Stat | None
    cold_first_batch_s: float | None
    steady_first_batch_s: Stat | None
    worker_startup_s: Stat | None
    peak_worker_uss_bytes: int | None
    # USS of its workers between its epochs (persistent pools), median over pauses.
    idle_workers_uss_bytes: int | None
    # See NOTE [stale worker state]. A persistent loader's Dataset as the main process saw
    # it at each iter() and each worker at each later epoch of its pool.
    dataset_states: tuple[DatasetState, ...] = ()
    # See NOTE [data wait]. The median epoch's waits: the steady epochs' (2..N) where
    # there are some, else the first epoch's; `wait_epochs` says which.
    wait: WaitSplit | None = None
    wait_epochs: str | None = None
    # Where a framework builds the loader from a setting of its own (the HF Trainer,
    # inside/frameworks.py): that setting, and what the framework built the loader for
    # (train / eval / test). None: the DataLoader's own flag.
    setting: str | None = None
    built_for: str | None = None


@dataclass(frozen=True)
class PoolSpan:
    """A loader's worker pool alive from `start_s` to `end_s` (its workers' lives)."""

    loader: str
    start_s: float
    end_s: float
    workers: int


@dataclass(frozen=True)
class WatchReport(ReportHead):
    command: tuple[str, ...]
    exit_code: int
    # The command's own status: its exit code, or -N when a signal N ended it.
    returncode: int | None
    wall_s: float
    loaders: tuple[WatchedLoader, ...]
    pools: tuple[PoolSpan, ...]
    peak_worker_processes: int | None
    # Worker processes still alive when the command's main process had exited.
    leaked_pids: tuple[int, ...]
    findings: tuple[Finding, ...]
    # The sampler's reading time over the command's wall (both sampler threads).
    sampler_duty_cycle: float | None
    interrupted: bool = False
    warnings: tuple[str, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)
