"""Pure: a watched run's events and samples -> its loaders, epochs, workers, pools.

See NOTE [watch hook]. Each loader is told apart by the id the hook gave it (a framework's
rebuild of a loader keeps its id); an epoch is one `iter_start` of that loader up to its
`iter_end` (exhausted, or left at its last batch) or the next `iter_start`; a worker
belongs to the loader its init probe names, and to the epochs it was alive in.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev
from loaderprof.inside.procfs import HANDLE_LABELS
from loaderprof.inside.waits import wait_split
from loaderprof.measure.readings import (
    copy_window,
    dataset_state,
    deep_ticks,
    in_pause,
    iter_spans,
    pool_whole_until,
    read_at,
    workers_reused,
)
from loaderprof.measure.sampler import Sample
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.metrics import Stat
from loaderprof.model.trials import DatasetState
from loaderprof.model.watch import (
    PoolSpan,
    WatchedEpoch,
    WatchedLoader,
    WatchedWorker,
    whole_epochs,
)

Events = Mapping[str, list[Mapping[str, Any]]]


def by_kind(events: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The events by kind, in time order, each loader named L1, L2... in the order
    the command built them (the hook's ids are `<pid>.<n>`, unique across ranks)."""
    ordered = sorted(events, key=lambda e: e["t"])
    names: dict[Any, str] = {}
    for ev in ordered:
        if ev["ev"] == Ev.LOADER_CREATED:
            names.setdefault(ev.get("loader"), f"L{len(names) + 1}")
    out: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for ev in ordered:
        if ev.get("loader") in names:
            ev = {**ev, "loader": names[ev["loader"]]}
        out[ev["ev"]].append(ev)
    return out


def _workers(
    evs: Events, lid: str, samples: Sequence[Sample], gone: Mapping[int, int], t0: int
) -> tuple[WatchedWorker, ...]:
    inits = [ev for ev in evs[Ev.WORKER_INIT] if ev.get("loader") == lid]
    readies = {ev["pid"]: ev["t"] for ev in evs[Ev.WORKER_READY]}
    exits = {ev["pid"]: ev["t"] for ev in evs[Ev.WORKER_EXIT]}
    whole = pool_whole_until(inits, exits, gone)
    peaks: dict[int, tuple[int | None, int | None]] = {}
    for s in samples:
        if s.uss is None or s.pid not in whole or read_at(s) >= whole[s.pid]:
            continue
        uss, pss = peaks.get(s.pid, (None, None))
        peaks[s.pid] = (max(uss or 0, s.uss), max(pss or 0, s.pss or 0) if s.pss else pss)

    def rel(t: int | None) -> float | None:
        return None if t is None else (t - t0) / NS

    return tuple(
        WatchedWorker(
            pid=int(ev["pid"]),
            worker_id=int(ev["worker_id"]),
            started_s=rel(ev.get("proc_start")),
            init_s=(ev["t"] - t0) / NS,
            ready_s=rel(readies.get(ev["pid"])),
            exited_s=rel(exits.get(ev["pid"], gone.get(ev["pid"]))),
            peak_uss_bytes=peaks.get(ev["pid"], (None, None))[0],
            peak_pss_bytes=peaks.get(ev["pid"], (None, None))[1],
        )
        for ev in inits
    )


def _with_handles(
    workers: Sequence[WatchedWorker],
    epochs: Sequence[WatchedEpoch],
    samples: Sequence[Sample],
    t0: int,
    counted: Sequence[Mapping[str, Any]] = (),
) -> tuple[WatchedWorker, ...]:
    """Each worker's handles after each of its loader's epochs: what it counted itself
    as each later epoch began and as it exited (`counted`: its WORKER_STATE and
    WORKER_EXIT events), which needs no pause; else the sampler's reading in each pause
    long enough to hold one."""
    own: dict[int, list[dict[str, int]]] = {}
    for ev in sorted(counted, key=lambda ev: ev["t"]):
        if ev.get("held"):
            own.setdefault(int(ev["pid"]), []).append(dict(ev["held"]))
    gaps = [
        (t0 + int(a.end_s * NS), t0 + int(b.start_s * NS))
        for a, b in itertools.pairwise(epochs)
        if a.end_s is not None
    ]
    out = []
    for w in workers:
        if w.pid in own:
            out.append(dataclasses.replace(w, handles_by_pause=tuple(own[w.pid])))
            continue
        held = []
        for lo, hi in gaps:
            inside = [
                s
                for s in samples
                if s.pid == w.pid and s.handles is not None and in_pause((s,), lo, hi)
            ]
            if inside:
                h = inside[-1].handles
                assert h is not None
                held.append({k: int(getattr(h, k)) for k in HANDLE_LABELS})
        out.append(dataclasses.replace(w, handles_by_pause=tuple(held)))
    return tuple(out)


def _with_reading(
    workers: Sequence[WatchedWorker],
    epochs: Sequence[WatchedEpoch],
    samples: Sequence[Sample],
    batch_size: int | None,
    t0: int,
) -> tuple[WatchedWorker, ...]:
    """See NOTE [copy-on-read]. Each worker's USS and RSS from its first USS reading after
    its epoch's first batch and its own ready (its start-up copy already paid) to its
    USS peak, and about how many samples it read in between."""
    out = []
    for w in workers:
        served = [e for e in epochs if w.pid in e.worker_pids and e.first_batch_s is not None]
        if not served:
            out.append(w)
            continue
        # The epoch's first batch may come from another worker while this one is still
        # starting: its own start-up copy is paid once it is ready.
        first = max(served[0].start_s + (served[0].first_batch_s or 0.0), w.ready_s or 0.0)
        window = copy_window(
            sorted(
                ((s.t_ns - t0) / NS, s.uss, s.rss)
                for s in samples
                if s.pid == w.pid and s.uss is not None and (s.t_ns - t0) / NS >= first
            )
        )
        if window is None:
            out.append(w)
            continue
        (a, u0, r0), (b, u1, r1) = window
        read = sum(
            (e.batches or 0)
            * (batch_size or 1)
            / max(1, len(e.worker_pids))
            # The share of the epoch that fell between the two readings.
            * max(0.0, min(b, e.end_s) - max(a, e.start_s))
            / (e.end_s - e.start_s)
            for e in served
            if e.end_s is not None and e.end_s > e.start_s
        )
        out.append(
            dataclasses.replace(
                w,
                read_start_uss_bytes=u0,
                read_uss_growth_bytes=u1 - u0,
                read_rss_growth_bytes=r1 - r0,
                read_samples=round(read),
            )
        )
    return tuple(out)


def _iter_events(evs: Events) -> list[Mapping[str, Any]]:
    return [*evs[Ev.ITER_START], *evs[Ev.ITER_FIRST_BATCH], *evs[Ev.ITER_END]]


def _new_workers(evs: Events, lid: str, starts: Sequence[int]) -> list[set[int] | None]:
    """Per epoch, the workers its iter() started, by their iterator's base seed
    (`inside.seed`), whenever each began; None where the seeds do not tell (a report's
    events from before them): the epoch's stamps do."""
    seed_of = {ev["pid"]: ev.get("pool") for ev in evs[Ev.WORKER_INIT] if ev.get("loader") == lid}
    seeds: list[Any] = [None] * len(starts)
    for ev in evs.get(Ev.ITER_POOL, []):
        at = bisect.bisect_right(starts, ev["t"]) - 1
        if ev.get("loader") == lid and at >= 0:
            seeds[at] = ev.get("pool")
    told = any(v is not None for v in seed_of.values())
    out: list[set[int] | None] = []
    claimed: set[int] = set()
    for seed in seeds:
        mine = {pid for pid, s in seed_of.items() if seed is not None and s == seed}
        # A persistent pool's later epochs keep its seed: its workers are its first's.
        out.append(mine - claimed if told and seed is not None else None)
        claimed |= mine
    return out


def _epochs(
    evs: Events, lid: str, workers: Sequence[WatchedWorker], t0: int, t_end: int
) -> tuple[WatchedEpoch, ...]:
    spans = iter_spans(_iter_events(evs), lid)
    by_seed = _new_workers(evs, lid, [span.start_ns for span in spans])
    out = []
    for i, span in enumerate(spans):
        start, first, end = span.start_ns, span.first_ns, span.end
        stop = spans[i + 1].start_ns if i + 1 < len(spans) else t_end + 1
        lo, hi = (start - t0) / NS, ((end["t"] if end else min(stop, t_end)) - t0) / NS
        # A pool the loop left alive (a framework's non-persistent iterator) ends once the
        # next iterator replaces it, before that one's first batch: it served no batch.
        served_from = lo if first is None else (first - t0) / NS
        alive = [
            w
            for w in workers
            if w.init_s <= hi and (w.exited_s is None or w.exited_s >= served_from)
        ]
        new = by_seed[i]
        if new is None:
            new = {w.pid for w in alive if w.init_s >= lo}
        out.append(
            WatchedEpoch(
                index=i + 1,
                start_s=lo,
                first_batch_s=None if first is None else (first - start) / NS,
                end_s=None if end is None else (end["t"] - t0) / NS,
                batches=None if end is None else int(end.get("batches", 0)),
                worker_pids=tuple(sorted(new | {w.pid for w in alive})),
                # Told by the init probe's exact stamp (a process start read from /proc
                # is rounded down to 10 ms, and can fall before the iter() that made it).
                new_worker_pids=tuple(sorted(new)),
                # Before the hook told how an epoch ended, only StopIteration ended one.
                ended=None if end is None else str(end.get("ended", "exhausted")),
                planned_batches=span.planned,
                wait=None if end is None else wait_split(end, (end["t"] - start) / NS),
            )
        )
    return tuple(out)


def _median_wait(epochs: Sequence[WatchedEpoch]) -> tuple[WaitSplit | None, str | None]:
    """The steady epochs' median waits where there are some, else the first epoch's:
    whole epochs only (NOTE [epochs left early])."""
    whole = whole_epochs(epochs)
    steady = WaitSplit.of(e.wait for e in whole if e.index > 1)
    if steady is not None:
        return steady, "steady"
    first = WaitSplit.of(e.wait for e in whole[:1] if e.index == 1)
    return first, None if first is None else "first"


def _settings(evs: Events, created: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the loader ran with: its last rebuild's settings (a framework may change
    them), the site and the process it was built in kept from the user's own."""
    rebuilt = [ev for ev in evs.get(Ev.LOADER_REBUILT, []) if ev.get("loader") == created["loader"]]
    if not rebuilt:
        return created
    keep = ("site", "pid", "rank", "t", "loader")
    return {**rebuilt[-1], **{k: created.get(k) for k in keep}}


def _states(evs: Events, lid: str) -> tuple[DatasetState, ...]:
    """See NOTE [stale worker state]. The Dataset's fingerprints, the main process's at
    each `iter()` of a persistent loader (taken just before its stamp: the epoch
    whose `iter()` comes next) and each worker's as its pool resumed (the epoch whose
    `iter()` came last before it)."""
    starts = [span.start_ns for span in iter_spans(_iter_events(evs), lid)]

    def epoch(kind: str, t: int) -> int:
        if kind == Ev.MAIN_STATE:
            return bisect.bisect_left(starts, t) + 1
        return bisect.bisect_right(starts, t)

    return tuple(
        dataset_state(ev, epoch(kind, ev["t"]))
        for kind in (Ev.MAIN_STATE, Ev.WORKER_STATE)
        for ev in evs.get(kind, [])
        if ev.get("loader") == lid and 0 < epoch(kind, ev["t"]) <= len(starts)
    )


def _reused(epochs: Sequence[WatchedEpoch], num_workers: int) -> bool | None:
    """By compare's rule (`workers_reused`), over the epochs that ended (and the first,
    which started the pool)."""
    if num_workers == 0:
        return None
    ran = [e for e in epochs if e.index == 1 or e.end_s is not None]
    return workers_reused([[(e.index, e.new_worker_pids, e.worker_pids) for e in ran]])


def _idle_series(
    epochs: Sequence[WatchedEpoch],
    pids: set[int],
    samples: Sequence[Sample],
    walks: Sequence[list[Sample]],
    t0: int,
) -> tuple[list[int], list[int], list[int]]:
    """The pool's USS and RSS in each pause between its epochs: the peak of the pause's
    whole walks (USS), of its ticks (RSS), and the epoch each pause followed; pauses
    without a reading are left out (NOTE [pauses not read])."""
    uss_by_gap: list[int] = []
    rss_by_gap: list[int] = []
    after: list[int] = []
    for a, b in itertools.pairwise(epochs):
        if a.end_s is None:
            continue
        lo, hi = t0 + int(a.end_s * NS), t0 + int(b.start_s * NS)
        uss = [sum(s.uss or 0 for s in g if s.pid in pids) for g in walks if in_pause(g, lo, hi)]
        ticks: dict[int, list[Sample]] = defaultdict(list)
        for s in samples:
            if s.pid in pids and lo <= s.t_ns <= hi:
                ticks[s.tick].append(s)
        rss = [sum(s.rss for s in g) for g in ticks.values()]
        if uss and rss:
            uss_by_gap.append(max(uss))
            rss_by_gap.append(max(rss))
            after.append(a.index)
    return uss_by_gap, rss_by_gap, after


def loaders(
    evs: Events,
    samples: Sequence[Sample],
    gone: Mapping[int, int],
    t0: int,
    t_end: int,
) -> tuple[WatchedLoader, ...]:
    walks = deep_ticks(samples)
    out = []
    for created in evs[Ev.LOADER_CREATED]:
        ev = _settings(evs, created)
        lid = str(ev["loader"])
        workers = _workers(evs, lid, samples, gone, t0)
        epochs = _epochs(evs, lid, workers, t0, t_end)
        pids = {w.pid for w in workers}
        resumed = [e for e in evs.get(Ev.WORKER_STATE, []) if e.get("loader") == lid]
        exited = [e for e in evs.get(Ev.WORKER_EXIT, []) if e["pid"] in pids]
        exited += [
            {"pid": int(p), "t": e["t"], "held": h}
            for e in evs.get(Ev.HELD_AT_EXIT, [])
            for p, h in e["held"].items()
            if int(p) in pids
        ]
        workers = _with_handles(workers, epochs, samples, t0, [*resumed, *exited])
        workers = _with_reading(workers, epochs, samples, ev.get("batch_size"), t0)
        done = whole_epochs(epochs)
        startups = [w.startup_s for w in workers if w.startup_s is not None]
        peaks = [w.peak_uss_bytes for w in workers if w.peak_uss_bytes is not None]
        wait, wait_epochs = _median_wait(epochs)
        idle_uss, idle_rss, idle_after = _idle_series(
            epochs, {w.pid for w in workers}, samples, walks, t0
        )
        out.append(
            WatchedLoader(
                id=lid,
                site=str(ev.get("site")),
                pid=int(ev["pid"]),
                rank=ev.get("rank"),
                cls=str(ev.get("cls")),
                num_workers=int(ev.get("num_workers") or 0),
                persistent_workers=bool(ev.get("persistent_workers")),
                prefetch_factor=ev.get("prefetch_factor"),
                pin_memory=bool(ev.get("pin_memory")),
                batch_size=ev.get("batch_size"),
                start_method=ev.get("start_method"),
                dataset_type=str(ev.get("dataset_type")),
                dataset_len=ev.get("dataset_len"),
                created_s=(ev["t"] - t0) / NS,
                epochs=epochs,
                workers=workers,
                workers_reused=_reused(epochs, int(ev.get("num_workers") or 0)),
                cold_epoch_s=done[0].wall_s if done and done[0].index == 1 else None,
                steady_epoch_s=Stat.of([e.wall_s for e in done if e.index > 1 and e.wall_s]),
                cold_first_batch_s=epochs[0].first_batch_s if epochs else None,
                steady_first_batch_s=Stat.of(
                    [e.first_batch_s for e in epochs[1:] if e.first_batch_s is not None]
                ),
                worker_startup_s=Stat.of(startups),
                peak_worker_uss_bytes=max(peaks) if peaks else None,
                idle_workers_uss_bytes=int(statistics.median(idle_uss)) if idle_uss else None,
                idle_uss_by_epoch=tuple(idle_uss),
                idle_rss_by_epoch=tuple(idle_rss),
                idle_after_epochs=tuple(idle_after),
                dataset_states=_states(evs, lid),
                wait=wait,
                wait_epochs=wait_epochs,
                setting=ev.get("setting"),
                built_for=ev.get("built_for"),
            )
        )
    return tuple(out)


def pools(found: Sequence[WatchedLoader], t_end_s: float) -> tuple[PoolSpan, ...]:
    """Each loader's worker pools: the span from its first worker's start to its last
    one's exit, per set of workers that served one epoch or several."""
    out = []
    for ld in found:
        groups: dict[tuple[int, ...], list[WatchedWorker]] = {}
        by_pid = {w.pid: w for w in ld.workers}
        for e in ld.epochs:
            # The workers this epoch started (an earlier epoch's may still be alive).
            members = tuple(p for p in e.new_worker_pids if p in by_pid)
            if members and not any(set(members) & set(k) for k in groups):
                groups[members] = [by_pid[p] for p in members]
        for ws in groups.values():
            starts = [w.started_s for w in ws if w.started_s is not None]
            ends = [w.exited_s if w.exited_s is not None else t_end_s for w in ws]
            if starts:
                out.append(PoolSpan(ld.id, min(starts), max(ends), len(ws)))
    return tuple(sorted(out, key=lambda p: p.start_s))
