"""Gates, statistics and exporters on synthetic reports."""

from __future__ import annotations

import contextlib
import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import MiB, make_pair
from loaderprof.analysis import stats
from loaderprof.analysis.gates import (
    MetricValue,
    evaluate,
    format_result,
    judge,
    overall,
    parse_gate,
    watch_gates,
    watch_gates_hit,
)
from loaderprof.comparing.scheduler import trial_order
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError
from loaderprof.model.environment import environment_differences
from loaderprof.model.results import Report
from loaderprof.report.csv_report import to_frame
from loaderprof.report.junit import to_junit
from loaderprof.report.markdown import to_markdown

GiB = 1024**3


def _report(p_walls: list[float], n_walls: list[float], **cfg: object) -> Report:
    p, n = make_pair(p_walls, n_walls)
    return build_report(
        RunConfig(dataset="a:B", epochs=len(p_walls), trials=1, **cfg),  # type: ignore[arg-type]
        [p, n],
        imported={"torch": "2.x", "start_method": "fork"},
    )


@pytest.mark.parametrize(
    ("text", "metric", "mode", "op", "limit"),
    [
        ("steady_epoch_ratio:<=0.95", "steady_epoch_ratio", "abs", "<=", 0.95),
        ("peak_worker_uss:<=1.5GiB", "persistent.peak_worker_uss", "abs", "<=", 1.5 * GiB),
        ("non_persistent.first_batch_s:<250ms", "non_persistent.first_batch_s", "abs", "<", 0.25),
        ("steady_epoch_s:<=2s", "persistent.steady_epoch_s", "abs", "<=", 2.0),
        ("first_batch_s:+10%", "persistent.first_batch_s", "rel", "<=", 1.1),
        ("steady_samples_per_s:-5%", "persistent.steady_samples_per_s", "rel", ">=", 0.95),
        ("idle_workers_uss_bytes:<=1048576", "persistent.idle_workers_uss", "abs", "<=", MiB),
    ],
)
def test_parse_gate(text: str, metric: str, mode: str, op: str, limit: float) -> None:
    g = parse_gate(text)
    assert (g.metric, g.mode, g.op) == (metric, mode, op)
    assert g.limit == pytest.approx(limit)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("steady_epoch_ratio", "expected METRIC:LIMIT"),
        ("nope:<=1", "unknown gate metric"),
        ("steady_epoc_ratio:<=1", "did you mean 'steady_epoch_ratio'"),
        ("steady_epoch_ratio:==1", "the limit must look like"),
        ("peak_worker_uss:<=lots", "not a number"),
        ("persistent.steady_epoch_ratio:<=1", "takes no arm prefix"),
        ("gpu.steady_epoch_s:<=1", "unknown arm"),
        ("steady_epoch_s:-100%", "cannot be checked"),
    ],
)
def test_bad_gates(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_gate(text)


@given(st.text(max_size=40))
def test_gate_parser_never_raises_anything_else(text: str) -> None:
    # Either the documented gate or the tool's own usage error, never another exception.
    with contextlib.suppress(UsageError):
        parse_gate(text)


@pytest.mark.parametrize(
    ("value", "lo", "hi", "status"),
    [
        (0.90, 0.85, 0.94, "pass"),
        (0.90, 0.85, 0.99, "pass"),  # median within the limit passes
        (0.97, 0.93, 1.01, "inconclusive"),  # median past, interval straddles
        (0.99, 0.96, 1.02, "fail"),  # the whole interval past the limit
    ],
)
def test_judge_upper_limit(value: float, lo: float, hi: float, status: str) -> None:
    g = parse_gate("steady_epoch_ratio:<=0.95")
    assert judge(g, MetricValue(value, lo, hi, 8)).status == status


def test_judge_lower_limit_uses_the_upper_end() -> None:
    g = parse_gate("steady_samples_per_s:>=1000")
    assert judge(g, MetricValue(900, 800, 1100, 8)).status == "inconclusive"
    assert judge(g, MetricValue(900, 800, 990, 8)).status == "fail"
    assert judge(g, MetricValue(1200, 800, 1300, 8)).status == "pass"


def test_a_saving_is_judged_by_its_interval_not_its_ends_ratio() -> None:
    # A saving's interval comes from an informative ratio's: 5–240 ms around 118 ms is
    # as earned as −50–300 ms, and the narrower one, wholly under 1 s, fails >= 1 s.
    g = parse_gate("saved_s_per_epoch:>=1s")
    narrow = judge(g, MetricValue(0.118, 0.005, 0.240, 4, signed=True))
    wide = judge(g, MetricValue(0.118, -0.05, 0.300, 4, signed=True))
    assert (narrow.status, wide.status) == ("fail", "fail")
    assert "too wide" not in format_result(narrow)[0]
    assert judge(g, MetricValue(0.118, -0.5, 3.0, 4, signed=True)).status == "inconclusive"
    # A positive figure (a time) 24× either way of its value says nothing.
    time = judge(parse_gate("persistent.steady_epoch_s:>=1s"), MetricValue(0.118, 0.005, 0.240, 4))
    assert time.status == "inconclusive" and "too wide" in format_result(time)[0]


def test_missing_metric_is_skipped_and_strict_fails_inconclusive() -> None:
    g = parse_gate("steady_epoch_ratio:<=0.95")
    skipped = judge(g, None)
    assert skipped.status == "skipped"
    inc = judge(g, MetricValue(0.97, 0.93, 1.01, 8))
    assert overall([inc], strict=False) == "pass"
    assert overall([inc], strict=True) == "fail"


def test_a_gate_on_an_interval_at_the_looks_level_names_it() -> None:
    # The adaptive plan's steady interval is at its look's level (NOTE [sequential
    # looks]), not 95 %: the table and the message say so; a 95 % one stays unnamed.
    g = parse_gate("steady_epoch_ratio:<=0.5")
    strict = judge(g, MetricValue(0.04, 0.02, 0.07, 2, True, 0.994))
    assert strict.confidence == 0.994
    assert format_result(strict)[0] == "0.040 [0.020–0.070] 99.4 %"
    assert "[0.020–0.070] 99.4 %, limit" in strict.message
    plain = judge(g, MetricValue(0.04, 0.02, 0.07, 2))
    assert format_result(plain)[0] == "0.040 [0.020–0.070]"
    # No interval, no level.
    once = judge(g, MetricValue(0.04, 0.04, 0.04, 1, False, 0.994))
    assert format_result(once)[0] == "0.040 (no CI)"
    # compare's report hands the steady ratio's level to its gate.
    report = _report([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0])
    assert report.comparison is not None
    looked = dataclasses.replace(
        report, comparison=dataclasses.replace(report.comparison, confidence=0.994)
    )
    results, _ = evaluate(looked, [g, parse_gate("cold_epoch_ratio:<=2")])
    assert [r.confidence for r in results] == [0.994, 0.95]


def test_evaluate_absolute_and_relative() -> None:
    old = _report([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0])
    new = _report([3.0, 1.5, 1.515, 1.485, 1.5], [3.0, 2.0, 2.02, 1.98, 2.0])
    gates = [
        parse_gate("steady_epoch_ratio:<=0.9"),
        parse_gate("steady_epoch_s:+10%"),
        parse_gate("idle_workers_uss:<=1GiB"),
    ]
    results, status = evaluate(new, gates, baseline=old)
    by = {r.metric: r for r in results}
    assert by["steady_epoch_ratio"].status == "pass"  # 0.75
    assert by["persistent.steady_epoch_s"].status == "fail"  # 1.5× the baseline
    assert by["persistent.steady_epoch_s"].value == pytest.approx(1.5)
    assert by["persistent.idle_workers_uss"].status == "pass"
    assert status == "fail"


def test_environment_differences() -> None:
    a = {"python": "3.11", "torch": "2.1", "cpu_count": 2}
    b = {"python": "3.11", "torch": "2.2", "cpu_count": 8}
    diffs = environment_differences(a, b)
    assert any("torch" in d for d in diffs) and any("cpu_count" in d for d in diffs)
    assert not any("python" in d for d in diffs)


def test_bootstrap_median() -> None:
    est = stats.bootstrap_median([1.0, 2.0, 3.0, 4.0, 5.0], seed=0)
    assert est is not None and est[0] == 3.0 and est[1] <= 3.0 <= est[2]


def _peaks(p_pss: int, n_pss: int, budget: int) -> Report:
    """The fast pair, two memory trials and two timing trials per arm, each arm's tree
    peaking at its own PSS total (±0.5 % between its memory trials)."""
    trials = []
    for i, (role, wobble) in enumerate((("memory", 0.995), ("memory", 1.005), ("timing", 1.0))):
        for k in (i, i + 3):
            p, n = make_pair([3.0, 1.0, 1.01, 0.99, 1.0 + k / 100], [3.0, 2.0, 2.02, 1.98, 2.0])
            for t, pss in ((p, p_pss), (n, n_pss)):
                mem = dataclasses.replace(t.memory, peak_total_pss_bytes=int(pss * wobble))
                trials.append(dataclasses.replace(t, index=k, role=role, memory=mem))
    return build_report(
        RunConfig(dataset="a:B", epochs=5, trials=2, memory_budget_bytes=budget),
        trials,
        imported={"torch": "2.x", "start_method": "fork"},
    )


def test_memory_budget_turns_verdict_to_keep_off() -> None:
    fast = ([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0])
    assert _report(*fast).verdict.recommendation == "enable"  # type: ignore[union-attr]
    # Persistence alone breaks the budget: the non-persistent arm keeps it.
    over = _peaks(300 * MiB, 90 * MiB, budget=100 * MiB)
    assert over.verdict is not None and over.verdict.recommendation == "keep_off"
    assert any("over budget" in r for r in over.verdict.reasons)
    fits = _report(*fast, memory_budget_bytes=GiB)
    assert fits.verdict is not None and fits.verdict.recommendation == "enable"


def test_both_arms_over_budget_do_not_blame_persistence() -> None:
    # The case: both arms peak at the same PSS above the budget; the time
    # verdict stands and says neither setting fits.
    both = _peaks(600 * MiB, 600 * MiB, budget=590 * MiB)
    v = both.verdict
    assert v is not None and v.recommendation == "enable"
    assert "Neither setting fits the memory budget" in v.headline
    assert v.reasons[0].startswith("neither setting fits --memory-budget 590.0 MiB")
    assert "persistence is not what breaks it" in v.reasons[0]
    assert not any(r.startswith("over budget") for r in v.reasons)


def test_a_budget_between_peaks_that_do_not_differ_blames_nothing() -> None:
    # 595 vs 590 MiB, each ±0.5 % between its two memory trials: not beyond noise.
    v = _peaks(595 * MiB, 590 * MiB, budget=592 * MiB).verdict
    assert v is not None and v.recommendation == "enable"
    assert "Neither setting is shown to fit" in v.headline
    assert "do not differ beyond noise" in v.reasons[0]


def test_verdict_needs_a_significant_test() -> None:
    # 2 steady epochs per arm: Mann-Whitney cannot reach p < 0.05, so no "enable".
    r = _report([3.0, 1.0, 1.0], [3.0, 2.0, 2.0])
    assert r.verdict is not None and r.verdict.recommendation != "enable"


def test_trial_order_is_abba_with_warmups_first() -> None:
    plans = trial_order(3, seed=0, warmup=1)
    assert [p.warmup for p in plans] == [True, True] + [False] * 6
    arms = [p.arm[0] for p in plans]
    # Pairs alternate: AB BA AB BA.
    assert arms[0:2] == arms[4:6] and arms[2:4] == arms[0:2][::-1]
    assert sorted(arms[2:]) == ["n"] * 3 + ["p"] * 3
    # The seed decides which arm leads each pair; a seed's order is the same in every
    # process and release (a report's seed replays its run): seed 3's leads with "off".
    orders = {tuple(p.arm for p in trial_order(4, seed=s)) for s in range(8)}
    assert len(orders) > 1
    off, on = "non_persistent", "persistent"
    assert [p.arm for p in trial_order(4, seed=3)] == [off, on, on, off, off, on, on, off]


def test_exporters_render_a_report() -> None:
    report = _report([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0])
    results, status = evaluate(report, [parse_gate("steady_epoch_ratio:<=0.4")])
    report = dataclasses.replace(report, gates=results, gate_status=status)
    md = to_markdown(report)
    assert "steady epoch" in md and "#### Gates: FAIL" in md and "❌" in md
    suite = ET.fromstring(to_junit(report))
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    frame = to_frame(report)
    assert len(frame) == 2 * 5
    assert set(frame["phase"]) == {"cold", "steady"}
    assert frame.loc[frame["arm"] == "persistent", "wall_s"].iloc[1] == 1.0


def test_gates_from_pyproject_tool_table(tmp_path: Path) -> None:
    from loaderprof.api import load_gates
    from loaderprof.config.build import load_config_file

    f = tmp_path / "pyproject.toml"
    f.write_text(
        '[tool.loaderprof]\ndataset = "a:B"\n[tool.loaderprof.gates]\n'
        'steady_epoch_ratio = "<=0.95"\npeak_worker_uss = ["<=2GiB", "+10%"]\n'
    )
    values = load_config_file(f)
    gates = load_gates(None, f, values.get("gates"))
    # Read once through --config and once through --gates: both sources count.
    assert [str(g) for g in gates[:3]] == [
        "steady_epoch_ratio:<=0.95",
        "persistent.peak_worker_uss:<=2GiB",
        "persistent.peak_worker_uss:+10%",
    ]
    bad = tmp_path / "g.toml"
    bad.write_text("[gates]\nsteady_epoch_ratio = 0.95\n")
    with pytest.raises(UsageError, match="must be a string"):
        load_gates(None, bad, None)


@pytest.mark.parametrize(
    ("parse", "text", "hint"),
    [
        ("compare", "non_persistent.cold_epoc_s:<=1s", "'non_persistent.cold_epoch_s'"),
        ("compare", "cold_epoc_s:<=1s", "'cold_epoch_s'"),
        ("command", "non_persistent.cold_epoc_s:<=1s", "'non_persistent.cold_epoch_s'"),
        ("command", "cold_epoc_s:<=1s", "'persistent.cold_epoch_s'"),
    ],
)
def test_a_typo_hint_keeps_the_arm_it_was_written_for(parse: str, text: str, hint: str) -> None:
    """Taken as offered, the hint must gate the arm the user named, and the command
    form offers only what it measures."""
    from loaderprof.analysis.gates import parse_command_gate

    with pytest.raises(UsageError) as caught:
        (parse_command_gate if parse == "command" else parse_gate)(text)
    said = str(caught.value)
    assert f"did you mean {hint}?" in said
    if parse == "command":
        assert "first_batch_ratio" not in said


def test_watch_gates_name_findings_its_checks_report() -> None:
    gates = watch_gates(["finding:leaked-files", "finding:idle-pools"])
    assert gates == ("leaked-files", "idle-pools")
    assert watch_gates_hit(gates, ["idle-pools", "copy-on-read"]) == ("idle-pools",)
    # A figure gate, a typo, and a finding only the other watch reports: one line each.
    with pytest.raises(UsageError, match="watch gates on findings only"):
        watch_gates(["steady_epoch_ratio:<=0.9"])
    with pytest.raises(UsageError, match="did you mean 'leaked-files'"):
        watch_gates(["finding:leaked-file"])
    with pytest.raises(UsageError, match="watch --pid finds no 'leaked-files'"):
        watch_gates(["finding:leaked-files"], pid=True)
    assert watch_gates(["finding:pool-rebuilt"], pid=True) == ("pool-rebuilt",)


def test_a_limit_a_shell_redirected_away_says_to_quote_it() -> None:
    """`--fail-on saved_s_per_epoch:>=100ms` unquoted: bash writes a file `=100ms` and
    loaderprof is left with `saved_s_per_epoch:`."""
    from loaderprof.analysis.gates import parse_gate

    with pytest.raises(UsageError, match=r"quote it in a shell \(an unquoted < or > redirects\)"):
        parse_gate("saved_s_per_epoch:")
