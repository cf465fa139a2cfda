"""`sweep`: every valid combination of the grid; the frontier and a recommendation."""

from __future__ import annotations

from typing import Any

import typer

from loaderprof.commands import params
from loaderprof.commands.common import (
    Outputs,
    interrupted_line,
    say,
    stderr_console,
    stdout_console,
)
from loaderprof.config.options import OutputOptions, RunOptions, SweepOptions, UiOptions, split
from loaderprof.errors import INTERRUPTS, ExitCode

# A sweep sets these per point; its grid options take their place.
GRID = ("num_workers", "prefetch_factor", "mp_context")
# What a sweep does not use: the comparison of two arms and its statistics.
NOT_FOR_SWEEP = (
    *GRID,
    "warmup_trials",
    "digests",
    "train_epochs",
    "min_gain",
    "state_checks",
    "set_epoch",
    "epoch_hook",
)
OUTPUTS = ("json", "csv", "plot")

DOC = """Sweep num_workers × prefetch_factor × start method × persistence; find the frontier.

Each grid option takes a comma list; every valid combination runs --trials times
(3 under auto), and the table marks the points no other beats on both time and memory.

Examples:
  loaderprof sweep mypkg.data:TrainSet --num-workers 2,4,8
  loaderprof sweep data.py:TrainSet -w 4,8 --prefetch-factor 2,4 --plot s.png
"""


def register(app: typer.Typer) -> None:
    ps = [params.argument("dataset", str | None, params.DATASET_HELP, default=None)]
    ps += params.options(SweepOptions)
    ps += params.options(RunOptions, exclude=NOT_FOR_SWEEP)
    ps += params.options(OutputOptions, only=OUTPUTS)
    ps += params.options(UiOptions)
    params.register(app, "sweep", DOC, ps, run)


def run(values: dict[str, Any]) -> int:
    INTERRUPTS.install()
    from loaderprof import api
    from loaderprof.comparing.sweep import expand, run_sweep
    from loaderprof.report.sweep_console import sweep_table

    values = dict(values)
    dataset = values.pop("dataset", None)
    grid_opts, run_opts, out_opts, ui = split(
        values, SweepOptions, RunOptions, OutputOptions, UiOptions
    )
    cfg, grid = api.prepare_sweep(dataset, run_opts, grid_opts)
    outputs = Outputs("sweep", out_opts)
    points, _ = expand(grid)
    err = stderr_console()
    if not ui.quiet and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            console=err,
            transient=True,
        )
        task = progress.add_task("sweep", total=len(points) * cfg.fixed_trials)

        def on_progress(done: int, total: int, point: Any, ev: Any) -> None:
            progress.update(task, completed=done, description=point.label)

        with progress:
            report = run_sweep(cfg, grid, on_progress=on_progress)
    else:
        report = run_sweep(cfg, grid)
    # The table first: a file that cannot be written takes nothing else with it.
    stdout_console(outputs.json_to_stdout).print(sweep_table(report, verbose=ui.verbose))
    saved = outputs.write(report)
    interrupted = INTERRUPTS.exit_code()
    if interrupted is not None:
        line = interrupted_line(outputs, complete=report.complete)
        say(line, "yellow")
        return interrupted
    if not report.complete:
        return int(ExitCode.RUN_FAILED)
    return int(ExitCode.OK if saved else ExitCode.NOT_SAVED)
