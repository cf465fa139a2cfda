"""The sweep's table for the terminal: configurations by steady epoch, the frontier
marked, and the recommendation with what it rests on (NOTE [partial reports])."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from loaderprof.report.console import cell, num, unit_of
from loaderprof.report.partial import (
    counted,
    point_failed,
    point_note,
    sweep_basis,
    sweep_counts,
    sweep_plan_words,
)
from loaderprof.report.rows import fmt_stat
from loaderprof.units import fmt_bytes, fmt_seconds, plural

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
    # The frontier's mark never wraps, so a tight table folds the labels, not it.
    t.add_column("", no_wrap=True, min_width=1)
    t.add_column("configuration", overflow="fold")
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
    t.caption_justify = "left"
    return Group(title, t, *_sweep_tail(report))


def _ran_words(report: Any) -> str:
    """What an incomplete sweep ran, plainly: '7 configurations ran all 2 planned
    trials, 1 ran 1, 1 ran none'."""
    planned = plural(report.config["trials"], "planned trial")
    ran = Counter(sum(counted(t) for t in p.trials) for p in report.points)
    words: list[str] = []
    for n, k in sorted(ran.items(), reverse=True):
        if words:
            words.append(f"{k} ran {n or 'none'}")
            continue
        what = f"all {planned}" if n == report.config["trials"] else f"{n} of {planned}"
        words.append(f"{plural(k, 'configuration')} ran {what}")
    return ", ".join(words)


def _uneven(report: Any) -> bool:
    """An incomplete sweep whose configurations ran different numbers of trials:
    partial.py's 'after 0–1 of 2' reads as a range, so it is said per group instead."""
    measured, low, high = sweep_counts(report)
    return not report.complete and (low != high or measured < len(report.points))


def _title(report: Any) -> str:
    cfg = report.config
    epochs = plural(cfg["epochs"], "epoch")
    if not _uneven(report):
        joint = "×" if report.complete else "·"
        return f"Sweep: {cfg['dataset']} · {epochs} {joint} {sweep_plan_words(report)}"
    why = "stopped by a failure" if any(point_failed(p) for p in report.points) else "interrupted"
    return f"Sweep: {cfg['dataset']} · {epochs} · {why}: {_ran_words(report)}"


def _basis(report: Any) -> str | None:
    """What an incomplete sweep's recommendation rests on (NOTE [partial reports])."""
    measured = sweep_counts(report)[0]
    if not _uneven(report) or not measured:
        return sweep_basis(report)
    total = plural(len(report.points), "configuration")
    return f"based on what ran ({measured} of {total} measured): rerun for the full plan"


def _sweep_tail(report: Any) -> list[RenderableType]:
    body = Text()
    basis = _basis(report)
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


def _stacked(text: str) -> str:
    """'98.4 ms ±192 µs (4)' on three lines: value, spread, count, so a narrow column
    breaks between them and never between a figure and its unit."""
    return text.replace(" ±", "\n±").replace(" (", "\n(")


def _sweep_full(report: Any) -> RenderableType:
    t = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("", no_wrap=True, min_width=1)
    t.add_column("configuration", overflow="fold", min_width=14)
    for figure, _, _ in _SWEEP_COLUMNS:
        t.add_column(figure, justify="right", no_wrap=True)
    for p in report.points:
        s = p.summary
        t.add_row(
            "◆" if p.frontier else "",
            p.label + point_note(p),
            *(
                _stacked(fmt_stat(getattr(s, attr), fmt))
                for attr, fmt in (
                    ("steady_epoch_s", fmt_seconds),
                    ("cold_epoch_s", fmt_seconds),
                    ("first_batch_s", fmt_seconds),
                    ("peak_total_pss_bytes", fmt_bytes),
                    ("peak_worker_uss_bytes", fmt_bytes),
                )
            ),
        )
    t.caption = f"{_FRONTIER} · median ± half IQR (n)"
    t.caption_justify = "left"
    return Group(Text(_title(report)), t, *_sweep_tail(report))
