"""`compare [OPTIONS] -- COMMAND ...`: the user's own command as both arms (see
NOTE [command arms]). compare's options that describe a loader loaderprof builds do
not apply: the command builds its own."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import sys
from typing import Any

from loaderprof.commands.common import (
    Outputs,
    failed_gates,
    interrupted_line,
    nothing_written,
    saved_code,
    say,
    warn_inconclusive,
)
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
    "max_trials",
    "seed",
    "min_gain",
    "max_batches",
    "fail_on",
    "gates",
    "strict",
    "baseline",
    "save_baseline",
    "json",
    "markdown",
    "quiet",
    "debug",
    "verbose",
}
DEFAULT_EPOCHS = 3
_EXPORTS = "it writes --json and --markdown (no memory table and no lifelines)"
_WHY = dict.fromkeys(("csv", "junit", "html", "plot", "trace"), _EXPORTS)
_BASELINE_NEEDS = "--baseline takes a compare -- COMMAND report (saved with --save-baseline)"


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
                    + _WHY.get(f.name, "the command builds its own DataLoaders")
                )


def _plan(values: dict[str, Any]) -> Any:
    from loaderprof import api
    from loaderprof.analysis.gates import check_command_gates
    from loaderprof.comparing.command import CommandPlan
    from loaderprof.config.run import AUTO

    trials = values.get("trials")
    if isinstance(trials, str):
        text = trials.strip().lower()
        if text != AUTO and not text.isdecimal():
            raise UsageError(f"--trials {trials!r}: a number of trials per arm, or auto")
        trials = int(text) if text.isdecimal() else AUTO
    epochs, cap = values.get("epochs"), values.get("max_trials")
    gates = tuple(api.load_gates(values.get("fail_on"), values.get("gates"), None, command=True))
    path = values.get("baseline")
    check_command_gates(gates, has_baseline=path is not None)
    baseline = None
    if path is not None:
        from loaderprof.report.json_report import read_command

        baseline = read_command(path, needs=_BASELINE_NEEDS)
    return CommandPlan(
        command=tuple(values["command"]),
        epochs=DEFAULT_EPOCHS if epochs is None else int(epochs),
        trials=AUTO if trials is None else trials,
        seed=int(values.get("seed") or 0),
        loader_site=values.get(dataclasses.fields(CommandOptions)[0].name),
        min_gain=0.05 if values.get("min_gain") is None else float(values["min_gain"]),
        max_trials=6 if cap is None else int(cap),
        gates=gates,
        strict=bool(values.get("strict")),
        max_batches=values.get("max_batches"),
        baseline=baseline,
        baseline_path=None if path is None else str(path),
    )


# What a run that ended in its first trial has to write: a trial's epochs count
# only once it completed.
_NONE_DONE = "no trial completed"


def run(values: dict[str, Any]) -> int:
    from loaderprof.comparing.command import CommandFailed, check_plan, compare_command

    _check_unused(values)
    plan = _plan(values)
    check_plan(plan)
    out_opts = OutputOptions(json=values.get("json"), markdown=values.get("markdown"))
    # --save-baseline: the --json report, written by the same registry (even when a
    # gate fails: what was measured is never lost).
    gate_opts = GateOptions(save_baseline=values.get("save_baseline"))
    outputs = Outputs("compare-command", out_opts, gate_opts, what="compare -- COMMAND")

    def on_trial(i: int, n: int, arm: str) -> None:
        if not values.get("quiet"):
            name = arm.replace("_", "-")
            say(f"loaderprof: trial {i}/{n} ({name}): {shlex.join(plan.command)}", "dim")

    failed: CommandFailed | None = None
    try:
        from loaderprof.watching.session import run_findings

        report = compare_command(plan, on_trial=on_trial, inspect=run_findings)
    except CommandFailed as exc:
        # The command's own error, not loaderprof's: its last lines, then one line.
        if exc.report is None:
            if exc.detail:
                sys.stderr.write(exc.detail.rstrip() + "\n")
            raise LoaderprofError(exc.message + nothing_written(outputs, _NONE_DONE)) from None
        # A later trial's: the trials before it are shown and written first.
        report, failed = exc.report, exc
    except UsageError as exc:
        # The first trial's run was no run to compare (no loader, too few epochs).
        raise UsageError(exc.message + nothing_written(outputs, _NONE_DONE)) from None
    if not report.trials:
        # A signal before the first trial ended: nothing to show or write.
        say(interrupted_line(outputs, complete=False), "yellow")
        return INTERRUPTS.exit_code() or int(ExitCode.INTERRUPTED)
    from loaderprof.report.command_text import render

    width = max(80, min(120, shutil.get_terminal_size((80, 24)).columns))
    (sys.stderr if outputs.json_to_stdout else sys.stdout).write(render(report, width=width))
    saved = outputs.write(report, strict=plan.strict)
    warn_inconclusive(report)
    if failed is not None:
        if failed.detail:
            sys.stderr.write(failed.detail.rstrip() + "\n")
        sys.stderr.write(f"loaderprof: error: {failed.message}\n")
        return int(ExitCode.RUN_FAILED)
    late = INTERRUPTS.exit_code()
    if report.interrupted or late is not None:
        # As compare says it: what the signal cut short, and the files that hold it.
        say(interrupted_line(outputs, complete=not report.interrupted), "yellow")
        return late if late is not None else int(ExitCode.INTERRUPTED)
    if report.gate_status == "fail":
        gates = ", ".join(failed_gates(report, plan.strict))
        sys.stderr.write(f"loaderprof: gate failed: {gates}\n")
        return int(ExitCode.GATE_FAILED)
    return saved_code(saved)
