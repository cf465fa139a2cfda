"""The sweep's table for the terminal: configurations by steady epoch, the frontier
marked, and the recommendation with what it rests on (NOTE [partial reports])."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from loaderprof.model.units import fmt_bytes, fmt_seconds, plural
from loaderprof.report.console import cell, num, unit_of
from loaderprof.report.partial import point_note, sweep_basis, sweep_plan_words
from loaderprof.report.rows import fmt_stat
from loaderprof.report.tables import titled

# Headers a word or two per line, so the figures set the columns' widths.
_SWEEP_COLUMNS = (
    ("steady\nepoch", "steady_epoch_s", "time"),
    ("cold\nepoch", "cold_epoch_s", "time"),
    ("first\nbatch", "first_batch_s", "time"),
    ("peak PSS\ntotal", "peak_total_pss_bytes", "bytes"),
    ("USS per\nworker", "peak_worker_uss_bytes", "bytes"),
)
_FRONTIER = "◆ Pareto frontier of steady epoch time vs peak PSS total"


def sweep_table(report: Any, *, verbose: bool = False) -> RenderableType:
    """Configurations sorted by steady epoch, with the time × memory frontier marked:
    NOTE [one screen] one unit per column, medians (the steady epoch with its
    spread); `verbose` shows every figure with its spread and count."""
    if verbose:
        return _sweep_full(report)
    title = Text(_title(report))
    t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("")
    t.add_column("configuration", no_wrap=True)
    units = []
    for label, attr, kind in _SWEEP_COLUMNS:
        unit, k = unit_of(kind, [getattr(p.summary, attr) for p in report.points])
        units.append(k)
        t.add_column(f"{label}\n{unit}", justify="right", no_wrap=True)
    for p in report.points:
        cells = [
            cell(getattr(p.summary, attr), k)
            if i == 0
            else num(getattr(p.summary, attr).median * k)
            if getattr(p.summary, attr) is not None
            else "–"
            for i, ((_, attr, _), k) in enumerate(zip(_SWEEP_COLUMNS, units, strict=True))
        ]
        t.add_row("◆" if p.frontier else "", p.label + point_note(p), *cells)
    t.caption = f"{_FRONTIER} · steady: median ± half IQR, the rest medians · -v: all spreads"
    return Group(title, t, *_sweep_tail(report))


def _title(report: Any) -> str:
    cfg = report.config
    joint = "×" if report.complete else "·"
    epochs = plural(cfg["epochs"], "epoch")
    return f"Sweep: {cfg['dataset']} · {epochs} {joint} {sweep_plan_words(report)}"


def _sweep_tail(report: Any) -> list[RenderableType]:
    body = Text()
    basis = sweep_basis(report)
    reasons = () if basis and basis.startswith("nothing") else report.recommendation.reasons
    for i, reason in enumerate(reasons):
        body.append(("\n" if i else "") + f"• {reason}")
    if basis:
        body.append(("\n" if reasons else "") + basis, style="yellow")
    parts: list[RenderableType] = [
        Panel(body, title="recommendation", title_align="left", border_style="green")
    ]
    # Each note names its combination and says it was skipped, and why.
    parts += [Text(note, style="dim") for note in report.skipped]
    parts += [Text(f"warning: {w}", style="yellow") for w in report.warnings]
    return parts


def _sweep_full(report: Any) -> RenderableType:
    figures = ("steady epoch", "cold epoch", "first batch", "peak PSS total", "peak USS / worker")
    t = titled(_title(report), ("", "configuration", *figures), text=("", "configuration"))
    for p in report.points:
        s = p.summary
        t.add_row(
            "◆" if p.frontier else "",
            p.label + point_note(p),
            fmt_stat(s.steady_epoch_s, fmt_seconds),
            fmt_stat(s.cold_epoch_s, fmt_seconds),
            fmt_stat(s.first_batch_s, fmt_seconds),
            fmt_stat(s.peak_total_pss_bytes, fmt_bytes),
            fmt_stat(s.peak_worker_uss_bytes, fmt_bytes),
        )
    t.caption = f"{_FRONTIER} · median ± half IQR (n)"
    return Group(t, *_sweep_tail(report))
