"""Arms × trials, interleaved, each trial in its own fresh process.

Order is A B B A A B ... from a seeded coin for the first arm, so slow drift
on a noisy machine (thermal, other tenants) falls evenly on both arms.
Trials already measured are kept whatever happens to a later one.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.config import RunConfig
from loaderprof.results import TrialResult
from loaderprof.runner import TrialInterrupted, TrialPlan, run_trial

ARM_PERSISTENT = TrialPlan("persistent", True, 0)
ARM_NON_PERSISTENT = TrialPlan("non_persistent", False, 0)


def trial_order(trials: int, seed: int, warmup: int = 0) -> list[TrialPlan]:
    """Warm-up pairs first, then the measured pairs, alternating AB / BA."""
    first, second = ARM_PERSISTENT, ARM_NON_PERSISTENT
    if random.Random(seed).random() < 0.5:
        first, second = second, first
    plans: list[TrialPlan] = []
    for is_warmup, count in ((True, warmup), (False, trials)):
        for i in range(count):
            pair = (first, second) if (len(plans) // 2) % 2 == 0 else (second, first)
            plans.extend(TrialPlan(p.arm, p.persistent, i, is_warmup) for p in pair)
    return plans


@dataclass(frozen=True)
class ScheduleOutcome:
    trials: tuple[TrialResult, ...]
    # Set when the run stopped early: the trial that failed or was interrupted.
    stopped_by: TrialResult | None
    interrupted: BaseException | None


ProgressCallback = Callable[[TrialPlan, Mapping[str, Any] | None], None]


def run_schedule(
    cfg: RunConfig,
    *,
    on_progress: ProgressCallback | None = None,
    workdir: Path | None = None,
    sync: Callable[[], None] | None = None,
) -> ScheduleOutcome:
    """Run the trials in order. With `sync` (a barrier across torchrun ranks) every
    planned trial starts together on all ranks; a rank whose trial failed stops
    measuring but keeps taking part in the barriers, so no other rank hangs."""
    results: list[TrialResult] = []
    stopped: TrialResult | None = None
    with tempfile.TemporaryDirectory(prefix="loaderprof-") as tmp:
        wd = workdir or Path(tmp)
        for plan in trial_order(cfg.trials, cfg.seed, cfg.warmup_trials):
            if sync is not None:
                sync()
                if stopped is not None:
                    continue
            if on_progress:
                on_progress(plan, None)

            def forward(ev: Mapping[str, Any], plan: TrialPlan = plan) -> None:
                if on_progress:
                    on_progress(plan, ev)

            try:
                result = run_trial(cfg, plan, wd, on_event=forward)
            except TrialInterrupted as exc:
                results.append(exc.partial)
                return ScheduleOutcome(tuple(results), exc.partial, exc.__cause__)
            results.append(result)
            if not result.complete:
                if sync is None:
                    return ScheduleOutcome(tuple(results), result, None)
                stopped = result
    return ScheduleOutcome(tuple(results), stopped, None)
