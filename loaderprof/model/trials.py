"""What one trial measured: its epochs, workers, memory and timeline (schema_version
1). Times are seconds from the trial start (the moment the parent launched the trial
process); memory is bytes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from loaderprof.model.datawait import WaitSplit
from loaderprof.units import elapsed


@dataclass(frozen=True)
class EpochResult:
    epoch: int
    start_s: float
    wall_s: float
    # From the iter() call to the first batch in the main process.
    first_batch_s: float | None
    batches: int
    samples: int
    samples_per_s: float | None
    # Workers that produced at least one batch in this epoch.
    worker_pids: tuple[int, ...]
    # Workers whose process was started during this epoch.
    new_worker_pids: tuple[int, ...]
    # Digest of the index order the sampler produced (map-style datasets).
    order_digest: str | None = None
    # With --digests (`check`): digest of the multiset of sample contents, and
    # how often samples repeated within the epoch.
    content_digest: str | None = None
    distinct_samples: int | None = None
    duplicate_samples: int | None = None
    max_sample_repeats: int | None = None
    max_batch_bytes: int | None = None
    # From the epoch's start to its last batch in the main process.
    last_batch_s: float | None = None
    # See NOTE [validation pass]. With --val the epoch's wall covers the train pass and
    # then the validation pass, whose own wall, first-batch wait and batches these are.
    val_s: float | None = None
    val_first_batch_s: float | None = None
    val_batches: int | None = None
    # See NOTE [data wait]. The main process's waits inside the loader (None in
    # reports written before they were measured).
    wait: WaitSplit | None = None


@dataclass(frozen=True)
class BatchSpan:
    """One batch a worker produced: from its first __getitem__ (or collate start,
    for IterableDatasets) to the end of collate."""

    pid: int
    start_s: float
    end_s: float
    samples: int


@dataclass(frozen=True)
class WorkerState:
    """What one worker held: when first seen (after_epoch 0), and in the pause after
    each epoch it lived through."""

    after_epoch: int
    t_s: float
    uss_bytes: int | None
    rss_bytes: int
    files: int
    inet: int
    threads: int
    children: int


@dataclass(frozen=True)
class WorkerResult:
    pid: int
    worker_id: int
    first_epoch: int | None
    # Process start (from /proc, ~10 ms resolution), init probe entry, init done.
    started_s: float | None
    init_start_s: float
    ready_s: float | None
    first_batch_s: float | None
    exited_s: float | None
    batches: int
    samples: int
    peak_rss_bytes: int | None
    peak_uss_bytes: int | None
    peak_pss_bytes: int | None
    # Deep (USS/PSS) samples behind the peaks: a worker that lived shorter
    # than the USS interval may have only its first-sight sample.
    uss_samples: int = 0
    states: tuple[WorkerState, ...] = ()
    # USS at the first deep sample after its first batch: what starting cost it (a
    # forked worker's imports and refcount writes), before reading adds anything.
    first_batch_uss_bytes: int | None = None
    # Median time to produce one batch: its first __getitem__ to the end of collate
    # (the straggler check compares workers by it).
    median_batch_s: float | None = None
    # The same less the worker's wait for a CPU in each batch (its main thread's run-queue
    # wait: another process's load), which the straggler check compares. None in reports
    # written before it was measured, or without schedstat.
    median_own_batch_s: float | None = None
    # See NOTE [worker threads]. The most OS threads seen in the worker, the most of them
    # computing (main + busy non-plumbing threads), and torch.get_num_threads() there.
    peak_threads: int | None = None
    compute_threads: int | None = None
    torch_threads: int | None = None
    # See NOTE [worker threads]. The cores its threads wanted on average (run + run-queue
    # wait over the wall time since init: CPU demand, not what it got), the share of
    # that of threads other than its main one, and what started its busy threads
    # ("python:MODULE" for a Python thread's target, "native:COMM" for a native pool).
    cpu_demand: float | None = None
    thread_cpu_demand: float | None = None
    # The run-queue wait inside each (cores): what another process's load lengthens
    # too. None in reports written before it was kept.
    cpu_wait: float | None = None
    thread_cpu_wait: float | None = None
    thread_origins: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # See NOTE [held at init]. Open files, network connections and child processes the
    # worker held as its init began, before any of the user's code ran in it.
    held_at_init: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # Which loader the worker served: "train", or "val" (NOTE [validation pass]).
    loader: str = "train"
    # NOTE [start-up breakdown] (spawn/forkserver): what multiprocessing pickled for
    # this worker (its Process: the Dataset, collate_fn, worker_init_fn) and how long
    # that took in the main process; when the worker began unpickling its Dataset
    # (map-style only) and finished unpickling its arguments; its first fetch.
    pickled_bytes: int | None = None
    pickle_s: float | None = None
    unpickle_start_s: float | None = None
    unpickled_s: float | None = None
    first_fetch_s: float | None = None
    # Of its unpickling, the time spent importing the modules the pickle names (its
    # Dataset's library, the user's own module): spawn's cost, whatever the Dataset
    # holds. None in reports before it was measured.
    unpickle_import_s: float | None = None

    @property
    def unpickle_s(self) -> float | None:
        return elapsed(self.unpickle_start_s, self.unpickled_s)

    @property
    def startup_s(self) -> float | None:
        """Process start to ready (includes unpickling under spawn, worker_init_fn)."""
        if self.ready_s is None:
            return None
        base = self.started_s if self.started_s is not None else self.init_start_s
        return self.ready_s - base


@dataclass(frozen=True)
class ProcessTimeline:
    pid: int
    role: Literal["main", "worker", "other"]
    worker_id: int | None
    t_s: tuple[float, ...]
    rss_bytes: tuple[int, ...]
    # None where the tick read RSS only (see sampler: USS/PSS are rarer in epochs).
    uss_bytes: tuple[int | None, ...]
    pss_bytes: tuple[int | None, ...]
    # Per sample: inside the trial's memory window (see TrialMemory).
    in_window: tuple[bool, ...] = ()
    # Per sample: how many processes its walk read, where that walk read every one
    # while the tree held still (the only readings a sum over processes may use:
    # `readings.deep_ticks`); 0 for RSS-only ticks and walks that cannot be summed.
    # A sum over one walk is whole when it has that many readings (past the detail
    # cap a timeline may keep only some). Empty in reports written before it.
    walk_processes: tuple[int, ...] = ()


@dataclass(frozen=True)
class TrialError:
    category: Literal["usage", "run", "interrupted"]
    kind: str
    message: str
    epoch: int | None = None
    worker_id: int | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Setup:
    imported_s: float | None
    dataset_built_s: float | None
    loader_built_s: float | None


@dataclass(frozen=True)
class WallParts:
    """Where a trial's wall time went, in seconds; None where the trial never got there."""

    # Launch until the trial child runs its first line (interpreter start).
    interpreter_s: float | None
    # Importing torch and loaderprof.
    imports_s: float | None
    # Building the Dataset and the DataLoader.
    setup_s: float | None
    epochs_s: float
    # The untimed pauses after epochs, where idle memory is sampled.
    pauses_s: float
    # Dropping the loader until its workers are gone.
    shutdown_s: float | None
    # The loader closed until the trial's last event (see NOTE [no teardown]; its exit
    # handlers run after it, in no figure).
    exit_s: float | None
    # The rest: bookkeeping between epochs.
    other_s: float | None


@dataclass(frozen=True)
class DatasetState:
    """The Dataset's instance state as one process saw it at an epoch's start
    (NOTE [stale worker state]): attribute -> a short repr or a content digest."""

    epoch: int
    role: Literal["main", "worker"]
    pid: int
    worker_id: int | None
    values: Mapping[str, str]
    # Attributes that could not be read or pickled, named and left out.
    skipped: tuple[str, ...] = ()
    # What fingerprinting cost (a worker's is inside its timed epoch).
    took_s: float | None = None


@dataclass(frozen=True)
class SamplerStats:
    """The parent-side sampler's own work during a trial."""

    interval_s: float
    # RSS ticks.
    ticks: int
    # Walks that read USS/PSS of every process (a page-table walk each).
    deep_ticks: int
    # Seconds both sampler threads spent reading /proc, and that over the trial's
    # wall (two threads: it may exceed 1).
    busy_s: float
    duty_cycle: float
    # Walks cut short (a timing trial's hold, the trial's end): never summed.
    targeted_ticks: int = 0
    # The 95th percentile of the time between consecutive RSS ticks while sampling
    # (not held still for a timing trial's epochs): the interval the sampler kept.
    tick_gap_p95_s: float | None = None


@dataclass(frozen=True)
class DetailInfo:
    """What a long trial's JSON kept of its batch spans and memory samples (see
    detail.py); absent when it kept everything."""

    batch_spans: int
    batch_spans_kept: int
    timeline_samples: int
    timeline_samples_kept: int


@dataclass(frozen=True)
class TrialResult:
    arm: str
    index: int
    complete: bool
    wall_s: float
    returncode: int | None
    setup: Setup
    epochs: tuple[EpochResult, ...]
    workers: tuple[WorkerResult, ...]
    memory: TrialMemory
    timeline: tuple[ProcessTimeline, ...]
    main_pid: int
    warnings: tuple[str, ...] = ()
    error: TrialError | None = None
    # Warm-up trials are run and kept, but left out of every statistic.
    warmup: bool = False
    shm_size_bytes: int | None = None
    # /dev/shm in use before the first epoch, and at its peak during the trial.
    shm_base_used_bytes: int | None = None
    shm_peak_used_bytes: int | None = None
    batches: tuple[BatchSpan, ...] = ()
    wall_parts: WallParts | None = None
    # None when sampling was off.
    sampler: SamplerStats | None = None
    dataset_states: tuple[DatasetState, ...] = ()
    # Batches in a full epoch, as the loader reports its length (None: no len()).
    full_batches: int | None = None
    # NOTE [timing and memory trials]: which figures this trial feeds: "timing"
    # (epochs timed with the sampler still), "memory" (sampled deeply throughout,
    # epochs not timed) or "both" (a plan of one trial per arm, or sampling off).
    role: str = "both"
    detail: DetailInfo | None = None
    # The loader's worker processes still alive after it was dropped and torch's own
    # shutdown had joined (then terminated) them, plus a grace period (None: no close).
    workers_alive_at_close: int | None = None
    # The Dataset's biggest attributes as a spawned worker receives them (bytes),
    # sized after the epochs when a worker's pickle was ≥ 1 MiB.
    dataset_attribute_bytes: Mapping[str, int] = field(default_factory=dict)

    @property
    def times_epochs(self) -> bool:
        """Its epoch times count (NOTE [timing and memory trials]): not a memory trial,
        whose deep sampling held its epochs up."""
        return self.role != "memory"


@dataclass(frozen=True)
class TrialMemory:
    """None everywhere when sampling was off."""

    # Max over sampling ticks of the PSS summed over the whole process tree.
    peak_total_pss_bytes: int | None
    # Max over ticks of the USS summed over the workers alive at that tick.
    peak_workers_uss_bytes: int | None
    # Largest single-worker peak USS.
    peak_worker_uss_bytes: int | None
    # USS (and PSS) the workers hold between epochs: per pause, the largest
    # tick sum; then the median over pauses. Zero when workers are gone.
    idle_workers_uss_bytes: int | None
    idle_workers_pss_bytes: int | None
    peak_main_uss_bytes: int | None
    peak_main_pss_bytes: int | None
    peak_main_rss_bytes: int | None
    samples: int
    # Ticks that read USS/PSS of every process (the rest read RSS only).
    deep_samples: int = 0
    # See NOTE [memory window]. Every figure above covers the loader's life, from
    # its construction until its workers are gone after the last epoch (trial
    # seconds). Samples outside it (imports, Dataset construction, the trial
    # process's exit) stay in the timeline, marked, and feed no figure.
    window_start_s: float | None = None
    window_end_s: float | None = None
    # The main process just before the loader was built: imports and the
    # Dataset, the baseline that forked workers start from.
    setup_main_rss_bytes: int | None = None
    setup_main_uss_bytes: int | None = None
    setup_main_pss_bytes: int | None = None
    # Peak PSS total while the loader shut its workers down (after the last epoch).
    shutdown_peak_total_pss_bytes: int | None = None
    # Most worker processes alive at one sampling tick (counted from PIDs).
    peak_worker_processes: int | None = None
    # See NOTE [validation pass]. USS the train loader's workers hold while validation
    # runs (0 when they are gone: non-persistent), None without --val or deep walks.
    val_train_pool_uss_bytes: int | None = None
