"""Persistent against non-persistent, and a report against its baseline: ratios
with intervals (NOTE [trial is the unit]), pure functions of measured trials.

What the ratios mean for the user is decided in `loaderprof.analysis.verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from loaderprof.analysis.stats import (
    CONFIDENCE,
    Estimate,
    estimate_median,
    estimate_ratio,
    significant_direction,
)
from loaderprof.analysis.summary import (
    Groups,
    _flat,
    arm_groups,
    cold_groups,
    first_batch_groups,
    memory_groups,
    reading_resolution,
    spread_groups,
    steady_groups,
)
from loaderprof.model.command import CommandReport
from loaderprof.model.metrics import MetricValue, Ratio, Stat
from loaderprof.model.results import ArmSummary, Comparison, Report
from loaderprof.model.trials import TrialResult


def break_even_epochs(cold_extra_s: float, saved_per_epoch_s: float) -> int | None:
    """Smallest epoch count N ≥ 2 at which cold_p + (N-1)·steady_p ≤ cold_np + (N-1)·steady_np."""
    if saved_per_epoch_s <= 0:
        return None
    if cold_extra_s <= 0:
        return 2
    return 1 + max(1, math.ceil(cold_extra_s / saved_per_epoch_s))


def compare(
    persistent: Sequence[TrialResult],
    non_persistent: Sequence[TrialResult],
    p_sum: ArmSummary,
    np_sum: ArmSummary,
    *,
    seed: int,
    train_epochs: int,
    memory_budget_bytes: int | None = None,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Persistent against non-persistent, trial against trial (NOTE [trial is the
    unit]). `confidence` is the steady-epoch interval's: below 95 % when an
    adaptive plan spends α over several looks (NOTE [sequential looks])."""
    saved = None
    if p_sum.steady_epoch_s and np_sum.steady_epoch_s:
        saved = np_sum.steady_epoch_s.median - p_sum.steady_epoch_s.median

    def diff(a: Stat | None, b: Stat | None) -> int | None:
        return None if a is None or b is None else int(a.median - b.median)

    def est(
        groups: Callable[[Sequence[TrialResult]], Groups], shift: int, metric: str
    ) -> Estimate | None:
        conf = confidence if shift == 0 else CONFIDENCE
        return estimate_ratio(
            groups(persistent),
            groups(non_persistent),
            seed=seed + shift,
            confidence=conf,
            extra_a=spread_groups(persistent, metric),
            extra_b=spread_groups(non_persistent, metric),
            resolution=reading_resolution(metric),
        )

    steady = est(steady_groups, 0, "steady")
    cold, first = est(cold_groups, 1, "cold"), est(first_batch_groups, 2, "first_batch")
    pss = est(lambda ts: memory_groups(ts, "peak_total_pss_bytes"), 3, "peak_total_pss")
    # The first epoch starts workers in both settings: a difference there is taken off
    # the saving where the cold ratio shows persistence slower (an earned interval
    # wholly above 1), not where its interval says it may be noise; read once a side (no
    # interval: a single trial, `check`), the figure printed is all there is, and a
    # sentence that left it out would contradict the table beside it.
    cold_extra = 0.0
    once = cold is not None and not cold.ratio.has_interval
    slower = cold is not None and (once or significant_direction(cold.ratio, cold.p) == "loss")
    if slower and p_sum.cold_epoch_s and np_sum.cold_epoch_s:
        cold_extra = max(0.0, p_sum.cold_epoch_s.median - np_sum.cold_epoch_s.median)
    # Break-even and totals only count a saving the statistics support.
    # Not from an interval too wide to mean anything (see NOTE [earned intervals]).
    significant = (
        steady is not None
        and steady.ratio.informative
        and significant_direction(steady.ratio, steady.p, 1 - confidence) == "saving"
    )
    be = break_even_epochs(cold_extra, saved) if saved is not None and significant else None
    over = np_over = None
    if memory_budget_bytes is not None:
        if p_sum.peak_total_pss_bytes is not None:
            over = p_sum.peak_total_pss_bytes.median > memory_budget_bytes
        if np_sum.peak_total_pss_bytes is not None:
            np_over = np_sum.peak_total_pss_bytes.median > memory_budget_bytes
    total = None
    if saved is not None:
        total = saved * (train_epochs - 1) - max(0.0, cold_extra)
    spread = steady.spread if steady else None
    return Comparison(
        steady_epoch_ratio=steady.ratio if steady else None,
        cold_epoch_ratio=cold.ratio if cold else None,
        first_batch_ratio=first.ratio if first else None,
        saved_s_per_epoch=saved,
        extra_idle_memory_bytes=diff(p_sum.idle_workers_uss_bytes, np_sum.idle_workers_uss_bytes),
        extra_peak_pss_bytes=diff(p_sum.peak_total_pss_bytes, np_sum.peak_total_pss_bytes),
        break_even_epochs=be,
        train_epochs=train_epochs,
        saved_s_total=total,
        steady_epoch_p=steady.p if steady else None,
        cold_epoch_p=cold.p if cold else None,
        first_batch_p=first.p if first else None,
        peak_total_pss_ratio=pss.ratio if pss else None,
        peak_total_pss_p=pss.p if pss else None,
        memory_budget_bytes=memory_budget_bytes,
        over_budget=over,
        unit=steady.unit if steady else None,
        steady_epoch_n=steady.n if steady else None,
        confidence=confidence,
        non_persistent_over_budget=np_over,
        steady_epoch_df=steady.df if steady else None,
        steady_epoch_spread=(
            {
                "persistent": spread[0].source,
                "non_persistent": spread[1].source,
                "df": [spread[0].df, spread[1].df],
            }
            if spread
            else None
        ),
    )


_RATIO_GROUPS: dict[str, Callable[[Sequence[TrialResult]], Groups]] = {
    "steady_epoch_ratio": steady_groups,
    "cold_epoch_ratio": cold_groups,
    "first_batch_ratio": first_batch_groups,
    "peak_total_pss_ratio": lambda ts: memory_groups(ts, "peak_total_pss_bytes"),
}


def ratio_sample_count(
    name: str, persistent: Sequence[TrialResult], non_persistent: Sequence[TrialResult]
) -> int:
    """How many units of the persistent arm stand behind a ratio metric, as `compare`
    draws it: trials, or values when an arm has a single trial."""
    groups = _RATIO_GROUPS[name]
    a, b = groups(persistent), groups(non_persistent)
    figures = [g for g in a if g]
    if len(figures) >= 2 and len([g for g in b if g]) >= 2:
        return len(figures)
    return len(_flat(a))


def report_metrics(report: Report, seed: int = 0) -> dict[str, MetricValue]:
    """Every gateable metric of a report, each with a 95 % interval (trial as unit)."""
    out: dict[str, MetricValue] = {}
    c = report.comparison
    if c is not None:
        for name, r in (
            ("steady_epoch_ratio", c.steady_epoch_ratio),
            ("cold_epoch_ratio", c.cold_epoch_ratio),
            ("first_batch_ratio", c.first_batch_ratio),
            ("peak_total_pss_ratio", c.peak_total_pss_ratio),
        ):
            if r is not None:
                n = ratio_sample_count(
                    name, report.arms["persistent"].trials, report.arms["non_persistent"].trials
                )
                level = c.confidence if name == "steady_epoch_ratio" else 0.95
                out[name] = MetricValue(r.value, r.ci_low, r.ci_high, n, r.has_interval, level)
        if c.saved_s_per_epoch is not None:
            # A difference of medians: no interval of its own (NOTE [earned intervals]),
            # so past its limit it is inconclusive, never a fail.
            v, n = c.saved_s_per_epoch, c.steady_epoch_n or 1
            out["saved_s_per_epoch"] = MetricValue(v, v, v, n, has_interval=False)
    for arm_name, arm in report.arms.items():
        for metric, groups in arm_groups(arm.trials).items():
            step = reading_resolution(metric, report.environment)
            est = estimate_median(groups, seed=seed, resolution=step)
            if est is not None:
                out[f"{arm_name}.{metric}"] = est
    if report.distributed is not None and report.distributed.nodes:
        # Node memory totals are sums of per-rank medians: no interval (NOTE [earned
        # intervals]), so a gate past its limit on them is inconclusive, never a fail.
        # Worker processes alive at once are counted, not estimated: exact.
        nodes = report.distributed.nodes
        for arm_name in ("persistent", "non_persistent"):
            for metric, attr in (
                ("node_pss_total", "pss_total_bytes"),
                ("node_idle_workers_uss", "idle_workers_uss_bytes"),
                ("node_worker_processes", "worker_processes"),
            ):
                vals = [getattr(n.arms[arm_name], attr) for n in nodes if arm_name in n.arms]
                vals = [v for v in vals if v is not None]
                if vals:
                    v = float(max(vals))
                    out[f"{arm_name}.{metric}"] = MetricValue(
                        v, v, v, n=len(nodes), has_interval=metric == "node_worker_processes"
                    )
    return out


def command_metrics(report: CommandReport, seed: int = 0) -> dict[str, MetricValue]:
    """The gateable metrics of `compare -- COMMAND` (NOTE [command arms]): the steady
    and cold ratios, the saving, each arm's steady and cold epoch; trials as units."""
    out: dict[str, MetricValue] = {}
    s = report.saving
    arms = {
        "persistent": [t for t in report.trials if t.arm == "persistent" and t.epochs],
        "non_persistent": [t for t in report.trials if t.arm == "non_persistent" and t.epochs],
    }
    if s is not None:
        r, n = s.ratio, min(len(v) for v in arms.values())
        # From trials as units only, as the screen prints (see NOTE [earned intervals]).
        trial = s.unit == "trial" and r.has_interval
        level = s.confidence
        out["steady_epoch_ratio"] = MetricValue(r.value, r.ci_low, r.ci_high, n, trial, level)
        if s.low_s is not None and s.high_s is not None:
            out["saved_s_per_epoch"] = MetricValue(
                s.saved_s, s.low_s, s.high_s, n, True, level, signed=True
            )
        else:
            v = s.saved_s
            out["saved_s_per_epoch"] = MetricValue(v, v, v, n, has_interval=False)
    cold = {name: [[t.epochs[0].wall_s] for t in ts] for name, ts in arms.items()}
    est = estimate_ratio(cold["persistent"], cold["non_persistent"], seed=seed)
    if est is not None and est.unit == "trial":
        r = est.ratio
        out["cold_epoch_ratio"] = MetricValue(r.value, r.ci_low, r.ci_high, est.n, r.has_interval)
    for name, ts in arms.items():
        for metric, groups in (
            ("steady_epoch_s", [list(t.steady) for t in ts if t.steady]),
            ("cold_epoch_s", cold[name]),
        ):
            m = estimate_median(groups, seed=seed) if groups else None
            if m is not None:
                out[f"{name}.{metric}"] = m
    return out


def _arm_estimates(new: Report, old: Report, seed: int) -> dict[str, tuple[Estimate, float, float]]:
    """new ÷ old for every per-arm metric both reports have: (estimate, old median,
    new median)."""
    out = {}
    for arm_name in ("persistent", "non_persistent"):
        if arm_name not in old.arms or arm_name not in new.arms:
            continue
        a = arm_groups(new.arms[arm_name].trials)
        b = arm_groups(old.arms[arm_name].trials)
        for metric, groups in a.items():
            base = b.get(metric, [])
            step = max(
                reading_resolution(metric, new.environment),
                reading_resolution(metric, old.environment),
            )
            est = estimate_ratio(groups, base, seed=seed, resolution=step)
            if est is not None:
                out[f"{arm_name}.{metric}"] = (
                    est,
                    float(np.median(_flat(base))),
                    float(np.median(_flat(groups))),
                )
    return out


def relative_metrics(new: Report, old: Report, seed: int = 0) -> dict[str, MetricValue]:
    """new ÷ baseline for every per-arm metric, with its interval (trial as unit)."""
    out: dict[str, MetricValue] = {
        name: MetricValue(e.ratio.value, e.ratio.ci_low, e.ratio.ci_high, e.n, e.ratio.has_interval)
        for name, (e, _, _) in _arm_estimates(new, old, seed).items()
    }
    # Ratios relative to the baseline's ratios (e.g. steady_epoch_ratio:+10%).
    nm, om = report_metrics(new, seed), report_metrics(old, seed)
    for name in _RATIO_GROUPS:
        if name in nm and name in om and om[name].value > 0:
            base = om[name].value
            v = nm[name]
            out[name] = MetricValue(
                v.value / base, v.ci_low / base, v.ci_high / base, v.n, v.has_interval
            )
    return out


@dataclass(frozen=True)
class MetricDiff:
    metric: str
    baseline: float
    new: float
    ratio: Ratio
    p_value: float | None


def diff_reports(old: Report, new: Report, seed: int = 0) -> list[MetricDiff]:
    """Per-arm metrics of `new` against `old`: medians, ratio with CI, and the test
    (NOTE [trial is the unit])."""
    return [
        MetricDiff(name, base, value, e.ratio, e.p)
        for name, (e, base, value) in _arm_estimates(new, old, seed).items()
    ]
