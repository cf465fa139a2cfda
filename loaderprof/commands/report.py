"""`report`: show a saved report as tables, or export it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from loaderprof.commands import params
from loaderprof.commands.common import Outputs, saved_code, stdout_console
from loaderprof.config.options import OutputOptions, UiOptions, split


def register(app: typer.Typer) -> None:
    ps = [params.argument("path", Path, "A JSON report written by --json.")]
    ps += params.options(OutputOptions)
    ps += params.options(UiOptions, exclude=("quiet",))
    params.register(app, "report", "Show a saved report as tables, or re-export it.", ps, run)


def run(values: dict[str, Any]) -> int:
    from loaderprof.report.console import print_report
    from loaderprof.report.json_report import is_command, is_sweep, read_report, read_sweep
    from loaderprof.report.sweep_console import sweep_table

    values = dict(values)
    path = values.pop("path")
    out_opts, ui = split(values, OutputOptions, UiOptions)
    if is_sweep(path):
        outputs = Outputs("sweep", out_opts, what=f"{path} is a sweep report, which")
        sweep = read_sweep(path)
        stdout_console(outputs.json_to_stdout).print(sweep_table(sweep, verbose=ui.verbose))
        return saved_code(outputs.write(sweep))
    if is_command(path):
        return _command(path, out_opts)
    outputs = Outputs("compare", out_opts)
    # A watch report (or any other kind) is one line naming it, before any output.
    report = read_report(path, needs="loaderprof report reads compare and sweep reports")
    print_report(report, stdout_console(outputs.json_to_stdout), verbose=ui.verbose)
    return saved_code(outputs.write(report))


def _command(path: Path, out_opts: OutputOptions) -> int:
    """A `compare -- COMMAND` report: its screen again, as the run printed it."""
    import shutil
    import sys

    from loaderprof.report.command_text import render
    from loaderprof.report.json_report import read_command

    outputs = Outputs(
        "compare-command", out_opts, what=f"{path} is a compare -- COMMAND report, which"
    )
    report = read_command(path)
    width = max(80, min(120, shutil.get_terminal_size((80, 24)).columns))
    (sys.stderr if outputs.json_to_stdout else sys.stdout).write(render(report, width=width))
    return saved_code(outputs.write(report))
