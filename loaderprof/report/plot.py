"""One figure of a report (matplotlib, an optional extra: `pip install loaderprof[plot]`).

Per arm (the first trial of each), on one time axis for both arms:
* memory over time: USS of each worker stacked, the main process's USS beside
  it, the PSS total of the whole tree as a line; epoch boundaries shaded and
  first-batch moments marked;
* a lifeline per worker process: born, start-up, busy (producing a batch),
  idle, exited, so reuse (one long life) and restart (one life per epoch) show
  at a glance.
A last panel compares the epoch times of the arms (cold vs steady, median and IQR).
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from loaderprof.errors import UsageError
from loaderprof.model.results import ARM_LABEL as _LABEL
from loaderprof.model.results import Report
from loaderprof.model.trials import ProcessTimeline, TrialResult
from loaderprof.report.rows import ARM_COLOR, plan_text
from loaderprof.units import MiB, plural

_COLORS = {"startup": "#f4a261", "busy": "#2a9d8f", "idle": "#d9d9d9"}


def require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            "--plot needs matplotlib, an optional extra: pip install 'loaderprof[plot]' "
            "(or pip install matplotlib)"
        )


@dataclass(frozen=True)
class MemorySeries:
    """What the memory panel draws (MiB over trial seconds), apart from matplotlib.

    Sums over processes (the workers' USS stacked, the PSS total) are drawn at the
    walks that read every process while the tree held still (`walk_processes`,
    from `measure.readings.deep_ticks`), and only those: a walk cut short, or one
    process read ahead of the rest, summed as if it were the tree, draws a dip
    that did not happen. A process's own line may use every reading of it."""

    main_t: tuple[float, ...]
    main_uss: tuple[float, ...]
    # When each whole walk began, and per worker (label) its USS there: 0 where it
    # was not alive, since a whole walk read every process that was.
    walk_t: tuple[float, ...]
    workers: tuple[tuple[str, tuple[float, ...]], ...]
    # The PSS total at each whole walk; empty where PSS was not measured.
    pss_t: tuple[float, ...]
    pss_total: tuple[float, ...]


def memory_series(t: TrialResult) -> MemorySeries | None:
    """The memory panel's series of a trial; None when memory was not sampled."""
    main = next((p for p in t.timeline if p.role == "main"), None)
    if main is None:
        return None
    walks: dict[float, list[tuple[ProcessTimeline, int]]] = defaultdict(list)
    for p in t.timeline:
        for i, n in enumerate(p.walk_processes):
            if n:
                walks[p.t_s[i]].append((p, i))
    whole = sorted(
        ts
        for ts, readings in walks.items()
        if len(readings) == readings[0][0].walk_processes[readings[0][1]]
    )
    workers = []
    for p in t.timeline:
        if p.role != "worker":
            continue
        uss = {p.t_s[i]: u for i, u in enumerate(p.uss_bytes) if u is not None}
        workers.append((f"w{p.worker_id} {p.pid}", tuple(uss.get(ts, 0) / MiB for ts in whole)))
    pss_t, pss_total = [], []
    for ts in whole:
        values = [v for p, i in walks[ts] if (v := p.pss_bytes[i]) is not None]
        if len(values) == len(walks[ts]):
            pss_t.append(ts)
            pss_total.append(sum(values) / MiB)
    readings = [
        (ts, u / MiB) for ts, u in zip(main.t_s, main.uss_bytes, strict=False) if u is not None
    ]
    return MemorySeries(
        main_t=tuple(ts for ts, _ in readings),
        main_uss=tuple(u for _, u in readings),
        walk_t=tuple(whole),
        workers=tuple(workers),
        pss_t=tuple(pss_t),
        pss_total=tuple(pss_total),
    )


def _memory(ax: Any, t: TrialResult) -> None:
    series = memory_series(t)
    if series is None:
        ax.text(
            0.5,
            0.5,
            "memory not sampled (--sample-interval 0)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="gray",
        )
        return
    if series.workers and series.walk_t:
        ax.stackplot(series.walk_t, [row for _, row in series.workers], alpha=0.75, linewidth=0)
    ax.plot(series.main_t, series.main_uss, color="#264653", lw=1.2, label="main process USS")
    if series.pss_t:
        # A dot per walk: where walks were rare (a busy machine, a pool starting and
        # stopping inside epochs), the line between two shows no reading, and says so.
        ax.plot(
            series.pss_t,
            series.pss_total,
            color="#e76f51",
            lw=1.5,
            ls="--",
            marker=".",
            ms=4,
            label="PSS total",
        )
    ax.set_ylabel("MiB")
    stacked = len(series.workers) if series.walk_t else 0
    ax.legend(
        loc="upper left",
        fontsize=7,
        ncol=3,
        title=f"worker USS stacked ({plural(stacked, 'process')})" if stacked else None,
        title_fontsize=7,
    )


def _epochs(ax: Any, t: TrialResult) -> None:
    for e in t.epochs:
        ax.axvspan(e.start_s, e.start_s + e.wall_s, color="#e9c46a", alpha=0.12, lw=0)
        if e.first_batch_s is not None:
            ax.axvline(e.start_s + e.first_batch_s, color="#6a4c93", lw=0.6, ls=":")


def _lifelines(ax: Any, t: TrialResult) -> None:
    rows = sorted({w.worker_id for w in t.workers})
    by_pid: dict[int, list[Any]] = {}
    for b in t.batches:
        by_pid.setdefault(b.pid, []).append(b)
    for w in t.workers:
        y = rows.index(w.worker_id)
        born = w.started_s if w.started_s is not None else w.init_start_s
        died = w.exited_s if w.exited_s is not None else t.wall_s
        ax.broken_barh([(born, max(died - born, 1e-4))], (y - 0.35, 0.7), color=_COLORS["idle"])
        if w.ready_s is not None:
            ax.broken_barh(
                [(born, max(w.ready_s - born, 1e-4))], (y - 0.35, 0.7), color=_COLORS["startup"]
            )
        spans = [(b.start_s, max(b.end_s - b.start_s, 1e-4)) for b in by_pid.get(w.pid, [])]
        if spans:
            ax.broken_barh(spans, (y - 0.35, 0.7), color=_COLORS["busy"])
        ax.plot([born], [y], marker="|", color="black", ms=9)
        if w.exited_s is not None:
            ax.plot([w.exited_s], [y], marker="x", color="black", ms=5)
    ax.set_yticks(range(len(rows)), [f"worker {r}" for r in rows], fontsize=7)
    ax.set_ylim(-0.6, max(len(rows), 1) - 0.4)


def _epoch_times(ax: Any, report: Report) -> None:
    names = ("persistent", "non_persistent")
    width = 0.35
    top = 0.0
    for i, kind in enumerate(("cold", "steady")):
        for j, name in enumerate(names):
            s = report.arms[name].summary
            stat = s.cold_epoch_s if kind == "cold" else s.steady_epoch_s
            if stat is None:
                continue
            x = i + (j - 0.5) * width
            err = [[stat.median - stat.q1], [stat.q3 - stat.median]]
            ax.bar(
                x,
                stat.median,
                width,
                yerr=err,
                capsize=3,
                color=ARM_COLOR[name],
                label=_LABEL[name] if i == 0 else None,
            )
            # Above the whisker's cap (the third quartile), not on the whisker.
            ax.annotate(
                f"{stat.median * 1e3:.0f} ms\nn={stat.n}",
                (x, stat.q3),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
            top = max(top, stat.q3)
    if top > 0:
        # Room above the highest cap for its two lines of label.
        ax.set_ylim(0, top * 1.35)
    ax.set_xticks([0, 1], ["cold epoch (1)", "steady epochs (2..N)"])
    ax.set_ylabel("s (median, IQR)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def render(report: Report, path: str | Path | BinaryIO, fmt: str | None = None) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in ("persistent", "non_persistent") if report.arms[a].trials]
    heights = [3, 1.4] * len(arms) + [2.4]
    fig = plt.figure(figsize=(11, 2.0 + 1.55 * sum(heights)), constrained_layout=True)
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    axes = []
    first_ax = None
    for k, name in enumerate(arms):
        t = report.arms[name].trials[0]
        ax_mem = fig.add_subplot(gs[2 * k], sharex=first_ax)
        first_ax = first_ax or ax_mem
        ax_life = fig.add_subplot(gs[2 * k + 1], sharex=first_ax)
        _memory(ax_mem, t)
        _epochs(ax_mem, t)
        _lifelines(ax_life, t)
        _epochs(ax_life, t)
        status = "" if t.complete else " (incomplete)"
        ax_mem.set_title(
            f"{_LABEL[name]}: memory over time (trial {t.index + 1}{status})",
            fontsize=9,
            loc="left",
        )
        ax_life.set_title(
            f"{_LABEL[name]}: worker lifelines (orange start-up, green busy, "
            "grey idle, | born, × exited)",
            fontsize=8,
            loc="left",
        )
        axes += [ax_mem, ax_life]
    if axes:
        axes[-1].set_xlabel("seconds from trial start (shaded: epochs; dotted: first batch)")
    ax_ep = fig.add_subplot(gs[-1])
    _epoch_times(ax_ep, report)
    ax_ep.set_title("epoch times per arm", fontsize=9, loc="left")
    lo = report.config.loader
    fig.suptitle(
        f"loaderprof · {report.config.dataset} · {plural(lo.num_workers, 'worker')} · batch "
        f"{lo.batch_size} · {report.environment.get('start_method') or 'default'} · "
        f"{plan_text(report)}",
        fontsize=10,
    )
    fig.savefig(path, dpi=110, format=fmt)
    plt.close(fig)


def render_sweep(report: Any, path: str | Path | BinaryIO, fmt: str | None = None) -> None:
    """Time vs memory scatter of a sweep, the Pareto frontier joined by a line."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5), constrained_layout=True)
    _sweep(ax, report)
    fig.savefig(path, dpi=110, format=fmt)
    plt.close(fig)


def _sweep(ax: Any, report: Any) -> None:
    pts = [p for p in report.points if p.summary.steady_epoch_s is not None]
    for p in pts:
        mem = p.summary.peak_total_pss_bytes.median / MiB if p.summary.peak_total_pss_bytes else 0
        ax.scatter(
            p.summary.steady_epoch_s.median,
            mem,
            s=60 if p.frontier else 30,
            color=ARM_COLOR["persistent" if p.persistent else "non_persistent"],
            edgecolor="black" if p.frontier else "none",
            zorder=3,
        )
        ax.annotate(
            p.label,
            (p.summary.steady_epoch_s.median, mem),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    front = sorted(
        (
            p.summary.steady_epoch_s.median,
            p.summary.peak_total_pss_bytes.median / MiB if p.summary.peak_total_pss_bytes else 0,
        )
        for p in pts
        if p.frontier
    )
    # One point is no line: drawn dashed, it would show nothing but its legend entry.
    if len(front) > 1:
        ax.plot(
            [f[0] for f in front],
            [f[1] for f in front],
            color="black",
            lw=1,
            ls="--",
            label="Pareto frontier",
            zorder=2,
        )
        ax.legend(fontsize=8)
    ax.set_xlabel("steady epoch (s, median)")
    ax.set_ylabel("peak PSS total (MiB, median)")
    ax.set_title(f"loaderprof sweep · {report.config['dataset']} (green: persistent)", fontsize=10)
