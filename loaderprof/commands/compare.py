"""`compare`, and `check`: the same run with every lifecycle check on."""

from __future__ import annotations

import sys
from typing import Any

import typer

from loaderprof.commands import params
from loaderprof.commands.common import (
    Outputs,
    error_detail,
    failed_gates,
    interrupted_line,
    nothing_written,
    run_exit_code,
    say,
    stderr_console,
    stdout_console,
    trial_progress,
    warn_inconclusive,
)
from loaderprof.config.options import COMPARE_GROUPS, CommandOptions, split
from loaderprof.errors import INTERRUPTS, ExitCode, UsageError
from loaderprof.model.results import error_line

# A rank's failures that rank 0 reports for it (under torchrun).
_REPORTED = (ExitCode.USAGE, ExitCode.RUN_FAILED)

COMPARE_DOC = """Run the same DataLoader with persistent_workers on and off, and compare.

Without DATASET, the dataset and the other settings come from --config or the
project's pyproject.toml (\\[tool.loaderprof]).

With -- COMMAND, your own training command runs unchanged as both arms: every
DataLoader it builds with workers gets persistent_workers=True in one and False in
the other; each trial stops after --epochs epochs (default 3) of its main loader.
Its trials follow the same plan (--trials auto), and --fail-on (finding:ID too),
--baseline, --save-baseline, --json and --markdown apply to it.

Examples:
  loaderprof compare mypkg.data:TrainSet --num-workers 4
  loaderprof compare --trials 3 -- python train.py --lr 0.1
  loaderprof compare data.py:make_dataset --arg root=/data --json report.json
  loaderprof compare -v      # settings from pyproject.toml, everything shown
"""
CHECK_DOC = """Run every lifecycle check: leaks, state carried across epochs, memory growth,
copy-on-read, unsharded IterableDatasets, RNG carried in workers, /dev/shm.

The same options as compare, with one trial per arm and --digests by default.
Exits 1 when a check finds a warning or an error.

Examples:
  loaderprof check mypkg.data:TrainSet --num-workers 4
  loaderprof check mypkg.data:TrainSet --json check.json -v
"""


def _params(*, command_form: bool = False) -> list[Any]:
    out = [params.argument("dataset", str | None, params.DATASET_HELP, default=None)]
    for group in COMPARE_GROUPS:
        out += params.options(group)
    if command_form:
        out += params.options(CommandOptions)
    return out


def register(app: typer.Typer) -> None:
    params.register(app, "compare", COMPARE_DOC, _params(command_form=True), lambda v: run(v))
    params.register(app, "check", CHECK_DOC, _params(), lambda v: run(v, check=True))


def run(values: dict[str, Any], *, check: bool = False) -> int:
    INTERRUPTS.install()
    if values.get("command") is not None:
        from loaderprof.commands import compare_command

        return compare_command.run(values)
    if values.get("loader_site") is not None:
        raise UsageError("--loader-site goes with a command: compare [OPTIONS] -- COMMAND ...")
    values = {k: v for k, v in values.items() if k not in ("command", "loader_site")}
    from loaderprof import api

    values = dict(values)
    dataset = values.pop("dataset", None)
    run_opts, gate_opts, out_opts, ui = split(values, *COMPARE_GROUPS)
    prep = api.prepare(dataset, run_opts, gate_opts, preset=api.CHECK_PRESET if check else None)
    outputs = Outputs("compare", out_opts, gate_opts)
    err = stderr_console()
    from loaderprof.comparing.ranks import detect, for_rank

    ctx = detect()
    # Under torchrun only rank 0 prints: a bar on every rank would garble the terminal.
    shown = not ui.quiet and (ctx is None or ctx.rank == 0)
    # Sized for the plan this rank runs (under torchrun a fixed one).
    with trial_progress(for_rank(prep.cfg, ctx), err, enabled=shown) as on_progress:
        done = api.execute(prep, on_progress=on_progress)
    if done.report is None:  # not rank 0: measured, handed over, silent
        code = run_exit_code(done.local)
        # Rank 0 named this rank's failure and exits with its code: the job's exit
        # status comes from there, and only from there.
        reported = api.release(done)
        return int(ExitCode.OK) if reported and code in _REPORTED else code
    try:
        return _report(done.report, prep, outputs, ui, check)
    finally:
        api.release(done)


def _report(report: Any, prep: Any, outputs: Outputs, ui: Any, check: bool) -> int:
    """Rank 0 (or the only process): gates, tables, outputs, the closing line."""
    from loaderprof import api

    code = run_exit_code(report)
    failed_ranks = [r for r in report.distributed.ranks if r.failed] if report.distributed else []
    if code == ExitCode.USAGE and not failed_ranks:
        detail = error_detail(report) if ui.debug else None
        raise UsageError(error_line(report) or "invalid input", detail=detail)
    if code == ExitCode.OK and api.gateable(report):
        report = api.finalize(report, prep)
    saved = True
    if api.measured(report) or report.distributed is not None:
        from loaderprof.report.console import print_report

        # The tables first: a file that cannot be written takes nothing else with it.
        print_report(report, stdout_console(outputs.json_to_stdout), verbose=ui.verbose)
        # Written even when the run failed: what was measured is never lost.
        saved = outputs.write(report, strict=prep.strict)
    warn_inconclusive(report)
    if failed_ranks:
        # One line per failed rank, as each would print alone; the code of the first.
        for r in failed_ranks:
            sys.stderr.write(f"loaderprof: error: rank {r.rank} (host {r.host}): {r.error}\n")
        return code
    code = _closing(report, code, outputs, prep.strict, ui.debug, check)
    late = INTERRUPTS.exit_code()
    if late is not None and late != code:
        # A signal while what was measured was written: it was all written first.
        line = interrupted_line(outputs, complete=report.complete)
        say(line, "yellow")
        return late
    return int(ExitCode.NOT_SAVED) if code == ExitCode.OK and not saved else code


def _closing(
    report: Any, code: int, outputs: Outputs, strict: bool, debug: bool, check: bool
) -> int:
    """The last line on stderr and the exit code: interrupted, failed, findings, gates."""
    if code in (ExitCode.HANGUP, ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        line = interrupted_line(outputs, complete=report.complete)
        say(line, "yellow")
        return code
    if code == ExitCode.RUN_FAILED:
        detail = error_detail(report) if debug else None
        if detail:
            sys.stderr.write(detail.rstrip() + "\n")
        line = (error_line(report) or "the run did not complete") + nothing_written(outputs)
        sys.stderr.write(f"loaderprof: error: {line}\n")
        return code
    worst = [f.id for f in report.findings if f.severity != "info"]
    if check and worst:
        sys.stderr.write(f"loaderprof: check found: {', '.join(worst)}\n")
        return int(ExitCode.GATE_FAILED)
    if report.gate_status == "fail":
        sys.stderr.write(f"loaderprof: gate failed: {', '.join(failed_gates(report, strict))}\n")
        return int(ExitCode.GATE_FAILED)
    return code
