"""`compare -- COMMAND`'s waits (NOTE [data wait]), cut epochs (NOTE [cut epochs]) and
findings per arm (NOTE [command findings]), from hook events and trials built here."""

from __future__ import annotations

from typing import Any

import pytest

from loaderprof.comparing.command import CommandPlan, check_plan, summarise
from loaderprof.comparing.command_events import CommandTrace
from loaderprof.comparing.command_figures import arm_waits, projected_steady
from loaderprof.comparing.command_findings import arm_findings
from loaderprof.errors import UsageError
from loaderprof.inside.events import Ev
from loaderprof.model.command import CommandEpoch, CommandTrial, MainLoader
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.results import Finding

S = 1_000_000_000


def _events(cut: bool) -> list[dict[str, Any]]:
    """One loader, two epochs of 10 of its 40 batches; each waits 0.3 s for its first
    batch then 0.1 s, and its last batch comes at start + 0.3 + 9 × 0.05 s."""
    out: list[dict[str, Any]] = [
        {"ev": Ev.LOADER_CREATED, "t": 1 * S, "loader": "1.1", "site": "t.py:4",
         "num_workers": 2, "prefetch_factor": 2, "dataset_type": "D"},
    ]  # fmt: skip
    for start in (2.0, 4.0):
        t0 = int(start * S)
        end: dict[str, Any] = {
            "ev": Ev.ITER_END,
            "t": t0 + int(0.8 * S),
            "loader": "1.1",
            "batches": 10,
            "ended": "cut" if cut else "exhausted",
            "wait_first": 0.3,
            "wait_steady": 0.1,
        }
        if cut:
            end["last_batch"] = t0 + int(0.75 * S)
        out += [
            {"ev": Ev.ITER_START, "t": t0, "loader": "1.1", "planned": 40 if cut else 10},
            {"ev": Ev.ITER_FIRST_BATCH, "t": t0 + int(0.3 * S), "loader": "1.1"},
            end,
        ]
    return out


def _trial(index: int, arm: str, epochs: tuple[CommandEpoch, ...], **kw: Any) -> CommandTrial:
    main = MainLoader("t.py:4", 2, False, arm == "persistent", 1, 3, 2)
    return CommandTrial(index, arm, epochs, 1.0, 2.0, main, True, None, 5.0, **kw)  # type: ignore[arg-type]


def test_each_epoch_carries_its_waits_and_its_cut() -> None:
    trace = CommandTrace(0)
    trace.feed(_events(cut=True))
    trace.ended = True
    first, second = trace.epochs(2)
    assert first.wait == WaitSplit(0.8, 0.3, 0.1, 10)
    assert first.cut and first.planned_batches == 40
    assert first.last_batch_s == pytest.approx(0.75)
    assert second.first_batch_s == pytest.approx(0.3)
    (plain, _) = _trace_epochs(cut=False)
    assert not plain.cut and plain.last_batch_s is None


def _trace_epochs(cut: bool) -> tuple[CommandEpoch, ...]:
    trace = CommandTrace(0)
    trace.feed(_events(cut))
    trace.ended = True
    return trace.epochs(2)


def test_an_arms_waits_are_the_median_trials_median_epoch() -> None:
    def epochs(first: float, steady: float, wall: float) -> tuple[CommandEpoch, ...]:
        cold = CommandEpoch(1, 2.0, 1.0, 10, WaitSplit(2.0, 1.0, 0.2, 10))
        steady_epochs = [
            CommandEpoch(k, wall, first, 10, WaitSplit(wall + 0.01 * k, first, steady, 10))
            for k in (2, 3, 4)
        ]
        return (cold, *steady_epochs)

    trials = [
        _trial(1, "persistent", epochs(0.1, 0.2, 1.0)),
        _trial(2, "persistent", epochs(0.3, 0.4, 1.2)),
    ]
    cold, steady = arm_waits(trials)
    assert cold == WaitSplit(2.0, 1.0, 0.2, 10)
    # The median of the arm's six steady epochs (1.02..1.04, 1.22..1.24), the faster of
    # the middle two: an epoch that ran, whole.
    assert steady == WaitSplit(1.04, 0.1, 0.2, 10)
    assert arm_waits([_trial(1, "persistent", ())]) == (None, None)


def test_a_cut_epoch_projects_to_the_loaders_len_at_the_pooled_batch_time() -> None:
    epochs = _trace_epochs(cut=True)
    trial = _trial(1, "persistent", (*epochs, epochs[1]))
    # Each steady epoch: 0.45 s over 9 gaps = 0.05 s a batch, 30 batches left out.
    assert projected_steady(trial, 10) == pytest.approx(0.8 + 30 * 0.05)
    # A whole epoch (ended by the script) is kept as measured.
    whole = _trial(1, "persistent", _trace_epochs(cut=False) * 2)
    assert projected_steady(whole, 10) == pytest.approx(0.8)


def test_the_saving_is_of_projected_epochs_and_the_report_keeps_the_cut_ones() -> None:
    def epochs(wall: float) -> tuple[CommandEpoch, ...]:
        return tuple(
            CommandEpoch(k, wall, 0.3 if wall > 1 else 0.01, 10, None, True, 100,
                         (0.3 if wall > 1 else 0.01) + 9 * 0.05)
            for k in (1, 2, 3)
        )  # fmt: skip

    trials = (
        _trial(1, "persistent", epochs(0.5)),
        _trial(2, "non_persistent", epochs(1.2)),
        _trial(3, "non_persistent", epochs(1.21)),
        _trial(4, "persistent", epochs(0.51)),
    )
    report = summarise(CommandPlan(("x",), 3, 2, max_batches=10), trials, None, False, 9.0)
    assert report.max_batches == 10
    assert report.persistent is not None and report.non_persistent is not None
    assert report.persistent.steady_epoch_s is not None
    assert report.persistent.steady_epoch_s.median == pytest.approx(0.505)
    projected = report.persistent.projected_steady_epoch_s
    assert projected is not None and projected.median == pytest.approx(0.505 + 90 * 0.05)
    # 0.7 s saved of a projected ~5.7 s epoch: about 12 %, not the 58 % cut epochs show.
    assert report.saving is not None
    assert report.saving.saved_s == pytest.approx(0.7, abs=0.02)
    assert 0.85 < report.saving.ratio.value < 0.9


def _leak(site: str = "t.py:4", severity: str = "warning") -> Finding:
    return Finding("leaked-files", severity, "more open files", {"site": site}, "close them")  # type: ignore[arg-type]


def test_an_arms_finding_names_its_arm_and_trials_once() -> None:
    trials = [
        _trial(1, "persistent", (), findings=(_leak(),)),
        _trial(2, "non_persistent", ()),
        _trial(3, "non_persistent", (), findings=(_leak(site="t.py:9", severity="info"),)),
        # Twice in one trial (a loader idle beside two others): trial 4 once.
        _trial(4, "persistent", (), findings=(_leak(), _leak())),
    ]
    found = arm_findings(trials)
    assert [(f.arm, f.evidence["site"], f.evidence["trials"]) for f in found] == [
        ("persistent", "t.py:4", [1, 4]),
        ("non_persistent", "t.py:9", [3]),
    ]


def _with(findings: tuple[Finding, ...], arm: str) -> CommandTrial:
    walls = (2.0, 1.0, 1.0) if arm == "persistent" else (2.0, 1.5, 1.5)
    epochs = tuple(CommandEpoch(k + 1, w, 0.1, 10) for k, w in enumerate(walls))
    return _trial(1, arm, epochs, findings=findings)


def test_the_verdict_names_a_warning_only_the_persistent_arm_shows() -> None:
    plan = CommandPlan(("x",), 3, 1)
    only = summarise(plan, (_with((_leak(),), "persistent"), _with((), "non_persistent")),
                     None, False, 5.0)  # fmt: skip
    assert only.verdict is not None and "leaked-files" in only.verdict.depends_on
    assert any("persistent arm" in r for r in only.verdict.reasons)
    both = summarise(plan, (_with((_leak(),), "persistent"), _with((_leak(),), "non_persistent")),
                     None, False, 5.0)  # fmt: skip
    # Both arms leak: not a cost of persistence.
    assert both.verdict is not None and "leaked-files" not in both.verdict.depends_on


def test_max_batches_below_two_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--max-batches must be ≥ 2"):
        check_plan(CommandPlan(("x",), 3, 1, max_batches=1))
