"""Rich tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from loaderprof.report.rows import (
    CAPTION,
    REUSED,
    fmt_stat,
    loader_text,
    plan_text,
    summary_rows,
)
from loaderprof.results import ARM_LABEL, ArmResult, Finding, Report
from loaderprof.units import fmt_bytes, fmt_seconds

VERDICT_STYLE = {"enable": "bold green", "keep_off": "bold red", "neutral": "bold yellow"}


def _sec(v: float) -> str:
    return fmt_seconds(v)


def _bytes(v: float) -> str:
    return fmt_bytes(v)


def _reused(arm: ArmResult) -> str:
    return REUSED[arm.summary.workers_reused]


def _title(report: Report) -> str:
    return f"{report.config['dataset']} · {loader_text(report)} · {plan_text(report)}"


def summary_table(report: Report) -> Table:
    """One column per arm, one row per figure, and the comparison beside them."""
    t = Table(title=_title(report), title_justify="left", header_style="bold")
    t.add_column("")
    t.add_column(ARM_LABEL["persistent"], justify="right")
    t.add_column(ARM_LABEL["non_persistent"], justify="right")
    t.add_column("ratio or Δ", justify="right", style="italic")
    for row in summary_rows(report):
        if row.section:
            t.add_section()
        t.add_row(
            row.label,
            row.persistent,
            row.non_persistent,
            row.compared,
            style=row.emphasis or None,
        )
    t.caption = CAPTION
    return t


def epochs_table(report: Report) -> Table:
    t = Table(
        title="Epoch wall times (first trial per arm; * = worker started that epoch)",
        title_justify="left",
        header_style="bold",
    )
    t.add_column("epoch", justify="right")
    for label in ("persist.", "non-pers."):
        t.add_column(label, justify="right")
        t.add_column("1st batch", justify="right")
        t.add_column("worker PIDs", overflow="fold", min_width=9)
    # Rows by epoch number, so an arm whose trial stopped early (or has a gap)
    # shows "–" in the epochs it lacks instead of shifting the later ones up.
    by_epoch = [
        {e.epoch: e for e in report.arms[n].trials[0].epochs} if report.arms[n].trials else {}
        for n in ("persistent", "non_persistent")
    ]

    def pids(served: tuple[int, ...], new: tuple[int, ...]) -> str:
        # Every PID that started this epoch carries its own star; one that started
        # but served no batch is listed too (after those that did).
        shown = list(served) + [p for p in new if p not in served]
        if not shown:
            return "–"
        cells = [f"{p}*" if p in new else str(p) for p in shown]
        if len(cells) <= 4:
            return " ".join(cells)
        hidden_new = sum(1 for p in shown[3:] if p in new)
        more = f" ({hidden_new}*)" if hidden_new else ""
        return f"{' '.join(cells[:3])} …+{len(cells) - 3}{more}"

    for epoch in sorted(set().union(*by_epoch)):
        row = [str(epoch)]
        for epochs in by_epoch:
            e = epochs.get(epoch)
            if e is None:
                row += ["–", "–", "–"]
                continue
            row += [
                fmt_seconds(e.wall_s),
                fmt_seconds(e.first_batch_s),
                pids(e.worker_pids, e.new_worker_pids),
            ]
        t.add_row(*row)
    return t


def workers_table(report: Report) -> Table:
    t = Table(
        title="Worker processes (times from trial start)", title_justify="left", header_style="bold"
    )
    for col in (
        "arm",
        "pid",
        "id",
        "epoch",
        "start→ready",
        "first batch",
        "exit",
        "batches",
        "USS at 1st batch",
        "USS",
        "PSS",
        "RSS",
    ):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name in ("persistent", "non_persistent"):
        for trial in report.arms[name].trials:
            for w in trial.workers:
                t.add_row(
                    f"{'p' if name == 'persistent' else 'np'}{trial.index + 1}",
                    str(w.pid),
                    str(w.worker_id),
                    str(w.first_epoch or "–"),
                    fmt_seconds(w.startup_s),
                    fmt_seconds(w.first_batch_s),
                    fmt_seconds(w.exited_s),
                    str(w.batches),
                    fmt_bytes(w.first_batch_uss_bytes),
                    fmt_bytes(w.peak_uss_bytes),
                    fmt_bytes(w.peak_pss_bytes),
                    fmt_bytes(w.peak_rss_bytes),
                )
    t.caption = (
        "arm p/np + trial number · USS at 1st batch: what starting cost the worker (a "
        "one-time copy), before reading adds anything · peaks over the worker's life"
    )
    return t


def verdict_panel(report: Report) -> RenderableType:
    v = report.verdict
    if v is None:
        return Panel(
            Text("No verdict: not enough was measured.", style="bold yellow"),
            title="verdict",
            title_align="left",
        )
    body = Text()
    body.append(f"{v.recommendation.upper()}  ", style=VERDICT_STYLE[v.recommendation])
    body.append(v.headline)
    for reason in v.reasons:
        body.append(f"\n • {reason}")
    return Panel(
        body,
        title="verdict",
        title_align="left",
        border_style=VERDICT_STYLE[v.recommendation].split()[-1],
    )


def render(report: Report, *, verbose: bool = False) -> RenderableType:
    parts: list[RenderableType] = [
        summary_table(report),
        epochs_table(report),
        lifelines_table(report),
        *distributed_tables(report),
    ]
    if verbose:
        parts.append(workers_table(report))
    if report.projection is not None:
        parts.append(projection_text(report))
    parts.append(verdict_panel(report))
    if report.findings:
        parts.append(findings_panel(report.findings))
    elif any(t.epochs for arm in report.arms.values() for t in arm.trials):
        from loaderprof.findings import checks_run

        ran = checks_run(report)
        parts.append(
            Text(f"lifecycle checks: no findings ({', '.join(ran)})", style="green")
            if ran
            else Text("lifecycle checks: none had the data to run", style="yellow")
        )
    if report.gates:
        parts.append(gates_table(report))
    if report.baseline is not None and report.baseline.differences:
        parts.append(
            Text(
                "warning: the environment differs from the baseline, so timing gates "
                "may not transfer (memory gates still apply): "
                + "; ".join(report.baseline.differences),
                style="yellow",
            )
        )
    for w in report.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    if not report.complete:
        parts.append(
            Text(
                "incomplete: some trials failed or were stopped; figures cover "
                "the trials that finished",
                style="bold red",
            )
        )
    for e in report.errors:
        parts.append(Text(f"error: {e.message}", style="red"))
    return Group(*parts)


def print_report(report: Report, console: Console, *, verbose: bool = False) -> None:
    console.print(render(report, verbose=verbose))


_GATE_STYLE = {"pass": "green", "fail": "bold red", "inconclusive": "yellow", "skipped": "dim"}


def gates_table(report: Report) -> Table:
    t = Table(
        title=f"Gates: {(report.gate_status or '').upper()}",
        title_justify="left",
        header_style="bold",
    )
    t.add_column("result")
    t.add_column("gate", overflow="fold")
    t.add_column("value [95 % CI]", justify="right")
    t.add_column("limit", justify="right")
    from loaderprof.gates import format_result

    for g in report.gates:
        shown, limit = format_result(g)
        t.add_row(Text(g.status, style=_GATE_STYLE[g.status]), g.gate, shown, limit)
    t.caption = (
        "fail: the whole interval is past the limit · inconclusive: the median is past "
        "it but the interval straddles it (fails only with --strict)"
    )
    return t


def diff_table(rows: list[tuple[str, str, str, str, str]], title: str) -> Table:
    """rows: (metric, baseline, new, new ÷ baseline [CI], p)."""
    t = Table(title=title, title_justify="left", header_style="bold")
    t.add_column("metric", overflow="fold", min_width=24)
    t.add_column("baseline", justify="right")
    t.add_column("new", justify="right")
    t.add_column("new ÷ baseline [95 % CI]", justify="right")
    t.add_column("Mann-Whitney p", justify="right")
    for row in rows:
        t.add_row(*row)
    return t


_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def findings_panel(
    findings: Sequence[Finding], title: str = "lifecycle findings"
) -> RenderableType:
    body = Text()
    for i, f in enumerate(findings):
        if i:
            body.append("\n")
        body.append(f"{f.severity.upper():<8}", style=_SEVERITY_STYLE[f.severity])
        body.append(f"{f.title}  [{f.id}]\n")
        evidence = ", ".join(f"{k}={v}" for k, v in f.evidence.items())
        body.append(f"        evidence: {evidence}\n", style="dim")
        body.append(f"        fix: {f.fix}")
    return Panel(body, title=title, title_align="left", border_style="yellow")


def lifeline_rows(report: Report) -> list[tuple[str, int, str, str]]:
    """(arm, worker id, one mark per epoch, processes) for the first trial of each arm.

    ● a new process served that slot this epoch; ━ the same process as before;
    · nothing served by that slot."""
    rows = []
    for name in ("persistent", "non_persistent"):
        trials = report.arms[name].trials
        if not trials:
            continue
        t = trials[0]
        # The train loader's workers (a validation pool's are counted in the summary).
        train = [w for w in t.workers if w.loader == "train"]
        wid_of = {w.pid: w.worker_id for w in train}
        for wid in sorted({w.worker_id for w in train}):
            marks = []
            for e in t.epochs:
                pids = [p for p in e.worker_pids if wid_of.get(p) == wid]
                new = [p for p in e.new_worker_pids if wid_of.get(p) == wid]
                marks.append("●" if new else ("━" if pids else "·"))
            procs = [w.pid for w in train if w.worker_id == wid]
            shown = f"1 (pid {procs[0]})" if len(procs) == 1 else str(len(procs))
            rows.append((ARM_LABEL[name], wid, "".join(marks), shown))
    return rows


def lifelines_table(report: Report) -> Table:
    t = Table(
        title="Worker lifelines (first trial; ● new process, ━ same process as before)",
        title_justify="left",
        header_style="bold",
    )
    t.add_column("arm")
    t.add_column("worker", justify="right")
    t.add_column("epochs 1..N")
    t.add_column("processes", justify="right")
    for arm, wid, marks, procs in lifeline_rows(report):
        t.add_row(arm, str(wid), marks, procs)
    return t


def sweep_table(report: Any) -> RenderableType:
    """Configurations sorted by steady epoch, with the time × memory frontier marked."""
    t = Table(
        title=f"Sweep: {report.config['dataset']} · {report.config['epochs']} epochs × "
        f"{report.config['trials']} trial(s) per configuration",
        title_justify="left",
        header_style="bold",
    )
    for col in (
        "",
        "configuration",
        "steady epoch",
        "cold epoch",
        "first batch",
        "peak PSS total",
        "peak USS / worker",
    ):
        t.add_column(col, justify="left" if col in ("", "configuration") else "right")
    for p in report.points:
        s = p.summary
        t.add_row(
            "◆" if p.frontier else "",
            p.label + (" (failed)" if p.error else ""),
            fmt_stat(s.steady_epoch_s, _sec),
            fmt_stat(s.cold_epoch_s, _sec),
            fmt_stat(s.first_batch_s, _sec),
            fmt_stat(s.peak_total_pss_bytes, _bytes),
            fmt_stat(s.peak_worker_uss_bytes, _bytes),
        )
    t.caption = "◆ Pareto frontier of steady epoch time vs peak PSS total · median ± half IQR (n)"
    parts: list[RenderableType] = [t]
    body = Text()
    for i, reason in enumerate(report.recommendation.reasons):
        body.append(("\n" if i else "") + f"• {reason}")
    parts.append(Panel(body, title="recommendation", title_align="left", border_style="green"))
    for note in report.skipped:
        parts.append(Text(f"skipped: {note}", style="dim"))
    for w in report.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    return Group(*parts)


def distributed_tables(report: Report) -> list[RenderableType]:
    d = report.distributed
    if d is None:
        return []
    t = Table(title=f"Ranks ({d.world_size})", title_justify="left", header_style="bold")
    for col in (
        "rank",
        "host",
        "steady p",
        "steady np",
        "first batch p",
        "peak USS / worker p",
        "workers",
    ):
        t.add_column(col, justify="left" if col == "host" else "right")
    for r in d.ranks:
        p, n = r.arms.get("persistent"), r.arms.get("non_persistent")
        t.add_row(
            str(r.rank),
            r.host,
            fmt_seconds(p.steady_epoch_s) if p else "–",
            fmt_seconds(n.steady_epoch_s) if n else "–",
            fmt_seconds(p.first_batch_s) if p else "–",
            fmt_bytes(p.peak_worker_uss_bytes) if p else "–",
            str(len(p.worker_pids) + (len(n.worker_pids) if n else 0)) if p else "–",
        )
    slow = Table(
        title="Slowest rank per epoch (the one the job waits for)",
        title_justify="left",
        header_style="bold",
    )
    slow.add_column("arm")
    for e in sorted({s.epoch for s in d.slowest}):
        slow.add_column(f"epoch {e}", justify="right")
    for arm in ("persistent", "non_persistent"):
        cells = {
            s.epoch: f"rank {s.rank} ({fmt_seconds(s.wall_s)})" for s in d.slowest if s.arm == arm
        }
        slow.add_row(ARM_LABEL[arm], *[cells.get(e, "–") for e in sorted(cells)])
    nodes = Table(title="Per node", title_justify="left", header_style="bold")
    for col in (
        "host",
        "ranks",
        "arm",
        "worker processes",
        "PSS total (all ranks)",
        "idle worker USS held",
    ):
        nodes.add_column(col, justify="left" if col in ("host", "arm") else "right")
    for node in d.nodes:
        for arm, tot in node.arms.items():
            nodes.add_row(
                node.host,
                ",".join(map(str, node.ranks)),
                ARM_LABEL[arm],
                str(tot.worker_processes),
                fmt_bytes(tot.pss_total_bytes),
                fmt_bytes(tot.idle_workers_uss_bytes),
            )
    return [t, slow, nodes]


def plan_table(proj: Any, *, ranks: int, num_workers: int, arm: str) -> Table:
    """`loaderprof plan`: what was measured and what it projects to."""
    t = Table(
        title=f"Host memory for {ranks} rank(s) × {num_workers} workers "
        f"({ARM_LABEL.get(arm, arm)})",
        title_justify="left",
        header_style="bold",
    )
    t.add_column("")
    t.add_column("bytes", justify="right")
    rows = [
        ("measured: one rank's process tree (peak PSS total)", proj.rank_total_pss_bytes),
        ("measured: peak USS per worker", proj.per_worker_uss_bytes),
        (f"projected: one rank with {num_workers} workers", proj.per_rank_bytes),
    ]
    for label, value in rows:
        t.add_row(label, fmt_bytes(value))
    t.add_row(f"projected: node with {ranks} rank(s)", fmt_bytes(proj.node_bytes), style="bold")
    if proj.limit_bytes:
        t.add_row(f"this machine's {proj.limit_source}", fmt_bytes(proj.limit_bytes))
    return t


def projection_text(report: Report) -> Text:
    """NOTE [short epochs]: what the verdict's full epochs were projected from."""
    proj = report.projection
    assert proj is not None
    if proj.unavailable:
        return Text(f"short epochs: {proj.unavailable}", style="yellow")
    arms = "; ".join(
        f"{ARM_LABEL[name]} {fmt_stat(proj.steady_epoch_s.get(name), _sec)} "
        f"({fmt_stat(proj.batch_interval_s.get(name), _sec)} per batch)"
        for name in ("persistent", "non_persistent")
    )
    return Text(
        f"short epochs: measured {proj.max_batches} of {proj.full_batches} batches per epoch; "
        f"the verdict compares full steady epochs projected from each epoch's per-batch time: "
        f"{arms}. Memory figures cover only the batches seen.",
        style="cyan",
    )
