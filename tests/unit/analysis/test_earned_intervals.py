"""Numbers a user can trust (NOTE [earned intervals], NOTE [words follow numbers],
NOTE [spread of an arm]): synthetic trials with a known truth, no processes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from builders import MiB, make_trial
from loaderprof.analysis import stats
from loaderprof.analysis.advice import PRACTICAL_UNITS
from loaderprof.analysis.comparison import report_metrics
from loaderprof.analysis.gates import evaluate, judge, parse_gate
from loaderprof.analysis.verdict import assess
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.model.metrics import MetricValue, Ratio
from loaderprof.model.results import Report
from loaderprof.model.trials import TrialResult


def _arm(
    arm: str,
    levels: list[float],
    *,
    role: str = "timing",
    peak_uss: list[int] | None = None,
    jitter: tuple[float, ...] = (1.0, 1.01, 0.99, 1.0),
) -> list[TrialResult]:
    """Trials whose steady epochs sit at `levels` (times `jitter`: ±1 %), cold epoch 3 s."""
    out = []
    for i, level in enumerate(levels):
        t = make_trial(arm, [3.0, *(level * j for j in jitter)], idle=0, reused=True)
        mem = t.memory
        if peak_uss is not None:
            mem = dataclasses.replace(mem, peak_worker_uss_bytes=peak_uss[i])
        out.append(dataclasses.replace(t, index=i, role=role, memory=mem))
    return out


def _report(measured: list[TrialResult], **cfg: object) -> Report:
    return build_report(
        RunConfig(dataset="a:B", epochs=5, **cfg),  # type: ignore[arg-type]
        measured,
        imported={"torch": "2.x", "start_method": "fork"},
    )


def test_an_interval_wider_than_10x_either_way_is_no_finding() -> None:
    # Two trials per arm, the persistent ones 60× apart: a t with ~1 degree of freedom.
    trials = _arm("persistent", [0.01, 0.6]) + _arm("non_persistent", [0.45, 0.451])
    report = _report(trials, trials=2, memory_trials=1)
    c, v = report.comparison, report.verdict
    assert c is not None and v is not None
    r = c.steady_epoch_ratio
    assert r is not None and r.has_interval and not r.informative
    assert v.recommendation == "neutral" and not v.decided
    assert v.headline == "Not decided: 2 trials per arm with this spread cannot decide."
    text = " ".join(v.reasons)
    # The fixed plan's own option, never the adaptive plan's.
    assert "--trials" in text and "--max-trials" not in text
    assert "at the line" not in text and "sits within" not in text
    # The interval's endpoints are not printed: they would read as a finding.
    assert f"{r.ci_high:.3g}" not in text and "more than 10× either way" in text
    from loaderprof.report.rows import fmt_ratio_interval

    assert fmt_ratio_interval(r).endswith("(too wide)")


@pytest.mark.parametrize("seed", range(40))
def test_p_and_the_interval_always_agree(seed: int) -> None:
    """One statistic gives both: p < 1 − level exactly when the interval leaves 1 out."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 5))
    a = [list(rng.lognormal(0, 0.2, size=4) * 0.9) for _ in range(k)]
    b = [list(rng.lognormal(0, 0.2, size=4)) for _ in range(k)]
    for level in (0.95, 0.994):
        est = stats.estimate_ratio(a, b, seed=0, confidence=level)
        assert est is not None and est.p is not None
        r = est.ratio
        assert r.ci_low <= r.value <= r.ci_high  # the point estimate lies inside
        excludes_one = r.ci_high < 1.0 or r.ci_low > 1.0
        assert excludes_one == (est.p < 1 - level)


def test_a_figure_read_once_has_no_interval_and_cannot_fail_a_gate() -> None:
    g = parse_gate("peak_worker_uss:<=10MiB")
    once = judge(g, MetricValue(50 * MiB, 50 * MiB, 50 * MiB, 1, has_interval=False))
    assert once.status == "inconclusive" and "read once" in once.message
    assert "the whole interval" not in once.message and "(no CI)" in once.message
    assert judge(g, MetricValue(5 * MiB, 5 * MiB, 5 * MiB, 1, has_interval=False)).status == (
        "pass"
    )
    # An interval past the limit but too wide to mean anything cannot fail either.
    rel = parse_gate("peak_worker_uss:+3%")
    wide = judge(rel, MetricValue(20.0, 1.5, 200.0, 2), relative=MetricValue(20.0, 1.5, 200.0, 2))
    assert wide.status == "inconclusive" and not wide.informative and "too wide" in wide.message


def _memory_report(uss: list[int]) -> Report:
    """Two memory trials per arm whose worker peaks are `uss`, two timing trials."""
    trials = (
        _arm("persistent", [1.0, 1.0], role="memory", peak_uss=uss)
        + _arm("non_persistent", [2.0, 2.0], role="memory", peak_uss=uss)
        + _arm("persistent", [1.0, 1.02])
        + _arm("non_persistent", [2.0, 2.04])
    )
    return _report(trials, trials=2)


def test_memory_gates_on_two_readings_pass_unchanged_code_and_fail_a_real_regression() -> None:
    base = _memory_report([44_900_000, 46_100_000])
    gate = [parse_gate("peak_worker_uss:+3%")]
    # Unchanged code, readings spread as identical runs do (44.9–47.7 MB).
    same = _memory_report([47_700_000, 45_300_000])
    results, status = evaluate(same, gate, baseline=base)
    assert status == "pass" and results[0].status in ("pass", "inconclusive")
    # A 30 % larger worker: the whole interval is past +3 %.
    grown = _memory_report([59_000_000, 60_500_000])
    results, status = evaluate(grown, gate, baseline=base)
    assert status == "fail" and results[0].status == "fail"
    # The arm's own figure has an interval of its own now (two memory trials).
    m = report_metrics(grown)["persistent.peak_worker_uss"]
    assert m.has_interval and m.n == 2 and m.ci_low < m.value < m.ci_high


def test_memory_trials_add_to_the_spread_not_the_level() -> None:
    """See NOTE [spread of an arm]. The memory trials' epochs (slower: sampled) move the
    degrees of freedom, never the ratio."""
    timing = _arm("persistent", [0.10, 0.13]) + _arm("non_persistent", [1.0, 1.04])
    memory = _arm("persistent", [0.2, 0.25], role="memory") + _arm(
        "non_persistent", [1.5, 1.6], role="memory"
    )
    alone = _report(timing, trials=2).comparison
    both = _report(memory + timing, trials=2).comparison
    assert alone is not None and both is not None
    assert alone.steady_epoch_ratio is not None and both.steady_epoch_ratio is not None
    assert both.steady_epoch_ratio.value == pytest.approx(alone.steady_epoch_ratio.value)
    assert both.steady_epoch_spread is not None and alone.steady_epoch_spread is not None
    assert sum(both.steady_epoch_spread["df"]) > sum(alone.steady_epoch_spread["df"])
    width = lambda r: math.log(r.ci_high / r.ci_low)  # noqa: E731
    assert width(both.steady_epoch_ratio) < width(alone.steady_epoch_ratio)


def test_distance_to_the_line_is_on_the_log_scale() -> None:
    # 0.11 on an interval 1e-5–1000: far from 0.95 in every sense; a ratio-unit
    # half-width (500) once called it "at the line".
    a = assess(Ratio(0.11, 1e-5, 1000.0), 0.5, 0.95, 0.05, 2, "trial")
    assert not a.at_line and not a.informative
    near = assess(Ratio(0.951, 0.8, 1.13), 0.5, 0.95, 0.05, 4, "trial")
    assert near.more is None or near.n + near.more > PRACTICAL_UNITS
    on = assess(Ratio(0.95, 0.8, 1.13), 0.5, 0.95, 0.05, 4, "trial")
    assert on.at_line and on.more is None
    far = assess(Ratio(0.97, 0.885, 1.055), 0.5, 0.95, 0.05, 8, "trial", df=7)
    assert far.more is not None and 80 <= far.more <= 100


def test_two_trials_far_from_the_line_are_not_called_at_it() -> None:
    """A 13 % saving, 5 % line, two trials per arm (t quantile 4–13): the interval is
    wide, not the ratio close; the trials that would decide it are counted with the t
    quantile falling as they add degrees of freedom (a measured Lightning run)."""
    a = assess(Ratio(0.87, 0.18, 4.21), 0.8, 0.95, 0.05, 2, "trial", df=1.5)
    assert not a.at_line and a.more is not None
    # The 1/√n rule alone, with the two-trial t kept, would ask for about 640.
    assert a.more < 100


def test_an_adaptive_plan_at_its_cap_advises_max_trials_and_a_fixed_one_trials() -> None:
    trials = _arm("persistent", [0.93, 1.0, 0.97]) + _arm("non_persistent", [1.0, 0.99, 1.01])
    fixed = _report(trials, trials=3, memory_trials=1).verdict
    assert fixed is not None and not fixed.decided
    assert "--max-trials" not in " ".join(fixed.reasons) and "--trials " in " ".join(fixed.reasons)


def test_memory_trials_disturbed_by_their_sampling_do_not_widen_a_clear_saving() -> None:
    """See NOTE [spread of an arm]. On a busy machine the memory trials' epochs spread
    far more than the timing trials' (their walks contend with the workers); pooled,
    their spread between trials turned a clear saving undecided (the figures of a
    measured run, HF text dataset, --trials 2, two busy cores)."""
    timing = _arm("persistent", [0.168, 0.157]) + _arm("non_persistent", [0.289, 0.295])
    busy = (1.0, 1.5, 0.6, 1.3)
    memory = _arm("persistent", [0.41, 0.25], role="memory", jitter=busy) + _arm(
        "non_persistent", [0.53, 0.93], role="memory", jitter=busy
    )
    alone = _report(timing, trials=2).comparison
    both = _report(memory + timing, trials=2).comparison
    assert alone is not None and both is not None
    assert both.steady_epoch_spread is not None
    assert both.steady_epoch_spread["persistent"] == "timing trials"
    assert both.steady_epoch_spread["non_persistent"] == "timing trials"
    assert both.steady_epoch_ratio == alone.steady_epoch_ratio
    r = both.steady_epoch_ratio
    assert r is not None and r.ci_high < 0.95
    # The same memory trials with epochs as steady as the timing trials' are of the same
    # kind: they are pooled, and their spread between trials leaves it undecided.
    calm = _arm("persistent", [0.41, 0.25], role="memory") + _arm(
        "non_persistent", [0.53, 0.93], role="memory"
    )
    pooled = _report(calm + timing, trials=2).comparison
    assert pooled is not None and pooled.steady_epoch_spread is not None
    assert pooled.steady_epoch_spread["persistent"] == "trials"
    assert pooled.steady_epoch_ratio is not None and pooled.steady_epoch_ratio.ci_high > 1.0
