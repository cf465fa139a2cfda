"""Every command's screen built from synthetic reports (FakeRunner, builders): data with
failures and long names, for the 80- and 120-column golden texts."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from rich.console import Group, RenderableType

import loaderprof
from builders import distributed_summary, watch_report
from fakes import FakeRunner
from loaderprof.model.results import Report

DATASET = "loaderprof.examples:CheapDataset"
GATES = [
    "non_persistent.peak_worker_uss:<=1.5GiB",
    "steady_epoch_ratio:<=0.5",
    "non_persistent.idle_workers_uss:>=12MiB",
    "persistent.worker_startup_s:<=1ms",
    "finding:stale-worker-state",
]


def failed_report() -> Report:
    """A compare whose second non-persistent trial failed, with gates that pass, fail
    and cannot be judged."""
    return loaderprof.compare(
        DATASET,
        epochs=4,
        trials=3,
        gates=GATES,
        runner=FakeRunner(0.2, 0.1, fail={("non_persistent", 1)}),
    )


def gated_report() -> Report:
    """A complete compare judged by gates that pass and fail, with long names."""
    return loaderprof.compare(DATASET, epochs=4, trials=3, gates=GATES, runner=FakeRunner())


def screens() -> Iterator[tuple[str, RenderableType]]:
    """(name, what the command prints) for compare (its default and -v screens, with a
    failed trial and with gates), sweep (a failed point), diff, plan and watch; check
    and report print compare's screens."""
    from loaderprof.analysis.capacity import project
    from loaderprof.commands.diff import diff_rows
    from loaderprof.report.console import diff_table, distributed_tables, plan_table, render
    from loaderprof.report.sweep_console import sweep_table
    from loaderprof.report.watch_console import render as watch_render

    report = failed_report()
    yield "compare", render(report)
    gated = gated_report()
    yield "compare_gates", render(gated)
    yield (
        "compare_distributed",
        Group(*distributed_tables(dataclasses.replace(gated, distributed=distributed_summary()))),
    )
    yield "compare_verbose", render(report, verbose=True)
    sweep = loaderprof.sweep(
        DATASET,
        epochs=3,
        trials=2,
        num_workers="0,2,12",
        prefetch_factor="2,16",
        runner=FakeRunner(fail={("workers=12 prefetch=16 non-persistent", 1)}),
    )
    yield "sweep", sweep_table(sweep)
    yield "sweep_verbose", sweep_table(sweep, verbose=True)
    slower = loaderprof.compare(DATASET, epochs=4, trials=3, runner=FakeRunner(0.3, 0.12))
    rows = diff_rows(report, slower, seed=0)
    yield "diff", diff_table(rows, "new_run_with_a_long_name.json vs baseline base.json")
    env = {"memory_total_bytes": 64 << 30, "cpu_count": 16}
    proj = project(report, ranks=8, num_workers=12, arm="persistent", environment=env)
    yield "plan", plan_table(proj, ranks=8, num_workers=12, arm="persistent")
    yield "watch", watch_render(watch_report())
