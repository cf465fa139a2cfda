"""A job watched from outside (`watch --pid`) as Chrome trace-event JSON
(ui.perfetto.dev, chrome://tracing).

One process track per pool lineage (each generation's life, and its workers' USS /
PSS together over time as a counter) and one per worker process (its life while
watched), on the watch's clock: 0 is the watch's start. A process born before the
watch starts at 0 on the track and says when it was born in its args; nothing here
claims what outside reading cannot see (no epochs, batches or start-up: NOTE [pools
from outside]).
"""

from __future__ import annotations

import json
from typing import Any

from loaderprof.model.attached import AttachedPool, AttachReport
from loaderprof.report.trace import meta, span, us
from loaderprof.units import MiB, plural

# Pool tracks get pids of their own, far from any real pid.
_POOL_PID = 10_000_000


def _lineage(pool: AttachedPool) -> str:
    if pool.persistent is None:
        return "one epoch seen"
    if pool.persistent:
        return "persists"
    return f"rebuilt {plural(pool.rebuilt, 'time')}"


def _pool_events(pool: AttachedPool, pid: int, wall_s: float) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for k, g in enumerate(pool.generations, start=1):
        end = g.ended_s if g.ended_s is not None else wall_s
        args = {"workers": len(g.workers), "born_s": round(g.born_s, 3)}
        name = f"generation {k}" + ("" if g.ended_s is not None else " (alive at the end)")
        events.append(span(name, pid, max(0.0, g.born_s), end, 0.0, "pool", args))
        for p in g.series:
            values = {"USS MiB": p.uss_bytes, "PSS MiB": p.pss_bytes}
            args = {k: round(v / MiB, 2) for k, v in values.items() if v is not None}
            if args:
                events.append(
                    {
                        "name": "pool memory",
                        "ph": "C",
                        "pid": pid,
                        "tid": pid,
                        "ts": us(p.t_s),
                        "args": args,
                    }
                )
    return events


def to_attach_trace(report: AttachReport) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    sort = 0
    for n, pool in enumerate(report.pools):
        pid = _POOL_PID + n
        method = pool.start_method or "start method unknown"
        title = f"{pool.id} ({plural(pool.workers, 'worker')}, {method}, {_lineage(pool)})"
        events += meta(pid, title, sort)
        sort += 1
        events += _pool_events(pool, pid, report.wall_s)
        for g in pool.generations:
            for w in g.workers:
                events += meta(w.pid, f"{pool.id} worker (pid {w.pid})", sort)
                sort += 1
                end = w.exited_s if w.exited_s is not None else report.wall_s
                args = {"born_s": round(w.born_s, 3), "peak_uss_bytes": w.peak_uss_bytes}
                events.append(span("alive", w.pid, max(0.0, w.born_s), end, 0.0, "worker", args))
    if report.job_exited_s is not None:
        events.append(
            {
                "name": "job's main process exited",
                "ph": "i",
                "s": "g",
                "pid": _POOL_PID,
                "tid": _POOL_PID,
                "ts": us(report.job_exited_s),
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def to_attach_trace_json(report: AttachReport) -> str:
    return json.dumps(to_attach_trace(report))
