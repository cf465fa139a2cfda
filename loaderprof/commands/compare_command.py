"""`compare [OPTIONS] -- COMMAND ...`: the user's own command as both arms (see
NOTE [command arms]). compare's options that describe a loader loaderprof builds do
not apply: the command builds its own."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from typing import Any

from loaderprof.commands.common import stderr_console
from loaderprof.config.options import (
    CommandOptions,
    GateOptions,
    OutputOptions,
    RunOptions,
    UiOptions,
)
from loaderprof.errors import INTERRUPTS, ExitCode, LoaderprofError, UsageError

# The options the command form reads; every other one left at its default.
_APPLY = {
    "epochs",
    "trials",
    "seed",
    "min_gain",
    "max_batches",
    "json",
    "quiet",
    "debug",
    "verbose",
}
DEFAULT_EPOCHS = 3
DEFAULT_TRIALS = 2


def _flag(cls: type, name: str) -> str:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return str(f.metadata["flags"][0])


def _check_unused(values: dict[str, Any]) -> None:
    if values.get("dataset") is not None:
        raise UsageError(
            f"give a DATASET or a command after --, not both ({values['dataset']!r} and "
            f"{' '.join(values['command'])!r})"
        )
    for cls in (RunOptions, GateOptions, OutputOptions, UiOptions):
        for f in dataclasses.fields(cls):
            if f.name in _APPLY or f.name not in values:
                continue
            if values[f.name] not in (f.default, None, ()):
                raise UsageError(
                    f"{_flag(cls, f.name)} does not apply to compare -- COMMAND: "
                    "the command builds its own DataLoaders"
                )


def _plan(values: dict[str, Any]) -> Any:
    from loaderprof.comparing.command import CommandPlan

    trials = values.get("trials")
    if isinstance(trials, str):
        if trials != "auto" and not trials.isdigit():
            raise UsageError(f"--trials {trials!r}: a number of trials per arm")
        trials = int(trials) if trials.isdigit() else None
    epochs = values.get("epochs")
    return CommandPlan(
        command=tuple(values["command"]),
        epochs=DEFAULT_EPOCHS if epochs is None else int(epochs),
        trials=DEFAULT_TRIALS if trials is None else int(trials),
        seed=int(values.get("seed") or 0),
        loader_site=values.get(dataclasses.fields(CommandOptions)[0].name),
        min_gain=0.05 if values.get("min_gain") is None else float(values["min_gain"]),
        max_batches=values.get("max_batches"),
    )


def run(values: dict[str, Any]) -> int:
    from loaderprof.comparing.command import CommandFailed, check_plan, compare_command

    _check_unused(values)
    plan = _plan(values)
    check_plan(plan)
    err = stderr_console()
    json_to = values.get("json")

    def on_trial(i: int, n: int, arm: str) -> None:
        if not values.get("quiet"):
            name = arm.replace("_", "-")
            err.print(f"loaderprof: trial {i}/{n} ({name}): {' '.join(plan.command)}", style="dim")

    try:
        from loaderprof.watching.session import run_findings

        report = compare_command(plan, on_trial=on_trial, inspect=run_findings)
    except CommandFailed as exc:
        # The command's own error, not loaderprof's: its last lines, then one line.
        if exc.detail:
            sys.stderr.write(exc.detail.rstrip() + "\n")
        raise LoaderprofError(exc.message) from None
    from loaderprof.report.command_text import render

    width = max(80, min(120, shutil.get_terminal_size((80, 24)).columns))
    text = render(report, width=width)
    (sys.stderr if json_to == "-" else sys.stdout).write(text)
    if json_to:
        data = json.dumps(dataclasses.asdict(report), indent=2, default=str)
        if json_to == "-":
            sys.stdout.write(data + "\n")
        else:
            try:
                with open(json_to, "w", encoding="utf-8") as f:
                    f.write(data + "\n")
            except OSError as exc:
                sys.stderr.write(f"loaderprof: error: cannot write {json_to}: {exc.strerror}\n")
                return int(ExitCode.NOT_SAVED)
    late = INTERRUPTS.exit_code()
    if report.interrupted or late is not None:
        sys.stderr.write(
            f"loaderprof: interrupted: {len(report.trials)} trial(s) measured and reported\n"
        )
        return late if late is not None else int(ExitCode.INTERRUPTED)
    return int(ExitCode.OK)
