"""Memory and handles: what persistent workers hold, gain and keep between epochs
(growth, copy-on-read, leaked files, connections, children and threads)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from loaderprof.checks.growth import leaked_handles, memory_growth
from loaderprof.checks.loader import copy_on_read_finding
from loaderprof.checks.series import copies_on_read, growth_trend, idle_growth
from loaderprof.inside.procfs import HANDLE_LABELS
from loaderprof.measure.readings import copy_window
from loaderprof.model.results import ArmResult, Finding, Report
from loaderprof.model.trials import TrialResult, WorkerResult
from loaderprof.units import plural


def _persistent_workers(arm: ArmResult) -> list[tuple[TrialResult, WorkerResult]]:
    """In the order the findings name them: by trial, then worker id."""
    return sorted(
        ((t, w) for t in arm.trials for w in t.workers if len(w.states) >= 3),
        key=lambda tw: (tw[0].index, tw[1].worker_id),
    )


def check_memory_growth(report: Report) -> list[Finding]:
    """Persistent workers whose idle USS grows after every epoch, told apart from a
    one-off warm-up in epoch 1, from copy-on-read (`new_memory`), and from growth that
    levels off (NOTE [growth to tell]). Every worker that grew is named."""
    grown: dict[str, tuple[list[float], str]] = {}
    after: dict[str, list[int]] = {}
    where: dict[str, Any] = {}
    for t, w in _persistent_workers(report.arms["persistent"]):
        idle = [s for s in w.states if s.after_epoch >= 1 and s.uss_bytes is not None]
        if len(idle) < 3:
            continue
        if f"worker {w.worker_id}" in grown:
            continue  # the first trial that shows it is the evidence
        series = [float(s.uss_bytes or 0) for s in idle]
        epochs = [s.after_epoch for s in idle]
        trend = idle_growth(series, [float(s.rss_bytes) for s in idle], epochs)
        if trend is None:
            continue
        grown[f"worker {w.worker_id}"] = (series, trend)
        after[f"worker {w.worker_id}"] = epochs
        start = w.states[0].uss_bytes
        where.setdefault("trial", t.index)
        where.setdefault("pids", []).append(w.pid)
        where.setdefault("worker_ids", []).append(w.worker_id)
        # What epoch 1 added once (warm-up), apart from the growth.
        where.setdefault("warmup_bytes_by_worker", {})[str(w.worker_id)] = (
            int(series[0] - start) if start is not None else None
        )
    return [memory_growth(grown, where, arm="persistent", after=after)] if grown else []


@dataclass(frozen=True)
class _Reading:
    """What a worker's private memory did while it read, from its first batch on."""

    growth_bytes: int
    samples_read: int
    rss_growth_bytes: int
    start_uss_bytes: int


def _reading(t: TrialResult, w: WorkerResult) -> _Reading | None:
    """USS growth from the first deep sample after the worker's first batch (its start-up
    copy already paid) to its peak, against the samples it read in between."""
    line = next((p for p in t.timeline if p.pid == w.pid), None)
    spans = sorted((b.end_s, b.samples) for b in t.batches if b.pid == w.pid)
    if line is None or not spans:
        return None
    inside = line.in_window or (True,) * len(line.t_s)
    window = copy_window(
        [
            (ts, u, r)
            for ts, u, r, ok in zip(line.t_s, line.uss_bytes, line.rss_bytes, inside, strict=False)
            if u is not None and ok and ts >= spans[0][0]
        ]
    )
    if window is None:
        return None
    (t0, u0, r0), (t1, u1, r1) = window
    read = sum(n for end, n in spans if t0 < end <= t1)
    if read <= 0:
        return None
    return _Reading(u1 - u0, read, r1 - r0, u0)


def check_copy_on_read(report: Report) -> list[Finding]:
    """Forked workers whose private memory grows with what they read while RSS stays
    flat: reading Python objects inherited from the parent writes their refcounts and
    turns shared pages private (PyTorch issue #13246). What a worker copied once while
    starting (imports, module objects) is its start-up cost, not this finding."""
    if (report.environment.get("start_method") or report.config.loader.mp_context) != "fork":
        return []
    hits = []
    for arm in report.arms.values():
        for t in arm.trials:
            for w in t.workers:
                r = _reading(t, w)
                if r is not None and copies_on_read(
                    r.growth_bytes, r.rss_growth_bytes, r.start_uss_bytes
                ):
                    hits.append((arm.name, w, r))
    if not hits:
        return []
    arm_name, w, r = max(hits, key=lambda h: h[2].growth_bytes)
    return [
        copy_on_read_finding(
            growth=r.growth_bytes,
            samples_read=r.samples_read,
            rss_growth=r.rss_growth_bytes,
            start_uss=r.start_uss_bytes,
            affected=len(hits),
            where={"pid": w.pid, "arm": arm_name},
            spawn_hint="--mp-context spawn/forkserver",
        )
    ]


def check_handles(report: Report) -> list[Finding]:
    """Handles that grow across epochs (leaks; NOTE [growth to tell]) and those held
    constantly (state carried)."""
    grown: dict[str, dict[str, tuple[list[int], str]]] = {}
    where: dict[str, dict[str, Any]] = {}
    carried: dict[str, list[int]] = {}
    for t, w in _persistent_workers(report.arms["persistent"]):
        idle = [s for s in w.states if s.after_epoch >= 1]
        for key in HANDLE_LABELS:
            get = operator.attrgetter(key)
            series = [int(get(s)) for s in idle]
            trend = growth_trend([float(v) for v in series], 1.0)
            # The first trial that shows a worker's growth is its evidence.
            if trend is not None and f"worker {w.worker_id}" not in grown.get(key, {}):
                grown.setdefault(key, {})[f"worker {w.worker_id}"] = (series, trend)
                ev = where.setdefault(key, {"trial": t.index, "pids": [], "worker_ids": []})
                ev["pids"].append(w.pid)
                ev["worker_ids"].append(w.worker_id)
            # torch starts its own threads on the first tensor op, so only files,
            # connections and children count as state the Dataset carries.
            extra = min(series) - _at_start(w, key) if series else 0
            if extra > 0 and key != "threads":
                carried.setdefault(key, []).append(extra)
    limit = report.environment.get("open_files_limit")
    out = [
        leaked_handles(key, grown[key], where[key], arm="persistent", limit=limit)
        for key in HANDLE_LABELS
        if key in grown
    ]
    held = {k: max(v) for k, v in carried.items() if k not in grown}
    if held:
        text = ", ".join(plural(n, HANDLE_LABELS[k]) for k, n in held.items())
        out.append(
            Finding(
                id="state-carried",
                severity="info",
                arm="persistent",
                title=f"each persistent worker holds {text} from one epoch to the next",
                evidence={f"extra_{k}": n for k, n in held.items()},
                fix="expected for lazily opened resources; make sure they survive reuse "
                "(file positions, cursors, connections that time out, per-epoch state)",
            )
        )
    return out


def _at_start(w: WorkerResult, key: str) -> int:
    """What the worker held before any of the user's code ran in it (NOTE [held at
    init]); from an older report, when the sampler first saw it."""
    if key in w.held_at_init:
        return int(w.held_at_init[key])
    return int(getattr(w.states[0], key))
