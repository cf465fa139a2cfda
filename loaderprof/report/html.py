"""One self-contained HTML page of a compare report, for a CI artifact.

The page must open anywhere, offline and years later, so it references nothing:
no scripts, no stylesheets, fonts or images from elsewhere; the CSS sits in one
<style> element and the figure is an inline <svg>. Every string that came from the
user or the machine (dataset, arguments, finding evidence, paths) passes through
`_e`, since a Dataset name or an exception text may hold markup.

Sections: header (dataset, configuration, environment), verdict, the summary (the
rows `rows.summary_rows` defines for the console and Markdown too), lifecycle
findings, gates and notes, the figure (the `--plot` figure drawn as SVG; without
matplotlib a small per-epoch chart drawn here), and the per-epoch detail of every
trial.
"""

from __future__ import annotations

import importlib.util
import io
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from loaderprof.model.results import ARM_LABEL, ARMS, ArmResult, Report
from loaderprof.model.trials import EpochResult, TrialResult
from loaderprof.report.rows import (
    ARM_COLOR,
    caption,
    evidence_items,
    loader_text,
    plan_text,
    summary_rows,
)
from loaderprof.units import fmt_bytes, fmt_seconds, plural

# The same arm colours as the --plot figure, so the two read alike.
_VERDICT = {"enable": "enable", "keep_off": "keep off", "neutral": "neutral"}

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
  margin: 2em auto; max-width: 1100px; padding: 0 1em; }
h1 { font-size: 1.4em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
h3 { font-size: 1em; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .92em; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .25em .7em; border-bottom: 1px solid #e3e3e3; text-align: right;
  vertical-align: top; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
thead th { border-bottom: 2px solid #999; }
tr.section td { border-top: 2px solid #999; }
tr.bold td { font-weight: 600; } tr.dim td { color: #888; }
caption { caption-side: bottom; text-align: left; color: #666; font-size: .85em;
  padding-top: .4em; }
.verdict { border-left: 6px solid #888; padding: .6em 1em; background: #f7f7f7; }
.verdict.enable { border-color: #2a9d8f; } .verdict.keep_off { border-color: #c0392b; }
.verdict.neutral { border-color: #e9c46a; }
.badge { display: inline-block; padding: .05em .5em; border-radius: 3px; color: #fff;
  background: #888; font-weight: 700; text-transform: uppercase; font-size: .85em; }
.enable .badge, .badge.pass { background: #2a9d8f; }
.keep_off .badge, .badge.fail, .badge.error { background: #c0392b; }
.neutral .badge, .badge.warning, .badge.inconclusive { background: #b8860b; }
.badge.info, .badge.skipped { background: #5b7db1; }
.finding { border: 1px solid #ddd; border-radius: 4px; padding: .5em 1em; margin: .6em 0; }
.note { color: #8a5a00; } .error-note { color: #c0392b; font-weight: 600; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #666; font-size: .85em; }
details { margin: .4em 0; } summary { cursor: pointer; }
"""


def render_html(report: Report) -> str:
    """The whole page; a pure function of the report."""
    title = f"loaderprof: {report.config.dataset}"
    body = [
        *_header(report),
        *_verdict(report),
        *_summary(report),
        *_findings(report),
        *_gates(report),
        *_notes(report),
        *_figure(report),
        *_epochs(report),
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, text_cols: int = 1) -> str:
    """A table of already-escaped cells; the first `text_cols` columns align left."""

    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(
            f'<{tag} class="text">{c}</{tag}>' if i < text_cols else f"<{tag}>{c}</{tag}>"
            for i, c in enumerate(row)
        )

    lines = ["<table>", f"<thead><tr>{cells('th', head)}</tr></thead>", "<tbody>"]
    lines += [f"<tr>{cells('td', row)}</tr>" for row in rows]
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def _flat(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested settings as dotted keys; unset ones (None, {}) left out to keep it short."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += _flat(value, f"{name}.")
        elif value is not None and value != {}:
            out.append((name, value))
    return out


def _setting(key: str, value: Any) -> str:
    if key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
        return fmt_bytes(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in value)
    return str(value)


def _header(report: Report) -> list[str]:
    env = report.environment
    tool = report.tool
    meta = [
        loader_text(report),
        plan_text(report),
        f"torch {env.get('torch')}",
        plural(env.get("cpu_count"), "CPU"),
    ]
    made = f"{tool.get('name', 'loaderprof')} {tool.get('version', '')}".strip()
    if report.created:
        made += f" · {report.created}"
    config = [(_e(k), _e(_setting(k, v))) for k, v in _flat(report.config.to_dict())]
    environment = [(_e(k), _e(_setting(k, v))) for k, v in _flat(env)]
    return [
        "<header>",
        f"<h1>loaderprof: <code>{_e(report.config.dataset)}</code></h1>",
        f'<p class="meta">{_e(" · ".join(meta))}</p>',
        f'<p class="meta">{_e(made)}</p>',
        "<details><summary>configuration</summary>",
        _table(("option", "value"), config, text_cols=2),
        "</details>",
        "<details><summary>environment</summary>",
        _table(("", "value"), environment, text_cols=2),
        "</details>",
        "</header>",
    ]


def _verdict(report: Report) -> list[str]:
    v = report.verdict
    if v is None:
        return [
            '<section class="verdict" id="verdict">',
            "<h2>Verdict</h2>",
            "<p><strong>No verdict: not enough was measured.</strong></p>",
            "</section>",
        ]
    out = [
        f'<section class="verdict {_e(v.recommendation)}" id="verdict">',
        "<h2>Verdict</h2>",
        f'<p><span class="badge">{_e(_VERDICT[v.recommendation])}</span> {_e(v.headline)}</p>',
    ]
    if v.reasons:
        out += ["<ul>", *(f"<li>{_e(r)}</li>" for r in v.reasons), "</ul>"]
    if not v.decided:
        out.append('<p class="note">not decided: more epochs or trials would settle it</p>')
    out.append("</section>")
    return out


def _summary(report: Report) -> list[str]:
    head = (
        "",
        _e(ARM_LABEL["persistent"]),
        _e(ARM_LABEL["non_persistent"]),
        "ratio or Δ",
    )
    rows = []
    for row in summary_rows(report):
        classes = " ".join(c for c in (row.emphasis, "section" if row.section else "") if c)
        attr = f' class="{classes}"' if classes else ""
        cells = (row.label, row.persistent, row.non_persistent, row.compared)
        rows.append(f"<tr{attr}>" + "".join(_td(i, c) for i, c in enumerate(cells)) + "</tr>")
    return [
        '<section id="summary">',
        "<h2>Summary</h2>",
        "<table>",
        f"<caption>{_e(caption(report))}</caption>",
        "<thead><tr>" + "".join(_th(i, h) for i, h in enumerate(head)) + "</tr></thead>",
        "<tbody>",
        *rows,
        "</tbody>",
        "</table>",
        "</section>",
    ]


def _td(i: int, cell: str) -> str:
    return f'<td class="text">{_e(cell)}</td>' if i == 0 else f"<td>{_e(cell)}</td>"


def _th(i: int, cell: str) -> str:
    # Header cells come escaped already.
    return f'<th class="text">{cell}</th>' if i == 0 else f"<th>{cell}</th>"


def _findings(report: Report) -> list[str]:
    out = ['<section id="findings">', "<h2>Lifecycle findings</h2>"]
    if not report.findings:
        from loaderprof.checks.catalogue import ran as checks_ran

        measured = any(t.epochs for arm in report.arms.values() for t in arm.trials)
        ran = checks_ran(report.findings_checked) if measured else []
        text = f"no findings ({', '.join(ran)})" if ran else "none: no check had the data to run"
        return [*out, f"<p>{_e(text)}</p>", "</section>"]
    for f in report.findings:
        evidence = [(_e(k), _e(v)) for k, v in evidence_items(f.evidence)]
        arm = f" · {_e(ARM_LABEL.get(f.arm, f.arm))}" if f.arm else ""
        out += [
            f'<div class="finding" id="finding-{_e(f.id)}">',
            f'<h3><span class="badge {_e(f.severity)}">{_e(f.severity)}</span> '
            f"{_e(f.title)} <code>{_e(f.id)}</code>{arm}</h3>",
            _table(("evidence", "value"), evidence, text_cols=2) if evidence else "",
            f"<p><strong>fix:</strong> {_e(f.fix)}</p>",
            "</div>",
        ]
    out.append("</section>")
    return out


def _gates(report: Report) -> list[str]:
    if not report.gates:
        return []
    from loaderprof.analysis.gates import format_result

    rows = []
    for g in report.gates:
        shown, limit = format_result(g)
        badge = f'<span class="badge {_e(g.status)}">{_e(g.status)}</span>'
        rows.append((f"<code>{_e(g.gate)}</code>", _e(shown), _e(limit), badge, _e(g.message)))
    status = (report.gate_status or "").upper()
    return [
        '<section id="gates">',
        f"<h2>Gates: {_e(status)}</h2>",
        _table(("gate", "value [95 % CI]", "limit", "result", "why"), rows),
        "</section>",
    ]


def _notes(report: Report) -> list[str]:
    """Baseline, warnings, errors: what the console prints after the tables."""
    notes: list[str] = []
    b = report.baseline
    if b is not None:
        notes.append(f"<p>Baseline: <code>{_e(b.path)}</code> ({_e(b.created)})</p>")
        if b.differences:
            notes.append(
                '<p class="note">environment differs from the baseline (timing gates may '
                f"not transfer): {_e('; '.join(b.differences))}</p>"
            )
    notes += [f'<p class="note">warning: {_e(w)}</p>' for w in report.warnings]
    if not report.complete:
        notes.append(
            '<p class="error-note">incomplete: some trials failed or were stopped; '
            "figures cover the trials that finished</p>"
        )
    notes += [f'<p class="error-note">error: {_e(e.message)}</p>' for e in report.errors]
    if not notes:
        return []
    return ['<section id="notes">', "<h2>Notes</h2>", *notes, "</section>"]


def _figure(report: Report) -> list[str]:
    svg = None
    if _has_matplotlib():
        try:
            svg = matplotlib_svg(report)
        except Exception:  # an installed but broken matplotlib: the page still comes
            svg = None
    if svg is not None:
        caption = (
            "First trial of each arm: memory over time (worker USS stacked, main process "
            "USS, PSS total dashed; the stack and the total only at walks that read every "
            "process), worker lifelines (orange start-up, green busy, grey idle), and the "
            "epoch times of both arms (median, IQR). The --plot figure."
        )
    else:
        svg = epochs_svg(report)
        caption = (
            "Epoch wall time per epoch, median over each arm's trials (matplotlib is not "
            "installed: pip install 'loaderprof[plot]' for the full figure)."
        )
    return [
        '<section id="figure">',
        "<h2>Figure</h2>",
        "<figure>",
        svg,
        f"<figcaption>{_e(caption)}</figcaption>",
        "</figure>",
        "</section>",
    ]


def _has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


# The prolog (an XML declaration and a DOCTYPE naming an external DTD) is not allowed
# inside HTML; the metadata block names outside URLs and the comments repeat the text.
_SVG_DROP = re.compile(r"<metadata>.*?</metadata>|<!--.*?-->", re.DOTALL)
# HTML puts an inline <svg> (and its xlink:href) in the right namespaces by itself, so
# the namespace URLs are dropped too: the page then names no URL at all.
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')


def matplotlib_svg(report: Report) -> str:
    """The --plot figure as an <svg> element to put inline."""
    import matplotlib

    from loaderprof.report import plot

    buf = io.BytesIO()
    # A fixed salt makes the element ids, and so the whole page, repeat run to run.
    with matplotlib.rc_context({"svg.hashsalt": "loaderprof"}):
        plot.render(report, buf, fmt="svg")
    text = buf.getvalue().decode("utf-8")
    text = text[text.index("<svg") :]
    end = text.index(">") + 1
    return (_XMLNS.sub("", text[:end]) + _SVG_DROP.sub("", text[end:])).strip()


def _timed(arm: ArmResult) -> list[TrialResult]:
    """The trials that time epochs (a memory trial's are held up by its sampling)."""
    timing = [t for t in arm.trials if t.times_epochs]
    return timing or list(arm.trials)


def _median_walls(arm: ArmResult) -> dict[int, float]:
    walls: dict[int, list[float]] = {}
    for t in _timed(arm):
        for e in t.epochs:
            walls.setdefault(e.epoch, []).append(e.wall_s)
    return {epoch: statistics.median(v) for epoch, v in walls.items()}


def epochs_svg(report: Report) -> str:
    """Grouped bars of the median wall time of each epoch, both arms: the figure
    drawn without matplotlib, so the page has one either way."""
    width, height = 640, 260
    left, right, top, bottom = 64, 12, 34, 40
    walls = {name: _median_walls(report.arms[name]) for name in ARMS if name in report.arms}
    epochs = sorted({e for w in walls.values() for e in w})
    label = "epoch wall time per epoch (median over trials)"
    out = [
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(label)}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{_e(label)}</title>",
    ]
    if not epochs:
        out += [
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#777">'
            "no epochs measured</text>",
            "</svg>",
        ]
        return "\n".join(out)
    top_s = max(v for w in walls.values() for v in w.values()) * 1.1 or 1.0
    plot_w, plot_h = width - left - right, height - top - bottom
    group = plot_w / len(epochs)
    bar = group * 0.35
    base = top + plot_h
    out += [
        f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#333"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{_e(fmt_seconds(top_s))}</text>',
        f'<text x="{left - 4}" y="{base}" text-anchor="end">0</text>',
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">epoch</text>',
    ]
    for i, epoch in enumerate(epochs):
        x0 = left + i * group + (group - 2 * bar) / 2
        for j, name in enumerate(walls):
            wall = walls[name].get(epoch)
            if wall is None:
                continue
            h = plot_h * wall / top_s
            out.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{base - h:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}" fill="{ARM_COLOR[name]}">'
                f"<title>{_e(f'{ARM_LABEL[name]} epoch {epoch}: {fmt_seconds(wall)}')}</title>"
                "</rect>"
            )
        cx = left + i * group + group / 2
        out.append(f'<text x="{cx:.1f}" y="{base + 14}" text-anchor="middle">{epoch}</text>')
    for j, name in enumerate(walls):
        x = left + 8 + j * 150
        out += [
            f'<rect x="{x}" y="10" width="12" height="12" fill="{ARM_COLOR[name]}"/>',
            f'<text x="{x + 16}" y="20">{_e(ARM_LABEL[name])}</text>',
        ]
    out.append("</svg>")
    return "\n".join(out)


def _pids(e: EpochResult) -> str:
    """Every PID that served the epoch, a * on those that started in it (as the console)."""
    shown = list(e.worker_pids) + [p for p in e.new_worker_pids if p not in e.worker_pids]
    if not shown:
        return "–"
    return " ".join(f"{p}*" if p in e.new_worker_pids else str(p) for p in shown)


def _trial_label(t: TrialResult) -> str:
    # A memory trial is numbered apart from the timing trials (both start at index 0).
    name = "memory" if t.role == "memory" else str(t.index + 1)
    extra = []
    if t.warmup:
        extra.append("warm-up, not in the statistics")
    if not t.complete:
        extra.append("incomplete")
    return name + (f" ({', '.join(extra)})" if extra else "")


def _epochs(report: Report) -> list[str]:
    out = [
        '<section id="epochs">',
        "<h2>Per-epoch detail</h2>",
        "<p>Every trial of each arm; * marks a worker process that started that epoch.</p>",
    ]
    for name in ARMS:
        arm = report.arms.get(name)
        if arm is None:
            continue
        rows = [
            (
                _e(_trial_label(t)),
                _e(e.epoch),
                _e(fmt_seconds(e.wall_s)),
                _e(fmt_seconds(e.first_batch_s)),
                _e(e.batches),
                _e(_pids(e)),
            )
            for t in (*arm.warmup_trials, *arm.trials)
            for e in t.epochs
        ]
        out.append(f"<h3>{_e(ARM_LABEL[name])}</h3>")
        head = ("trial", "epoch", "wall", "first batch", "batches", "worker PIDs")
        out.append(_table(head, rows) if rows else "<p>no epochs measured</p>")
    out.append("</section>")
    return out
