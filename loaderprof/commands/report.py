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
    from loaderprof.report.json_report import kind_in

    values = dict(values)
    path = values.pop("path")
    out_opts, ui = split(values, OutputOptions, UiOptions)
    # Each kind of report shown as the command that wrote it showed it; a file of no
    # kind loaderprof writes is one line from the compare reader, before any output.
    show = {
        "sweep": _sweep,
        "compare-command": _command,
        "watch": _watch,
        "attach": _attach,
    }.get(kind_in(path), _compare)
    return show(path, out_opts, ui.verbose)


def _compare(path: Path, out_opts: OutputOptions, verbose: bool) -> int:
    from loaderprof.report.console import print_report
    from loaderprof.report.json_report import read_report

    outputs = Outputs("compare", out_opts)
    report = read_report(path, needs="loaderprof report reads the reports loaderprof writes")
    print_report(report, stdout_console(outputs.json_to_stdout), verbose=verbose)
    return saved_code(outputs.write(report))


def _sweep(path: Path, out_opts: OutputOptions, verbose: bool) -> int:
    from loaderprof.report.json_report import read_sweep
    from loaderprof.report.sweep_console import sweep_table

    outputs = Outputs("sweep", out_opts, what=f"{path} is a sweep report, which")
    sweep = read_sweep(path)
    stdout_console(outputs.json_to_stdout).print(sweep_table(sweep, verbose=verbose))
    return saved_code(outputs.write(sweep))


def _watch(path: Path, out_opts: OutputOptions, verbose: bool) -> int:
    """A watch report: its tables and findings again, as watch printed them."""
    from loaderprof.report.json_report import read_watch
    from loaderprof.report.watch_console import render

    outputs = Outputs("watch", out_opts, what=f"{path} is a watch report, which")
    report = read_watch(path)
    stdout_console(outputs.json_to_stdout).print(render(report))
    return saved_code(outputs.write(report))


def _attach(path: Path, out_opts: OutputOptions, verbose: bool) -> int:
    """A `watch --pid` report, as the watch printed it."""
    from loaderprof.report.attach_console import render
    from loaderprof.report.json_report import read_attach

    outputs = Outputs("attach", out_opts, what=f"{path} is a watch --pid report, which")
    report = read_attach(path)
    stdout_console(outputs.json_to_stdout).print(render(report))
    return saved_code(outputs.write(report))


def _command(path: Path, out_opts: OutputOptions, verbose: bool) -> int:
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
