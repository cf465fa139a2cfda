"""`watch -- COMMAND`: run a training script unchanged and report its DataLoaders."""

from __future__ import annotations

import copy
import shlex
from typing import Annotated, Any

import typer

from loaderprof.commands import params
from loaderprof.commands.common import (
    Outputs,
    findings_hit,
    interrupted_line,
    saved_code,
    say,
    stdout_console,
)
from loaderprof.config.options import (
    WATCH_HELP,
    AttachOptions,
    GateOptions,
    OutputOptions,
    RunOptions,
    UiOptions,
    WatchStopOptions,
    fill,
)
from loaderprof.errors import INTERRUPTS

# Each flag is the options model's own (`config/options.py`): one definition whatever
# number of commands take it.
_OPTIONS = (
    (OutputOptions, ("json", "markdown", "trace")),
    (GateOptions, ("fail_on",)),
    (RunOptions, ("sample_interval", "uss_interval")),
    (UiOptions, ("quiet", "debug")),
)


def _watch_help(p: Any) -> Any:
    """A shared option with watch's own help where watch uses it otherwise."""
    if p.name not in WATCH_HELP:
        return p
    info = copy.copy(p.annotation.__metadata__[0])
    info.help, metavar = WATCH_HELP[p.name]
    info.metavar = metavar or info.metavar
    return p.replace(annotation=Annotated[p.annotation.__origin__, info])


def register(app: typer.Typer) -> None:
    ps = [
        params.argument(
            "command",
            list[str] | None,
            "The command to run, after --: python train.py ...",
            default=None,
        )
    ]
    for group, names in _OPTIONS:
        ps += [_watch_help(p) for p in params.options(group, only=names)]
    ps += params.options(WatchStopOptions)
    ps += params.options(AttachOptions)  # `watch --pid`: commands/watch_pid.py
    doc = """Run a training command unchanged and report what its DataLoaders did.

Every loader COMMAND (given after --) builds: its epochs, workers and memory, and what
to fix. Exits with the command's own status.

Examples:
  loaderprof watch -- python train.py --lr 0.1
  loaderprof watch --fail-on finding:loader-recreated -- python train.py
  loaderprof watch --pid 4242 --duration 600
"""
    params.register(app, "watch", doc, ps, run)


def run(values: dict[str, Any]) -> int:
    from loaderprof.report.watch_console import render
    from loaderprof.watching.session import (
        build_watch_report,
        check_intervals,
        check_kill_after,
        collect,
    )

    if values["pid"] is not None or not values["command"]:
        from loaderprof.commands import watch_pid

        return watch_pid.run(values)
    INTERRUPTS.install()
    # Every option is checked before the command starts: a typo found after it ran
    # would cost the user the whole run.
    kill_after = values["kill_after"]
    check_kill_after(kill_after)
    from loaderprof.analysis.gates import watch_gates

    gates = watch_gates(values["fail_on"] or ())
    check_intervals(values["sample_interval"], values["uss_interval"])
    out_opts = fill(OutputOptions, {k: values[k] for k in ("json", "markdown", "trace")})
    # Every path is checked before the command starts, by the registry that writes it.
    outputs = Outputs("watch", out_opts)
    from loaderprof.measure.hooked import check_command

    check_command(values["command"])
    if not values["quiet"]:
        say(f"loaderprof watch: running {shlex.join(values['command'])}", "dim")
    # Not api.watch: a signal the command was stopped for is this run's status here,
    # not one to give back to a caller.
    report = build_watch_report(
        collect(
            values["command"],
            sample_interval=values["sample_interval"],
            uss_interval=values["uss_interval"],
            kill_after=kill_after,
        )
    )
    # The tables first: a file that cannot be written loses nothing that was seen.
    stdout_console(outputs.json_to_stdout).print(render(report))
    saved = outputs.write(report)
    late = INTERRUPTS.exit_code()
    if late is not None:  # after the command ended: its report was written first
        say(interrupted_line(outputs, complete=True), "yellow")
        return late
    if report.interrupted:
        # Passed on to the command, whose own traceback may be all stderr shows else.
        files = f"; written to {', '.join(outputs.written)}" if outputs.written else ""
        say(
            f"loaderprof: the signal was passed on to the command, which ended with status "
            f"{report.exit_code}; the report covers what was seen until then{files}",
            "yellow",
        )
    if report.exit_code == 0 and findings_hit(gates, (f.id for f in report.findings)):
        return 1
    return report.exit_code or saved_code(saved)
