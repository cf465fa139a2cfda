"""The trial as the statistical unit, and the adaptive plan's sequential looks:
synthetic trials with a known truth, no processes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from builders import make_trial
from loaderprof.analysis import stats
from loaderprof.analysis.comparison import compare
from loaderprof.analysis.summary import steady_walls, summarize_arm
from loaderprof.analysis.verdict import settled
from loaderprof.model.metrics import MetricValue, Ratio
from loaderprof.units import MiB

TRUE_RATIO = 0.8


def _synthetic_arms(
    rng: np.random.Generator, trials: int, epochs: int, between: float, within: float
) -> tuple[list, list]:
    """Trials whose steady epochs share a per-trial offset (between-trial spread, in
    log) on top of small epoch-to-epoch noise; persistent epochs are TRUE_RATIO × the
    non-persistent ones."""
    arms = []
    for arm, scale in (("persistent", TRUE_RATIO), ("non_persistent", 1.0)):
        out = []
        for i in range(trials):
            level = scale * math.exp(rng.normal(0, between))
            steady = level * np.exp(rng.normal(0, within, size=epochs - 1))
            out.append(
                make_trial(
                    arm, [3.0, *map(float, steady)], idle=0, reused=arm == "persistent", index=i
                )
            )
        arms.append(out)
    return arms[0], arms[1]


def _coverage(trials: int, reps: int = 300) -> tuple[float, float]:
    """How often the steady ratio's interval holds the truth: through `compare`,
    and for the pooled-epoch bootstrap it replaced."""
    rng = np.random.default_rng(7)
    hits = pooled_hits = 0
    for rep in range(reps):
        p, n = _synthetic_arms(rng, trials, epochs=6, between=0.08, within=0.01)
        c = compare(p, n, summarize_arm(p), summarize_arm(n), seed=rep, train_epochs=5)
        r = c.steady_epoch_ratio
        assert r is not None and c.unit == "trial" and c.steady_epoch_n == trials
        hits += r.ci_low <= TRUE_RATIO <= r.ci_high
        old = stats.bootstrap_ratio(steady_walls(p), steady_walls(n), seed=rep)
        assert old is not None
        pooled_hits += old.ci_low <= TRUE_RATIO <= old.ci_high
    return hits / reps, pooled_hits / reps


@pytest.mark.parametrize("trials", [3, 5])
def test_intervals_cover_the_truth_at_their_nominal_rate_when_trials_differ(trials: int) -> None:
    covered, pooled = _coverage(trials)
    # 300 draws of a 95 % interval: the binomial spread is about ±2.5 points.
    assert 0.90 <= covered <= 0.99
    # Pooling the epochs treats them as independent: far too narrow here.
    assert pooled < 0.85


def _welch(
    a: list[float], b: list[float], confidence: float = stats.CONFIDENCE
) -> tuple[Ratio, float | None]:
    """The trial-level test on each trial's figure alone (each arm's own spread)."""
    sa, sb = stats.arm_spread(a), stats.arm_spread(b)
    assert sa is not None and sb is not None
    return stats.log_ratio_test(a, b, sa, sb, confidence)


def test_welch_on_trial_figures_known_answer() -> None:
    r, p = _welch([1.0, 1.1, 0.9], [2.0, 2.2, 1.8])
    assert r.value == pytest.approx(0.5)
    assert p is not None and r.ci_low < 0.5 < r.ci_high and p < 0.01
    # No spread at all: no interval and no test (NOTE [earned intervals]).
    assert _welch([1.0, 1.0], [1.0, 1.0]) == (Ratio(1.0, 1.0, 1.0, has_interval=False), None)
    # A higher confidence widens the interval.
    wide, _ = _welch([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], 0.99)
    assert wide.ci_low < r.ci_low and wide.ci_high > r.ci_high
    # One trial has no spread of its own: no trial-level spread to test with.
    assert stats.arm_spread([1.0]) is None


def test_one_trial_per_arm_falls_back_to_its_epochs_and_says_so() -> None:
    est = stats.estimate_ratio([[1.0, 1.01, 0.99, 1.0]], [[2.0, 2.02, 1.98, 2.0]], seed=0)
    assert est is not None and est.unit == "epoch" and est.n == 4
    assert est.ratio.value == pytest.approx(0.5)


def test_per_arm_interval_comes_from_the_spread_of_trial_figures() -> None:
    tight = stats.estimate_median([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]], seed=0)
    # No spread at all: a value, not an interval (NOTE [earned intervals]).
    assert tight == MetricValue(1.0, 1.0, 1.0, 3, has_interval=False)
    spread = stats.estimate_median([[1.0, 1.0], [1.5, 1.5], [0.8, 0.8]], seed=0)
    assert spread is not None
    assert spread.value == 1.0 and spread.ci_low < 1.0 < spread.ci_high and spread.n == 3
    # A zero figure (no idle workers): the interval is taken on the values themselves.
    zero = stats.estimate_median([[0.0], [10.0], [20.0]], seed=0)
    assert zero is not None and zero.ci_low < 10.0 < zero.ci_high
    # Read once (one memory trial): a value, never an interval (NOTE [earned intervals]).
    once = stats.estimate_median([[5.0]], seed=0)
    assert once == MetricValue(5.0, 5.0, 5.0, 1, has_interval=False)


def test_looks_and_their_confidence() -> None:
    assert stats.look_points(6) == [2, 3, 4, 6]
    assert stats.look_points(7) == [2, 3, 4, 6, 7]
    assert stats.look_points(4) == [2, 3, 4]
    assert stats.look_points(3) == [2, 3]
    assert stats.look_points(2) == [2]
    assert stats.look_points(1) == [1]
    # Power spending α·t²: (4 − 0)/36, (9 − 4)/36, (16 − 9)/36 and (36 − 16)/36 of α
    # at looks 2, 3, 4, 6 of a cap of 6.
    spent = [4 / 36, 5 / 36, 7 / 36, 20 / 36]
    assert stats.look_confidences(6) == pytest.approx([1 - 0.05 * s for s in spent])
    assert stats.look_confidences(1) == pytest.approx([0.95])
    assert sum(1 - c for c in stats.look_confidences(7)) == pytest.approx(0.05)
    assert stats.look_confidence(6, 2) == stats.look_confidences(6)[0]
    assert stats.look_confidence(6, 3) == stats.look_confidences(6)[1]
    assert stats.look_confidence(6, 1) == stats.look_confidences(6)[0]
    assert stats.look_confidence(6, 5) == stats.look_confidences(6)[2]
    assert stats.look_confidence(6, 6) == stats.look_confidences(6)[3]


def test_false_decisions_stay_below_alpha_over_all_looks() -> None:
    """No true difference at all: stopping at the first look whose interval leaves 1
    must not decide wrongly more often than α, which looking at α each time would."""
    rng = np.random.default_rng(3)
    looks = stats.look_points(8)
    spent = stats.look_confidences(8)

    def decides(a: np.ndarray, b: np.ndarray, confidence: list[float]) -> bool:
        for k, level in zip(looks, confidence, strict=True):
            ratio, _ = _welch(list(a[:k]), list(b[:k]), level)
            if ratio.ci_high < 1.0 or ratio.ci_low > 1.0:
                return True
        return False

    false_spent = false_naive = 0
    reps = 400
    for _ in range(reps):
        a, b = rng.lognormal(0, 0.1, size=8), rng.lognormal(0, 0.1, size=8)
        false_spent += decides(a, b, spent)
        false_naive += decides(a, b, [0.95] * len(looks))
    assert false_spent / reps <= 0.05 + 0.02
    assert false_naive / reps > false_spent / reps


def test_settled_is_the_interval_on_one_side_of_the_min_gain_line() -> None:
    assert settled(Ratio(0.5, 0.4, 0.6), 0.05)
    assert settled(Ratio(1.0, 0.97, 1.02), 0.05)
    assert not settled(Ratio(0.93, 0.9, 0.97), 0.05)


def test_figures_that_agree_to_the_page_get_an_interval_one_page_wide() -> None:
    # See NOTE [reading resolution]. Three memory trials that read the same idle USS.
    page, held = 4096.0, 22.2 * MiB
    m = stats.estimate_median([[held], [held], [held]], seed=0, resolution=page)
    assert m is not None and m.has_interval and m.n == 3
    half = stats._t_quantile(0.95, 2) * page / 3**0.5
    assert (m.ci_low, m.ci_high) == pytest.approx((held - half, held + half))
    # Memory never reads below zero: an arm that holds nothing has an interval from 0.
    zero = stats.estimate_median([[0.0], [0.0]], seed=0, resolution=page)
    assert zero is not None and zero.has_interval and zero.ci_low == 0.0 < zero.ci_high
    # Times have no such step: equal figures have no interval (NOTE [earned intervals]),
    # nor has a figure read once, whatever its step.
    assert not stats.estimate_median([[0.2], [0.2]], seed=0).has_interval  # type: ignore[union-attr]
    once = stats.estimate_median([[held]], seed=0, resolution=page)
    assert once is not None and not once.has_interval


def test_ratios_of_figures_that_agree_to_the_page_are_tested_on_a_page() -> None:
    page, held = 4096.0, 40.0 * MiB
    same = stats.estimate_ratio([[held], [held]], [[held], [held]], seed=0, resolution=page)
    assert (
        same is not None and same.ratio.has_interval and same.ratio.ci_low < 1 < same.ratio.ci_high
    )
    assert same.spread is not None and same.spread[0].source == "reading resolution"
    # A 1 % larger footprint, read the same in every trial, is past a +0.5 % gate.
    grown = stats.estimate_ratio(
        [[1.01 * held], [1.01 * held]], [[held], [held]], seed=0, resolution=page
    )
    assert grown is not None and grown.ratio.ci_low > 1.005
    # Without a step: no spread seen, no interval.
    bare = stats.estimate_ratio([[held], [held]], [[held], [held]], seed=0)
    assert bare is not None and not bare.ratio.has_interval
    # Six figures whose logs' mean rounds to a variance of 1e-30, not 0, are alike too.
    odd = 5001 * page
    six = stats.estimate_ratio([[odd]] * 6, [[odd]] * 6, seed=0, resolution=page)
    assert six is not None and six.ratio.has_interval and six.ratio.ci_low < 1


def test_figures_a_page_apart_are_no_surer_than_figures_that_agree() -> None:
    page, held = 4096.0, 40.0 * MiB
    for a, b in (([held, held], [held, held + page]), ([held, held + page], [held, held])):
        agree = stats.estimate_ratio(
            [[v] for v in a[:1] * 2], [[v] for v in b[:1] * 2], seed=0, resolution=page
        )
        apart = stats.estimate_ratio([[v] for v in a], [[v] for v in b], seed=0, resolution=page)
        assert agree is not None and apart is not None
        width = math.log(apart.ratio.ci_high / apart.ratio.ci_low)
        assert width >= math.log(agree.ratio.ci_high / agree.ratio.ci_low) * 0.999
    one = stats.estimate_median([[held], [held]], seed=0, resolution=page)
    two = stats.estimate_median([[held], [held + page]], seed=0, resolution=page)
    assert one is not None and two is not None
    assert two.ci_high - two.ci_low >= one.ci_high - one.ci_low
