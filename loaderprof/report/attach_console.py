"""`loaderprof watch --pid`'s screen and Markdown: pure functions of the AttachReport,
sized for 80 columns."""

from __future__ import annotations

import shlex

from rich.console import Group, RenderableType
from rich.text import Text

from loaderprof.model.attached import AttachedPool, AttachReport
from loaderprof.report.console import findings_panel
from loaderprof.report.tables import titled
from loaderprof.units import fmt_bytes, fmt_pct, fmt_seconds, plural

# Characters of the pool timeline: what is left of 80 columns after the pool's name.
_WIDTH = 60
_PERSISTENT = {True: "yes", False: "no", None: "–"}
_FROM = {"pool births": "births", "CPU activity": "CPU"}


def _bytes(v: int | None) -> str:
    return fmt_bytes(v) if v else "–"


def _workers(pool: AttachedPool) -> str:
    return f"{pool.workers} ×{len(pool.generations)}" if pool.rebuilt else str(pool.workers)


def _epochs(pool: AttachedPool) -> str:
    if not pool.epochs_from:
        return "–"
    return f"{pool.epochs_inferred} ({_FROM.get(pool.epochs_from, pool.epochs_from)})"


def watched_s(report: AttachReport) -> float:
    """Until the job exited, not the look for workers it left behind after it."""
    return report.job_exited_s if report.job_exited_s is not None else report.wall_s


def head(report: AttachReport) -> str:
    ended = {
        "job exit": "ended when the job exited",
        "duration": "ended at --duration",
        "interrupt": "ended by a signal",
    }
    watched = watched_s(report)
    return (
        f"loaderprof watch --pid {report.pid}: {shlex.join(report.command)}\n"
        f"watched {fmt_seconds(watched)} from outside, "
        f"{ended.get(report.ended_by, report.ended_by)} · {plural(len(report.pools), 'pool')} "
        f"· at most {plural(report.peak_worker_processes, 'worker')} at once · "
        f"reading took {fmt_pct(report.duty_cycle or 0, 1)} of a CPU"
    )


def pools_table(report: AttachReport) -> RenderableType:
    t = titled("Worker pools (epochs are inferred)")
    for col, just in (
        ("pool", "left"),
        ("workers", "right"),
        ("start", "left"),
        ("persists", "left"),
        ("epochs", "right"),
        ("peak USS", "right"),
        ("idle USS", "right"),
    ):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for p in report.pools:
        t.add_row(
            p.id,
            _workers(p),
            p.start_method or "?",
            _PERSISTENT[p.persistent],
            _epochs(p),
            _bytes(p.peak_uss_bytes),
            _bytes(p.idle_uss_bytes),
        )
    return t


def timeline(report: AttachReport) -> RenderableType:
    """When each pool's workers were alive over the watch: one row per pool."""
    span = watched_s(report)
    t = titled(f"Pools over the watch (0 … {fmt_seconds(span)})")
    t.add_column("pool")
    # Full width, blanks kept: the right edge is the job's exit, for every bar.
    t.add_column("alive", no_wrap=True, min_width=_WIDTH)
    scale = _WIDTH / span if span > 0 else 0.0
    for p in report.pools:
        cells = [" "] * _WIDTH
        for g in p.generations:
            lo = min(_WIDTH - 1, max(0, int(g.born_s * scale)))
            end = report.wall_s if g.ended_s is None else g.ended_s
            hi = min(_WIDTH, max(lo + 1, int(end * scale)))
            cells[lo:hi] = "━" * (hi - lo)
        t.add_row(p.id, "".join(cells))
    return t


def other_lines(report: AttachReport) -> list[str]:
    """The main process, /dev/shm, the helpers and the workers left behind."""
    lines = [
        f"main process {report.pid}: peak USS {_bytes(report.main_peak_uss_bytes)}, "
        f"PSS {_bytes(report.main_peak_pss_bytes)}"
    ]
    if report.shm_size_bytes:
        lines.append(
            f"/dev/shm: at most {_bytes(report.shm_peak_used_bytes)} used of "
            f"{fmt_bytes(report.shm_size_bytes)} (the machine's, not the job's alone)"
        )
    if report.helpers:
        shown = ", ".join(f"{h.role} ({h.pid})" for h in report.helpers)
        lines.append(f"not workers: {shown}")
    if report.left_behind_pids:
        pids = ", ".join(str(p) for p in report.left_behind_pids)
        lines.append(f"left behind after the job exited: {pids}")
    return lines


def render(report: AttachReport) -> RenderableType:
    parts: list[RenderableType] = [Text(head(report))]
    if report.pools:
        parts += [pools_table(report), timeline(report)]
    else:
        parts.append(Text("no worker pool was seen (a job with num_workers=0, or none yet)"))
    parts.append(Text("\n".join(other_lines(report))))
    if report.findings:
        parts.append(findings_panel(report.findings, title="findings"))
    else:
        parts.append(Text("findings: none"))
    not_seen = "; ".join(report.not_seen)
    parts.append(Text(f"not seen from outside: {not_seen}", style="dim"))
    return Group(*parts)


def attach_markdown(report: AttachReport) -> str:
    """The pools in one table, then the findings and what could not be seen."""
    first, second = head(report).split("\n")
    lines = [
        f"### {first}",
        "",
        second,
        "",
        "| pool | workers | start | persists | epochs (inferred) | peak USS | peak PSS | "
        "idle USS |",
        "|---|---:|---|---|---:|---:|---:|---:|",
    ]
    for p in report.pools:
        lines.append(
            f"| {p.id} | {_workers(p)} | {p.start_method or '?'} | "
            f"{_PERSISTENT[p.persistent]} | {_epochs(p)} | {_bytes(p.peak_uss_bytes)} | "
            f"{_bytes(p.peak_pss_bytes)} | {_bytes(p.idle_uss_bytes)} |"
        )
    lines += ["", *[f"- {line}" for line in other_lines(report)], ""]
    if report.findings:
        lines += ["**Findings**", ""]
        lines += [
            f"- **{f.severity}** `{f.id}`: {f.title}. Not seen: {f.evidence.get('not_seen', '–')}. "
            f"Fix: {f.fix}"
            for f in report.findings
        ]
    else:
        lines.append("No findings.")
    lines += ["", f"Not seen from outside: {'; '.join(report.not_seen)}."]
    return "\n".join(lines) + "\n"
