"""A watched run as Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing).

One process track per loader (its epochs, each with its wait for the first batch)
and one per worker process (start-up, then its life), on the command's own clock.
"""

from __future__ import annotations

import json
from typing import Any

from loaderprof.model.watch import WatchReport
from loaderprof.report.trace import meta, span
from loaderprof.units import plural

# Loader tracks get pids of their own, far from any real pid.
_LOADER_PID = 10_000_000


def to_watch_trace(report: WatchReport) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    sort = 0
    for n, ld in enumerate(report.loaders):
        pid = _LOADER_PID + n
        persistence = "persistent" if ld.persistent_workers else "not persistent"
        workers = plural(ld.num_workers, "worker")
        events += meta(pid, f"{ld.id} {ld.site} ({workers}, {persistence})", sort)
        sort += 1
        for e in ld.epochs:
            end = e.end_s if e.end_s is not None else report.wall_s
            name = f"epoch {e.index}" + ("" if e.end_s is not None else " (abandoned)")
            events.append(span(name, pid, e.start_s, end, 0.0, "epoch", {"batches": e.batches}))
            if e.first_batch_s is not None:
                events.append(
                    span(
                        "wait for 1st batch",
                        pid,
                        e.start_s,
                        e.start_s + e.first_batch_s,
                        0.0,
                        "first_batch",
                    )
                )
        for w in ld.workers:
            events += meta(w.pid, f"{ld.id} worker {w.worker_id} (pid {w.pid})", sort)
            sort += 1
            start = w.started_s if w.started_s is not None else w.init_s
            ready = w.ready_s if w.ready_s is not None else w.init_s
            end = w.exited_s if w.exited_s is not None else report.wall_s
            events.append(span("start-up", w.pid, start, ready, 0.0, "startup"))
            events.append(
                span(
                    "alive", w.pid, ready, end, 0.0, "worker", {"peak_uss_bytes": w.peak_uss_bytes}
                )
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def to_watch_trace_json(report: WatchReport) -> str:
    return json.dumps(to_watch_trace(report))
