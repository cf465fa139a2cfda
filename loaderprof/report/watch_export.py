"""`watch` reports as JSON (kind "watch", its own schema) and Markdown: pure functions."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from loaderprof.model.results import to_dict
from loaderprof.model.units import fmt_bytes, fmt_seconds
from loaderprof.model.watch import WatchReport


def load_watch_schema() -> dict[str, Any]:
    text = resources.files("loaderprof").joinpath("schemas/watch-v1.schema.json").read_text()
    return dict(json.loads(text))


def to_json(report: WatchReport) -> str:
    return json.dumps(to_dict(report), indent=2, allow_nan=False)


def to_markdown(report: WatchReport) -> str:
    lines = [
        f"### loaderprof watch: `{' '.join(report.command)}`",
        "",
        f"Exit status {report.exit_code} · {fmt_seconds(report.wall_s)} · "
        f"{len(report.loaders)} DataLoader(s) · most worker processes at once: "
        f"{report.peak_worker_processes}",
        "",
        "| loader | built at | workers | persistent | epochs | reused | steady epoch | "
        "peak USS / worker |",
        "|---|---|---:|---|---:|---|---:|---:|",
    ]
    for ld in report.loaders:
        steady = fmt_seconds(ld.steady_epoch_s.median) if ld.steady_epoch_s else "–"
        peak = fmt_bytes(ld.peak_worker_uss_bytes) if ld.peak_worker_uss_bytes else "–"
        reused = {True: "yes", False: "no", None: "–"}[ld.workers_reused]
        lines.append(
            f"| {ld.id} | `{ld.site}` | {ld.num_workers} | "
            f"{'yes' if ld.persistent_workers else 'no'} | {len(ld.epochs)} | {reused} | "
            f"{steady} | {peak} |"
        )
    lines.append("")
    if report.findings:
        lines.append("**Findings**")
        lines.append("")
        lines += [f"- **{f.severity}** `{f.id}`: {f.title}. Fix: {f.fix}" for f in report.findings]
    else:
        lines.append("No findings.")
    return "\n".join(lines) + "\n"
