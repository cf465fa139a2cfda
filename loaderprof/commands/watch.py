"""`watch -- COMMAND`: run a training script unchanged and report its DataLoaders."""

from __future__ import annotations

import inspect
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from loaderprof.commands import params
from loaderprof.commands.common import stderr_console, stdout_console
from loaderprof.config.options import WatchStopOptions
from loaderprof.errors import INTERRUPTS, UsageError


def register(app: typer.Typer) -> None:
    ps = [
        inspect.Parameter(
            "command",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=Annotated[
                list[str],
                typer.Argument(
                    help="The command to run, after --: python train.py ...", show_default=False
                ),
            ],
        ),
        _opt("json_path", Path | None, None, "--json", "Write the JSON report (kind: watch)."),
        _opt("markdown", Path | None, None, "--markdown", "Write a Markdown summary."),
        _opt("trace", Path | None, None, "--trace", "Write a Chrome trace (ui.perfetto.dev)."),
        _opt(
            "fail_on",
            list[str] | None,
            None,
            "--fail-on",
            "finding:ID, repeatable: exit 1 (when the command itself succeeded) if found.",
        ),
        _opt("sample_interval", float, 50.0, "--sample-interval", "RSS sampling interval, ms."),
        _opt(
            "uss_interval", float, 500.0, "--uss-interval", "Most time between USS/PSS walks, ms."
        ),
    ]
    ps += params.options(WatchStopOptions)
    doc = (
        "Run COMMAND unchanged (after --) and report what its DataLoaders did: every "
        "loader, its epochs, workers and memory, and what to fix. Exits with the "
        "command's own status."
    )
    params.register(app, "watch", doc, ps, run)


def _opt(name: str, tp: Any, default: Any, flag: str, help: str) -> inspect.Parameter:
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[tp, typer.Option(flag, help=help, show_default=False)],
    )


def _gates(fail_on: list[str] | None) -> list[str]:
    ids = []
    for g in fail_on or ():
        if not g.startswith("finding:") or not g[len("finding:") :]:
            raise UsageError(f"--fail-on {g!r}: watch gates on findings only (finding:ID)")
        ids.append(g[len("finding:") :])
    return ids


# The sampler's shortest honest interval (as `compare` allows), in ms.
_MIN_INTERVAL_MS = 5.0


def check_intervals(sample_ms: float, uss_ms: float) -> None:
    """A real run is always sampled: an interval too short to read /proc in would
    spin the sampler on the CPUs the training needs."""
    if sample_ms < _MIN_INTERVAL_MS:
        raise UsageError(
            f"--sample-interval {sample_ms:g} ms: use ≥ {_MIN_INTERVAL_MS:g} ms (each reading "
            "goes through /proc for every process of the command)"
        )
    if uss_ms < sample_ms:
        raise UsageError(
            f"--uss-interval {uss_ms:g} ms must be ≥ --sample-interval ({sample_ms:g} ms)"
        )


def run(values: dict[str, Any]) -> int:
    from loaderprof.report.exporters import check_writable, write_atomic
    from loaderprof.report.watch_console import render
    from loaderprof.report.watch_export import to_json, to_markdown
    from loaderprof.watching.session import watch

    INTERRUPTS.install()
    gates = _gates(values["fail_on"])
    check_intervals(values["sample_interval"], values["uss_interval"])
    json_path, md, trace = values["json_path"], values["markdown"], values["trace"]
    for path in (json_path, md, trace):
        if path is not None and str(path) != "-":
            check_writable(path)
    err = stderr_console()
    err.print(f"loaderprof watch: running {' '.join(values['command'])}", style="dim")
    if values["kill_after"] < 0:
        raise UsageError(f"--kill-after {values['kill_after']:g}: use seconds ≥ 0")
    report = watch(
        values["command"],
        interval_ms=values["sample_interval"],
        uss_interval_ms=values["uss_interval"],
        kill_after_s=values["kill_after"],
    )
    out = stdout_console(str(json_path) == "-")
    out.print(render(report))
    if json_path is not None:
        if str(json_path) == "-":
            sys.stdout.write(to_json(report) + "\n")
        else:
            write_atomic(json_path, to_json(report))
    if md is not None:
        write_atomic(md, to_markdown(report))
    if trace is not None:
        from loaderprof.report.watch_trace import to_watch_trace_json

        write_atomic(trace, to_watch_trace_json(report))
    found = {f.id for f in report.findings}
    hit = [g for g in gates if g in found]
    late = INTERRUPTS.exit_code()
    if late is not None:  # after the command ended: its report was written first
        err.print(f"loaderprof: interrupted by {signal.Signals(late - 128).name}")
        return late
    if report.exit_code == 0 and hit:
        err.print(f"loaderprof: watch found: {', '.join(hit)}")
        return 1
    return report.exit_code
