"""The command form's plan, verdict and gates (NOTE [command arms]) on fake trials: the
pure pieces compare shares with it, without running a command."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from loaderprof.analysis.gates import (
    check_command_gates,
    evaluate_command,
    parse_command_gate,
    parse_gate,
)
from loaderprof.analysis.verdict import decide_command
from loaderprof.comparing.command import CommandPlan, saving, settled, summarise
from loaderprof.comparing.scheduler import at_look
from loaderprof.errors import UsageError
from loaderprof.model.codec import to_dict
from loaderprof.model.command import CommandEpoch, CommandReport, CommandTrial, MainLoader
from loaderprof.report.json_report import load_schema, read_command

MAIN = MainLoader("train.py:9", 2, False, True, 1, 3)


def _trial(i: int, arm: str, steady: float, jitter: float = 0.002) -> CommandTrial:
    walls = (0.45 + 0.01 * i, steady * (1 + jitter * i), steady * (1 + 2 * jitter * i))
    epochs = tuple(CommandEpoch(k + 1, w, 0.2, 8) for k, w in enumerate(walls))
    return CommandTrial(i, arm, epochs, 1.0, 1.1, MAIN, True, None, 2.0)  # type: ignore[arg-type]


def _abba(pairs: int, p: float = 0.18, n: float = 0.43) -> list[CommandTrial]:
    out: list[CommandTrial] = []
    for k in range(pairs):
        arms = ("persistent", "non_persistent") if k % 2 == 0 else ("non_persistent", "persistent")
        for arm in arms:
            out.append(_trial(len(out) + 1, arm, p if arm == "persistent" else n))
    return out


def test_the_plan_looks_where_compare_looks() -> None:
    # Looks at 2, 3, 4, 6 per arm for --max-trials 6; never at the cap (it ends there).
    assert [k for k in range(1, 7) if at_look(k, k, 6)] == [2, 3, 4]
    assert not at_look(2, 1, 6)


def test_adaptive_stops_at_the_first_look_on_a_clear_saving_and_fixed_never_does() -> None:
    auto = CommandPlan(("python", "t.py"), 3)
    assert auto.schedule.adaptive and auto.schedule.per_arm == 6
    trials = _abba(2)
    assert not settled(auto, trials[:3])  # two trials of one arm, one of the other
    assert settled(auto, trials)
    assert not settled(CommandPlan(("python", "t.py"), 3, trials=2), trials)
    report = summarise(auto, tuple(trials), None, False, 10.0)
    assert report.complete and report.plan is not None
    assert (report.plan.mode, report.plan.looks_taken, report.plan.settled) == (
        "adaptive",
        1,
        True,
    )
    # The saving's interval at the look's level, stricter than 95 %.
    assert report.saving is not None and report.saving.confidence > 0.99
    assert report.verdict is not None and report.verdict.recommendation == "enable"


def test_noise_keeps_the_plan_looking() -> None:
    noisy = [_trial(t.index, t.arm, 0.4 if t.index % 3 else 0.2, 0.3) for t in _abba(2, 0.3, 0.3)]
    plan = CommandPlan(("python", "t.py"), 3)
    assert not settled(plan, noisy)
    v = decide_command(saving(noisy[::3], noisy[1:3], 0), 2, 0.05, 6)
    assert v.recommendation == "neutral" and not v.decided


def test_the_verdict_is_compares_with_its_words() -> None:
    trials = _abba(2)
    p = [t for t in trials if t.arm == "persistent"]
    n = [t for t in trials if t.arm == "non_persistent"]
    s = saving(p, n, 0)
    assert s is not None
    v = decide_command(s, 2, 0.05, None)
    assert v.recommendation == "enable" and v.decided
    assert v.headline.startswith("Enable persistent_workers: it saves")
    assert any("reports no memory figures" in r for r in v.reasons)
    one = decide_command(saving(p[:1], n[:1], 0), 1, 0.05, None)
    assert one.recommendation == "neutral" and not one.decided
    assert one.reasons[0].endswith("≥ 2 trials per arm: run --trials auto or --trials 2")
    # An adaptive plan looks first at 2 trials per arm: with one, it was cut short.
    cut = decide_command(saving(p[:1], n[:1], 0), 1, 0.05, 6)
    assert cut.reasons[0].endswith("let --trials auto run to its end (this run was cut short)")
    # ... unless its cap allowed no second trial.
    capped = decide_command(saving(p[:1], n[:1], 0), 1, 0.05, 1)
    assert capped.reasons[0].endswith("raise --max-trials to 2")
    none = decide_command(None, 0, 0.05, 6)
    assert none.headline == "Not enough steady epochs were measured to decide."
    same = decide_command(saving(p, [_trial(9, "non_persistent", 0.18)] * 2, 0), 2, 0.05, None)
    assert same.recommendation == "neutral"


@pytest.mark.parametrize(
    ("gate", "words"),
    [
        ("peak_worker_uss:<=1GiB", "does not measure persistent.peak_worker_uss"),
        # compare's lifecycle checks are not the command form's (watch's).
        ("finding:repeated-randomness", "finds no 'repeated-randomness'"),
        ("finding:stale-state", "did you mean 'stale-worker-state'"),
        ("steady_epoch_ratio:+10%", "is relative to a baseline: pass --baseline"),
    ],
)
def test_gates_on_what_the_command_form_does_not_measure_are_refused(gate: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        check_command_gates([parse_command_gate(gate)])


def test_gates_fail_only_past_the_whole_interval() -> None:
    gates = tuple(
        parse_gate(g)
        for g in (
            "saved_s_per_epoch:>=1s",
            "steady_epoch_ratio:<=0.9",
            "non_persistent.steady_epoch_s:<=100ms",
            "cold_epoch_ratio:<=1.5",
        )
    )
    check_command_gates(gates)
    plan = CommandPlan(("python", "t.py"), 3, trials=2)
    report = summarise(plan, tuple(_abba(2)), None, False, 10.0)
    results, status = evaluate_command(report, gates)
    assert [g.status for g in results] == ["fail", "pass", "fail", "pass"]
    assert status == "fail"
    # One trial per arm: no interval is earned, so a gate past its limit is inconclusive.
    one = summarise(plan, tuple(_abba(1)), None, False, 5.0)
    results, status = evaluate_command(one, gates[:1])
    assert [g.status for g in results] == ["inconclusive"] and status == "pass"


def test_the_json_follows_its_schema_and_an_older_file_still_loads(tmp_path: Path) -> None:
    gates = (parse_gate("saved_s_per_epoch:>=1s"),)
    plan = CommandPlan(("python", "t.py"), 3, gates=gates)
    report = dataclasses.replace(
        summarise(plan, tuple(_abba(2)), None, False, 10.0),
        tool={"name": "loaderprof", "version": "0"},
        environment={"python": "3"},
    )
    data = to_dict(report)
    schema = load_schema("compare-command")
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(CommandReport)}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert read_command(path) == report
    # Written before the plan, gates, tool and environment were added.
    old = {k: v for k, v in data.items() if k not in ("plan", "gates", "gate_status", "tool")}
    del old["environment"]
    jsonschema.validate(old, schema, cls=jsonschema.Draft202012Validator)
    path.write_text(json.dumps(old))
    back = read_command(path)
    assert back.plan is None and back.gates == () and back.trials == report.trials
