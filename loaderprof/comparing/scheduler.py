"""Trials in order, each through a `TrialRunner`; shared by compare and sweep.

compare runs two arms A B B A A B ... (the first arm from a seeded coin), so slow
drift on a noisy machine (thermal, other tenants) falls evenly on both; sweep
runs rounds over its points in a seeded shuffled order. Either way the trials
go through `run_trials`, which keeps every trial already measured whatever
happens to a later one. The runner is a parameter: the real one starts a
process per trial, a fake one (tests) assembles synthetic events.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.analysis.stats import look_points
from loaderprof.config.run import RunConfig
from loaderprof.errors import Measuring
from loaderprof.measure.runner import (
    TemplateRunner,
    TrialInterrupted,
    TrialRunner,
    TrialSlot,
)
from loaderprof.measure.scratch import scratch_dir
from loaderprof.model.trials import TrialResult

ARM_PERSISTENT = TrialSlot("persistent", True, 0)
ARM_NON_PERSISTENT = TrialSlot("non_persistent", False, 0)


def trial_order(trials: int, seed: int, warmup: int = 0, *, memory: int = 0) -> list[TrialSlot]:
    """Warm-up pairs first, then the `memory` memory pairs (NOTE [timing and memory
    trials]), then the timing pairs, alternating AB / BA throughout."""
    first, second = ARM_PERSISTENT, ARM_NON_PERSISTENT
    if random.Random(seed).random() < 0.5:
        first, second = second, first
    specs: list[TrialSlot] = []
    timing = "timing" if memory else "both"
    for is_warmup, count, role in (
        (True, warmup, "both"),
        (False, memory, "memory"),
        (False, trials, timing),
    ):
        for i in range(count):
            pair = (first, second) if (len(specs) // 2) % 2 == 0 else (second, first)
            specs.extend(TrialSlot(p.arm, p.persistent, i, is_warmup, role) for p in pair)
    return specs


@dataclass(frozen=True)
class Scheduled:
    """One trial to run: its config, which trial it is, and the group it stops with."""

    cfg: RunConfig
    spec: TrialSlot
    # When a trial of a group fails, the group's later trials are skipped.
    group: str = ""


@dataclass(frozen=True)
class ScheduleOutcome:
    trials: tuple[TrialResult, ...]
    # Set when an interrupt stopped the run.
    interrupted: BaseException | None


ProgressCallback = Callable[[TrialSlot, Mapping[str, Any] | None], None]
# Given the measured trials so far, whether the run may stop now.
StopRule = Callable[[Sequence[TrialResult]], bool]


@contextlib.contextmanager
def _closing(runner: TemplateRunner | None) -> Iterator[None]:
    try:
        yield
    finally:
        if runner is not None:
            runner.close()


def run_trials(
    scheduled: Iterable[Scheduled],
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    sync: Callable[[], None] | None = None,
    stop: StopRule | None = None,
) -> ScheduleOutcome:
    """Run the trials in order. With `sync` (a barrier across torchrun ranks) every
    planned trial starts together on all ranks; a rank whose trial failed stops
    measuring but keeps taking part in the barriers, so no other rank hangs.
    `stop` is asked after every trial whether the rest may be left out."""
    default = TemplateRunner() if runner is None else None
    run: TrialRunner = runner or default  # type: ignore[assignment]
    results: list[TrialResult] = []
    failed: set[str] = set()
    # The tempdir and the template are gone before `measuring` ends (NOTE [measuring]).
    with (
        Measuring() as measuring,
        scratch_dir("loaderprof-") as tmp,
        _closing(default),
    ):
        for item in scheduled:
            if sync is not None:
                sync()
            if item.group in failed:
                continue
            if on_progress:
                on_progress(item.spec, None)

            def forward(ev: Mapping[str, Any], spec: TrialSlot = item.spec) -> None:
                if on_progress:
                    on_progress(spec, ev)

            try:
                result = run(item.cfg, item.spec, Path(tmp), forward)
            except TrialInterrupted as exc:
                results.append(exc.partial)
                return ScheduleOutcome(tuple(results), exc.__cause__)
            results.append(result)
            if not result.complete:
                failed.add(item.group)
            elif stop is not None and stop(results):
                break
    return ScheduleOutcome(tuple(results), measuring.interrupted)


def looks_stop(cfg: RunConfig, settled: StopRule) -> StopRule:
    """The adaptive plan's stop rule: at each look (NOTE [sequential looks]), once both
    arms have the same number of measured trials, stop if `settled` says so."""

    def stop(results: Sequence[TrialResult]) -> bool:
        measured = [t for t in results if not t.warmup and t.times_epochs]
        k = sum(t.arm == ARM_PERSISTENT.arm for t in measured)
        if not at_look(k, len(measured) - k, cfg.max_trials):
            return False
        return settled([t for t in results if not t.warmup])

    return stop


def at_look(persistent: int, non_persistent: int, max_trials: int) -> bool:
    """Whether the adaptive plan looks now (NOTE [sequential looks]): both arms have
    the same number of measured trials, at a look point short of the cap (at the
    cap the plan ends anyway). compare's plan and the command form's both ask here."""
    k = persistent
    return k == non_persistent and k < max_trials and k in look_points(max_trials)


def run_schedule(
    cfg: RunConfig,
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    sync: Callable[[], None] | None = None,
    settled: StopRule | None = None,
) -> ScheduleOutcome:
    """compare's plan: both arms, trials interleaved; the first failure ends it. An
    adaptive plan (`cfg.adaptive`) runs up to --max-trials and stops at the first look
    where `settled` holds; without `settled` it runs them all."""
    specs = trial_order(cfg.planned_trials, cfg.seed, cfg.warmup_trials, memory=cfg.memory_pairs)
    return run_trials(
        (Scheduled(cfg, spec) for spec in specs),
        runner=runner,
        on_progress=on_progress,
        sync=sync,
        stop=looks_stop(cfg, settled) if cfg.adaptive and settled is not None else None,
    )
