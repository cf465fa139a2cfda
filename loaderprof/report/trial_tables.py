"""`-v`'s tables of single trials: each epoch of the first timed trial per arm (see
`rows.shown_words`), and
each worker of every trial (its times, then its memory)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from loaderprof.model.results import Report
from loaderprof.report.rows import ARM_SHORT, shown_words
from loaderprof.report.tables import titled
from loaderprof.units import fmt_bytes, fmt_seconds, plural


def epochs_table(report: Report) -> Table:
    t = titled(f"Epoch wall times ({shown_words(report)}; * = worker started that epoch)")
    t.add_column("epoch", justify="right")
    for label in ARM_SHORT.values():
        t.add_column(label, justify="right")
        t.add_column("1st batch", justify="right")
        t.add_column("worker PIDs", overflow="fold", min_width=9)
    # Rows by epoch number, so an arm whose trial stopped early (or has a gap)
    # shows "–" in the epochs it lacks instead of shifting the later ones up.
    by_epoch = [
        {e.epoch: e for e in shown.epochs} if (shown := report.arms[n].shown_trial) else {}
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


def _trial_label(arm: str, trial: Any) -> str:
    """p1, np2: the arm and its trial; 'm' a memory trial, 'w' a warm-up (NOTE [timing
    and memory trials]), so a memory trial and timing trial 1 do not read alike."""
    kind = "w" if trial.warmup else ("m" if trial.role == "memory" else "")
    return f"{'p' if arm == 'persistent' else 'np'}{trial.index + 1}{kind}"


def workers_table(report: Report) -> RenderableType:
    """Two tables that fit 80 columns: each worker's times, then its memory, in the
    same rows, no PID or unit cut (see NOTE [one screen])."""
    times = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    memory = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    heads = ("trial", "pid", "id")
    for col in (*heads, "epoch", "start→ready", "first batch", "exit", "batches"):
        times.add_column(col, justify="left" if col == "trial" else "right", no_wrap=True)
    for col in (*heads, "USS at 1st batch", "peak USS", "peak PSS", "peak RSS"):
        memory.add_column(col, justify="left" if col == "trial" else "right", no_wrap=True)
    unsampled = 0
    for name in ("persistent", "non_persistent"):
        for trial in report.arms[name].trials:
            for w in trial.workers:
                who = (_trial_label(name, trial), str(w.pid), str(w.worker_id))
                times.add_row(
                    *who,
                    str(w.first_epoch or "–"),
                    fmt_seconds(w.startup_s),
                    fmt_seconds(w.first_batch_s),
                    fmt_seconds(w.exited_s),
                    str(w.batches),
                )
                figures = (
                    w.first_batch_uss_bytes,
                    w.peak_uss_bytes,
                    w.peak_pss_bytes,
                    w.peak_rss_bytes,
                )
                # A timing trial's workers are not sampled (NOTE [timing and memory
                # trials]): a row of dashes would read as memory that was lost.
                if trial.role == "timing" and all(v is None for v in figures):
                    unsampled += 1
                else:
                    memory.add_row(*who, *(fmt_bytes(v) for v in figures))
    left_out = (
        f" · {plural(unsampled, 'worker')} of timing trials not sampled, left out"
        if unsampled
        else ""
    )
    memory.caption = (
        "trial: p/np + number, m: memory trial (epochs not timed), w: warm-up · USS at "
        "1st batch: what starting cost the worker (a one-time copy), before reading "
        f"adds anything · peaks over the worker's life{left_out}"
    )
    memory.caption_justify = "left"
    return Group(
        Text("Worker processes: times (from trial start)"),
        times,
        Text("Worker processes: memory"),
        memory,
    )
