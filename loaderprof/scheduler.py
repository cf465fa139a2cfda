"""Trials in order, each through a `TrialRunner`; shared by compare and sweep.

compare runs two arms A B B A A B ... (the first arm from a seeded coin), so slow
drift on a noisy machine (thermal, other tenants) falls evenly on both; sweep
runs rounds over its points in a seeded shuffled order. Either way the trials
go through `run_trials`, which keeps every trial already measured whatever
happens to a later one. The runner is a parameter: the real one starts a
process per trial, a fake one (tests) assembles synthetic events.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.config import RunConfig
from loaderprof.results import TrialResult
from loaderprof.runner import TrialInterrupted, TrialPlan, TrialRunner, run_trial

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
class Scheduled:
    """One trial to run: its config, its plan, and the group it stops with."""

    cfg: RunConfig
    plan: TrialPlan
    # When a trial of a group fails, the group's later trials are skipped.
    group: str = ""


@dataclass(frozen=True)
class ScheduleOutcome:
    trials: tuple[TrialResult, ...]
    # Set when an interrupt stopped the run.
    interrupted: BaseException | None


ProgressCallback = Callable[[TrialPlan, Mapping[str, Any] | None], None]


def run_trials(
    scheduled: Iterable[Scheduled],
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    sync: Callable[[], None] | None = None,
) -> ScheduleOutcome:
    """Run the trials in order. With `sync` (a barrier across torchrun ranks) every
    planned trial starts together on all ranks; a rank whose trial failed stops
    measuring but keeps taking part in the barriers, so no other rank hangs."""
    run = runner or run_trial
    results: list[TrialResult] = []
    failed: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="loaderprof-") as tmp:
        for item in scheduled:
            if sync is not None:
                sync()
            if item.group in failed:
                continue
            if on_progress:
                on_progress(item.plan, None)

            def forward(ev: Mapping[str, Any], plan: TrialPlan = item.plan) -> None:
                if on_progress:
                    on_progress(plan, ev)

            try:
                result = run(item.cfg, item.plan, Path(tmp), on_event=forward)
            except TrialInterrupted as exc:
                results.append(exc.partial)
                return ScheduleOutcome(tuple(results), exc.__cause__)
            results.append(result)
            if not result.complete:
                failed.add(item.group)
    return ScheduleOutcome(tuple(results), None)


def run_schedule(
    cfg: RunConfig,
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    sync: Callable[[], None] | None = None,
) -> ScheduleOutcome:
    """compare's plan: both arms, trials interleaved; the first failure ends it."""
    plans = trial_order(cfg.trials, cfg.seed, cfg.warmup_trials)
    return run_trials(
        (Scheduled(cfg, plan) for plan in plans), runner=runner, on_progress=on_progress, sync=sync
    )
