"""Markdown for a pull-request comment or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from collections.abc import Callable

from loaderprof.results import Ratio, Report, Stat
from loaderprof.units import fmt_bytes, fmt_seconds

_ICON = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "skipped": "⏭️"}
_VERDICT = {"enable": "✅ enable", "keep_off": "⛔ keep off", "neutral": "➖ neutral"}


def _stat(s: Stat | None, fmt: Callable[[float], str]) -> str:
    if s is None:
        return "–"
    if s.n == 1:
        return f"{fmt(s.median)} (n=1)"
    return f"{fmt(s.median)} ± {fmt(s.iqr / 2)} (n={s.n})"


def _ratio(r: Ratio | None) -> str:
    return "–" if r is None else f"{r.value:.2f} [{r.ci_low:.2f}–{r.ci_high:.2f}]"


def _delta(a: Stat | None, b: Stat | None) -> str:
    return "–" if a is None or b is None else fmt_bytes(a.median - b.median, signed=True)


def to_markdown(report: Report) -> str:
    cfg = report.config
    lo = cfg["loader"]
    method = report.environment.get("start_method") or lo["mp_context"] or "default"
    p, n = report.arms["persistent"].summary, report.arms["non_persistent"].summary
    c = report.comparison
    reused = {True: "yes", False: "no", None: "unclear"}
    lines = [
        f"### loaderprof: `{cfg['dataset']}`",
        "",
        f"{lo['num_workers']} workers · batch {lo['batch_size']} · {method} · "
        f"{cfg['epochs']} epochs × {cfg['trials']} trials per arm · "
        f"torch {report.environment.get('torch')} · {report.environment.get('cpu_count')} CPUs",
        "",
    ]
    if report.verdict is not None:
        v = report.verdict
        lines += [f"**{_VERDICT[v.recommendation]}**: {v.headline}", ""]
        lines += [f"- {r}" for r in v.reasons]
        lines.append("")
    lines += [
        "| | persistent | non-persistent | ratio or Δ |",
        "|---|---:|---:|---:|",
        f"| workers reused | {reused[p.workers_reused]} | {reused[n.workers_reused]} | |",
        f"| cold epoch (1) | {_stat(p.cold_epoch_s, fmt_seconds)} | "
        f"{_stat(n.cold_epoch_s, fmt_seconds)} | {_ratio(c.cold_epoch_ratio) if c else '–'} |",
        f"| **steady epoch (2..N)** | {_stat(p.steady_epoch_s, fmt_seconds)} | "
        f"{_stat(n.steady_epoch_s, fmt_seconds)} | "
        f"**{_ratio(c.steady_epoch_ratio) if c else '–'}** |",
        f"| first batch (steady) | {_stat(p.first_batch_s, fmt_seconds)} | "
        f"{_stat(n.first_batch_s, fmt_seconds)} | {_ratio(c.first_batch_ratio) if c else '–'} |",
        f"| worker start-up | {_stat(p.worker_startup_s, fmt_seconds)} | "
        f"{_stat(n.worker_startup_s, fmt_seconds)} | |",
        f"| peak USS / worker | {_stat(p.peak_worker_uss_bytes, fmt_bytes)} | "
        f"{_stat(n.peak_worker_uss_bytes, fmt_bytes)} | "
        f"{_delta(p.peak_worker_uss_bytes, n.peak_worker_uss_bytes)} |",
        f"| peak PSS total | {_stat(p.peak_total_pss_bytes, fmt_bytes)} | "
        f"{_stat(n.peak_total_pss_bytes, fmt_bytes)} | "
        f"{_delta(p.peak_total_pss_bytes, n.peak_total_pss_bytes)} |",
        f"| **idle worker USS held** | {_stat(p.idle_workers_uss_bytes, fmt_bytes)} | "
        f"{_stat(n.idle_workers_uss_bytes, fmt_bytes)} | "
        f"**{_delta(p.idle_workers_uss_bytes, n.idle_workers_uss_bytes)}** |",
        "",
        "<sub>median ± half IQR (n) · ratio persistent ÷ non-persistent [95 % bootstrap CI] · "
        "USS: private memory (a worker's true cost) · PSS: shared pages split among users</sub>",
        "",
    ]
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
        from loaderprof.gates import format_result

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
