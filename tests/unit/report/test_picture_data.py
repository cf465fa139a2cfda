"""What the --plot figure (and the HTML page, which inlines it) draws: sums over
processes only at walks that read every process, labels off the whiskers, and
legends that list only what is drawn. The series are read from the helper and from
the matplotlib artists themselves, never from pixels."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

import loaderprof
from fakes import FakeRunner, MiB
from loaderprof.model.results import Report
from loaderprof.model.trials import TrialResult
from loaderprof.report import plot

pytest.importorskip("matplotlib")

DATASET = "loaderprof.examples:CheapDataset"
WORKERS = 2


@pytest.fixture
def ax() -> Iterator[Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots()
    yield axes
    plt.close(fig)


@pytest.fixture(scope="module")
def cut() -> Report:
    """Each trial has a walk cut short in the middle of epoch 1 that read the main
    process only (as a busy machine, or a process read ahead of the rest, leaves)."""
    runner = FakeRunner(cut_walk=True)
    return loaderprof.compare(
        DATASET, epochs=3, trials=1, num_workers=WORKERS, runner=runner, state_checks=False
    )


def _trial(report: Report) -> TrialResult:
    return report.arms["persistent"].trials[0]


def _cut_walk_s(t: TrialResult) -> float:
    main = next(p for p in t.timeline if p.role == "main")
    (ts,) = (
        ts
        for ts, uss, n in zip(main.t_s, main.uss_bytes, main.walk_processes, strict=True)
        if uss is not None and n == 0
    )
    return ts


def test_sums_come_only_from_walks_that_read_every_process(cut: Report) -> None:
    t = _trial(cut)
    runner = FakeRunner()
    full = (runner.main_pss + WORKERS * runner.worker_uss) / MiB
    series = plot.memory_series(t)
    assert series is not None
    epoch1 = t.epochs[0]
    at = _cut_walk_s(t)
    assert epoch1.start_s < at < epoch1.start_s + epoch1.wall_s
    # Summed, the cut walk would draw the total at the main process alone, and the
    # workers' stack at 0, while both workers live.
    assert at not in series.walk_t and at not in series.pss_t
    in_epoch1 = [
        v
        for ts, v in zip(series.pss_t, series.pss_total, strict=True)
        if epoch1.start_s <= ts <= epoch1.start_s + epoch1.wall_s
    ]
    assert in_epoch1 and min(in_epoch1) == pytest.approx(full)
    for _, row in series.workers:
        assert all(
            v == runner.worker_uss / MiB
            for ts, v in zip(series.walk_t, row, strict=True)
            if epoch1.start_s <= ts <= epoch1.start_s + epoch1.wall_s
        )
    # A process's own line uses every reading, the cut walk's too.
    assert at in series.main_t


def test_the_panel_draws_the_series(cut: Report, ax: Any) -> None:
    t = _trial(cut)
    series = plot.memory_series(t)
    assert series is not None
    plot._memory(ax, t)
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert tuple(lines["PSS total"].get_xdata()) == series.pss_t
    assert tuple(lines["PSS total"].get_ydata()) == series.pss_total
    assert tuple(lines["main process USS"].get_xdata()) == series.main_t
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["main process USS", "PSS total"]


def test_a_report_without_walk_markers_draws_no_sums(cut: Report, ax: Any) -> None:
    # A report written before the markers: which walks read every process is not
    # known, so nothing is summed, and the legend names only what is drawn.
    t = _trial(cut)
    old = dataclasses.replace(
        t, timeline=tuple(dataclasses.replace(p, walk_processes=()) for p in t.timeline)
    )
    series = plot.memory_series(old)
    assert series is not None and not series.pss_t and not series.walk_t
    plot._memory(ax, old)
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["main process USS"]
    assert ax.get_legend().get_title().get_text() == ""


def test_epoch_time_labels_sit_above_the_whiskers(cut: Report, ax: Any) -> None:
    plot._epoch_times(ax, cut)
    labels = ax.texts
    assert len(labels) == 4
    caps = sorted(
        stat.q3
        for arm in ("persistent", "non_persistent")
        for stat in (cut.arms[arm].summary.cold_epoch_s, cut.arms[arm].summary.steady_epoch_s)
        if stat is not None
    )
    # Each label is anchored at its whisker's cap and drawn upwards from it.
    assert sorted(label.xy[1] for label in labels) == caps
    assert all(label.get_va() == "bottom" for label in labels)
    assert ax.get_ylim()[1] > max(caps)


# One point on the frontier (persistence dominates), then two (0 and 4 workers).
@pytest.mark.parametrize("workers", [[2], [0, 2, 4]], ids=["one-on-frontier", "two"])
def test_the_sweep_legend_lists_only_what_is_drawn(ax: Any, workers: list[int]) -> None:
    sweep = loaderprof.sweep(
        DATASET, num_workers=workers, epochs=2, trials=1, runner=FakeRunner(), state_checks=False
    )
    plot._sweep(ax, sweep)
    drawn = {line.get_label() for line in ax.get_lines() if len(line.get_xdata()) > 1}
    legend = ax.get_legend()
    listed = {t.get_text() for t in legend.get_texts()} if legend is not None else set()
    assert listed == drawn
    front = [p for p in sweep.points if p.frontier]
    assert ("Pareto frontier" in listed) == (len(front) > 1) == (len(workers) > 1)
