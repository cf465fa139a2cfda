"""The terminal's epoch table on synthetic reports: no processes."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from builders import make_trial
from loaderprof.analysis.summary import summarize_arm
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.model.metrics import Stat
from loaderprof.model.results import ArmResult, Report
from loaderprof.model.trials import EpochResult, Setup, TrialMemory, TrialResult
from loaderprof.report.console import cell
from loaderprof.report.partial import cut_words
from loaderprof.report.rows import evidence_items
from loaderprof.report.trial_tables import epochs_table
from loaderprof.units import MiB, fmt_seconds

Epoch = tuple[int, float, tuple[int, ...], tuple[int, ...]]  # number, wall, PIDs, new PIDs


def _trial(arm: str, epochs: list[Epoch], *, complete: bool = True) -> TrialResult:
    results = []
    t = 0.0
    for number, wall, pids, new in epochs:
        results.append(EpochResult(number, t, wall, wall / 4, 4, 128, 128 / wall, pids, new))
        t += wall
    mem = TrialMemory(200 * MiB, 20 * MiB, 10 * MiB, 0, 0, 150 * MiB, 160 * MiB, 170 * MiB, 50)
    return TrialResult(
        arm, 0, complete, t, 0, Setup(1.0, 1.1, 1.2), tuple(results), (), mem, (), 999
    )


def _report(persistent: list[Epoch], non_persistent: list[Epoch]) -> Report:
    cfg = RunConfig(dataset="a:B", epochs=3, trials=1)
    trials = [
        _trial("persistent", persistent),
        _trial("non_persistent", non_persistent, complete=len(non_persistent) == 3),
    ]
    return build_report(cfg, trials, imported={})


def _rows(report: Report) -> dict[str, list[str]]:
    """Body rows of the rendered table by their epoch cell."""
    console = Console(record=True, width=120)
    console.print(epochs_table(report))
    rows = {}
    for line in console.export_text().splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0].isdigit():
            rows[cells[0]] = cells[1:]
    return rows


PERSISTENT: list[Epoch] = [
    (1, 3.0, (1, 2), (1, 2)),
    (2, 1.0, (1, 2), ()),
    # Worker 1 died and was replaced: only its new process carries the star.
    (3, 1.5, (1, 3), (3,)),
]


def test_rows_align_by_epoch_when_a_trial_stopped_early() -> None:
    # The non-persistent trial failed in epoch 3: two measured epochs.
    rows = _rows(_report(PERSISTENT, [(1, 3.0, (11, 12), (11, 12)), (2, 2.0, (21, 22), (21,))]))
    assert list(rows) == ["1", "2", "3"]
    # Cells: persistent wall, 1st batch, PIDs; then the same for non-persistent.
    assert rows["1"][:3] == [fmt_seconds(3.0), fmt_seconds(0.75), "1* 2*"]
    assert rows["1"][3:] == [fmt_seconds(3.0), fmt_seconds(0.75), "11* 12*"]
    assert rows["2"][:3] == [fmt_seconds(1.0), fmt_seconds(0.25), "1 2"]
    assert rows["2"][3:] == [fmt_seconds(2.0), fmt_seconds(0.5), "21* 22"]
    assert rows["3"] == [fmt_seconds(1.5), fmt_seconds(0.375), "1 3*", "–", "–", "–"]


def test_rows_follow_epoch_numbers_not_positions() -> None:
    # An arm without epoch 2: its epoch 3 stays in row 3.
    rows = _rows(_report(PERSISTENT, [(1, 3.0, (11, 12), (11, 12)), (3, 2.5, (31, 32), (31, 32))]))
    assert list(rows) == ["1", "2", "3"]
    assert rows["2"][3:] == ["–", "–", "–"]
    assert rows["3"][3:] == [fmt_seconds(2.5), fmt_seconds(0.625), "31* 32*"]


def test_many_pids_keep_their_stars_when_cut_short() -> None:
    many = (41, 42, 43, 44, 45, 46)
    rows = _rows(
        _report(
            PERSISTENT,
            [(1, 3.0, many, (41, 45, 46)), (2, 2.0, (), (51,))],
        )
    )
    # Three shown, three hidden of which two started that epoch.
    assert rows["1"][5] == "41* 42 43 …+3 (2*)"
    # A worker that started but served no batch is still listed, with its star.
    assert rows["2"][5] == "51*"


def test_evidence_prints_what_was_read_and_lists_as_lists() -> None:
    """A None printed reads as a figure (`idle_workers_uss_bytes=None`); Python's list
    repr is not for users."""
    items = evidence_items({"loader": "L2", "while": ["L1"], "idle_workers_uss_bytes": None})
    assert items == [("loader", "L2"), ("while", "[L1]")]
    by_worker = evidence_items({"uss_by_epoch_by_worker": {"pool P1": [1, 2]}})
    assert by_worker == [("uss_by_epoch_by_worker", "{pool P1: [1, 2]}")]


def test_a_figure_two_decimals_would_show_as_minus_zero_reads_zero() -> None:
    """1.4 GiB in both arms, 3 MiB apart: '±0' in the compared column, never '−0.00'."""
    from loaderprof.model.metrics import Stat
    from loaderprof.report.console import _compared, num
    from loaderprof.report.rows import SummaryRow

    assert num(-0.003) == "0" and num(0.004) == "0" and num(-0.006) == "-0.01"
    gib = 2**30
    a, b = (
        Stat(1.400 * gib, 1.4 * gib, 1.4 * gib, 1.4 * gib, 1.4 * gib, 2),
        Stat(1.403 * gib, 1.403 * gib, 1.403 * gib, 1.403 * gib, 1.403 * gib, 2),
    )
    row = SummaryRow("peak PSS total", "", "", kind="bytes", stats=(a, b))
    assert _compared(row, 1 / gib) == "±0"


def test_a_spread_too_small_for_two_decimals_is_not_printed_as_none() -> None:
    # 4.5 KiB of spread on a figure in MiB: below what two decimals show, yet not 0.
    def stat(median: float, iqr: float) -> Stat:
        return Stat(median, median - iqr / 2, median + iqr / 2, median - iqr, median + iqr, 2)

    small = stat(282 * MiB, 9 * 1024)
    assert cell(small, 1 / MiB) == "282 ±<0.01"
    assert cell(stat(282 * MiB, 0), 1 / MiB) == "282 ±0"
    assert cell(stat(60 * MiB, 0.04 * MiB), 1 / MiB) == "60.0 ±0.02"


def test_a_plan_cut_short_names_each_arms_trials_where_they_differ() -> None:
    # One persistent trial ran before the signal: "0 per arm" alone would read as none.
    uneven = cut_words(False, {"persistent": 1, "non_persistent": 0}, 6)
    assert uneven == (
        "interrupted after 1 persistent and 0 non-persistent of 6 planned trials per arm"
    )
    even = cut_words(True, {"persistent": 2, "non_persistent": 2}, 6)
    assert even == "stopped by a failure after 2 of 6 planned trials per arm"


def test_an_arm_whose_timed_trial_was_stopped_before_an_epoch_shows_one_that_ran() -> None:
    # Ctrl-C in the persistent arm's timing trial: its two memory trials had finished.
    ran = [
        dataclasses.replace(
            make_trial("persistent", [1.0, 0.5], idle=0, reused=True, index=i), role="memory"
        )
        for i in (0, 1)
    ]
    stopped = dataclasses.replace(ran[0], index=2, role="timing", epochs=(), complete=False)
    arm = ArmResult("persistent", True, (*ran, stopped), summarize_arm(ran))
    assert arm.shown_trial is ran[0]
    assert ArmResult("persistent", True, (stopped,), summarize_arm([])).shown_trial is stopped
