"""Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

One process track per worker and one per main process, with each arm × trial a
separate process group. Trials are laid end to end on the time axis, in the
order arm, trial, with a gap between them: each trial's own times are seconds
from its start.
"""

from __future__ import annotations

import json
from typing import Any

from loaderprof.model.results import ARM_LABEL as _LABEL
from loaderprof.model.results import Report
from loaderprof.model.trials import TrialResult
from loaderprof.units import MiB

GAP_US = 1_000_000


def us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def span(
    name: str,
    pid: int,
    start_s: float,
    end_s: float,
    offset: float,
    cat: str,
    args: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "name": name,
        "cat": cat,
        "ph": "X",
        "pid": pid,
        "tid": pid,
        "ts": offset + us(start_s),
        "dur": max(0.0, us(end_s - start_s)),
    }
    if args:
        ev["args"] = args
    return ev


def meta(pid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [
        {
            "name": "process_name",
            "ph": "M",
            "pid": pid,
            "tid": pid,
            "ts": 0,
            "args": {"name": name},
        },
        {
            "name": "process_sort_index",
            "ph": "M",
            "pid": pid,
            "tid": pid,
            "ts": 0,
            "args": {"sort_index": sort},
        },
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": pid, "ts": 0, "args": {"name": name}},
    ]


def _trial_events(t: TrialResult, group: str, offset: float, sort: int) -> list[dict[str, Any]]:
    evs: list[dict[str, Any]] = []
    main = t.main_pid
    evs += meta(main, f"{group} · main process (pid {main})", sort)
    evs.append(
        span(f"{group} trial", main, 0.0, t.wall_s, offset, "trial", {"complete": t.complete})
    )
    for e in t.epochs:
        end = e.start_s + e.wall_s
        evs.append(
            span(
                f"epoch {e.epoch}",
                main,
                e.start_s,
                end,
                offset,
                "epoch",
                {
                    "batches": e.batches,
                    "samples": e.samples,
                    "new_workers": list(e.new_worker_pids),
                },
            )
        )
        if e.first_batch_s is not None:
            evs.append(
                span(
                    "time to first batch",
                    main,
                    e.start_s,
                    e.start_s + min(e.first_batch_s, e.wall_s),
                    offset,
                    "first_batch",
                )
            )
    by_pid: dict[int, list[Any]] = {}
    for b in t.batches:
        by_pid.setdefault(b.pid, []).append(b)
    for i, w in enumerate(t.workers):
        born = w.started_s if w.started_s is not None else w.init_start_s
        spans = sorted(by_pid.get(w.pid, []), key=lambda b: b.start_s)
        last = max([b.end_s for b in spans] + [w.ready_s or born])
        died = w.exited_s if w.exited_s is not None and w.exited_s >= last else t.wall_s
        died = max(died, last)
        evs += meta(w.pid, f"{group} · worker {w.worker_id} (pid {w.pid})", sort + 1 + i)
        evs.append(
            span(
                f"worker {w.worker_id} alive",
                w.pid,
                born,
                died,
                offset,
                "worker",
                {"first_epoch": w.first_epoch},
            )
        )
        if w.ready_s is not None:
            evs.append(span("start-up", w.pid, born, w.ready_s, offset, "startup"))
        prev_end = w.ready_s if w.ready_s is not None else born
        for b in spans:
            # Keep spans well nested: a batch cannot start before the previous one ended.
            start = max(b.start_s, prev_end)
            end = max(b.end_s, start)
            evs.append(span("batch", w.pid, start, end, offset, "batch", {"samples": b.samples}))
            prev_end = end
    for p in t.timeline:
        for ts, rss, uss in zip(p.t_s, p.rss_bytes, p.uss_bytes, strict=False):
            args = {"RSS MiB": round(rss / MiB, 2)}
            if uss is not None:
                args["USS MiB"] = round(uss / MiB, 2)
            evs.append(
                {
                    "name": "memory",
                    "ph": "C",
                    "pid": p.pid,
                    "tid": p.pid,
                    "ts": offset + us(ts),
                    "args": args,
                }
            )
    return evs


def to_trace(report: Report) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    offset = 0.0
    sort = 0
    for arm_name in ("persistent", "non_persistent"):
        for t in report.arms[arm_name].trials:
            group = f"{_LABEL[arm_name]} trial {t.index + 1}"
            events += _trial_events(t, group, offset, sort)
            sort += 1 + len(t.workers) + 1
            offset += us(t.wall_s) + GAP_US
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "tool": "loaderprof",
            "dataset": report.config.dataset,
            "version": report.tool.get("version"),
        },
    }


def to_trace_json(report: Report) -> str:
    return json.dumps(to_trace(report), separators=(",", ":")) + "\n"
