"""One `compare` run: schedule the trials, then analyse them into a Report."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loaderprof.config import RunConfig
from loaderprof.environment import environment
from loaderprof.results import (
    ARMS,
    SCHEMA_VERSION,
    ArmResult,
    Comparison,
    Projection,
    Report,
    TrialError,
    TrialResult,
    Verdict,
)
from loaderprof.runner import TrialRunner
from loaderprof.scheduler import ProgressCallback, run_schedule
from loaderprof.version import __version__


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
) -> Report:
    from loaderprof import analysis

    arms: dict[str, ArmResult] = {}
    for name in ARMS:
        arm_trials = tuple(t for t in trials if t.arm == name and not t.warmup)
        arms[name] = ArmResult(
            name=name,
            persistent=name == "persistent",
            trials=arm_trials,
            summary=analysis.summarize_arm(arm_trials),
            warmup_trials=tuple(t for t in trials if t.arm == name and t.warmup),
        )
    p, n = arms["persistent"], arms["non_persistent"]
    errors = tuple(t.error for t in trials if t.error is not None) + tuple(extra_errors)
    complete = (
        not errors
        and not interrupted
        and all(
            len(a.trials) == cfg.trials and all(t.complete for t in a.trials) for a in arms.values()
        )
    )
    comparison = verdict = projection = None
    warnings: list[str] = []
    for t in trials:
        warnings.extend(w for w in t.warnings if w not in warnings)
    if p.summary.steady_epoch_s and n.summary.steady_epoch_s:
        comparison, verdict, projection = _weigh_arms(cfg, p, n, train_epochs)
        if projection is not None and projection.unavailable:
            warnings.append(projection.unavailable)
        if projection is not None:
            warnings.extend(_short_epoch_warnings(cfg))
        for name, arm in arms.items():
            warnings.extend(analysis.noise_warnings(name, arm.summary))
        if p.summary.workers_reused is False or p.summary.workers_reused is None:
            warnings.append("persistent arm did not keep the same worker PIDs across epochs")
        if n.summary.workers_reused is not False:
            warnings.append("non-persistent arm did not start fresh workers every epoch")
    env = environment(imported)
    load = env.get("load_average")
    if load and env.get("cpu_count") and load[0] >= env["cpu_count"]:
        warnings.append(
            f"the machine was busy (load average {load[0]:.1f} on {env['cpu_count']} cores): "
            "timings may be noisy"
        )
    extras = {}
    if dataset:
        extras = {
            "dataset_kind": dataset.get("kind"),
            "dataset_length": dataset.get("length"),
            "dataset_type": dataset.get("type"),
        }
    report = Report(
        schema_version=SCHEMA_VERSION,
        tool={"name": "loaderprof", "version": __version__},
        environment=env,
        config=cfg.to_dict(),
        arms=arms,
        comparison=comparison,
        verdict=verdict,
        complete=complete,
        warnings=tuple(warnings),
        errors=errors,
        created=created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        wall_s=wall_s,
        extras=extras,
    )
    from loaderprof.findings import find, findings_checked
    from loaderprof.state_findings import weigh

    findings = find(report)
    return dataclasses.replace(
        report,
        findings=findings,
        verdict=weigh(report.verdict, findings),
        projection=projection,
        findings_checked=findings_checked(report),
    )


def _short_epoch_warnings(cfg: RunConfig) -> list[str]:
    """NOTE [short epochs]: an epoch's first batches come from the prefetch queue,
    faster than the steady rate, so a cut that holds only those projects too short."""
    queued = cfg.loader.num_workers * (cfg.loader.prefetch_factor or 2)
    if cfg.max_batches is not None and cfg.max_batches < 4 * queued:
        return [
            f"--max-batches {cfg.max_batches}: the first {queued} batches of an epoch are "
            "prefetched, so the per-batch time is faster than the steady rate and full "
            f"epochs project short; use --max-batches {4 * queued} or more"
        ]
    return []


def _weigh_arms(
    cfg: RunConfig, p: ArmResult, n: ArmResult, train_epochs: int | None
) -> tuple[Comparison, Verdict, Projection | None]:
    """The comparison and the verdict; with --max-batches on epochs projected to full
    length (NOTE [short epochs]), so --min-gain applies to the epochs training runs."""
    from loaderprof import analysis, projection

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
            p_sum, n_sum = analysis.summarize_arm(p_trials), analysis.summarize_arm(n_trials)
        info = projection.describe(
            cfg.max_batches,
            full,
            {"persistent": p.trials, "non_persistent": n.trials},
            {"persistent": p_trials, "non_persistent": n_trials},
            unavailable,
        )
    comparison = analysis.compare(
        p_trials,
        n_trials,
        p_sum,
        n_sum,
        seed=cfg.seed,
        train_epochs=train_epochs or cfg.train_epochs or cfg.epochs,
        memory_budget_bytes=cfg.memory_budget_bytes,
    )
    return comparison, analysis.verdict(comparison, p_sum, min_gain=cfg.min_gain), info


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
        if ev is not None and ev.get("ev") == "imported" and not imported:
            imported.update(ev)
        if ev is not None and ev.get("ev") == "dataset_built" and not dataset:
            dataset.update(ev)
        if on_progress:
            on_progress(plan, ev)

    start = time.monotonic()
    outcome = run_schedule(cfg, runner=runner, on_progress=capture, sync=sync)
    return build_report(
        cfg,
        outcome.trials,
        imported=imported,
        train_epochs=train_epochs,
        interrupted=outcome.interrupted is not None,
        wall_s=time.monotonic() - start,
        dataset=dataset,
    )
