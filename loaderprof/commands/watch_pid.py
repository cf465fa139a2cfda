"""`watch --pid PID`: a running job's worker pools, watched from outside.

`commands/watch.py` registers the options (`AttachOptions`) and hands a run with
`--pid` (or with no command at all, to say what is missing) over to `run`.
"""

from __future__ import annotations

import shlex
import signal
from typing import Any

from loaderprof.commands.common import (
    Outputs,
    findings_hit,
    saved_code,
    say,
    stdout_console,
)
from loaderprof.config.options import AttachOptions, OutputOptions, fill
from loaderprof.errors import INTERRUPTS, UsageError
from loaderprof.units import fmt_seconds


def _refuse(values: dict[str, Any]) -> None:
    if values["pid"] is None:
        raise UsageError("watch needs a command after -- (or --pid PID for a running job)")
    if values["command"]:
        raise UsageError(
            "--pid watches a job that is running; a command after -- starts one: give one or "
            "the other"
        )


def run(values: dict[str, Any]) -> int:
    from loaderprof.report.attach_console import render
    from loaderprof.watching.attach import open_job
    from loaderprof.watching.attach_report import attach, check_duration
    from loaderprof.watching.pools import runs_python
    from loaderprof.watching.session import check_intervals

    INTERRUPTS.install()
    _refuse(values)
    from loaderprof.analysis.gates import watch_gates

    gates = watch_gates(values["fail_on"] or (), pid=True)
    opts = fill(AttachOptions, {k: values[k] for k in ("pid", "duration")})
    sample_ms, uss_ms = check_intervals(values["sample_interval"], values["uss_interval"])
    # The job's tree is read every --sample-interval, as watch samples a command's.
    interval_s = sample_ms / 1000
    out_opts = fill(OutputOptions, {k: values[k] for k in ("json", "markdown", "trace")})
    # Every path is checked before the watch starts, by the registry that writes it.
    outputs = Outputs("attach", out_opts)
    check_duration(opts.duration)
    proc = open_job(opts.pid)
    job = shlex.join(proc.cmdline())
    until = f"for {fmt_seconds(opts.duration)}" if opts.duration else "until it exits"
    if not values["quiet"]:
        say(
            f"loaderprof watch: watching pid {opts.pid} ({job}) from outside {until}; Ctrl-C "
            "ends the watch, not the job",
            "dim",
        )
    if not runs_python(proc.cmdline(), _exe(proc)):
        # A launcher (a shell script, torchrun's agent) may start the training later:
        # watched, not refused, but said at once rather than after a watch of nothing.
        say(
            f"loaderprof watch: warning: pid {opts.pid} is not a Python process: DataLoader "
            "workers are looked for among the Python processes it starts",
            "yellow",
        )
    report = attach(
        opts.pid,
        interval_s=interval_s,
        deep_interval_s=uss_ms / 1000,
        duration_s=opts.duration,
    )
    # The tables first: a file that cannot be written loses nothing that was seen.
    stdout_console(outputs.json_to_stdout).print(render(report))
    saved = outputs.write(report)
    late = INTERRUPTS.exit_code()
    if late is not None:
        # The signal ended the watch before anything was printed: the report covers
        # what was seen until then, and the job was never touched.
        name = signal.Signals(INTERRUPTS.signum or signal.SIGINT).name
        files = f"; written to {', '.join(outputs.written)}" if outputs.written else ""
        say(
            f"loaderprof: {name} ended the watch (the job goes on); the report covers what "
            f"was seen until then{files}",
            "yellow",
        )
        return late
    return findings_hit(gates, (f.id for f in report.findings)) or saved_code(saved)


def _exe(proc: Any) -> str:
    import psutil

    try:
        return str(proc.exe())
    except psutil.Error:  # a process gone or not ours: its command line decides
        return ""
