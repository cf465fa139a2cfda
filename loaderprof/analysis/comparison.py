"""Summaries, comparison and verdict: pure functions of measured trials.

Epoch 1 (cold: every worker starts) and epochs 2..N (steady) are different
quantities and are never averaged together; persistence changes the steady
epochs. Steady epochs are pooled over trials.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from loaderprof.analysis.stats import (
    ALPHA,
    CONFIDENCE,
    Estimate,
    bootstrap_ratio,
    estimate_median,
    estimate_ratio,
    mann_whitney_p,
)
from loaderprof.measure import readings
from loaderprof.model.metrics import UNINFORMATIVE_FACTOR, MetricValue, Ratio, Stat
from loaderprof.model.results import ArmSummary, Comparison, Report, Verdict
from loaderprof.model.trials import TrialResult
from loaderprof.model.units import fmt_bytes, fmt_ratio, fmt_seconds

__all__ = ["ALPHA", "bootstrap_ratio", "mann_whitney_p"]

NOISY_REL_IQR = 0.10


def _measured(trials: Sequence[TrialResult]) -> list[TrialResult]:
    return [t for t in trials if t.epochs]


def _timed(trials: Sequence[TrialResult]) -> list[TrialResult]:
    """NOTE [timing and memory trials]: the trials whose epoch times count (the
    sampler held still in them), not the memory trials."""
    return [t for t in _measured(trials) if t.role != "memory"]


def _memory_source(trials: Sequence[TrialResult], attr: str) -> list[TrialResult]:
    """The trials a memory figure comes from: peaks (reached inside epochs) and the
    set-up baseline from the trials sampled deeply throughout, where a reading of the
    set-up is waited for (NOTE [sampled pauses]); a timing trial's last walk before
    its loader may date from before its Dataset was built. What is read in the pauses
    (idle workers) from every trial that took pauses."""
    if attr.startswith(("peak_", "setup_")):
        return [t for t in _measured(trials) if t.role != "timing"]
    return _measured(trials)


Groups = list[list[float]]


def _flat(groups: Groups) -> list[float]:
    return [v for g in groups for v in g]


def _memory_trials(trials: Sequence[TrialResult]) -> list[TrialResult]:
    return [t for t in _measured(trials) if t.role == "memory"]


def _cold(trials: Sequence[TrialResult]) -> Groups:
    return [[t.epochs[0].wall_s] for t in trials if t.epochs and t.epochs[0].epoch == 1]


def _steady(trials: Sequence[TrialResult]) -> Groups:
    return [[e.wall_s for e in t.epochs if e.epoch >= 2] for t in trials]


def _first_batch(trials: Sequence[TrialResult]) -> Groups:
    return [
        [e.first_batch_s for e in t.epochs if e.epoch >= 2 and e.first_batch_s is not None]
        for t in trials
    ]


def cold_groups(trials: Sequence[TrialResult]) -> Groups:
    """Per trial: its cold epoch's wall (NOTE [trial is the unit])."""
    return _cold(_timed(trials))


def steady_groups(trials: Sequence[TrialResult]) -> Groups:
    """Per trial: the walls of its steady epochs."""
    return _steady(_timed(trials))


def first_batch_groups(trials: Sequence[TrialResult]) -> Groups:
    """Per trial: the first-batch waits of its steady epochs."""
    return _first_batch(_timed(trials))


# NOTE [spread of an arm]: the memory trials' epochs inform each arm's spread (not
# its level, which their sampling shifts), metric by metric.
_SPREAD_OF: dict[str, Callable[[Sequence[TrialResult]], Groups]] = {
    "steady": _steady,
    "cold": _cold,
    "first_batch": _first_batch,
}


def spread_groups(trials: Sequence[TrialResult], metric: str) -> Groups:
    """The memory trials' values of a timing metric, per trial (NOTE [spread of an arm])."""
    of = _SPREAD_OF.get(metric)
    return of(_memory_trials(trials)) if of else []


def memory_groups(trials: Sequence[TrialResult], attr: str) -> Groups:
    """Per trial: its one figure of `attr` (a peak, an idle level), where measured."""
    values = (getattr(t.memory, attr) for t in _memory_source(trials, attr))
    return [[float(v)] for v in values if v is not None]


def cold_walls(trials: Sequence[TrialResult]) -> list[float]:
    return _flat(cold_groups(trials))


def steady_walls(trials: Sequence[TrialResult]) -> list[float]:
    return _flat(steady_groups(trials))


def steady_first_batches(trials: Sequence[TrialResult]) -> list[float]:
    return _flat(first_batch_groups(trials))


def summarize_arm(trials: Sequence[TrialResult]) -> ArmSummary:
    measured = _measured(trials)
    timed = _timed(trials)
    cold_fb = [
        t.epochs[0].first_batch_s
        for t in timed
        if t.epochs[0].epoch == 1 and t.epochs[0].first_batch_s is not None
    ]
    sps = [
        e.samples_per_s
        for t in timed
        for e in t.epochs
        if e.epoch >= 2 and e.samples_per_s is not None
    ]
    startup = [w.startup_s for t in timed for w in t.workers if w.startup_s is not None]

    def mem(attr: str) -> Stat | None:
        return Stat.of(_flat(memory_groups(trials, attr)))

    return ArmSummary(
        trials=len(timed),
        cold_epoch_s=Stat.of(cold_walls(measured)),
        steady_epoch_s=Stat.of(steady_walls(measured)),
        first_batch_s=Stat.of(steady_first_batches(measured)),
        cold_first_batch_s=Stat.of(cold_fb),
        worker_startup_s=Stat.of(startup),
        steady_samples_per_s=Stat.of(sps),
        peak_total_pss_bytes=mem("peak_total_pss_bytes"),
        peak_worker_uss_bytes=mem("peak_worker_uss_bytes"),
        peak_workers_uss_bytes=mem("peak_workers_uss_bytes"),
        idle_workers_uss_bytes=mem("idle_workers_uss_bytes"),
        idle_workers_pss_bytes=mem("idle_workers_pss_bytes"),
        workers_reused=workers_reused(measured),
        worker_processes=sum(len(t.workers) for t in measured),
        peak_main_pss_bytes=mem("peak_main_pss_bytes"),
        shutdown_s=Stat.of(
            [
                t.wall_parts.shutdown_s
                for t in timed
                if t.wall_parts is not None and t.wall_parts.shutdown_s is not None
            ]
        ),
        setup_main_pss_bytes=mem("setup_main_pss_bytes"),
        steady_val_s=Stat.of([e.val_s for t in timed for e in t.epochs[1:] if e.val_s is not None]),
        val_train_pool_uss_bytes=mem("val_train_pool_uss_bytes"),
        peak_worker_processes=max(
            (
                t.memory.peak_worker_processes
                for t in _memory_source(trials, "peak_worker_processes")
                if t.memory.peak_worker_processes is not None
            ),
            default=None,
        ),
    )


def workers_reused(trials: Sequence[TrialResult]) -> bool | None:
    """True: epochs 2..N ran on the workers of epoch 1. False: every epoch started
    its own workers. None: neither (or nothing to tell from). One rule for compare
    and watch (`measure.readings.workers_reused`)."""
    return readings.workers_reused(
        [(e.epoch, e.new_worker_pids, e.worker_pids) for e in t.epochs] for t in trials
    )


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
    cold_extra = 0.0
    if p_sum.cold_epoch_s and np_sum.cold_epoch_s:
        cold_extra = p_sum.cold_epoch_s.median - np_sum.cold_epoch_s.median

    def diff(a: Stat | None, b: Stat | None) -> int | None:
        return None if a is None or b is None else int(a.median - b.median)

    def est(
        groups: Callable[[Sequence[TrialResult]], Groups], shift: int, metric: str = ""
    ) -> Estimate | None:
        conf = confidence if shift == 0 else CONFIDENCE
        return estimate_ratio(
            groups(persistent),
            groups(non_persistent),
            seed=seed + shift,
            confidence=conf,
            extra_a=spread_groups(persistent, metric),
            extra_b=spread_groups(non_persistent, metric),
        )

    steady = est(steady_groups, 0, "steady")
    cold, first = est(cold_groups, 1, "cold"), est(first_batch_groups, 2, "first_batch")
    pss = est(lambda ts: memory_groups(ts, "peak_total_pss_bytes"), 3)
    # Break-even and totals only count a saving the statistics support.
    # NOTE [earned intervals]: not from an interval too wide to mean anything.
    steady_a = (
        assess(steady.ratio, steady.p, confidence, 0.0, steady.n, steady.unit) if steady else None
    )
    significant = steady_a is not None and steady_a.informative and steady_a.direction == "saving"
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


def _pct(ratio: float) -> str:
    """How much faster or slower, in words that stay readable for tiny ratios:
    "93 %", or "330×" where a percentage would read "100 %"."""
    if 0 < ratio < 0.05:
        return f"{1 / ratio:.0f}×"
    return f"{abs(1 - ratio) * 100:.0f} %"


Direction = Literal["saving", "loss"]
Side = Literal["below", "above", "straddles"]
PlanMode = Literal["adaptive", "fixed"]


def significant_direction(
    ratio: Ratio | None, p: float | None, alpha: float = ALPHA
) -> Direction | None:
    """The one test of a significant difference in a persistent ÷ non-persistent ratio:
    its interval lies on one side of 1 and the test's p is below alpha (the two agree:
    one statistic gives both, NOTE [spread of an arm]). "saving": significantly below
    1; "loss": significantly above 1; None: neither, or no interval (read once)."""
    if ratio is None or p is None or not ratio.has_interval or not p < alpha:
        return None
    if ratio.ci_high < 1.0:
        return "saving"
    if ratio.ci_low > 1.0:
        return "loss"
    return None


@dataclass(frozen=True)
class Assessment:
    """NOTE [words follow numbers]: everything the verdict says about the steady
    ratio, computed once, on the log scale, from the interval and test it prints:
    whether it is significant, where it lies against the --min-gain line, whether it
    means anything at all, and how many more units would decide it."""

    ratio: Ratio
    p: float | None
    confidence: float
    n: int
    unit: str | None
    line: float
    direction: Direction | None
    side: Side
    informative: bool
    # The line the interval must clear to decide: the --min-gain line, or 1.
    target: float
    # About how many more units per arm would put the interval on one side of
    # `target`; None when the ratio sits at it (or nothing can be said).
    more: int | None
    at_line: bool


def assess(
    r: Ratio, p: float | None, confidence: float, min_gain: float, n: int, unit: str | None
) -> Assessment:
    line = 1.0 - min_gain
    side: Side = "below" if r.ci_high < line else "above" if r.ci_low > line else "straddles"
    direction = significant_direction(r, p, 1 - confidence)
    target = line if (r.value <= line or r.ci_low <= line) else 1.0
    more, at_line = None, False
    if r.has_interval and r.ci_low > 0 and r.value > 0 and n > 0:
        half = math.log(r.ci_high / r.ci_low) / 2
        distance = abs(math.log(r.value / target))
        at_line = half > 0 and distance < 0.1 * half
        if half > 0 and not at_line:
            more = max(1, math.ceil(n * (half / distance) ** 2) - n)
    return Assessment(
        r, p, confidence, n, unit, line, direction, side, r.informative, target, more, at_line
    )


@dataclass(frozen=True)
class _Evidence:
    """What the verdict weighs: the assessment of the steady ratio, and both in words."""

    a: Assessment
    saved_s: float
    # "ratio 0.50, 95 % CI 0.48–0.52, t on the logs of 3 trial medians per arm, p=0.01"
    interval: str
    # What the persistent workers hold between epochs.
    memory: str
    plan: PlanMode
    max_trials: int | None

    @property
    def ratio(self) -> Ratio:
        return self.a.ratio


def _test_words(comparison: Comparison) -> str:
    n = comparison.steady_epoch_n
    if comparison.unit == "trial":
        return f"t on the logs of {n} trial medians per arm"
    return f"t on the logs of one trial's {n} steady epochs per arm"


def _evidence(
    comparison: Comparison,
    p_sum: ArmSummary,
    r: Ratio,
    saved: float,
    a: Assessment,
    plan: PlanMode,
    max_trials: int | None,
) -> _Evidence:
    idle = p_sum.idle_workers_uss_bytes.median if p_sum.idle_workers_uss_bytes else None
    memory = (
        f"persistent workers hold {fmt_bytes(idle)} of private memory (USS) between epochs"
        if idle is not None
        else "memory between epochs was not sampled (--sample-interval 0 or --idle-ms 0), "
        "so its cost is unknown"
    )
    p = comparison.steady_epoch_p
    p_text = f", {_test_words(comparison)}, p={p:.3g}" if p is not None else ""
    level = f"{comparison.confidence * 100:.3g} %"
    return _Evidence(
        a=a,
        saved_s=saved,
        interval=f"ratio {fmt_ratio(r.value)}, {level} CI {fmt_ratio(r.ci_low)}–"
        f"{fmt_ratio(r.ci_high)}{p_text}",
        memory=memory,
        plan=plan,
        max_trials=max_trials,
    )


def settled(r: Ratio, min_gain: float) -> bool:
    """The adaptive plan's stop rule: the steady ratio's interval means something and
    lies wholly on one side of the --min-gain line (a saving worth enabling for, or
    not). NOTE [earned intervals]."""
    line = 1.0 - min_gain
    return r.informative and (r.ci_high < line or r.ci_low > line)


def verdict(
    comparison: Comparison,
    p_sum: ArmSummary,
    *,
    min_gain: float,
    max_trials: int | None = None,
    np_sum: ArmSummary | None = None,
) -> Verdict:
    """enable: a significant saving of at least min_gain. keep_off: no significant
    gain (or a loss) while persistence holds memory, or persistence alone breaks the
    memory budget. neutral: anything else. With `max_trials` (the adaptive plan's cap)
    a verdict also needs the interval settled on one side of the --min-gain line; until
    then it is not decided. Every sentence comes from one Assessment (NOTE [words
    follow numbers])."""
    r = comparison.steady_epoch_ratio
    saved = comparison.saved_s_per_epoch
    if r is None or saved is None:
        return Verdict(
            "neutral",
            "Not enough steady epochs were measured to decide.",
            ("need at least one steady epoch (epoch ≥ 2) in each arm",),
        )
    a = assess(
        r,
        comparison.steady_epoch_p,
        comparison.confidence,
        min_gain,
        comparison.steady_epoch_n or 0,
        comparison.unit,
    )
    plan: PlanMode = "adaptive" if max_trials is not None else "fixed"
    ev = _evidence(comparison, p_sum, r, saved, a, plan, max_trials)
    budget = comparison.memory_budget_bytes
    alone = comparison.non_persistent_over_budget is False
    if comparison.over_budget and budget is not None and alone and _adds_memory(comparison):
        return _over_budget_verdict(p_sum, ev, budget)
    v = _time_verdict(comparison, ev, min_gain)
    if comparison.over_budget and budget is not None:
        return _neither_fits(v, p_sum, np_sum, budget, between=alone)
    return v


def _adds_memory(comparison: Comparison) -> bool:
    """Persistence raises the tree's peak beyond noise: the peak-PSS ratio's interval
    means something and lies above 1 (NOTE [earned intervals])."""
    r = comparison.peak_total_pss_ratio
    return r is not None and r.informative and r.ci_low > 1.0


def _time_verdict(comparison: Comparison, ev: _Evidence, min_gain: float) -> Verdict:
    a, r = ev.a, ev.ratio
    if not a.informative:
        return _cannot_decide_verdict(ev)
    if ev.plan == "adaptive" and a.side == "straddles":
        return _unsettled_verdict(ev, min_gain)
    if a.direction == "saving" and r.value <= a.line:
        return _enable_verdict(comparison, ev)
    if a.direction == "loss":
        return Verdict(
            "keep_off",
            "Keep persistent_workers off: it makes steady epochs slower.",
            (
                f"steady epochs are {_pct(r.value)} slower with persistent workers ({ev.interval})",
                ev.memory,
            ),
        )
    if a.direction == "saving":
        return Verdict(
            "neutral",
            f"Either way: persistence saves a little time ({fmt_seconds(ev.saved_s)} per epoch).",
            (
                f"steady epochs are {_pct(r.value)} faster ({ev.interval}), a real but small "
                f"saving (below the {min_gain * 100:.0f} % worth enabling for)",
                ev.memory,
            ),
        )
    if a.side != "above":
        # NOTE [no gain needs evidence]: "no gain" is a claim of its own; the interval
        # must rule out a saving worth enabling for before it may say keep_off.
        return Verdict(
            "neutral",
            f"Not decided: no significant difference, but a saving of up to "
            f"{_pct(r.ci_low)} is still possible.",
            (
                f"no significant difference in steady epoch time ({ev.interval}), yet the "
                f"interval reaches below {a.line:.2f}: it cannot rule out a saving "
                f"worth enabling for (--min-gain {min_gain:g}); " + _what_decides(ev),
                ev.memory,
            ),
            decided=False,
        )
    return _no_difference_verdict(comparison, ev)


def epochs_to_decide(r: Ratio, n: int, min_gain: float) -> int | None:
    """About how many more units per arm would put the interval wholly on one side of
    1 − min_gain (or of 1), from the measured spread, on the log scale: the interval
    narrows as 1/√n. None when the ratio sits on the line itself."""
    return assess(r, None, CONFIDENCE, min_gain, n, None).more


def _advice(ev: _Evidence, total: int) -> str:
    """The option that acts on the plan that ran, to reach `total` units per arm."""
    if ev.a.unit != "trial":
        # One trial per arm: its steady epochs are the units, so --epochs adds them.
        return (
            f"run --epochs {total + 1} (or --trials auto: one trial per arm cannot show "
            "how trials differ)"
        )
    if ev.plan == "adaptive":
        return f"raise --max-trials (to about {total})"
    return f"run --trials {total}"


def _what_decides(ev: _Evidence) -> str:
    a = ev.a
    units = "trials" if a.unit == "trial" else "steady epochs"
    if a.at_line:
        return (
            f"the ratio sits within a tenth of the interval's half-width of {a.target:.2f} "
            f"(on the log scale), so no practical number of {units} would decide it: the "
            "difference is too small to matter either way"
        )
    if a.more is None:
        return _advice(ev, a.n + 1)
    unit = units if a.more != 1 else units[:-1]
    return f"about {a.more} more {unit} per arm (n={a.n} now) would decide it: " + _advice(
        ev, a.n + a.more
    )


def _cannot_decide_verdict(ev: _Evidence) -> Verdict:
    """NOTE [earned intervals]: an interval reaching past 10× either way is no finding."""
    a, r = ev.a, ev.ratio
    units = "trials" if a.unit == "trial" else "steady epochs"
    level = f"{a.confidence * 100:.3g} %"
    if not r.has_interval:
        why = (
            f"no interval: one reading per arm, or {units} that did not differ at all, "
            "show no spread to judge it by"
        )
        headline = f"Not decided: {a.n} {units} per arm show no spread to decide on."
    else:
        # The endpoints stay in the JSON: printed, they would read as a finding.
        why = (
            f"its {level} interval reaches more than {UNINFORMATIVE_FACTOR:g}× either way "
            f"of it: the {units} spread too much for {a.n} per arm to say anything"
        )
        headline = f"Not decided: {a.n} {units} per arm with this spread cannot decide."
    return Verdict(
        "neutral",
        headline,
        (
            f"the steady epochs' ratio reads {fmt_ratio(r.value)}, but {why}; "
            + _advice(ev, max(a.n + 2, 4)),
            ev.memory,
        ),
        decided=False,
    )


def _unsettled_verdict(ev: _Evidence, min_gain: float) -> Verdict:
    a, r = ev.a, ev.ratio
    look = "faster" if r.value < 1.0 else "slower"
    return Verdict(
        "neutral",
        f"Not decided: after {a.n} trials per arm the saving may or may not reach "
        f"--min-gain {min_gain:g}.",
        (
            f"steady epochs look {_pct(r.value)} {look} with persistent workers "
            f"({ev.interval}), but the interval reaches both sides of {a.line:.2f}, "
            f"and the adaptive plan stopped at its cap (--max-trials {ev.max_trials}); "
            + _what_decides(ev),
            ev.memory,
        ),
        decided=False,
    )


def _over_budget_verdict(p_sum: ArmSummary, ev: _Evidence, budget: int) -> Verdict:
    peak = p_sum.peak_total_pss_bytes.median if p_sum.peak_total_pss_bytes else None
    reasons = [
        f"over budget: with persistent workers the process tree peaks at "
        f"{fmt_bytes(peak)} PSS, above --memory-budget {fmt_bytes(budget)}, which the "
        "run stays within without them"
    ]
    if ev.a.direction == "saving" and ev.a.informative:
        reasons.append(f"it would save {fmt_seconds(ev.saved_s)} per epoch ({ev.interval})")
    reasons.append(ev.memory)
    return Verdict(
        "keep_off",
        "Keep persistent_workers off: the run does not fit the memory budget with it.",
        tuple(reasons),
    )


def _neither_fits(
    v: Verdict, p_sum: ArmSummary, np_sum: ArmSummary | None, budget: int, *, between: bool
) -> Verdict:
    """Both arms break the budget, or it lies between peaks that do not differ beyond
    noise: persistence is not shown to be what breaks it, so the verdict on time
    stands, and says that neither setting is shown to fit."""
    p_peak = p_sum.peak_total_pss_bytes.median if p_sum.peak_total_pss_bytes else None
    np_peak = (
        np_sum.peak_total_pss_bytes.median
        if np_sum is not None and np_sum.peak_total_pss_bytes
        else None
    )
    peaks = (
        f"the process tree peaks at {fmt_bytes(p_peak)} PSS with persistent workers and "
        f"{fmt_bytes(np_peak)} without"
    )
    if between:
        line = (
            f"--memory-budget {fmt_bytes(budget)} lies between the two peaks ({peaks}), "
            "which do not differ beyond noise, so neither setting is shown to fit and "
            "persistence is not shown to be what breaks it"
        )
        headline = f"{v.headline} Neither setting is shown to fit the memory budget."
    else:
        line = (
            f"neither setting fits --memory-budget {fmt_bytes(budget)}: {peaks}, so "
            "persistence is not what breaks it"
        )
        headline = f"{v.headline} Neither setting fits the memory budget."
    return dataclasses.replace(v, headline=headline, reasons=(line, *v.reasons))


def _enable_verdict(comparison: Comparison, ev: _Evidence) -> Verdict:
    extra = comparison.extra_idle_memory_bytes
    reasons = [
        f"steady epochs are {_pct(ev.ratio.value)} faster with persistent workers "
        f"({ev.interval}), saving {fmt_seconds(ev.saved_s)} per epoch"
    ]
    if comparison.break_even_epochs is not None:
        reasons.append(f"it pays for itself from epoch {comparison.break_even_epochs} on")
    if comparison.saved_s_total is not None:
        reasons.append(
            f"over {comparison.train_epochs} epochs that saves about "
            f"{fmt_seconds(comparison.saved_s_total)}"
        )
    reasons.append(ev.memory)
    return Verdict(
        "enable",
        f"Enable persistent_workers: it saves {fmt_seconds(ev.saved_s)} per epoch "
        f"for {fmt_bytes(extra) if extra is not None else 'an unmeasured amount of'} memory "
        "held between epochs.",
        tuple(reasons),
    )


def _no_difference_verdict(comparison: Comparison, ev: _Evidence) -> Verdict:
    extra = comparison.extra_idle_memory_bytes
    reasons = [f"no significant difference in steady epoch time ({ev.interval})"]
    if comparison.memory_budget_bytes is not None and not comparison.over_budget:
        reasons.append(f"within --memory-budget {fmt_bytes(comparison.memory_budget_bytes)}")
    reasons.append(ev.memory)
    if extra is not None and extra > 1024**2:
        return Verdict(
            "keep_off",
            f"Keep persistent_workers off: it holds {fmt_bytes(extra)} between epochs "
            "for no measurable gain.",
            tuple(reasons),
        )
    return Verdict(
        "neutral",
        "Either way: persistence changes neither time nor memory measurably.",
        tuple(reasons),
    )


def noise_warnings(name: str, s: ArmSummary) -> list[str]:
    out = []
    for label, stat in (("steady epoch", s.steady_epoch_s), ("cold epoch", s.cold_epoch_s)):
        if stat is not None and stat.n >= 3 and stat.rel_iqr > NOISY_REL_IQR:
            out.append(
                f"{name}: {label} times are noisy (IQR {stat.rel_iqr * 100:.0f} % of the median, "
                f"n={stat.n}); more --epochs or --trials would tighten the comparison"
            )
    return out


def arm_groups(trials: Sequence[TrialResult]) -> dict[str, Groups]:
    """The values behind each gateable per-arm metric, grouped by trial."""
    measured = _timed(trials)
    return {
        "steady_epoch_s": steady_groups(measured),
        "cold_epoch_s": cold_groups(measured),
        "first_batch_s": first_batch_groups(measured),
        "worker_startup_s": [
            [w.startup_s for w in t.workers if w.startup_s is not None] for t in measured
        ],
        "steady_samples_per_s": [
            [e.samples_per_s for e in t.epochs if e.epoch >= 2 and e.samples_per_s is not None]
            for t in measured
        ],
        "peak_worker_uss": memory_groups(trials, "peak_worker_uss_bytes"),
        "peak_total_pss": memory_groups(trials, "peak_total_pss_bytes"),
        "idle_workers_uss": memory_groups(trials, "idle_workers_uss_bytes"),
        "peak_main_pss": memory_groups(trials, "peak_main_pss_bytes"),
    }


def arm_samples(trials: Sequence[TrialResult]) -> dict[str, list[float]]:
    """The raw values behind each gateable per-arm metric."""
    return {k: _flat(v) for k, v in arm_groups(trials).items()}


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
                out[name] = MetricValue(r.value, r.ci_low, r.ci_high, n, r.has_interval)
    for arm_name, arm in report.arms.items():
        for metric, groups in arm_groups(arm.trials).items():
            est = estimate_median(groups, seed=seed)
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
            est = estimate_ratio(groups, base, seed=seed)
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
