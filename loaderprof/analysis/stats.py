"""Intervals and tests, with the trial as the statistical unit.

NOTE [trial is the unit]: the epochs of one trial share a process, its
allocator, its page cache and the machine's state at that moment, so they are
not independent draws. Pooling them makes intervals too narrow whenever trials
differ from each other (pyperf treats each worker process as its unit for the
same reason). So each trial is reduced to one figure (the median of its
values: its steady epochs, its first batches; a memory peak is already one per
trial) and the arms are compared on those figures: a t on their logs, whose
interval is exp(difference of mean logs ± t·SE) and whose p comes from the same
statistic, so the two always agree. Each arm's variance and degrees of freedom
come from NOTE [spread of an arm]; the two arms' combine by Welch-Satterthwaite.
With a handful of trials a t interval keeps its nominal coverage where a
bootstrap of 3 units cannot (benchmarks/interval_coverage.py measures both).
Only with a single trial in an arm, where trial-to-trial spread cannot be seen,
do the epochs stand in as units (the same t on their logs), and the report says
so.

NOTE [sequential looks]: the adaptive plan looks at the data at 2 and 3 trials
per arm, then after every A B B A block (4, 6, ...) and at its cap, and stops once
the interval settles. Each look at level α would inflate false decisions, so α is
spent over the looks the plan may take with the power spending function α·t²
(Kim and DeMets, 1987; t = trials so far ÷ the cap): look k's interval is at
level 1 − (α·t_k² − α·t_(k-1)²). The levels' misses sum to α, so by the union
bound the chance that any look's interval misses the truth stays at most α,
wherever the plan stops. Spending little early keeps most of α for the last look:
at the cap the plan decides about as often as a fixed plan of one trial fewer.
The look at 3 is there because of Welch's degrees of freedom: with two trials per
arm and their spread alone they fall to about one whenever one arm's trials spread
more than the other's (a fast persistent arm usually does), and a t with one degree
of freedom is so heavy-tailed that even a 16-fold saving settles at 99.4 % only
about half the time; a third trial per arm lifts them to about two. The memory
trials' spread (NOTE [spread of an arm]) now gives the first look two per arm too. Simulated
(benchmarks/look_schedule.py), the look at 3 cuts the trials such a saving needs
from 3.20 to 2.60 per arm on average and decides as often at the cap as looks at
2, 4, 6; a look after every pair cuts the same on plain savings but takes more of
the last look's α. The look at 3 falls mid-block (A B B A A B), where linear drift
is not cancelled as at 2 and 4: it leaves a third of the drift between neighbouring
trials in the difference, which the trials' spread (and so the interval) holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from loaderprof.config.run import Schedule
from loaderprof.model.metrics import MetricValue, Ratio

ALPHA = 0.05
CONFIDENCE = 1 - ALPHA
BOOTSTRAP_RESAMPLES = 4000

Unit = Literal["trial", "epoch"]


@dataclass(frozen=True)
class Estimate:
    """A persistent ÷ non-persistent (or new ÷ baseline) ratio with its interval and test."""

    ratio: Ratio
    p: float | None
    unit: Unit
    # Units behind the numerator: trials, or epochs when one trial stands alone.
    n: int
    spread: tuple[ArmSpread, ArmSpread] | None = None
    # The t's degrees of freedom (None: no interval).
    df: float | None = None


def unit_figures(groups: Sequence[Sequence[float]]) -> list[float]:
    """One figure per trial: the median of its values (trials without any are left out)."""
    return [float(np.median(g)) for g in groups if len(g)]


def _pooled(groups: Sequence[Sequence[float]]) -> list[float]:
    return [float(v) for g in groups for v in g]


def _t_quantile(confidence: float, df: float) -> float:
    # scipy.special, not scipy.stats: the same function, a fifth of the import time.
    from scipy.special import stdtrit

    return float(stdtrit(df, 1 - (1 - confidence) / 2))


# The variance of the median of m normal values, as a multiple of σ²/m: π/2 in the
# limit, and above the exact small-m factors (1.35 at 3, 1.19 at 4), so a floor
# built on it errs wide. Two values' median is their mean.
_MEDIAN_VARIANCE_FACTOR = math.pi / 2


@dataclass(frozen=True)
class ArmSpread:
    """NOTE [spread of an arm]: the variance of one trial figure of an arm (log
    scale), the degrees of freedom behind it, and what it was learned from.

    The trial figures' own spread (between trials) is the honest measure, but two
    trials give it one degree of freedom, and a t with one is so heavy-tailed that
    two trials per arm decide almost nothing. Two sources add degrees of freedom
    without touching the level: the arm's memory trials (the same arm, run the same
    way, sampled deeply: their epochs are not timed for the level, since sampling
    shifts it, but their spread between trials is run-to-run spread of the same
    kind, at least as wide), pooled about their own mean (never below the timing
    trials' own spread, so coverage holds should they spread less); and the epochs inside
    each trial, whose spread sets a floor under the trial figure's variance
    (σ²_within × π/2 ÷ m for a median of m). The floor replaces the between-trial
    variance only when it is the larger and keeps the trials' degrees of freedom,
    so it can only widen what the trials would show. The memory trials' degrees of
    freedom are kept even where the timing trials' own spread is the larger: that
    part is not safe by construction, and benchmarks/interval_coverage.py measures
    the coverage of the whole rule (unequal arm spreads, memory trials that spread
    less than assumed, and more).

    "At least as wide" can be far wider: on a busy machine the memory trials' walks
    contend with the workers, and their epochs spread several times the timing
    trials' (seen: a pooled interval of 0.27–1.17 where the timing trials alone gave
    0.45–0.69). Where the memory trials' epochs spread significantly more than the
    timing trials' epochs (a one-sided F test on the within-trial log variances,
    a degree of freedom from nearly every epoch, and nearly independent of the
    trial figures' spread, which are medians), they ran
    under a disturbance the timing trials did not: their spread is not of the same
    kind, and the arm's comes from its timing trials alone ("timing trials"), exact
    with fewer degrees of freedom. Not the narrower of the two: choosing by width
    after seeing both lost coverage (0.938 at 3 trials per arm where the memory
    trials' epochs alone spread 5×), as a minimum of two intervals does."""

    var: float
    df: float
    source: Literal["trials", "timing trials", "epochs in trials", "reading resolution"]


def _logs(values: Sequence[float]) -> np.ndarray:
    return np.log(np.asarray(values, dtype=float))


def _within(groups: Sequence[Sequence[float]]) -> tuple[float, int, list[int]]:
    """The log values' sum of squares about each group's own mean, its degrees of
    freedom, and the sizes of the groups that gave them."""
    ss, dof, sizes = 0.0, 0, []
    for g in groups:
        if len(g) >= 2 and min(g) > 0:
            x = _logs(g)
            ss += float(((x - x.mean()) ** 2).sum())
            dof += x.size - 1
            sizes.append(x.size)
    return ss, dof, sizes


# See NOTE [spread of an arm]. The level of the one-sided F test that finds memory
# trials whose epochs spread more than the timing trials' epochs.
LEND_ALPHA = 0.05


def _lends(groups: Sequence[Sequence[float]], extra_groups: Sequence[Sequence[float]]) -> bool:
    """False where the memory trials' epochs spread significantly more than the timing
    trials' epochs (one-sided F test at LEND_ALPHA): sampling disturbed them as it did
    not the timing trials, so their spread between trials is not of the same kind."""
    w_ss, w_dof, _ = _within(groups)
    x_ss, x_dof, _ = _within(extra_groups)
    # No spread at all in the timing trials' epochs (or nothing to compare): no test.
    if not w_dof or not x_dof or w_ss <= 0:
        return True
    from scipy.special import fdtrc

    return float(fdtrc(x_dof, w_dof, (x_ss / x_dof) / (w_ss / w_dof))) >= LEND_ALPHA


def arm_spread(
    figures: Sequence[float],
    extra: Sequence[float] = (),
    groups: Sequence[Sequence[float]] = (),
    extra_groups: Sequence[Sequence[float]] = (),
) -> ArmSpread | None:
    """The spread of one arm's trial figure (NOTE [spread of an arm]): `figures` the
    timing trials' figures, `extra` other trials' figures of the same arm (memory
    trials), `groups` the values each timing figure is the median of, and
    `extra_groups` each memory trial's."""
    if extra and not _lends(groups, extra_groups):
        own = _spread(figures, (), groups)
        if own is not None:
            return own if own.source != "trials" else ArmSpread(own.var, own.df, "timing trials")
    return _spread(figures, extra, groups)


def _spread(
    figures: Sequence[float], extra: Sequence[float], groups: Sequence[Sequence[float]]
) -> ArmSpread | None:
    ss, dof, own = 0.0, 0, 0.0
    for part in (figures, extra):
        if len(part) >= 2 and min(part) > 0:
            x = _logs(part)
            ss += float(((x - x.mean()) ** 2).sum())
            dof += x.size - 1
            if part is figures:
                own = ss / dof
    if dof == 0:
        return None
    # The memory trials lend degrees of freedom and may widen the spread, never narrow
    # the timing trials' own: should they spread less than assumed, coverage holds.
    spread = ArmSpread(max(ss / dof, own), float(dof), "trials")
    w_ss, w_dof, sizes = _within(groups)
    if w_dof:
        m = len(sizes) / sum(1 / s for s in sizes)
        factor = _MEDIAN_VARIANCE_FACTOR if m > 2 else 1.0
        floor = factor * (w_ss / w_dof) / m
        # The floor raises the variance and keeps the trials' degrees of freedom: taking
        # the epochs' many would shrink t and could narrow what the trials alone show.
        if floor > spread.var:
            spread = ArmSpread(floor, spread.df, "epochs in trials")
    return spread


# NOTE [reading resolution]: /proc counts memory in pages, so trial figures of a
# deterministic footprint (a persistent worker's idle USS on the CUDA build, read the
# same to the page in three memory trials) can agree exactly. That is no spread seen
# at the step they are read in, not no spread at all. A memory figure's spread is
# taken as at least one whole step (wider than the step's own rounding error, sqrt(1/12)
# of it), whether its trials agree or differ by a page: so a 22 MiB idle pool can fail
# a gate at 1 MiB, a figure a few pages off its limit stays inconclusive, and figures
# that agree never get a narrower interval than figures a page apart. The step is the
# page size of the machine that measured (`environment.page_bytes`). Times are read in
# nanoseconds and never agree: their rule stays NOTE [earned intervals].
def _resolved(
    spread: ArmSpread | None, figures: Sequence[float], resolution: float
) -> ArmSpread | None:
    """`spread`, or one step of `resolution` on the log scale where it is less
    (NOTE [reading resolution])."""
    if spread is None or resolution <= 0:
        return spread
    step = resolution / float(np.median(figures))
    if spread.var >= step * step:
        return spread
    return ArmSpread(step * step, spread.df, "reading resolution")


def log_ratio_test(
    a: Sequence[float],
    b: Sequence[float],
    spread_a: ArmSpread,
    spread_b: ArmSpread,
    confidence: float = CONFIDENCE,
) -> tuple[Ratio, float | None]:
    """exp(mean log a − mean log b) with its t interval and two-sided p, from one
    statistic (so p < 1 − confidence exactly when the interval leaves 1 out);
    degrees of freedom by Welch-Satterthwaite over the two arms' spreads."""
    d = float(_logs(a).mean() - _logs(b).mean())
    va, vb = spread_a.var / len(a), spread_b.var / len(b)
    se = math.sqrt(va + vb)
    # Below rounding of equal logs: no spread at all.
    if se <= 1e-12 * max(1.0, abs(d)):
        # No spread seen at all: nothing to build an interval or a test on (NOTE
        # [earned intervals]), however many units.
        v = math.exp(d)
        return Ratio(v, v, v, has_interval=False), None
    df = welch_df(spread_a, spread_b, len(a), len(b))
    from scipy.special import stdtr

    half = _t_quantile(confidence, df) * se
    p = float(2 * stdtr(df, -abs(d) / se))
    return Ratio(math.exp(d), math.exp(d - half), math.exp(d + half)), p


def welch_df(spread_a: ArmSpread, spread_b: ArmSpread, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite's degrees of freedom of the difference of two arms' means."""
    va, vb = spread_a.var / n_a, spread_b.var / n_b
    if va + vb <= 0:
        return spread_a.df + spread_b.df
    return (va + vb) ** 2 / (va**2 / spread_a.df + vb**2 / spread_b.df)


def estimate_ratio(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    *,
    seed: int,
    confidence: float = CONFIDENCE,
    extra_a: Sequence[Sequence[float]] = (),
    extra_b: Sequence[Sequence[float]] = (),
    resolution: float = 0.0,
) -> Estimate | None:
    """a ÷ b from per-trial groups of values (NOTE [trial is the unit]); `extra_*`:
    other trials of each arm that inform its spread only (NOTE [spread of an arm]);
    `resolution`: the step the values are read in, where it is known (NOTE [reading
    resolution]). `seed` is kept for callers; the estimate is deterministic."""
    del seed
    fa, fb = unit_figures(a), unit_figures(b)
    if not all(math.isfinite(v) for v in (*fa, *fb)):
        return None
    if len(fa) >= 2 and len(fb) >= 2 and min(fa) > 0 and min(fb) > 0:
        sa = _resolved(arm_spread(fa, unit_figures(extra_a), a, extra_a), fa, resolution)
        sb = _resolved(arm_spread(fb, unit_figures(extra_b), b, extra_b), fb, resolution)
        assert sa is not None and sb is not None
        r, p = log_ratio_test(fa, fb, sa, sb, confidence)
        df = welch_df(sa, sb, len(fa), len(fb)) if r.has_interval else None
        return Estimate(r, p, "trial", len(fa), spread=(sa, sb), df=df)
    pa, pb = _pooled(a), _pooled(b)
    if not pa or not pb or min(pa) <= 0 or min(pb) <= 0:
        return None
    value = math.exp(float(_logs(pa).mean() - _logs(pb).mean()))
    if len(pa) < 2 or len(pb) < 2:
        # See NOTE [earned intervals]. Read once on a side: a value, not an interval.
        return Estimate(Ratio(value, value, value, has_interval=False), None, "epoch", len(pa))
    # One trial on a side: its epochs stand in as units, tested as trials are.
    sa, sb = arm_spread(pa), arm_spread(pb)
    assert sa is not None and sb is not None
    r, p = log_ratio_test(pa, pb, sa, sb, confidence)
    df = welch_df(sa, sb, len(pa), len(pb)) if r.has_interval else None
    return Estimate(r, p, "epoch", len(pa), spread=(sa, sb), df=df)


def estimate_median(
    groups: Sequence[Sequence[float]],
    *,
    seed: int,
    confidence: float = CONFIDENCE,
    resolution: float = 0.0,
) -> MetricValue | None:
    """The median of all values with its interval and units: the interval's width
    comes from the spread of the trial figures (t on their logs, or on the values when
    some are not positive); from a bootstrap of the values when there is one trial;
    none when there is one value (NOTE [earned intervals]). `resolution`: the step
    the values are read in, where it is known (NOTE [reading resolution])."""
    pooled = _pooled(groups)
    if not pooled:
        return None
    med = float(np.median(pooled))
    figures = unit_figures(groups)
    stepped = resolution > 0 and len(figures) >= 2
    # Read once, or no spread at all: a value, not an interval (NOTE [earned intervals]).
    if len(pooled) == 1 or (
        len(set(figures if len(figures) >= 2 else pooled)) == 1 and not stepped
    ):
        return MetricValue(med, med, med, len(figures) or 1, has_interval=False)
    if len(figures) < 2:
        est = bootstrap_median(pooled, seed, confidence)
        assert est is not None
        return MetricValue(*est, len(pooled))
    x = np.asarray(figures, dtype=float)
    q = _t_quantile(confidence, x.size - 1)
    if x.min() > 0:
        half = q * float(np.log(x).std(ddof=1)) / math.sqrt(x.size)
        low, high = med * math.exp(-half), med * math.exp(half)
    else:
        half = q * float(x.std(ddof=1)) / math.sqrt(x.size)
        low, high = med - half, med + half
    if stepped:
        # A spread of one step at least (see NOTE [reading resolution]); memory is
        # never below zero.
        step = q * resolution / math.sqrt(x.size)
        low, high = min(low, max(0.0, med - step)), max(high, med + step)
    return MetricValue(med, low, high, x.size)


def bootstrap_ratio(
    a: Sequence[float], b: Sequence[float], seed: int, confidence: float = CONFIDENCE
) -> Ratio | None:
    """median(a) / median(b) with a percentile bootstrap interval, values as units."""
    if not a or not b:
        return None
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    mb = float(np.median(xb))
    if mb <= 0:
        return None
    value = float(np.median(xa)) / mb
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(xa, size=(BOOTSTRAP_RESAMPLES, xa.size)), axis=1)
    rb = np.median(rng.choice(xb, size=(BOOTSTRAP_RESAMPLES, xb.size)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ra / rb
    ratios = ratios[np.isfinite(ratios)]
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return Ratio(value, float(lo), float(hi))


def bootstrap_median(
    values: Sequence[float], seed: int, confidence: float = CONFIDENCE
) -> tuple[float, float, float] | None:
    """(median, low, high): the median with a percentile bootstrap interval."""
    if not values:
        return None
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    if x.size == 1:
        return med, med, med
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(x, size=(BOOTSTRAP_RESAMPLES, x.size)), axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(meds, [tail, 100 - tail])
    return med, float(lo), float(hi)


Direction = Literal["saving", "loss"]


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


# The adaptive plan's first look, the extra look one trial pair after it, and how
# many trials per arm each later look adds (one A B B A block). NOTE [sequential looks].
FIRST_LOOK = 2
LOOK_STEP = 2


def look_points(max_trials: int) -> list[int]:
    """Trials per arm at which the adaptive plan looks (NOTE [sequential looks]):
    2, 3, then every block (4, 6, ...) up to the cap, and the cap."""
    if max_trials <= FIRST_LOOK:
        return [max_trials]
    later = range(FIRST_LOOK + LOOK_STEP, max_trials, LOOK_STEP)
    return sorted({FIRST_LOOK, FIRST_LOOK + 1, *later, max_trials})


SPENDING_POWER = 2


def spent_confidences(points: Sequence[int]) -> list[float]:
    """Each look's interval level for looks at `points` trials per arm, the last
    being the cap: α·t² spent (NOTE [sequential looks])."""
    spent = [ALPHA * (k / points[-1]) ** SPENDING_POWER for k in points]
    return [1 - (b - a) for a, b in zip([0.0, *spent], spent, strict=False)]


def look_confidences(max_trials: int) -> list[float]:
    """Each look's interval level (NOTE [sequential looks])."""
    return spent_confidences(look_points(max_trials))


def look_confidence(max_trials: int, per_arm: int) -> float:
    """The level of the last look taken with `per_arm` trials per arm (the first
    look's, the strictest, before it)."""
    taken = [i for i, k in enumerate(look_points(max_trials)) if k <= per_arm]
    return look_confidences(max_trials)[taken[-1] if taken else 0]


def plan_confidence(schedule: Schedule, per_arm: int) -> float:
    """The interval level a plan's verdict is read at with `per_arm` trials per arm:
    an adaptive plan's last look's, a fixed plan's the one look at CONFIDENCE."""
    return look_confidence(schedule.max_trials, per_arm) if schedule.adaptive else CONFIDENCE


def plan_ends(schedule: Schedule) -> frozenset[int]:
    """The trials per arm a plan may end with, run as planned: an adaptive plan at any
    of its looks, a fixed one at its count."""
    return frozenset(look_points(schedule.max_trials) if schedule.adaptive else (schedule.fixed,))
