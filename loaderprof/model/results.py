"""Typed, frozen results and their JSON form (schema_version 1).

The JSON produced from these classes is a public contract: field names are
stable, new fields may be added. Times are seconds from the trial start (the
moment the parent launched the trial process); memory is bytes.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

SCHEMA_VERSION = 1
ARMS = ("persistent", "non_persistent")
# How every reporter names the arms.
ARM_LABEL = {"persistent": "persistent", "non_persistent": "non-persistent"}
Recommendation = Literal["enable", "keep_off", "neutral"]
GateStatus = Literal["pass", "fail", "inconclusive", "skipped"]


@dataclass(frozen=True)
class Stat:
    """A median with its spread; quartiles by linear interpolation."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float:
        return self.iqr / self.median if self.median else math.inf

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat | None:
        vals = sorted(float(v) for v in values)
        if not vals:
            return None
        if len(vals) == 1:
            v = vals[0]
            return cls(v, v, v, v, v, 1)
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
        return cls(statistics.median(vals), q1, q3, vals[0], vals[-1], len(vals))


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

    @property
    def unpickle_s(self) -> float | None:
        if self.unpickle_start_s is None or self.unpickled_s is None:
            return None
        return self.unpickled_s - self.unpickle_start_s

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
    # `measure.readings.deep_ticks`); 0 for RSS-only ticks and walks that cannot be summed.
    # A sum over one walk is whole when it has that many readings (past the detail
    # cap a timeline may keep only some). Empty in reports written before it.
    walk_processes: tuple[int, ...] = ()


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
    # The loader closed until the trial process was gone (no interpreter teardown).
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

    @staticmethod
    def from_event(ev: Mapping[str, Any], epoch: int) -> DatasetState:
        """From a `main_state` / `worker_state` event (compare's trial, watch's hook)."""
        return DatasetState(
            epoch=epoch,
            # inside.events.Ev.MAIN_STATE: model/ sits below inside/ and cannot import it.
            role="main" if ev["ev"] == "main_state" else "worker",
            pid=int(ev["pid"]),
            worker_id=ev.get("worker_id"),
            values=dict(ev.get("values") or {}),
            skipped=tuple(ev.get("skipped") or ()),
            took_s=ev.get("took_s"),
        )


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


@dataclass(frozen=True)
class ArmSummary:
    trials: int
    cold_epoch_s: Stat | None
    steady_epoch_s: Stat | None
    # Time to first batch of steady epochs; the cold epoch's is separate.
    first_batch_s: Stat | None
    cold_first_batch_s: Stat | None
    worker_startup_s: Stat | None
    steady_samples_per_s: Stat | None
    peak_total_pss_bytes: Stat | None
    peak_worker_uss_bytes: Stat | None
    peak_workers_uss_bytes: Stat | None
    idle_workers_uss_bytes: Stat | None
    idle_workers_pss_bytes: Stat | None
    # True: every epoch of every trial was served by the same worker PIDs.
    # False: every epoch had a fresh set. None: could not tell.
    workers_reused: bool | None
    worker_processes: int
    peak_main_pss_bytes: Stat | None = None
    # Dropping the loader after the last epoch until its workers are gone.
    shutdown_s: Stat | None = None
    # The main process before the loader was built (see TrialMemory).
    setup_main_pss_bytes: Stat | None = None
    # Most worker processes alive at once in any trial, counted from PIDs.
    peak_worker_processes: int | None = None
    # See NOTE [validation pass]. The steady epochs' validation passes, and the USS the
    # train pool holds while they run.
    steady_val_s: Stat | None = None
    val_train_pool_uss_bytes: Stat | None = None


@dataclass(frozen=True)
class ArmResult:
    name: str
    persistent: bool
    trials: tuple[TrialResult, ...]
    summary: ArmSummary
    warmup_trials: tuple[TrialResult, ...] = ()


# See NOTE [earned intervals]. An interval reaching more than this factor from its
# point estimate on either side says nothing a user could act on (a t with one
# degree of freedom on two trials per arm gives such); it is reported as "cannot
# decide with this many trials", never as a finding.
UNINFORMATIVE_FACTOR = 10.0


def informative_interval(value: float, low: float, high: float, has_interval: bool) -> bool:
    """NOTE [earned intervals], the one rule: an interval was earned, is finite, and
    (for positive figures, read on the log scale) reaches no more than
    UNINFORMATIVE_FACTOR from the value on either side. An interval on values that may
    be zero (idle memory) is judged by being earned alone."""
    if not has_interval or not all(math.isfinite(x) for x in (value, low, high)):
        return False
    if value > 0 and low > 0:
        return high <= value * UNINFORMATIVE_FACTOR and low >= value / UNINFORMATIVE_FACTOR
    return value > 0 or low <= value <= high


@dataclass(frozen=True)
class Ratio:
    """persistent / non_persistent, with its interval (see Comparison.confidence).

    NOTE [earned intervals]: an interval is printed, exported and gated only where
    it was earned. A side read once has none: `has_interval` is False and ci_low =
    ci_high = value stand for "no interval" (n=1), never for certainty. An interval
    reaching more than UNINFORMATIVE_FACTOR from the value on either side is not
    `informative`: it is reported as "cannot decide with this many trials"."""

    value: float
    ci_low: float
    ci_high: float
    has_interval: bool = True

    @property
    def informative(self) -> bool:
        # A ratio is positive: an interval reaching 0 says nothing.
        return self.ci_low > 0 and informative_interval(
            self.value, self.ci_low, self.ci_high, self.has_interval
        )


@dataclass(frozen=True)
class Comparison:
    steady_epoch_ratio: Ratio | None
    cold_epoch_ratio: Ratio | None
    first_batch_ratio: Ratio | None
    # non_persistent minus persistent median steady epoch (positive: saved).
    saved_s_per_epoch: float | None
    # persistent minus non_persistent median idle worker USS.
    extra_idle_memory_bytes: int | None
    extra_peak_pss_bytes: int | None
    # Smallest epoch count at which persistence has paid back any extra cost
    # of its cold epoch; None when it never does.
    break_even_epochs: int | None
    train_epochs: int
    saved_s_total: float | None
    # Two-sided p-values of persistent vs non-persistent, from the t statistic that
    # gives each interval (NOTE [spread of an arm]); None where there is no interval.
    steady_epoch_p: float | None = None
    cold_epoch_p: float | None = None
    first_batch_p: float | None = None
    peak_total_pss_ratio: Ratio | None = None
    peak_total_pss_p: float | None = None
    memory_budget_bytes: int | None = None
    over_budget: bool | None = None
    # See NOTE [trial is the unit]. "trial" when each arm had two or more trials, "epoch"
    # when one trial's epochs had to stand in; and how many units per arm.
    unit: str | None = None
    steady_epoch_n: int | None = None
    # The steady-epoch interval's confidence: 0.95, or the level of the look an
    # adaptive plan stopped at (NOTE [sequential looks]). The other intervals are 95 %.
    confidence: float = 0.95
    # Whether the non-persistent arm's peak PSS total broke --memory-budget too: when
    # both arms break it, persistence is not what breaks it.
    non_persistent_over_budget: bool | None = None
    # See NOTE [spread of an arm]. What each arm's steady spread was learned from
    # ("trials": the trial figures, timing and memory trials; "epochs in trials":
    # the floor from the epochs inside each trial) and its degrees of freedom.
    steady_epoch_spread: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Projection:
    """See NOTE [short epochs]. Epochs cut to `max_batches` batches, projected to full ones.

    A cut epoch's wall + (full − measured batches) × its per-batch time (last batch −
    first batch over the batches between) is what the full epoch would take; the
    comparison and the verdict use these, the per-epoch tables the measured walls.
    """

    max_batches: int
    full_batches: int | None
    # Per arm: the steady per-batch time, and the projected full steady epoch.
    batch_interval_s: Mapping[str, Stat | None]
    steady_epoch_s: Mapping[str, Stat | None]
    # Why there is no projection (None when there is one).
    unavailable: str | None = None


@dataclass(frozen=True)
class Verdict:
    recommendation: Recommendation
    headline: str
    reasons: tuple[str, ...]
    # Finding ids the verdict weighed (persistence changing what the model sees).
    depends_on: tuple[str, ...] = ()
    # False: the evidence decides neither way yet; the reasons say what would.
    decided: bool = True


@dataclass(frozen=True)
class MetricValue:
    """A gateable figure with its 95 % interval and the number of values behind it.
    See NOTE [earned intervals]. `has_interval` False: read once, ci_low = ci_high =
    value, and no gate may fail on it with certainty."""

    value: float
    ci_low: float
    ci_high: float
    n: int
    has_interval: bool = True

    @property
    def informative(self) -> bool:
        return informative_interval(self.value, self.ci_low, self.ci_high, self.has_interval)


@dataclass(frozen=True)
class GateResult:
    gate: str
    metric: str
    status: GateStatus
    # What was compared with the limit (for relative gates: new / baseline).
    value: float | None
    ci_low: float | None
    ci_high: float | None
    limit: float
    op: str
    mode: str
    message: str
    baseline: float | None = None
    # See NOTE [earned intervals]. False when the value was read once (no interval).
    has_interval: bool = True
    # False when there is no interval, or it is too wide to mean anything: such a
    # gate is inconclusive at most.
    informative: bool = True


@dataclass(frozen=True)
class Finding:
    """Something a lifecycle check found, with its evidence in figures."""

    id: str
    severity: Literal["info", "warning", "error"]
    title: str
    evidence: Mapping[str, Any]
    fix: str
    arm: str | None = None


@dataclass(frozen=True)
class RankArmSummary:
    steady_epoch_s: float | None
    first_batch_s: float | None
    peak_worker_uss_bytes: float | None
    peak_total_pss_bytes: float | None
    idle_workers_uss_bytes: float | None
    worker_pids: tuple[int, ...]


@dataclass(frozen=True)
class RankSummary:
    rank: int
    host: str
    arms: Mapping[str, RankArmSummary]
    # The rank's run did not complete; its one error line (what the same run
    # without torchrun would print) and its category (usage / run / interrupted).
    failed: bool = False
    error: str | None = None
    error_category: str | None = None


@dataclass(frozen=True)
class SlowestRank:
    """The rank the whole job waits for in one epoch."""

    arm: str
    epoch: int
    rank: int
    wall_s: float


@dataclass(frozen=True)
class NodeArmTotals:
    # Worker processes the node ran at once, measured: per rank the most worker PIDs
    # alive at once (sampler ticks, epochs), summed over the node's ranks.
    worker_processes: int
    # Sum over the node's ranks of each rank's peak PSS total (trials start
    # together, so the peaks overlap).
    pss_total_bytes: int | None
    # Memory held between epochs by all the node's persistent workers.
    idle_workers_uss_bytes: int | None


@dataclass(frozen=True)
class NodeSummary:
    host: str
    ranks: tuple[int, ...]
    arms: Mapping[str, NodeArmTotals]


@dataclass(frozen=True)
class DistributedSummary:
    world_size: int
    ranks: tuple[RankSummary, ...]
    slowest: tuple[SlowestRank, ...]
    nodes: tuple[NodeSummary, ...]


@dataclass(frozen=True)
class BaselineInfo:
    path: str
    created: str
    # Environment keys that differ; non-empty means timing gates may not transfer.
    differences: tuple[str, ...]


@dataclass(frozen=True)
class PlanInfo:
    """How many trials ran and why the plan stopped (NOTE [sequential looks])."""

    # "adaptive" (--trials auto) or "fixed" (--trials N, or any torchrun job).
    mode: str
    trials_per_arm: int
    # The adaptive plan's cap and the looks it may take / took; 1 and 1 when fixed.
    max_trials: int
    looks_planned: int
    looks_taken: int
    # The steady-epoch interval's confidence at the look the plan stopped at.
    confidence: float
    settled: bool
    # Why the plan ended, in words.
    stopped: str


@dataclass(frozen=True)
class Report:
    schema_version: int
    tool: Mapping[str, str]
    environment: Mapping[str, Any]
    config: Mapping[str, Any]
    arms: Mapping[str, ArmResult]
    comparison: Comparison | None
    verdict: Verdict | None
    complete: bool
    warnings: tuple[str, ...] = ()
    errors: tuple[TrialError, ...] = ()
    created: str = ""
    wall_s: float = 0.0
    extras: Mapping[str, Any] = field(default_factory=dict)
    gates: tuple[GateResult, ...] = ()
    # "pass" / "fail" over all gates (inconclusive fails only with --strict).
    gate_status: str | None = None
    baseline: BaselineInfo | None = None
    findings: tuple[Finding, ...] = ()
    # Under torchrun: every rank's figures and the per-node totals (rank 0 only).
    distributed: DistributedSummary | None = None
    projection: Projection | None = None
    # The finding ids whose check had the data to run (`checks.catalogue.ran` names
    # those checks).
    findings_checked: tuple[str, ...] = ()
    plan: PlanInfo | None = None

    @property
    def recommendation(self) -> Recommendation | None:
        return self.verdict.recommendation if self.verdict else None

    @property
    def summaries(self) -> dict[str, ArmSummary]:
        return {name: arm.summary for name, arm in self.arms.items()}


@dataclass(frozen=True)
class SweepPointResult:
    label: str
    num_workers: int
    prefetch_factor: int | None
    mp_context: str | None
    persistent: bool
    trials: tuple[TrialResult, ...]
    summary: ArmSummary
    frontier: bool = False
    error: str | None = None


@dataclass(frozen=True)
class SweepRecommendation:
    fastest: str | None
    cheapest_near_fastest: str | None
    memory_budget_bytes: int | None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepReport:
    schema_version: int
    kind: str
    tool: Mapping[str, str]
    environment: Mapping[str, Any]
    config: Mapping[str, Any]
    points: tuple[SweepPointResult, ...]
    skipped: tuple[str, ...]
    recommendation: SweepRecommendation
    complete: bool
    warnings: tuple[str, ...] = ()
    created: str = ""
    wall_s: float = 0.0
    extras: Mapping[str, Any] = field(default_factory=dict)


# -- (de)serialization -------------------------------------------------------


def to_dict(obj: Any) -> Any:
    """Plain JSON-ready data; properties such as Stat.iqr are added for readers."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, Stat):
            out["iqr"] = obj.iqr
        if isinstance(obj, Ratio):
            out["informative"] = obj.informative
        return out
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


T = TypeVar("T")


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild a result dataclass from `to_dict` output (unknown keys ignored)."""
    return typing.cast(T, _convert(cls, data))


def _convert(tp: Any, data: Any) -> Any:
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        if data is None:
            return None
        inner = [a for a in get_args(tp) if a is not type(None)]
        return _convert(inner[0], data)
    if origin is Literal:
        return data
    if origin in (tuple, Sequence):
        (item, *_) = get_args(tp)
        return tuple(_convert(item, v) for v in data)
    if origin in (dict, Mapping):
        _, value_tp = get_args(tp)
        return {k: _convert(value_tp, v) for k, v in data.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _convert(hints[f.name], data[f.name])
        return tp(**kwargs)
    if tp is float and isinstance(data, int):
        return float(data)
    return data


def error_line(report: Report) -> str | None:
    """The one line that says what went wrong, naming the arm and trial."""
    for arm in report.arms.values():
        for t in arm.trials:
            if t.error is None or t.error.category == "interrupted":
                continue
            if t.error.category == "usage":
                return t.error.message
            where = f"{arm.name.replace('_', '-')} arm, trial {t.index + 1}"
            epoch = (
                f" (epoch {t.error.epoch})"
                if t.error.epoch and "epoch" not in t.error.message
                else ""
            )
            return f"{where}: {t.error.message}{epoch}"
    return None
