"""`compare -- COMMAND`'s screen at 80 and 120 columns, on data with a long site and
command, an interrupted run and nothing to compare: committed text (regenerate with
LOADERPROF_UPDATE_GOLDEN=1 after checking it by eye), no line past the width."""

from __future__ import annotations

import dataclasses

import pytest
from golden_text import GOLDEN, check_golden

from loaderprof.analysis.gates import parse_command_gate, parse_gate
from loaderprof.comparing.command import CommandPlan, summarise
from loaderprof.model.command import CommandEpoch, CommandReport, CommandTrial, MainLoader
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.results import BaselineInfo, Finding
from loaderprof.report.command_text import render

SITE = "/home/someone/projects/a-rather-long-project-name/training/scripts/train_resnet.py:142"
MAIN = MainLoader(SITE, 4, False, True, 1, 5)
COMMAND = ("python", "training/scripts/train_resnet.py", "--config", "configs/resnet50.yaml")


def _trial(i: int, arm: str, steady: float, epochs: int = 5) -> CommandTrial:
    walls = [4.2 + 0.01 * i] + [steady * (1 + 0.01 * k + 0.004 * i) for k in range(2, epochs + 1)]
    return CommandTrial(
        i,
        arm,  # type: ignore[arg-type]
        tuple(CommandEpoch(k + 1, w, 0.3, 120) for k, w in enumerate(walls)),
        6.1 + 0.1 * i,
        6.4 + 0.1 * i,
        MAIN,
        True,
        None,
        30.0,
    )


def _reports() -> dict[str, CommandReport]:
    plan = CommandPlan(COMMAND, 5, 2)
    full = (
        _trial(1, "persistent", 2.1),
        _trial(2, "non_persistent", 3.4),
        _trial(3, "non_persistent", 3.5),
        _trial(4, "persistent", 2.2),
    )
    rebuilt = MainLoader(SITE, 4, False, True, 5, 1)
    alone = CommandTrial(1, "persistent", full[0].epochs, 6.0, 6.3, rebuilt, True, None, 30.0)
    gates = tuple(
        parse_gate(g)
        for g in (
            "steady_epoch_ratio:<=0.9",
            "saved_s_per_epoch:>=2s",
            "non_persistent.steady_epoch_s:<=3s",
        )
    )
    # An adaptive plan that ends at its cap, unsettled: the plan line and verdict say so.
    adaptive = CommandPlan(COMMAND, 5, max_trials=2, gates=gates)
    return {
        "full": summarise(plan, full, None, False, 125.0),
        "adaptive_gates": summarise(adaptive, full, None, False, 125.0),
        "interrupted": summarise(plan, full[:2], None, True, 60.0),
        "nothing": summarise(
            plan, (alone,), "its main loader is built anew every epoch", False, 30.0
        ),
        "more": _more(),
        "baseline": _against_baseline(),
    }


LEAK = Finding(
    "leaked-files",
    "warning",
    "loader L1's persistent worker 0 holds more open files after every epoch "
    "(10 → 12 → 14 → 16 → 18 → 20 → 22 → 24 → 26 → 28)",
    {"site": SITE},
    "close each file the Dataset opens (a `with` block), or open it once per worker",
)


def _cut_trial(i: int, arm: str, steady: float, first: float) -> CommandTrial:
    """Five epochs cut at 32 of 500 batches, each with its waits (NOTE [data wait])."""
    walls = [4.2 + 0.01 * i] + [steady * (1 + 0.01 * k + 0.004 * i) for k in range(2, 6)]
    epochs = tuple(
        CommandEpoch(
            k + 1,
            w,
            first,
            32,
            WaitSplit(w, first if k else 3.1, 0.4 + 0.01 * k, 32),
            True,
            500,
            first + 31 * 0.05,
        )
        for k, w in enumerate(walls)
    )
    found = (LEAK,) if arm == "persistent" else ()
    return CommandTrial(i, arm, epochs, 6.1, 6.4, MAIN, True, None, 30.0, findings=found)  # type: ignore[arg-type]


def _more() -> CommandReport:
    """Waits, findings and --max-batches."""
    plan = CommandPlan(COMMAND, 5, 2, max_batches=32)
    trials = (
        _cut_trial(1, "persistent", 1.9, 0.05),
        _cut_trial(2, "non_persistent", 4.9, 3.0),
        _cut_trial(3, "non_persistent", 5.0, 3.1),
        _cut_trial(4, "persistent", 2.0, 0.06),
    )
    return summarise(plan, trials, None, False, 125.0)


def _against_baseline() -> CommandReport:
    """Relative gates against a saved run from another torch build, and finding gates:
    one found, one whose check could not run (every trial stopped by loaderprof)."""
    old = dataclasses.replace(_more(), created="2026-12-01T10:00:00+00:00")
    gates = tuple(
        parse_command_gate(g)
        for g in (
            "persistent.steady_epoch_s:+10%",
            "steady_epoch_ratio:+10%",
            "saved_s_per_epoch:-20%",
            "finding:leaked-files",
            "finding:workers-leaked",
        )
    )
    plan = CommandPlan(COMMAND, 5, 2, max_batches=32, gates=gates, baseline=old)
    trials = (
        _cut_trial(1, "persistent", 2.6, 0.05),
        _cut_trial(2, "non_persistent", 4.9, 3.0),
        _cut_trial(3, "non_persistent", 5.0, 3.1),
        _cut_trial(4, "persistent", 2.7, 0.06),
    )
    report = summarise(plan, trials, None, False, 125.0)
    info = BaselineInfo("ci/baseline.json", old.created, ("torch: '2.12.0' → '2.13.0'",))
    return dataclasses.replace(report, baseline=info)


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize(
    "name", ["full", "adaptive_gates", "interrupted", "nothing", "more", "baseline"]
)
def test_the_command_screen_fits_and_matches_its_golden_text(name: str, width: int) -> None:
    text = render(_reports()[name], width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    path = GOLDEN / f"command_{name}_{width}.txt"
    check_golden(path, text)


def test_every_figure_printed_is_the_reports() -> None:
    report = _reports()["full"]
    text = render(report)
    assert report.saving is not None and report.saving.low_s is not None
    assert f"{report.saving.saved_s:.2f} s" in text
    assert "95 % CI" in text
    one = render(_reports()["interrupted"])
    assert "no interval" in one and "interrupted" in one


def test_a_command_that_runs_fewer_epochs_than_asked_says_so() -> None:
    """--epochs 5 on a script of 3 epochs: every trial ended by itself, and the labels
    and the plan are the 3 epochs measured, with a warning naming the difference."""
    from loaderprof.report.command_text import render

    trials = tuple(
        dataclasses.replace(_trial(i, arm, s, epochs=3), stopped=False, returncode=0)
        for i, arm, s in ((1, "persistent", 2.1), (2, "non_persistent", 3.4),
                          (3, "non_persistent", 3.5), (4, "persistent", 2.2))
    )  # fmt: skip
    text = render(summarise(CommandPlan(COMMAND, 5, 2), trials, None, False, 60.0), width=80)
    assert "each ended by itself after 3 epochs" in text
    assert "the command ran 3 epochs of its main loader, not --epochs 5" in text
    assert "steady epoch (2..3)" in text and "(2..5)" not in text
    assert "loaderprof stopped" not in text


def test_a_busy_machine_is_said_under_the_figures() -> None:
    from loaderprof.report.command_text import render

    busy = "the machine was busy: other processes kept 1.0 of 2 cores busy on average"
    report = dataclasses.replace(_reports()["full"], warnings=(busy,))
    text = render(report, width=80)
    assert "warning: the machine was busy: other processes kept 1.0 of 2 cores" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "warning: the machine" not in render(_reports()["full"], width=80)


def test_the_loaders_findings_name_are_placed_where_they_were_built() -> None:
    """The command screen has no table of loaders: the findings' L1, L2 are followed by
    where each was built, the main loader marked."""
    from loaderprof.model.results import Finding

    report = _more()
    assert report.site is not None
    idle = [
        Finding(
            "idle-pools",
            "info",
            f"loader {lid}'s 2 persistent workers stay alive and idle",
            {"loader": lid, "site": site, "trials": [1, 4]},
            "expected",
            "persistent",
        )
        for lid, site in (("L2", report.site), ("L1", "train.py:46"))
    ]
    text = render(dataclasses.replace(report, findings=tuple(idle)), 200)
    assert f"loaders named: L1 at train.py:46, L2 at {report.site} (the main loader)" in text
