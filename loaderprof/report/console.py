"""Rich tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from loaderprof.analysis.capacity import NodeMemoryEstimate
from loaderprof.model.command import CommandReport
from loaderprof.model.metrics import Stat
from loaderprof.model.results import ARM_LABEL, ArmResult, Finding, Report
from loaderprof.report.datawait import COMPARE_HEAD, compare_wait_rows
from loaderprof.report.partial import NOT_MEASURED, unmeasured_arms
from loaderprof.report.rows import (
    ARM_SHORT,
    REUSED,
    SummaryRow,
    caption,
    evidence_items,
    fmt_ratio_interval,
    fmt_stat,
    gates_caption,
    interval_text,
    loader_text,
    plan_text,
    shown_words,
    summary_rows,
)
from loaderprof.report.tables import titled
from loaderprof.report.trial_tables import epochs_table, workers_table
from loaderprof.report.wrap import keep_figures_whole
from loaderprof.units import byte_unit, fmt_bytes, fmt_seconds, plural, time_unit

# Every screen is built from this module's pieces: however a command or a test
# renders one, its prose keeps each figure with its unit (report/wrap.py).
keep_figures_whole()

# The rows only a timed trial measures: "not measured" in an arm without one.
_TIMED = ("time", "rate")
VERDICT_STYLE = {"enable": "bold green", "keep_off": "bold red", "neutral": "bold yellow"}


def _reused(arm: ArmResult) -> str:
    return REUSED[arm.summary.workers_reused]


def _title(report: Report) -> str:
    return f"{report.config.dataset} · {loader_text(report)} · {plan_text(report)}"


def _stacked(text: str) -> str:
    """'329.0 ms ±9.6 ms (2)' as the median over its spread, '0.87 [0.65–1.17]' as the
    ratio over its interval: two lines that fit 80 columns, never a unit apart from
    its figure."""
    for mark in (" ±", " ["):
        text = text.replace(mark, "\n" + mark[1:], 1)
    return text


def summary_table(report: Report) -> Table:
    """One column per arm, one row per figure, and the comparison beside them."""
    t = titled(_title(report))
    t.add_column("")
    t.add_column(ARM_LABEL["persistent"], justify="right", no_wrap=True)
    t.add_column(ARM_LABEL["non_persistent"], justify="right", no_wrap=True)
    t.add_column("ratio or Δ", justify="right", style="italic", no_wrap=True)
    unmeasured = unmeasured_arms(report)
    for row in summary_rows(report):
        if row.section:
            t.add_section()
        cells = [
            NOT_MEASURED if row.kind in _TIMED and arm in unmeasured else text
            for arm, text in (
                ("persistent", row.persistent),
                ("non_persistent", row.non_persistent),
            )
        ]
        t.add_row(
            row.label,
            *map(_stacked, cells),
            _stacked(row.compared),
            style=row.emphasis or None,
        )
    t.caption = caption(report)
    t.caption_justify = "left"
    return t


def verdict_panel(report: Report) -> RenderableType:
    v = report.verdict
    if v is None:
        return Panel(
            Text("No verdict: not enough was measured.", style="bold yellow"),
            title="verdict",
            title_align="left",
        )
    head = Text()
    head.append(f"{v.recommendation.upper()}  ", style=VERDICT_STYLE[v.recommendation])
    head.append(v.headline)
    # A grid, so that a reason that wraps hangs under its own first word.
    reasons = Table.grid(padding=(0, 1))
    reasons.add_column(justify="right", width=2)
    reasons.add_column(ratio=1)
    for reason in v.reasons:
        reasons.add_row("•", reason)
    return Panel(
        Group(head, reasons),
        title="verdict",
        title_align="left",
        border_style=VERDICT_STYLE[v.recommendation].split()[-1],
    )


def render(report: Report, *, verbose: bool = False) -> RenderableType:
    """See NOTE [one screen]. The brief layout by default, everything with `verbose`."""
    parts: list[RenderableType] = (
        [summary_table(report), epochs_table(report), lifelines_table(report)]
        if verbose
        else [Text(_title(report)), brief_summary_table(report), brief_lifelines(report)]
    )
    parts += distributed_tables(report)
    if verbose:
        parts.append(workers_table(report))
    if report.projection is not None:
        parts.append(projection_text(report))
    parts.append(verdict_panel(report))
    parts += wait_block(report, verbose)
    parts += _checks(report, verbose)
    if report.gates:
        parts.append(gates_table(report))
    parts += _warnings(report, verbose)
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


def wait_block(report: Report, verbose: bool) -> list[RenderableType]:
    """See NOTE [data wait]. Its rows in a grid, so that a row that wraps hangs under
    its own text, as the verdict's reasons do."""
    rows = compare_wait_rows(report, cold=verbose)
    if not rows:
        return []
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for label, text in rows:
        grid.add_row(f"  {label}" if label else "  →", text)
    return [Text(COMPARE_HEAD), grid]


def _checks(report: Report, verbose: bool) -> list[RenderableType]:
    if report.findings:
        return [findings_panel(report.findings) if verbose else brief_findings(report.findings)]
    if not any(t.epochs for arm in report.arms.values() for t in arm.trials):
        return []
    from loaderprof.checks.catalogue import ran as checks_ran

    ran = checks_ran(report.findings_checked)
    if not ran:
        return [Text("lifecycle checks: none had the data to run", style="yellow")]
    names = ", ".join(ran) if verbose else f"{plural(len(ran), 'check')} ran; -v names them"
    return [Text(f"lifecycle checks: no findings ({names})", style="green")]


def _warnings(report: Report, verbose: bool) -> list[RenderableType]:
    lines = [f"warning: {w}" for w in report.warnings]
    if report.baseline is not None and report.baseline.differences:
        lines.insert(
            0,
            "warning: the environment differs from the baseline, so timing gates may not "
            "transfer (memory gates still apply): " + "; ".join(report.baseline.differences),
        )
    shown = lines if verbose else lines[:BRIEF_WARNINGS]
    out: list[RenderableType] = [Text(line, style="yellow") for line in shown]
    if len(lines) > len(shown):
        more = plural(len(lines) - len(shown), "more warning")
        out.append(Text(f"… {more} (-v)", style="yellow"))
    return out


# NOTE [one screen]: what `compare`, `check` and `report` print by default: the
# header, one summary table whose cells never wrap at 80 columns (one unit per row,
# the spread in the same unit), the lifelines in a line per arm, the verdict, the
# findings without their evidence, and at most three warnings. -v prints it all.
BRIEF_WARNINGS = 3


def _row_unit(row: SummaryRow) -> tuple[str, float]:
    return unit_of(row.kind, row.stats or ())


def unit_of(kind: str, stats: Sequence[Stat | None]) -> tuple[str, float]:
    """The unit these figures read best in, and the factor to it."""
    values = [abs(v) for st in stats if st is not None for v in (st.median, st.iqr / 2)]
    top = max(values, default=0.0)
    if kind == "time":
        return time_unit(top)
    if kind == "bytes":
        name, size = byte_unit(top)
        return name, 1 / size
    return ("k/s", 1e-3) if top >= 10_000 else ("/s", 1.0)


def num(v: float) -> str:
    a = abs(v)
    if a < 0.005:  # what two decimals show as 0.00 (or −0.00)
        return "0"
    return f"{v:,.0f}" if a >= 100 else (f"{v:.1f}" if a >= 1 else f"{v:.2f}")


def cell(stat: Stat | None, k: float) -> str:
    if stat is None:
        return "–"
    half = stat.iqr / 2 * k
    # A spread below what two decimals show is not none: "±0" is kept for none at all.
    shown = "<0.01" if half > 0 and num(half) == "0" else num(half)
    spread = "" if stat.n == 1 else f" ±{shown}"
    return f"{num(stat.median * k)}{spread}"


def _compared(row: SummaryRow, k: float) -> str:
    if row.kind == "time":
        return fmt_ratio_interval(row.ratio) if row.ratio else row.compared
    a, b = row.stats or (None, None)
    if row.kind != "bytes" or a is None or b is None:
        return ""
    d = (a.median - b.median) * k
    return "±0" if num(d) == "0" else f"{'+' if d > 0 else '−'}{num(abs(d))}"


def brief_summary_table(report: Report) -> Table:
    """The summary's rows that carry figures, each in its own unit, never wrapped."""
    t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("")
    t.add_column("")
    for label in ARM_SHORT.values():
        t.add_column(label, justify="right", no_wrap=True)
    t.add_column("ratio or Δ", justify="right", style="italic", no_wrap=True)
    unmeasured = unmeasured_arms(report)
    for row in summary_rows(report):
        if not row.brief or not row.stats or not row.kind:
            continue
        unit, k = _row_unit(row)
        cells = [
            NOT_MEASURED if row.kind in _TIMED and arm in unmeasured else cell(stat, k)
            for arm, stat in zip(ARM_SHORT, row.stats, strict=True)
        ]
        if all(c in (NOT_MEASURED, "–") for c in cells):
            unit = ""  # no figure to read in it
        t.add_row(row.label, unit, *cells, _compared(row, k), style=row.emphasis or None)
    more = "-v: n, epochs, RSS, main process"
    t.caption = f"median ± half IQR · {interval_text(report, brief=True)} · {more}"
    t.caption_justify = "left"
    return t


def brief_lifelines(report: Report) -> Text:
    """One line per arm: each distinct lifeline and how many workers lived it."""
    per_arm: dict[str, list[str]] = {}
    for arm, _, marks, _ in lifeline_rows(report):
        per_arm.setdefault(arm, []).append(marks)
    text = Text(f"lifelines ({shown_words(report)}; ● new process, ━ same as before)")
    reused = {ARM_LABEL[name]: _reused(arm) for name, arm in report.arms.items()}
    for arm, lines in per_arm.items():
        counts = ", ".join(f"{m} ×{lines.count(m)}" for m in dict.fromkeys(lines))
        text.append(f"\n  {arm:<15} {counts}  (workers reused: {reused[arm]})")
    return text


def brief_findings(findings: Sequence[Finding]) -> RenderableType:
    """Each finding's title and fix in a grid, so that a line that wraps hangs under
    its own text rather than at the screen's edge."""
    grid = Table.grid()
    grid.add_column(width=8, no_wrap=True)
    grid.add_column()
    for f in findings:
        grid.add_row(
            Text(f.severity.upper(), style=_SEVERITY_STYLE[f.severity]),
            Text(f"{f.title}  [{f.id}]"),
        )
        grid.add_row("", Text(f"fix: {f.fix}", style="dim"))
    return Group(grid, Text("(-v or the JSON: each finding's evidence)", style="dim"))


def print_report(report: Report, console: Console, *, verbose: bool = False) -> None:
    console.print(render(report, verbose=verbose))


_GATE_STYLE = {"pass": "green", "fail": "bold red", "inconclusive": "yellow", "skipped": "dim"}


def _gate_name(g: Any) -> str:
    """The gate as written, broken after its arm's prefix so a narrow column wraps
    there and never mid-word."""
    head, dot, rest = g.gate.partition(".")
    return f"{head}.\n  {rest}" if dot and ":" not in head else g.gate


def gates_table(report: Report | CommandReport) -> RenderableType:
    """The gates as written (their limits in them), so the table fits 80 columns; a
    relative gate's limit is spelled out (× baseline) in a column of its own."""
    from loaderprof.analysis.gates import format_result

    relative = any(g.mode == "rel" for g in report.gates)
    t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("result", no_wrap=True)
    t.add_column("gate", no_wrap=True)
    # A row whose interval is at another level names it (the steady epoch's look).
    looked = any(g.confidence != 0.95 and g.has_interval and g.informative for g in report.gates)
    t.add_column("value [CI]" if looked else "value [95 % CI]", justify="right", no_wrap=True)
    if relative:
        t.add_column("limit", justify="right", no_wrap=True)
    for g in report.gates:
        shown, limit = format_result(g)
        cells: list[Text | str] = [
            Text(g.status, style=_GATE_STYLE[g.status]),
            _gate_name(g),
            shown,
        ]
        t.add_row(*cells, *([limit if g.mode == "rel" else ""] if relative else []))
    t.caption = gates_caption(report.gates)
    t.caption_justify = "left"
    return Group(Text(f"Gates: {(report.gate_status or '').upper()}"), t)


def diff_table(rows: list[tuple[str, str, str, str, str]], title: str) -> RenderableType:
    """rows: (metric, baseline, new, new ÷ baseline [CI], p), grouped by arm; the
    metrics keep their gate names (what --gate takes) without the arm's prefix."""
    t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("metric (gate name)", no_wrap=True)
    t.add_column("baseline", justify="right", no_wrap=True)
    t.add_column("new", justify="right", no_wrap=True)
    t.add_column("new ÷ baseline\n[95 % CI]", justify="right", no_wrap=True)
    t.add_column("p", justify="right", no_wrap=True)
    arm = None
    for metric, *cells in rows:
        head, dot, name = metric.partition(".")
        if dot and head != arm:
            arm = head
            t.add_row(Text(f"{head}.", style="bold"), "", "", "", "")
        t.add_row(f"  {name}" if dot else metric, *cells)
    return Group(Text(title), t)


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
        evidence = ", ".join(f"{k}={v}" for k, v in evidence_items(f.evidence))
        body.append(f"        evidence: {evidence}\n", style="dim")
        body.append(f"        fix: {f.fix}")
    return Panel(body, title=title, title_align="left", border_style="yellow")


def lifeline_rows(report: Report) -> list[tuple[str, int, str, str]]:
    """(arm, worker id, one mark per epoch, processes) for the first trial of each arm.

    ● a new process served that slot this epoch; ━ the same process as before;
    · nothing served by that slot."""
    rows = []
    for name in ("persistent", "non_persistent"):
        t = report.arms[name].shown_trial
        if t is None:
            continue
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
    t = titled(f"Lifelines, {shown_words(report)} (● new, ━ same)")
    t.add_column("arm")
    t.add_column("worker", justify="right")
    t.add_column("epochs 1..N")
    t.add_column("processes", justify="right")
    for arm, wid, marks, procs in lifeline_rows(report):
        t.add_row(arm, str(wid), marks, procs)
    return t


def _plain(columns: Sequence[str], text: Sequence[str]) -> Table:
    """A borderless table that fits 80 columns: the `text` columns fold (a long host
    name), the figures never wrap (NOTE [one screen])."""
    t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for col in columns:
        if col in text:
            t.add_column(col, overflow="fold")
        else:
            t.add_column(col, justify="right", no_wrap=True)
    return t


def distributed_tables(report: Report) -> list[RenderableType]:
    d = report.distributed
    if d is None:
        return []
    ranks = ("rank", "host", "steady\np", "steady\nnp", "first\nbatch p", "peak USS\n/ worker p")
    t = _plain((*ranks, "workers"), text=("host",))
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
    epochs = sorted({s.epoch for s in d.slowest})
    slow = _plain(("arm", *(f"epoch {e}" for e in epochs)), text=("arm",))
    for arm in ("persistent", "non_persistent"):
        cells = {
            s.epoch: f"rank {s.rank}\n({fmt_seconds(s.wall_s)})" for s in d.slowest if s.arm == arm
        }
        slow.add_row(ARM_SHORT[arm], *[cells.get(e, "–") for e in epochs])
    per_node = ("host", "ranks", "arm", "worker\nprocesses", "PSS total\n(all ranks)")
    nodes = _plain((*per_node, "idle worker\nUSS held"), text=("host", "ranks", "arm"))
    for node in d.nodes:
        for arm, tot in node.arms.items():
            nodes.add_row(
                node.host,
                ",".join(map(str, node.ranks)),
                ARM_SHORT[arm],
                str(tot.worker_processes),
                fmt_bytes(tot.pss_total_bytes),
                fmt_bytes(tot.idle_workers_uss_bytes),
            )
    return [
        Text(f"Ranks ({d.world_size}) · p: persistent, np: non-persistent"),
        t,
        Text("Slowest rank per epoch (the one the job waits for)"),
        slow,
        Text("Per node"),
        nodes,
    ]


def plan_table(proj: NodeMemoryEstimate, *, ranks: int, num_workers: int, arm: str) -> Table:
    """`loaderprof plan`: what was measured and what it projects to."""
    t = titled(
        f"Host memory for {plural(ranks, 'rank')} × {plural(num_workers, 'worker')} "
        f"({ARM_LABEL.get(arm, arm)})"
    )
    t.add_column("")
    t.add_column("bytes", justify="right")
    rows = [
        ("measured: one rank's process tree (peak PSS total)", proj.rank_total_pss_bytes),
        ("measured: peak USS per worker", proj.per_worker_uss_bytes),
        (f"projected: one rank with {plural(num_workers, 'worker')}", proj.per_rank_bytes),
    ]
    for label, value in rows:
        t.add_row(label, fmt_bytes(value))
    node = f"projected: node with {plural(ranks, 'rank')}"
    t.add_row(node, fmt_bytes(proj.node_bytes), style="bold")
    if proj.limit_bytes:
        t.add_row(f"this machine's {proj.limit_source}", fmt_bytes(proj.limit_bytes))
    return t


def projection_text(report: Report) -> Text:
    """See NOTE [short epochs]. What the verdict's full epochs were projected from."""
    proj = report.projection
    assert proj is not None
    if proj.unavailable:
        return Text(f"short epochs: {proj.unavailable}", style="yellow")
    arms = "; ".join(
        f"{ARM_LABEL[name]} {fmt_stat(proj.steady_epoch_s.get(name), fmt_seconds)} "
        f"({fmt_stat(proj.batch_interval_s.get(name), fmt_seconds)} per batch)"
        for name in ("persistent", "non_persistent")
    )
    return Text(
        f"short epochs: measured {proj.max_batches} of {plural(proj.full_batches, 'batch')} "
        "per epoch; "
        f"the verdict compares full steady epochs projected from each epoch's per-batch time: "
        f"{arms}. Memory figures cover only the batches seen.",
        style="cyan",
    )
