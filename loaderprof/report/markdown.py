"""Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import shlex

from loaderprof.model.results import ARM_LABEL, Report
from loaderprof.model.watch import WatchReport
from loaderprof.report.datawait import COMPARE_HEAD, WATCH_HEAD, compare_wait_rows, watch_wait_line
from loaderprof.report.rows import (
    LOADER_REUSED,
    caption,
    epoch_count,
    evidence_items,
    loader_text,
    most_workers,
    plan_text,
    summary_rows,
)
from loaderprof.units import fmt_bytes, fmt_seconds, plural

_ICON = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "skipped": "⏭️"}
_VERDICT = {"enable": "✅ enable", "keep_off": "⛔ keep off", "neutral": "➖ neutral"}


def to_markdown(report: Report) -> str:
    lines = [
        f"### loaderprof: `{report.config.dataset}`",
        "",
        f"{loader_text(report)} · {plan_text(report)} · "
        f"torch {report.environment.get('torch')} · "
        f"{plural(report.environment.get('cpu_count'), 'CPU')}",
        "",
    ]
    if report.verdict is not None:
        v = report.verdict
        lines += [f"**{_VERDICT[v.recommendation]}**: {v.headline}", ""]
        lines += [f"- {r}" for r in v.reasons]
        lines.append("")
    lines += [
        f"| | {ARM_LABEL['persistent']} | {ARM_LABEL['non_persistent']} | ratio or Δ |",
        "|---|---:|---:|---:|",
    ]
    for row in summary_rows(report):
        if row.emphasis == "bold":
            cells = [f"**{c}**" if c else c for c in (row.label, row.compared)]
            label, compared = cells
        else:
            label, compared = row.label, row.compared
        lines.append(f"| {label} | {row.persistent} | {row.non_persistent} | {compared} |")
    lines += ["", f"<sub>{caption(report)}</sub>", ""]
    wait = compare_wait_rows(report, cold=True)
    if wait:
        lines += [COMPARE_HEAD, ""]
        lines += [f"- **{label}**: {text}" if label else f"- {text}" for label, text in wait]
        lines.append("")
    if report.findings:
        icon = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}
        lines += ["#### Lifecycle findings", ""]
        for f in report.findings:
            evidence = ", ".join(f"{k}={v}" for k, v in evidence_items(f.evidence))
            lines += [
                f"- {icon[f.severity]} **{f.title}** (`{f.id}`)",
                f"  - evidence: {evidence}",
                f"  - fix: {f.fix}",
            ]
        lines.append("")
    if report.gates:
        status = (report.gate_status or "").upper()
        lines += [
            f"#### Gates: {status}",
            "",
            "| | gate | value [95 % CI] | limit | result |",
            "|---|---|---:|---:|---|",
        ]
        from loaderprof.analysis.gates import format_result

        for g in report.gates:
            shown, limit = format_result(g)
            lines.append(f"| {_ICON[g.status]} | `{g.gate}` | {shown} | {limit} | {g.status} |")
        lines.append("")
    if report.baseline is not None:
        lines.append(f"Baseline: `{report.baseline.path}` ({report.baseline.created})")
        if report.baseline.differences:
            lines.append(
                "environment differs from the baseline (timing gates may not "
                "transfer): " + "; ".join(report.baseline.differences)
            )
        lines.append("")
    for w in report.warnings:
        lines.append(f"> ⚠️ {w}")
    if not report.complete:
        lines.append("> ❌ **incomplete**: some trials failed or were stopped")
    for e in report.errors:
        lines.append(f"> ❌ {e.message}")
    return "\n".join(lines).rstrip() + "\n"


def watch_markdown(report: WatchReport) -> str:
    """A watched run: its loaders in one table, then its findings."""
    lines = [
        f"### loaderprof watch: `{shlex.join(report.command)}`",
        "",
        f"Exit status {report.exit_code} · {fmt_seconds(report.wall_s)} · "
        f"{plural(len(report.loaders), 'DataLoader')} · most worker processes at once: "
        f"{most_workers(report.peak_worker_processes)}",
        "",
        "| loader | built at | workers | persistent | epochs | reused | steady epoch | "
        "peak USS / worker |",
        "|---|---|---:|---|---:|---|---:|---:|",
    ]
    for ld in report.loaders:
        steady = fmt_seconds(ld.steady_epoch_s.median) if ld.steady_epoch_s else "–"
        peak = fmt_bytes(ld.peak_worker_uss_bytes) if ld.peak_worker_uss_bytes else "–"
        reused = LOADER_REUSED[ld.workers_reused]
        lines.append(
            f"| {ld.id} | `{ld.site}` | {ld.num_workers} | "
            f"{'yes' if ld.persistent_workers else 'no'} | {epoch_count(ld)} | {reused} | "
            f"{steady} | {peak} |"
        )
    lines.append("")
    waits = [line for ld in report.loaders if (line := watch_wait_line(ld))]
    if waits:
        lines += [WATCH_HEAD, ""]
        lines += [f"- {line}" for line in waits] + [""]
    if report.findings:
        lines.append("**Findings**")
        lines.append("")
        lines += [f"- **{f.severity}** `{f.id}`: {f.title}. Fix: {f.fix}" for f in report.findings]
    else:
        lines.append("No findings.")
    if report.warnings:
        lines.append("")
        lines += [f"> ⚠️ {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"
