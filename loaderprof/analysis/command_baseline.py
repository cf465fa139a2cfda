"""`compare -- COMMAND --baseline`: each gated figure of a new command report against
a saved one, new ÷ baseline with an interval only where both runs earned one.

NOTE [command baseline]: an arm's epoch (`persistent.steady_epoch_s`, ...) is set
against the baseline's as `loaderprof diff` sets two compare reports: each run's
trials are the units of one ratio test (NOTE [trial is the unit]), so the noise of
both runs is in its interval. A figure that compares the arms within one run (the
steady and cold ratios, the saving) exists once per run with its own interval; its
value against the baseline is the quotient of the two, and its interval is the
widest quotient of the two intervals' ends. Each interval holds the true figure at
its level, so both hold it at the product of the levels at least (the runs are
independent): that product is the interval's level, printed beside it, not a 95 %
it has not earned. A baseline figure read once (no interval), or one whose interval
reaches zero, leaves no interval: such a gate is inconclusive at most.
"""

from __future__ import annotations

import math

from loaderprof.analysis.comparison import command_metrics
from loaderprof.analysis.stats import estimate_ratio
from loaderprof.model.command import CommandReport, CommandTrial
from loaderprof.model.metrics import MetricValue

# Figures that compare the two arms within one run.
_WITHIN_RUN = ("steady_epoch_ratio", "cold_epoch_ratio", "saved_s_per_epoch")
_ARMS = ("persistent", "non_persistent")


def _groups(trials: tuple[CommandTrial, ...], arm: str, metric: str) -> list[list[float]]:
    ts = [t for t in trials if t.arm == arm and t.epochs]
    if metric == "cold_epoch_s":
        return [[t.epochs[0].wall_s] for t in ts]
    return [list(t.steady) for t in ts if t.steady]


def _arm_relative(
    new: CommandReport, old: CommandReport, arm: str, metric: str, seed: int
) -> MetricValue | None:
    a, b = _groups(new.trials, arm, metric), _groups(old.trials, arm, metric)
    est = estimate_ratio(a, b, seed=seed) if a and b else None
    if est is None:
        return None
    r = est.ratio
    # The epochs of one trial are not independent units: only trials earn an interval.
    earned = r.has_interval and est.unit == "trial"
    return MetricValue(r.value, r.ci_low, r.ci_high, est.n, earned)


def quotient(new: MetricValue, old: MetricValue) -> MetricValue | None:
    """new ÷ old for figures of two runs (see NOTE [command baseline]); None where the
    baseline is not positive (no relative change of it means anything)."""
    if not old.value > 0:
        return None
    value = new.value / old.value
    earned = new.has_interval and old.has_interval and old.ci_low > 0
    if not earned:
        return MetricValue(value, value, value, new.n, has_interval=False)
    ends = [n / o for n in (new.ci_low, new.ci_high) for o in (old.ci_low, old.ci_high)]
    if not all(math.isfinite(e) for e in ends):
        return MetricValue(value, value, value, new.n, has_interval=False)
    level = new.confidence * old.confidence
    return MetricValue(value, min(ends), max(ends), new.n, True, level)


def relative_command_metrics(
    new: CommandReport, old: CommandReport, seed: int = 0
) -> dict[str, MetricValue]:
    """new ÷ baseline for every figure `compare -- COMMAND` gates (see NOTE [command
    baseline])."""
    out: dict[str, MetricValue] = {}
    nm, om = command_metrics(new, seed), command_metrics(old, seed)
    for name in _WITHIN_RUN:
        if name in nm and name in om:
            q = quotient(nm[name], om[name])
            if q is not None:
                out[name] = q
    for arm in _ARMS:
        for metric in ("steady_epoch_s", "cold_epoch_s"):
            m = _arm_relative(new, old, arm, metric, seed)
            if m is not None:
                out[f"{arm}.{metric}"] = m
    return out
