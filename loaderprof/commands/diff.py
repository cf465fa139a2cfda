"""`diff`: two saved reports, compared offline with the same statistics and gates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from loaderprof.commands import params
from loaderprof.commands.common import (
    Outputs,
    failed_gates,
    saved_code,
    stdout_console,
    warn_inconclusive,
)
from loaderprof.config.options import GateOptions, OutputOptions, UiOptions, split
from loaderprof.errors import ExitCode

OUTPUTS = ("json", "csv", "markdown", "junit", "html")
_NEEDS = "loaderprof diff reads compare reports"


def register(app: typer.Typer) -> None:
    ps = [
        params.argument("old", Path, "The baseline report (JSON)."),
        params.argument("new", Path, "The new report (JSON)."),
    ]
    ps += params.options(GateOptions, only=("fail_on", "gates", "strict"))
    ps += params.options(OutputOptions, only=OUTPUTS)
    ps += params.options(UiOptions, only=("debug",))
    doc = "Compare two saved reports offline, with the same statistics and gates."
    params.register(app, "diff", doc, ps, run)


def run(values: dict[str, Any]) -> int:
    from loaderprof import api
    from loaderprof.config.run import RunConfig
    from loaderprof.report.console import diff_table, gates_table
    from loaderprof.report.json_report import read_report

    values = dict(values)
    old, new = values.pop("old"), values.pop("new")
    gate_opts, out_opts, _ = split(values, GateOptions, OutputOptions, UiOptions)
    gates = api.load_gates(gate_opts.fail_on, gate_opts.gates, None)
    outputs = Outputs("compare", out_opts)
    old_report = read_report(old, needs=_NEEDS)
    new_report = read_report(new, needs=_NEEDS)
    # Only the seed matters here (the bootstrap behind the gates' intervals).
    cfg = RunConfig(
        dataset=new_report.config.dataset,
        seed=new_report.config.seed,
    )
    prep = api.Prepared(cfg, tuple(gates), gate_opts.strict, old_report, old)
    report = api.finalize(new_report, prep)
    rows = diff_rows(old_report, new_report, seed=report.config.seed)
    console = stdout_console(outputs.json_to_stdout)
    console.print(diff_table(rows, f"{new} vs baseline {old}"))
    if report.baseline is not None and report.baseline.differences:
        console.print(
            "warning: the environments differ, so timing comparisons may not "
            "transfer: " + "; ".join(report.baseline.differences),
            style="yellow",
        )
    if report.gates:
        console.print(gates_table(report))
    saved = outputs.write(report, strict=gate_opts.strict)
    warn_inconclusive(report)
    if report.gate_status == "fail":
        failed = ", ".join(failed_gates(report, gate_opts.strict))
        sys.stderr.write(f"loaderprof: gate failed: {failed}\n")
        return int(ExitCode.GATE_FAILED)
    return saved_code(saved)


def diff_rows(old: Any, new: Any, *, seed: int) -> list[tuple[str, str, str, str, str]]:
    """(metric, baseline, new, new ÷ baseline [CI], p) for each metric both reports have."""
    from loaderprof.analysis.comparison import diff_reports
    from loaderprof.analysis.gates import format_value
    from loaderprof.report.rows import fmt_ratio_interval

    return [
        (
            d.metric,
            format_value(d.metric, d.baseline),
            format_value(d.metric, d.new),
            fmt_ratio_interval(d.ratio),
            "–" if d.p_value is None else f"{d.p_value:.3g}",
        )
        for d in diff_reports(old, new, seed=seed)
    ]
