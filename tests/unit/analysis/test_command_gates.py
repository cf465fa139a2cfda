"""`compare -- COMMAND`'s relative and finding gates (NOTE [command baseline]) on fake
trials, and the one-line refusals of its --baseline, before any command runs."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jsonschema
import pytest

from loaderprof.analysis.command_baseline import quotient, relative_command_metrics
from loaderprof.analysis.gates import (
    COMMAND_FINDING_IDS,
    check_command_gates,
    gates_from_table,
    make_command_gate,
    parse_command_gate,
    parse_gate,
)
from loaderprof.cli import _run
from loaderprof.comparing.command import CommandPlan, baseline_info, summarise
from loaderprof.errors import ExitCode, UsageError
from loaderprof.inside.procfs import HANDLE_LABELS
from loaderprof.model.codec import to_dict
from loaderprof.model.command import CommandEpoch, CommandReport, CommandTrial, MainLoader
from loaderprof.model.metrics import MetricValue
from loaderprof.model.results import Finding
from loaderprof.report.json_report import load_schema, read_command, to_json

MAIN = MainLoader("train.py:9", 2, False, True, 1, 3)
CMD = ("python", "t.py")


def _trial(
    i: int, arm: str, steady: float, found: tuple[Finding, ...] = (), code: int | None = None
) -> CommandTrial:
    walls = (0.45 + 0.01 * i, steady * (1 + 0.004 * i), steady * (1 + 0.008 * i))
    epochs = tuple(CommandEpoch(k + 1, w, 0.2, 8) for k, w in enumerate(walls))
    return CommandTrial(
        i,
        arm,  # type: ignore[arg-type]
        epochs,
        1.0,
        1.1,
        MAIN,
        code is None,
        code,
        2.0,
        findings=found,
    )


def _run_of(pairs: int, p: float = 0.18, n: float = 0.43, **kw: object) -> tuple[CommandTrial, ...]:
    out: list[CommandTrial] = []
    for k in range(pairs):
        arms = ("persistent", "non_persistent") if k % 2 == 0 else ("non_persistent", "persistent")
        for arm in arms:
            out.append(_trial(len(out) + 1, arm, p if arm == "persistent" else n, **kw))  # type: ignore[arg-type]
    return tuple(out)


def _report(
    trials: tuple[CommandTrial, ...], *gates: str, baseline: object = None
) -> CommandReport:
    plan = CommandPlan(
        CMD,
        3,
        trials=len(trials) // 2,
        gates=tuple(parse_command_gate(g) for g in gates),
        baseline=baseline,  # type: ignore[arg-type]
    )
    return summarise(plan, trials, None, False, 10.0)


def _status(report: CommandReport) -> dict[str, str]:
    return {g.gate: g.status for g in report.gates}


def test_a_relative_gate_fails_by_construction_and_passes_against_itself() -> None:
    saved = _report(_run_of(3))
    # The persistent arm's steady epoch doubled; the other arm's did not move.
    gates = ("persistent.steady_epoch_s:+10%", "non_persistent.steady_epoch_s:+10%")
    slower = _report(_run_of(3, p=0.36), *gates, baseline=saved)
    assert _status(slower) == {gates[0]: "fail", gates[1]: "pass"}
    assert slower.gate_status == "fail"
    got = {g.gate: g for g in slower.gates}[gates[0]]
    assert got.value == pytest.approx(2.0, rel=0.02) and got.baseline == pytest.approx(0.18, 0.02)
    same = _report(_run_of(3), *gates, baseline=saved)
    assert same.gate_status == "pass"


def test_a_figure_of_both_arms_against_the_baseline_earns_the_product_of_both_levels() -> None:
    saved = _report(_run_of(3))
    new = _report(_run_of(3, p=0.27), "steady_epoch_ratio:+10%", baseline=saved)
    (g,) = new.gates
    assert g.status == "fail" and g.value == pytest.approx(1.5, rel=0.02)
    assert g.confidence == pytest.approx(0.95 * 0.95)
    # Both intervals are in it: wider than the new run's own, divided by a point.
    own = relative_command_metrics(new, saved)["steady_epoch_ratio"]
    assert (own.ci_low, own.ci_high) == (g.ci_low, g.ci_high)
    assert new.saving is not None and saved.saving is not None
    point = new.saving.ratio.ci_high / saved.saving.ratio.value
    assert g.ci_high is not None and g.ci_high > point


def test_a_baseline_read_once_per_arm_cannot_fail_a_gate() -> None:
    once = _report(_run_of(1))
    new = _report(_run_of(3, p=0.36), "steady_epoch_ratio:+10%", baseline=once)
    (g,) = new.gates
    # Past the limit, but no interval was earned on the baseline's side.
    assert g.status == "inconclusive" and not g.has_interval and new.gate_status == "pass"


def test_quotient_of_two_intervals() -> None:
    q = quotient(MetricValue(2.0, 1.5, 2.5, 3), MetricValue(1.0, 0.5, 2.0, 3))
    assert q is not None and (q.value, q.ci_low, q.ci_high) == (2.0, 0.75, 5.0)
    across = quotient(MetricValue(0.1, -0.2, 0.4, 3), MetricValue(1.0, 0.5, 2.0, 3))
    assert across is not None and (across.ci_low, across.ci_high) == (-0.4, 0.8)
    assert quotient(MetricValue(1.0, 0.5, 1.5, 3), MetricValue(-0.1, -0.2, 0.0, 3)) is None
    reaches_zero = quotient(MetricValue(1.0, 0.5, 1.5, 3), MetricValue(1.0, 0.0, 2.0, 3))
    assert reaches_zero is not None and not reaches_zero.has_interval


LEAK = Finding("leaked-files", "warning", "files grow", {"site": "t.py:9"}, "close them")
INFO = Finding("idle-pools", "info", "idle", {"site": "t.py:9"}, "fix it")


def test_a_finding_gate_fails_on_the_persistent_arms_finding_at_any_severity() -> None:
    """As compare and watch count them: the gate agrees with the findings listed above it."""
    trials = tuple(
        dataclasses.replace(t, findings=(LEAK, INFO) if t.arm == "persistent" else (INFO,))
        for t in _run_of(2)
    )
    gates = ("finding:leaked-files", "finding:idle-pools", "finding:loader-recreated")
    report = _report(trials, *gates)
    assert _status(report) == {
        "finding:leaked-files:absent": "fail",
        "finding:idle-pools:absent": "fail",  # info, and found
        "finding:loader-recreated:absent": "pass",
    }
    theirs = tuple(
        dataclasses.replace(t, findings=(LEAK,) if t.arm == "non_persistent" else ())
        for t in _run_of(2)
    )
    assert _report(theirs, gates[0]).gate_status == "pass"


def test_leaked_workers_are_gated_only_where_a_trial_ended_by_itself() -> None:
    stopped = _report(_run_of(2), "finding:workers-leaked")
    assert [g.status for g in stopped.gates] == ["skipped"]
    assert "exits by itself" in stopped.gates[0].message
    ended = _report(_run_of(2, code=0), "finding:workers-leaked")
    assert [g.status for g in ended.gates] == ["pass"]


def test_the_command_forms_finding_ids() -> None:
    assert {f"leaked-{k}" for k in HANDLE_LABELS} <= set(COMMAND_FINDING_IDS)
    assert "persistence-candidate" not in COMMAND_FINDING_IDS  # this comparison answers it
    with pytest.raises(UsageError, match="a finding gate's limit"):
        gates_from_table({"finding:stale-worker-state": "<=2"}, "g.toml", make_command_gate)
    gates = gates_from_table(
        {"finding:workers-leaked": "absent", "steady_epoch_ratio": ["<=0.9", "+5%"]},
        "g.toml",
        make_command_gate,
    )
    assert [str(g) for g in gates] == [
        "finding:workers-leaked:absent",
        "steady_epoch_ratio:<=0.9",
        "steady_epoch_ratio:+5%",
    ]
    with pytest.raises(UsageError, match="relative to a baseline"):
        check_command_gates(gates)
    check_command_gates(gates, has_baseline=True)
    # compare's own lifecycle checks do not run here, however the gate was parsed.
    with pytest.raises(UsageError, match="finds no 'repeated-randomness'"):
        check_command_gates([parse_gate("finding:repeated-randomness")])


def test_the_baseline_is_flagged_where_it_ran_otherwise_and_the_json_keeps_it(
    tmp_path: Path,
) -> None:
    saved = dataclasses.replace(
        _report(_run_of(2)), environment={"torch": "2.12.0"}, created="2026-12-01T10:00:00"
    )
    path = tmp_path / "b.json"
    path.write_text(to_json(saved))
    back = read_command(path)
    assert back == saved
    plan = CommandPlan(CMD, 3, baseline=back, baseline_path=str(path))
    new = dataclasses.replace(
        _report(_run_of(2), "persistent.steady_epoch_s:+10%", baseline=back),
        environment={"torch": "2.13.0"},
        command=("python", "u.py"),
    )
    info = baseline_info(plan, new)
    assert info is not None and info.path == str(path) and info.created == saved.created
    assert info.differences == (
        "torch: '2.12.0' → '2.13.0'",
        "command: 'python t.py' → 'python u.py'",
    )
    data = to_dict(dataclasses.replace(new, baseline=info))
    jsonschema.validate(data, load_schema("compare-command"), cls=jsonschema.Draft202012Validator)
    assert json.loads(json.dumps(data))["gates"][0]["baseline"] == pytest.approx(0.18, rel=0.02)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--fail-on", "steady_epoch_ratio:+10%"], "is relative to a baseline: pass --baseline"),
        (["--fail-on", "finding:no-such-thing"], "compare -- COMMAND finds no 'no-such-thing'"),
        (["--baseline", "{compare}"], "is a compare report"),
        (["--baseline", "{text}"], "is not valid JSON"),
        (["--baseline", "{missing}"], "report not found"),
    ],
    ids=["relative-without-baseline", "unknown-finding", "compare-report", "not-json", "missing"],
)
def test_a_bad_gate_or_baseline_is_one_line_before_the_command_runs(
    args: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare = tmp_path / "c.json"
    compare.write_text(json.dumps({"schema_version": 1, "arms": {}}))
    text = tmp_path / "t.json"
    text.write_text("not json")
    files = {"compare": compare, "text": text, "missing": tmp_path / "nope.json"}
    args = [a.format(**files) for a in args]
    ran = tmp_path / "ran"
    argv = ["compare", *args, "--", sys.executable, "-c", f"open({str(ran)!r}, 'w')"]
    code = _run(argv, debug=False)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == ExitCode.USAGE and len(err) == 1, err
    assert words in err[0], err[0]
    assert not ran.exists(), "the command ran before its gates were checked"
