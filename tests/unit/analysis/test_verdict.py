"""KEEP_OFF only on evidence: a verdict says "not decided" until the interval decides it."""

from __future__ import annotations

import loaderprof
from builders import make_pair
from fakes import FakeRunner
from loaderprof.analysis.comparison import epochs_to_decide, summarize_arm, verdict
from loaderprof.model.metrics import Ratio
from loaderprof.model.results import Comparison

DATASET = "loaderprof.examples:CheapDataset"


def _run(trials: int, epochs: int, startup_s: float, work_s: float, jitter: float) -> object:
    runner = FakeRunner(startup_s=startup_s, work_s=work_s, jitter=jitter)
    return loaderprof.compare(DATASET, trials=trials, epochs=epochs, runner=runner)


def test_a_real_12_percent_saving_with_too_few_epochs_is_undecided_and_says_what_decides() -> None:
    # Workers cost 30 ms to start, an epoch's work 220 ms: persistence saves ~12 %.
    report = _run(1, 3, startup_s=0.03, work_s=0.22, jitter=0.15)
    v = report.verdict  # type: ignore[attr-defined]
    assert v.recommendation == "neutral" and not v.decided
    assert v.headline.startswith("Not decided")
    # One trial per arm: the advice names the options that act on that plan.
    assert any("run --epochs" in r and "--trials auto" in r for r in v.reasons)


def test_the_same_saving_with_enough_epochs_is_enable() -> None:
    report = _run(4, 11, startup_s=0.03, work_s=0.22, jitter=0.15)
    v = report.verdict  # type: ignore[attr-defined]
    assert v.recommendation == "enable" and v.decided


def test_a_saving_well_below_min_gain_with_enough_epochs_is_decided_against_enabling() -> None:
    report = _run(3, 11, startup_s=0.002, work_s=0.3, jitter=0.01)
    v = report.verdict  # type: ignore[attr-defined]
    assert v.recommendation in ("neutral", "keep_off") and v.decided


def test_keep_off_for_lack_of_gain_needs_an_interval_that_rules_the_gain_out() -> None:
    # The case: ratio 0.97 [0.89–1.06], p = 1, memory held: not KEEP_OFF.
    p, _ = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 1.0])
    p_sum = summarize_arm([p])

    def comparison(r: Ratio, saved: float) -> Comparison:
        return Comparison(
            steady_epoch_ratio=r,
            cold_epoch_ratio=None,
            first_batch_ratio=None,
            saved_s_per_epoch=saved,
            extra_idle_memory_bytes=20 << 20,
            extra_peak_pss_bytes=None,
            break_even_epochs=None,
            train_epochs=5,
            saved_s_total=None,
            steady_epoch_p=1.0,
        )

    v = verdict(comparison(Ratio(0.97, 0.89, 1.06), 0.03), p_sum, min_gain=0.05)
    assert v.recommendation == "neutral" and not v.decided
    assert "a saving of up to 11 %" in v.headline
    v = verdict(comparison(Ratio(1.0, 0.97, 1.03), 0.0), p_sum, min_gain=0.05)
    assert v.recommendation == "keep_off" and v.decided


def test_epochs_to_decide_follows_the_spread() -> None:
    # Half-width 0.085 around 0.97, 0.02 from the 0.95 line: n × (0.085 / 0.02)² ≈ 144.5.
    more = epochs_to_decide(Ratio(0.97, 0.885, 1.055), 8, 0.05)
    assert more is not None and 130 <= more <= 150
    assert epochs_to_decide(Ratio(0.95, 0.90, 1.00), 8, 0.05) is None
