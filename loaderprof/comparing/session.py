"""One `compare` run: schedule the trials, then analyse them into a Report."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loaderprof.analysis.stats import (
    CONFIDENCE,
    look_confidence,
    look_points,
    plan_confidence,
    plan_ends,
)
from loaderprof.comparing.scheduler import ProgressCallback, StopRule, run_schedule
from loaderprof.config.run import RunConfig, Schedule
from loaderprof.inside.events import Ev
from loaderprof.measure import contention
from loaderprof.measure.contention import busy_warning
from loaderprof.measure.runner import TrialRunner
from loaderprof.model.environment import SCHEMA_VERSION, created_now, environment, tool
from loaderprof.model.results import (
    ARMS,
    ArmResult,
    Comparison,
    PlanOutcome,
    Projection,
    Report,
    Verdict,
)
from loaderprof.model.trials import TrialError, TrialResult
from loaderprof.report.partial import plan_words
from loaderprof.units import plural


def build_report(
    cfg: RunConfig,
    trials: Sequence[TrialResult],
    *,
    imported: Mapping[str, Any] | None,
    train_epochs: int | None = None,
    extra_errors: Sequence[TrialError] = (),
    interrupted: bool = False,
    wall_s: float = 0.0,
    created: str | None = None,
    dataset: Mapping[str, Any] | None = None,
    other_cores: float | None = None,
) -> Report:
    from loaderprof.analysis import summary

    arms = _arms(trials)
    p, n = arms["persistent"], arms["non_persistent"]
    errors = tuple(t.error for t in trials if t.error is not None) + tuple(extra_errors)
    complete = not errors and not interrupted and _ran_as_planned(cfg, arms)
    comparison = projection = None
    warnings: list[str] = []
    # Last: the one-screen output shows only the first few (NOTE [one screen]).
    noise: list[str] = []
    for t in trials:
        warnings.extend(w for w in t.warnings if w not in warnings)
    if p.summary.steady_epoch_s and n.summary.steady_epoch_s:
        comparison, projection = _compare_arms(cfg, p, n, train_epochs)
        if projection is not None and projection.unavailable:
            warnings.append(projection.unavailable)
        if projection is not None:
            warnings.extend(_short_epoch_warnings(cfg))
        for name, arm in arms.items():
            noise.extend(summary.noise_warnings(name, arm.summary))
        if p.summary.workers_reused is False or p.summary.workers_reused is None:
            warnings.append("persistent arm did not keep the same worker PIDs across epochs")
        if n.summary.workers_reused is not False:
            warnings.append("non-persistent arm did not start fresh workers every epoch")
    env = environment(imported)
    busy = busy_warning(env, other_cores)
    if busy:
        warnings.append(busy)
    extras = {}
    if dataset:
        extras = {
            "dataset_kind": dataset.get("kind"),
            "dataset_length": dataset.get("length"),
            "dataset_type": dataset.get("type"),
            "dataset_shards": dataset.get("shards"),
            "dataset_shards_attribute": dataset.get("shards_attribute"),
        }
    report = Report(
        schema_version=SCHEMA_VERSION,
        tool=tool(),
        environment=env,
        config=cfg.recorded(),
        arms=arms,
        comparison=comparison,
        # Decided below, once the findings are in (NOTE [one verdict]).
        verdict=None,
        complete=complete,
        warnings=(*warnings, *noise),
        errors=errors,
        created=created or created_now(),
        wall_s=wall_s,
        extras=extras,
    )
    from loaderprof.analysis.verdict import VerdictInputs, decide
    from loaderprof.checks.registry import find, findings_checked

    findings = find(report)
    verdict = settled = None
    if comparison is not None:
        # See NOTE [one verdict]. The plan settled on the measurements alone (the stop
        # rule's question); the verdict weighs the findings too.
        measured = VerdictInputs.of_run(cfg, comparison, p.summary, n.summary)
        settled = decide(measured)
        verdict = decide(dataclasses.replace(measured, findings=tuple(findings)))
    return dataclasses.replace(
        report,
        # After every figure and finding: they see all that was measured.
        arms=arms if cfg.full_detail else _bounded(arms),
        findings=findings,
        verdict=verdict,
        projection=projection,
        findings_checked=findings_checked(report),
        plan=plan_outcome(
            cfg.schedule,
            sum(t.times_epochs for t in p.trials),
            settled,
            # One wording for a plan a signal or a failure cut short (NOTE [partial reports]).
            plan_words(report, planned=cfg.schedule.per_arm),
        ),
    )


def _ran_as_planned(cfg: RunConfig, arms: Mapping[str, ArmResult]) -> bool:
    """Every trial complete, and as many timing trials per arm as the plan may end with."""
    counts = {sum(t.times_epochs for t in a.trials) for a in arms.values()}
    planned = plan_ends(cfg.schedule)
    return (
        len(counts) == 1
        and counts <= planned
        and all(t.complete for a in arms.values() for t in a.trials)
    )


def _bounded(arms: Mapping[str, ArmResult]) -> dict[str, ArmResult]:
    """The arms with each trial's detail bounded for the JSON (see detail.py)."""
    from loaderprof.model.detail import bounded

    return {
        name: dataclasses.replace(
            arm,
            trials=tuple(bounded(t) for t in arm.trials),
            warmup_trials=tuple(bounded(t) for t in arm.warmup_trials),
        )
        for name, arm in arms.items()
    }


def _arms(trials: Sequence[TrialResult]) -> dict[str, ArmResult]:
    from loaderprof.analysis.summary import summarize_arm

    arms: dict[str, ArmResult] = {}
    for name in ARMS:
        arm_trials = tuple(t for t in trials if t.arm == name and not t.warmup)
        arms[name] = ArmResult(
            name=name,
            persistent=name == "persistent",
            trials=arm_trials,
            summary=summarize_arm(arm_trials),
            warmup_trials=tuple(t for t in trials if t.arm == name and t.warmup),
        )
    return arms


def plan_outcome(
    schedule: Schedule,
    per_arm: int,
    verdict: Verdict | None,
    cut_short: str | None = None,
) -> PlanOutcome:
    """How the plan ended, in compare's words (NOTE [sequential looks]); compare --
    COMMAND's too."""
    settled = verdict is not None and verdict.decided
    fixed = schedule.fixed
    if not schedule.adaptive:
        return PlanOutcome(
            "fixed",
            per_arm,
            fixed,
            1,
            1,
            CONFIDENCE,
            settled,
            cut_short or f"fixed plan ({schedule.fixed_why}): {plural(fixed, 'trial')} per arm",
        )
    max_trials = schedule.max_trials
    looks = look_points(max_trials)
    taken = sum(1 for k in looks if k <= per_arm)
    if cut_short:
        stopped = cut_short
    elif settled and per_arm < max_trials:
        stopped = f"settled after {plural(per_arm, 'trial')} per arm (look {taken} of {len(looks)})"
    elif settled:
        stopped = f"settled at the cap, --max-trials {max_trials}"
    elif per_arm >= max_trials:
        stopped = f"not settled at the cap, --max-trials {max_trials}"
    else:
        stopped = f"stopped after {plural(per_arm, 'trial')} per arm, before the plan could settle"
    return PlanOutcome(
        "adaptive",
        per_arm,
        max_trials,
        len(looks),
        taken,
        look_confidence(max_trials, per_arm),
        settled,
        stopped,
    )


def settled_rule(cfg: RunConfig, train_epochs: int | None = None) -> StopRule:
    """Whether the measured trials already give a settled verdict (the adaptive stop rule)."""
    from loaderprof.analysis.verdict import VerdictInputs, decide

    def settled(trials: Sequence[TrialResult]) -> bool:
        arms = _arms(trials)
        p, n = arms["persistent"], arms["non_persistent"]
        if not (p.summary.steady_epoch_s and n.summary.steady_epoch_s):
            return False
        comparison, _ = _compare_arms(cfg, p, n, train_epochs)
        return decide(VerdictInputs.of_run(cfg, comparison, p.summary, n.summary)).decided

    return settled


def _short_epoch_warnings(cfg: RunConfig) -> list[str]:
    """See NOTE [short epochs]. An epoch's first batches come from the prefetch queue,
    faster than the steady rate, so a cut that holds only those projects too short."""
    queued = cfg.loader.num_workers * (cfg.loader.prefetch_factor or 2)
    if cfg.max_batches is not None and cfg.max_batches < 4 * queued:
        return [
            f"--max-batches {cfg.max_batches}: the first {queued} batches of an epoch are "
            "prefetched, so the per-batch time is faster than the steady rate and full "
            f"epochs project short; use --max-batches {4 * queued} or more"
        ]
    return []


def _compare_arms(
    cfg: RunConfig, p: ArmResult, n: ArmResult, train_epochs: int | None
) -> tuple[Comparison, Projection | None]:
    """The comparison; with --max-batches on epochs projected to full length (NOTE
    [short epochs]), so --min-gain applies to the epochs training runs."""
    from loaderprof.analysis import projection
    from loaderprof.analysis.comparison import compare
    from loaderprof.analysis.summary import summarize_arm

    p_trials, n_trials = list(p.trials), list(n.trials)
    p_sum, n_sum = p.summary, n.summary
    info = None
    if cfg.max_batches is not None:
        full = projection.full_batches(
            p_trials + n_trials, cfg.epoch_samples, cfg.loader.batch_size
        )
        unavailable = None
        if full is None:
            unavailable = (
                f"epochs were cut to {cfg.max_batches} batches but the loader has no len(): "
                "the verdict speaks of the cut epochs; pass --epoch-samples to project"
            )
        else:
            p_trials = projection.project_trials(p_trials, full, cfg.max_batches)
            n_trials = projection.project_trials(n_trials, full, cfg.max_batches)
            p_sum, n_sum = summarize_arm(p_trials), summarize_arm(n_trials)
        info = projection.describe(
            cfg.max_batches,
            full,
            {"persistent": p.trials, "non_persistent": n.trials},
            {"persistent": p_trials, "non_persistent": n_trials},
            unavailable,
        )
    comparison = compare(
        p_trials,
        n_trials,
        p_sum,
        n_sum,
        seed=cfg.seed,
        train_epochs=train_epochs or cfg.train_epochs or cfg.epochs,
        memory_budget_bytes=cfg.memory_budget_bytes,
        confidence=plan_confidence(cfg.schedule, sum(t.times_epochs for t in p.trials)),
    )
    return comparison, info


def run_compare(
    cfg: RunConfig,
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    train_epochs: int | None = None,
    sync: Callable[[], None] | None = None,
) -> Report:
    """Run both arms and return the Report; partial when a trial failed or was stopped."""
    imported: dict[str, Any] = {}
    dataset: dict[str, Any] = {}

    def capture(plan: Any, ev: Mapping[str, Any] | None) -> None:
        if ev is not None and ev.get("ev") == Ev.IMPORTED and not imported:
            imported.update(ev)
        if ev is not None and ev.get("ev") == Ev.DATASET_BUILT and not dataset:
            dataset.update(ev)
        if on_progress:
            on_progress(plan, ev)

    start, cpu = time.monotonic(), contention.mark()
    outcome = run_schedule(
        cfg,
        runner=runner,
        on_progress=capture,
        sync=sync,
        settled=settled_rule(cfg, train_epochs),
    )
    return build_report(
        cfg,
        outcome.trials,
        imported=imported,
        train_epochs=train_epochs,
        interrupted=outcome.interrupted is not None,
        wall_s=time.monotonic() - start,
        dataset=dataset,
        other_cores=contention.other_cores(cpu, contention.mark()),
    )
