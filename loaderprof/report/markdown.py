"""Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from loaderprof.model.results import ARM_LABEL, Report
from loaderprof.report.rows import caption, loader_text, plan_text, summary_rows

_ICON = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "skipped": "⏭️"}
_VERDICT = {"enable": "✅ enable", "keep_off": "⛔ keep off", "neutral": "➖ neutral"}


def to_markdown(report: Report) -> str:
    cfg = report.config
    lines = [
        f"### loaderprof: `{cfg['dataset']}`",
        "",
        f"{loader_text(report)} · {plan_text(report)} · "
        f"torch {report.environment.get('torch')} · {report.environment.get('cpu_count')} CPUs",
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
    if report.findings:
        icon = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}
        lines += ["#### Lifecycle findings", ""]
        for f in report.findings:
            evidence = ", ".join(f"{k}={v}" for k, v in f.evidence.items())
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
