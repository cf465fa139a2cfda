"""Typed, frozen results of a compare or a sweep: the report, its arms, comparison,
verdict, gates, findings and torchrun summary (schema_version 1).

The JSON produced from these classes (`model.codec`) is a public contract: field
names are stable, new fields may be added. What one trial measured is in
`model.trials`, figures with their spread in `model.metrics`. Times are seconds
from the trial start (the moment the parent launched the trial process); memory is
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from loaderprof.config.run import RunConfig
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.environment import ReportHead
from loaderprof.model.metrics import Ratio, Stat
from loaderprof.model.trials import TrialError, TrialResult

ARMS = ("persistent", "non_persistent")
# How every reporter names the arms.
ARM_LABEL = {"persistent": "persistent", "non_persistent": "non-persistent"}
Recommendation = Literal["enable", "keep_off", "neutral"]
GateStatus = Literal["pass", "fail", "inconclusive", "skipped"]


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
    # See NOTE [data wait]. The timing trials' median cold epoch and median steady
    # epoch, each as it ran: its wall and its waits for data.
    cold_wait: WaitSplit | None = None
    steady_wait: WaitSplit | None = None


@dataclass(frozen=True)
class ArmResult:
    name: str
    persistent: bool
    trials: tuple[TrialResult, ...]
    summary: ArmSummary
    warmup_trials: tuple[TrialResult, ...] = ()

    @property
    def shown_trial(self) -> TrialResult | None:
        """The trial whose epochs a screen shows: the first that times its epochs
        (NOTE [timing and memory trials]), so its times agree with the summary's; one
        stopped before its first epoch has none to show, and gives way to one that ran."""
        ran = [t for t in self.trials if t.epochs]
        return next((t for t in ran if t.times_epochs), None) or next(
            iter(ran or self.trials), None
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
    # ("trials": the trial figures, timing and memory trials; "timing trials": the
    # timing trials alone, the memory trials' epochs having spread more; "epochs in
    # trials": the floor from the epochs inside each trial) and its degrees of freedom.
    steady_epoch_spread: Mapping[str, Any] | None = None
    # The steady ratio's t: its degrees of freedom (Welch-Satterthwaite over the two
    # arms' spreads), from which "what would decide it" extrapolates.
    steady_epoch_df: float | None = None


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
    # The interval's level (the steady epoch's is the adaptive plan's look level).
    confidence: float = 0.95


@dataclass(frozen=True)
class Finding:
    """Something a lifecycle check found, with its evidence in figures."""

    id: str
    severity: Literal["info", "warning", "error"]
    title: str
    evidence: Mapping[str, Any]
    fix: str
    arm: str | None = None


# -- under torchrun: each rank's figures and the per-node totals rank 0 reports --


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
class PlanOutcome:
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
    # What ran, as the report records it (`RunConfig.recorded`).
    config: RunConfig
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
    plan: PlanOutcome | None = None

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
class SweepReport(ReportHead):
    config: Mapping[str, Any]
    points: tuple[SweepPointResult, ...]
    skipped: tuple[str, ...]
    recommendation: SweepRecommendation
    complete: bool
    warnings: tuple[str, ...] = ()
    created: str = ""
    wall_s: float = 0.0
    extras: Mapping[str, Any] = field(default_factory=dict)


def error_line(report: Report) -> str | None:
    """The one line that says what went wrong, naming the arm and trial."""
    for arm in report.arms.values():
        for t in arm.trials:
            if t.error is None or t.error.category == "interrupted":
                continue
            if t.error.category == "usage":
                return t.error.message
            # Named as the -v tables name it: a memory trial and timing trial 1 differ.
            kind = "memory " if t.role == "memory" else ""
            where = f"{arm.name.replace('_', '-')} arm, {kind}trial {t.index + 1}"
            epoch = (
                f" (epoch {t.error.epoch})"
                if t.error.epoch and "epoch" not in t.error.message
                else ""
            )
            return f"{where}: {t.error.message}{epoch}"
    return None
