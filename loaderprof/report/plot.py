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
from pathlib import Path
from typing import Any, BinaryIO

from loaderprof.errors import UsageError
from loaderprof.report.rows import ARM_COLOR, plan_text
from loaderprof.results import ARM_LABEL as _LABEL
from loaderprof.results import Report, TrialResult

MiB = 1024 * 1024
_COLORS = {"startup": "#f4a261", "busy": "#2a9d8f", "idle": "#d9d9d9"}


def require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            "--plot needs matplotlib, an optional extra: pip install 'loaderprof[plot]' "
            "(or pip install matplotlib)"
        )


def _memory(ax: Any, t: TrialResult) -> None:
    main = next((p for p in t.timeline if p.role == "main"), None)
    if main is None:
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
    grid = [ts for ts, u in zip(main.t_s, main.uss_bytes, strict=False) if u is not None]
    index = {ts: i for i, ts in enumerate(grid)}
    stacks, labels = [], []
    for p in t.timeline:
        if p.role != "worker":
            continue
        row = [0.0] * len(grid)
        for ts, u in zip(p.t_s, p.uss_bytes, strict=False):
            if u is not None and ts in index:
                row[index[ts]] = u / MiB
        stacks.append(row)
        labels.append(f"w{p.worker_id} {p.pid}")
    if stacks:
        ax.stackplot(grid, stacks, alpha=0.75, linewidth=0)
    ax.plot(
        grid,
        [u / MiB for u in main.uss_bytes if u is not None],
        color="#264653",
        lw=1.2,
        label="main process USS",
    )
    pss: dict[float, float] = {}
    for p in t.timeline:
        for ts, v in zip(p.t_s, p.pss_bytes, strict=False):
            if v is not None and ts in index:
                pss[ts] = pss.get(ts, 0.0) + v / MiB
    xs = sorted(pss)
    ax.plot(xs, [pss[x] for x in xs], color="#e76f51", lw=1.5, ls="--", label="PSS total")
    ax.set_ylabel("MiB")
    ax.legend(
        loc="upper left",
        fontsize=7,
        ncol=3,
        title=f"worker USS stacked ({len(stacks)} processes)",
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
            ax.text(
                x,
                stat.median,
                f"{stat.median * 1e3:.0f} ms\nn={stat.n}",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks([0, 1], ["cold epoch (1)", "steady epochs (2..N)"])
    ax.set_ylabel("s (median, IQR)")
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
    lo = report.config["loader"]
    fig.suptitle(
        f"loaderprof · {report.config['dataset']} · {lo['num_workers']} workers · batch "
        f"{lo['batch_size']} · {report.environment.get('start_method') or 'default'} · "
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
    if front:
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
    fig.savefig(path, dpi=110, format=fmt)
    plt.close(fig)
