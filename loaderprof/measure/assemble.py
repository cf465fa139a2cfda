"""Turn one trial's raw events and memory samples into a TrialResult.

Pure: no processes, no clocks, no I/O, so the bookkeeping is unit-tested on
synthetic events. Epochs are windows [epoch_start, epoch_end] on the shared
monotonic clock; a worker batch belongs to the epoch whose window holds its
stamp. That is exact: a persistent worker does not prefetch epoch k+1 before
`iter()` resumes it, and a non-persistent worker only lives in its epoch.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev
from loaderprof.inside.waits import wait_split
from loaderprof.measure.memory import (
    ByKind,
    held_during_val,
    idle_windows,
    in_window,
    memory_window,
    own_collections,
    peak,
    per_process,
    setup_sample,
    shm_base,
    shutdown_peak,
    window_memory,
    worker_states,
)
from loaderprof.measure.readings import dataset_state, deep_ticks, pool_whole_until, read_at
from loaderprof.measure.sampler import Sample
from loaderprof.model.trials import (
    BatchSpan,
    DatasetState,
    EpochResult,
    ProcessTimeline,
    Setup,
    TrialError,
    TrialMemory,
    TrialResult,
    WallParts,
    WorkerResult,
)


def assemble_trial(
    *,
    arm: str,
    index: int,
    t0_ns: int,
    t_end_ns: int,
    main_pid: int,
    returncode: int | None,
    events: Sequence[Mapping[str, Any]],
    samples: Sequence[Sample],
    gone_ns: Mapping[int, int] | None = None,
    error: TrialError | None = None,
    shm_size: int | None = None,
    shm_used: Sequence[tuple[int, int]] = (),
) -> TrialResult:
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for ev in events:
        by_kind[ev["ev"]].append(ev)
    clock = _Clock(t0_ns, by_kind)
    setup = Setup(
        clock.rel(clock.first(Ev.IMPORTED)),
        clock.rel(clock.first(Ev.DATASET_BUILT)),
        clock.rel(clock.first(Ev.LOADER_BUILT)),
    )
    windows = _Windows(by_kind)
    epochs = _epochs(windows, by_kind, t0_ns)
    lo, hi = memory_window(by_kind, t_end_ns)
    own = own_collections(by_kind, t_end_ns)
    inside = in_window(samples, lo, hi, own)
    kept = {(s.tick, s.pid) for s in inside}
    summable = {g[0].tick: len(g) for g in deep_ticks(samples)}
    per_pid = per_process(samples)
    inits = {ev["pid"]: ev for ev in by_kind[Ev.WORKER_INIT]}
    exits = {ev["pid"]: ev["t"] for ev in by_kind[Ev.WORKER_EXIT]}
    whole = pool_whole_until(inits.values(), exits, gone_ns or {})
    workers = _workers(inits, windows, by_kind, per_process(inside), gone_ns or {}, clock, whole)
    worker_pids = set(inits)
    memory = _trial_memory(
        inside, samples, by_kind, main_pid, inits, clock, (lo, hi), t_end_ns, whole
    )
    timeline = tuple(
        ProcessTimeline(
            pid=pid,
            role="main" if pid == main_pid else ("worker" if pid in worker_pids else "other"),
            worker_id=int(inits[pid]["worker_id"]) if pid in inits else None,
            t_s=tuple(round((s.t_ns - t0_ns) / NS, 6) for s in series),
            rss_bytes=tuple(s.rss for s in series),
            uss_bytes=tuple(s.uss for s in series),
            pss_bytes=tuple(s.pss for s in series),
            in_window=tuple((s.tick, s.pid) in kept for s in series),
            walk_processes=tuple(summable.get(s.tick, 0) for s in series),
        )
        for pid, series in sorted(per_pid.items())
    )
    # Past TRIAL_END only the user's exit handlers run (NOTE [no teardown]): however
    # they end, the trial was complete.
    complete = error is None and Ev.TRIAL_END in by_kind
    return TrialResult(
        arm=arm,
        index=index,
        complete=complete,
        wall_s=(t_end_ns - t0_ns) / NS,
        returncode=returncode,
        setup=setup,
        epochs=epochs,
        workers=workers,
        memory=memory,
        timeline=timeline,
        main_pid=main_pid,
        warnings=tuple(str(ev.get("message", "")) for ev in by_kind[Ev.WARNING]),
        error=error,
        shm_size_bytes=shm_size,
        shm_base_used_bytes=shm_base(shm_used, windows.closed),
        shm_peak_used_bytes=max((u for _, u in shm_used), default=None),
        batches=tuple(
            BatchSpan(
                pid=int(b["pid"]),
                start_s=round(((b.get("fetch") or b["start"]) - t0_ns) / NS, 6),
                end_s=round((b["t"] - t0_ns) / NS, 6),
                samples=int(b.get("n", 0)),
            )
            for b in by_kind[Ev.BATCH]
        ),
        wall_parts=_wall_parts(clock, epochs, by_kind, t_end_ns),
        dataset_states=_dataset_states(by_kind),
        full_batches=next((ev.get("full_batches") for ev in by_kind[Ev.LOADER_BUILT]), None),
        dataset_attribute_bytes=next((ev["sizes"] for ev in by_kind[Ev.DATASET_ATTRIBUTES]), {}),
        workers_alive_at_close=next(
            (ev.get("workers_alive") for ev in by_kind[Ev.LOADER_CLOSED]), None
        ),
    )


def _trial_memory(
    inside: Sequence[Sample],
    samples: Sequence[Sample],
    by_kind: ByKind,
    main_pid: int,
    inits: Mapping[int, Mapping[str, Any]],
    clock: _Clock,
    window: tuple[int | None, int | None],
    t_end_ns: int,
    whole: Mapping[int, int],
) -> TrialMemory:
    """The trial's memory figures: those of the window, the set-up baseline, the
    shutdown peak and (NOTE [validation pass]) what the train pool holds meanwhile."""
    lo, hi = window
    train = {pid for pid, ev in inits.items() if ev.get("loader", "train") == "train"}
    memory = window_memory(inside, main_pid, set(inits), idle_windows(by_kind), whole)
    memory = dataclasses.replace(
        memory,
        window_start_s=clock.rel(lo),
        window_end_s=clock.rel(hi) if lo is not None else None,
        shutdown_peak_total_pss_bytes=shutdown_peak(samples, by_kind, t_end_ns),
        val_train_pool_uss_bytes=held_during_val(inside, train, by_kind),
    )
    baseline = setup_sample(per_process(samples).get(main_pid, []), clock.first(Ev.SETUP_READ), lo)
    if baseline is not None:
        memory = dataclasses.replace(
            memory,
            setup_main_rss_bytes=baseline.rss,
            setup_main_uss_bytes=baseline.uss,
            setup_main_pss_bytes=baseline.pss,
        )
    return memory


class _Clock:
    """Event stamps as seconds from the trial start."""

    def __init__(self, t0_ns: int, by_kind: ByKind) -> None:
        self.t0_ns = t0_ns
        self._by_kind = by_kind

    def first(self, kind: str) -> int | None:
        evs = self._by_kind.get(kind)
        return evs[0]["t"] if evs else None

    def rel(self, t: int | None) -> float | None:
        return None if t is None else (t - self.t0_ns) / NS

    def between(self, a: str, b: str) -> float | None:
        ta, tb = self.first(a), self.first(b)
        return None if ta is None or tb is None else (tb - ta) / NS


class _Windows:
    """Epoch windows [epoch_start, epoch_end] on the shared clock; an epoch without
    an end (a failure) is open and is not a measured epoch."""

    def __init__(self, by_kind: ByKind) -> None:
        starts = {ev["epoch"]: ev["t"] for ev in by_kind[Ev.EPOCH_START]}
        self.ends = {ev["epoch"]: ev for ev in by_kind[Ev.EPOCH_END]}
        self.closed = [(e, starts[e], self.ends[e]["t"]) for e in sorted(self.ends) if e in starts]
        self.open = [(e, starts[e]) for e in sorted(starts) if e not in self.ends]

    def epoch_of(self, t: int) -> int | None:
        for e, lo, hi in self.closed:
            if lo <= t <= hi:
                return e
        for e, lo in self.open:
            if t >= lo:
                return e
        return None


def _epochs(windows: _Windows, by_kind: ByKind, t0_ns: int) -> tuple[EpochResult, ...]:
    first_batches = {ev["epoch"]: ev["t"] for ev in by_kind[Ev.FIRST_BATCH]}
    # See NOTE [validation pass]. An epoch's figures are the train loader's; the
    # validation pass adds only its own time, first batch and batches.
    val_pids = {ev["pid"] for ev in by_kind[Ev.WORKER_INIT] if ev.get("loader") == "val"}
    batches_by_epoch: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for ev in by_kind[Ev.BATCH]:
        e = windows.epoch_of(ev["t"])
        if e is not None and ev["pid"] not in val_pids:
            batches_by_epoch[e].append(ev)
    new_by_epoch: dict[int, list[int]] = defaultdict(list)
    for ev in by_kind[Ev.WORKER_INIT]:
        e = windows.epoch_of(ev["t"])
        if e is not None and ev["pid"] not in val_pids:
            new_by_epoch[e].append(ev["pid"])
    epochs = []
    for e, lo, hi in windows.closed:
        bevs = batches_by_epoch.get(e, [])
        n_samples = sum(int(b.get("n", 0)) for b in bevs)
        wall = (hi - lo) / NS
        val = _val_pass(by_kind, e)
        # Throughput is the train pass's (the validation pass's samples are not counted).
        train_wall = wall - val.get("val_s", 0.0)
        fb = first_batches.get(e)
        epochs.append(
            EpochResult(
                epoch=e,
                start_s=(lo - t0_ns) / NS,
                wall_s=wall,
                first_batch_s=None if fb is None else (fb - lo) / NS,
                batches=int(windows.ends[e].get("batches", 0)),
                samples=n_samples,
                samples_per_s=n_samples / train_wall if train_wall > 0 else None,
                worker_pids=tuple(sorted({int(b["pid"]) for b in bevs})),
                new_worker_pids=tuple(sorted(new_by_epoch.get(e, []))),
                order_digest=windows.ends[e].get("order")
                or (None if windows.ends[e].get("cut") else _stream_order(bevs)),
                max_batch_bytes=max((int(b.get("bytes", 0)) for b in bevs), default=None),
                last_batch_s=_since(windows.ends[e].get("last_batch"), lo),
                wait=wait_split(windows.ends[e], wall),
                **_content(bevs),
                **val,
            )
        )
    return tuple(epochs)


def _val_pass(by_kind: ByKind, epoch: int) -> dict[str, Any]:
    """The epoch's validation pass (NOTE [validation pass]): its wall, first-batch
    wait and batches; nothing without --val."""

    def at(kind: str) -> Mapping[str, Any] | None:
        return next((ev for ev in by_kind.get(kind, []) if ev.get("epoch") == epoch), None)

    start, end, first = at(Ev.VAL_START), at(Ev.VAL_END), at(Ev.VAL_FIRST_BATCH)
    if start is None or end is None:
        return {}
    return {
        "val_s": (end["t"] - start["t"]) / NS,
        "val_first_batch_s": None if first is None else (first["t"] - start["t"]) / NS,
        "val_batches": int(end.get("batches", 0)),
    }


def _since(t: int | None, start: int) -> float | None:
    return None if t is None else (t - start) / NS


def _workers(
    inits: Mapping[int, Mapping[str, Any]],
    windows: _Windows,
    by_kind: ByKind,
    per_pid: Mapping[int, list[Sample]],
    gone: Mapping[int, int],
    clock: _Clock,
    whole: Mapping[int, int],
) -> tuple[WorkerResult, ...]:
    """One row per worker process; its memory from the samples inside the window while
    its pool was whole (`whole`: readings.pool_whole_until)."""
    batches_by_pid: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for ev in by_kind[Ev.BATCH]:
        batches_by_pid[ev["pid"]].append(ev)
    readies = {ev["pid"]: ev["t"] for ev in by_kind[Ev.WORKER_READY]}
    threads: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for ev in by_kind[Ev.WORKER_THREADS]:
        threads[ev["pid"]].append(ev)
    # Each worker id's pickles in the order its processes were started.
    pickles: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for ev in by_kind[Ev.WORKER_PICKLED]:
        pickles[ev.get("worker_id")].append(ev)
    exits = {ev["pid"]: ev["t"] for ev in by_kind[Ev.WORKER_EXIT]}
    pauses = idle_windows(by_kind)
    workers = []
    for pid, ev in sorted(inits.items(), key=lambda kv: (kv[1]["t"], kv[1]["worker_id"])):
        bevs = batches_by_pid.get(pid, [])
        first_epoch = windows.epoch_of(ev["t"])
        if first_epoch is None:
            known = [e for e in (windows.epoch_of(b["t"]) for b in bevs) if e is not None]
            first_epoch = min(known) if known else None
        series = [s for s in per_pid.get(pid, []) if read_at(s) < whole[pid]]
        queue = pickles.get(ev["worker_id"])
        pickled = queue.pop(0) if queue else {}
        workers.append(
            WorkerResult(
                pid=pid,
                worker_id=int(ev["worker_id"]),
                first_epoch=first_epoch,
                started_s=clock.rel(ev.get("proc_start")),
                init_start_s=(ev["t"] - clock.t0_ns) / NS,
                ready_s=clock.rel(readies.get(pid)),
                first_batch_s=clock.rel(min(b["t"] for b in bevs)) if bevs else None,
                exited_s=clock.rel(exits.get(pid, gone.get(pid))),
                batches=len(bevs),
                samples=sum(int(b.get("n", 0)) for b in bevs),
                peak_rss_bytes=max((s.rss for s in series), default=None),
                peak_uss_bytes=peak(s.uss for s in series),
                peak_pss_bytes=peak(s.pss for s in series),
                uss_samples=sum(1 for s in series if s.uss is not None),
                states=worker_states(series, pauses, clock.t0_ns),
                first_batch_uss_bytes=_first_after(
                    series, min((b["t"] for b in bevs), default=None)
                ),
                **_worker_detail(ev, bevs, threads[pid], pickled, clock),
            )
        )
    return tuple(workers)


def _thread_demand(threads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """See NOTE [worker threads]. The most cores the worker's threads wanted (each report
    covers its life since init), and what started its busy threads."""
    read = [t for t in threads if t.get("main_demand") is not None]
    if not read:
        return {}
    peak = max(read, key=lambda t: float(t["main_demand"]) + float(t["thread_demand"]))
    origins: dict[str, int] = {}
    for t in threads:
        for name, n in (t.get("origins") or {}).items():
            origins[name] = max(origins.get(name, 0), int(n))
    return {
        "cpu_demand": round(float(peak["main_demand"]) + float(peak["thread_demand"]), 4),
        "thread_cpu_demand": float(peak["thread_demand"]),
        "cpu_wait": round(float(peak["main_wait"]) + float(peak["thread_wait"]), 4),
        "thread_cpu_wait": float(peak["thread_wait"]),
        "thread_origins": origins,
    }


def _worker_detail(
    init: Mapping[str, Any],
    bevs: Sequence[Mapping[str, Any]],
    threads: Sequence[Mapping[str, Any]],
    pickled: Mapping[str, Any],
    clock: _Clock,
) -> dict[str, Any]:
    """A worker's batch times (NOTE [worker threads]), threads and start-up breakdown
    (NOTE [start-up breakdown])."""
    fetches = [b["fetch"] for b in bevs if b.get("fetch")]
    imports = init.get("unpickle_import_ns")
    return {
        "median_batch_s": _median_span(bevs),
        "median_own_batch_s": _median_span(bevs, own=True),
        "peak_threads": max((int(t["threads"]) for t in threads), default=None),
        "compute_threads": max((int(t["compute"]) for t in threads), default=None),
        "torch_threads": int(threads[-1]["torch_threads"]) if threads else None,
        **_thread_demand(threads),
        "pickled_bytes": pickled.get("bytes"),
        "pickle_s": pickled.get("seconds"),
        "unpickle_start_s": clock.rel(init.get("unpickle_start")),
        "unpickled_s": clock.rel(init.get("unpickle_end")),
        "unpickle_import_s": None if imports is None else round(imports / NS, 6),
        "first_fetch_s": clock.rel(min(fetches)) if fetches else None,
        "loader": str(init.get("loader") or "train"),
        "held_at_init": dict(init.get("held") or {}),
    }


def _median_span(batch_events: Sequence[Mapping[str, Any]], own: bool = False) -> float | None:
    """The median batch: its first fetch to the end of its collate; `own`: less the
    worker's wait for a CPU meanwhile (None where no batch measured it)."""
    if own:
        batch_events = [b for b in batch_events if b.get("waited") is not None]
    spans = [
        (b["t"] - (b.get("fetch") or b["start"]) - (int(b["waited"]) if own else 0)) / NS
        for b in batch_events
    ]
    return round(max(0.0, statistics.median(spans)), 6) if spans else None


def _dataset_states(by_kind: ByKind) -> tuple[DatasetState, ...]:
    return tuple(
        dataset_state(ev, int(ev["epoch"]))
        for kind in (Ev.MAIN_STATE, Ev.WORKER_STATE)
        for ev in by_kind.get(kind, [])
    )


def _first_after(series: Sequence[Sample], t_ns: int | None) -> int | None:
    if t_ns is None:
        return None
    return next((s.uss for s in series if s.uss is not None and s.t_ns >= t_ns), None)


def _wall_parts(
    clock: _Clock,
    epochs: Sequence[EpochResult],
    by_kind: ByKind,
    t_end_ns: int,
) -> WallParts:
    pauses = sum((ends - start) / NS for start, ends, _ in idle_windows(by_kind) if ends >= start)
    # A memory trial's wait for its set-up reading (NOTE [sampled pauses]) is a
    # pause for the sampler, not the user's set-up: the loader is built right after.
    waited = clock.between(Ev.SETUP_READ, Ev.LOADER_BUILDING) or 0.0
    setup = clock.between(Ev.IMPORTED, Ev.LOADER_BUILT)
    closed = clock.first(Ev.LOADER_CLOSED)
    parts = WallParts(
        interpreter_s=clock.rel(clock.first(Ev.CHILD_START)),
        imports_s=clock.between(Ev.CHILD_START, Ev.IMPORTED),
        setup_s=None if setup is None else setup - waited,
        epochs_s=sum(e.wall_s for e in epochs),
        pauses_s=pauses + waited,
        shutdown_s=clock.between(Ev.LOADER_CLOSING, Ev.LOADER_CLOSED),
        exit_s=None if closed is None else (t_end_ns - closed) / NS,
        other_s=None,
    )
    if closed is None:
        return parts
    known = [
        v
        for v in (parts.interpreter_s, parts.imports_s, parts.setup_s, parts.shutdown_s)
        if v is not None
    ]
    wall = (t_end_ns - clock.t0_ns) / NS
    other = wall - sum(known) - parts.epochs_s - parts.pauses_s - (parts.exit_s or 0.0)
    return dataclasses.replace(parts, other_s=max(other, 0.0))


def _stream_order(batch_events: Sequence[Mapping[str, Any]]) -> str | None:
    """An IterableDataset's order, which no sampler holds: each worker's stream, its
    samples' content digests in the order it made them, worker by worker. The streams,
    not their interleaving, which `in_order=False` leaves to timing. None without
    digests."""
    if not batch_events or any("d" not in b for b in batch_events):
        return None
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    by_worker = sorted(batch_events, key=lambda b: (b.get("worker_id") or 0, b["start"]))
    for b in by_worker:
        h.update(f"{b.get('worker_id')}:{','.join(b['d'])};".encode())
    return h.hexdigest()


def _content(batch_events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    digests = [d for b in batch_events for d in b.get("d", ())]
    if not digests:
        return {}
    import hashlib

    counts = Counter(digests)
    h = hashlib.blake2b(digest_size=8)
    for d in sorted(digests):
        h.update(d.encode())
    return {
        "content_digest": h.hexdigest(),
        "distinct_samples": len(counts),
        "duplicate_samples": sum(c - 1 for c in counts.values() if c > 1),
        "max_sample_repeats": max(counts.values()),
    }
