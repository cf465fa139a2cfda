"""One trial's memory figures from the sampler's walks (measure/sampler.py), cut to
the memory window (NOTE [memory window]) and its pauses. Pure, like assemble.py."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev
from loaderprof.measure.readings import deep_ticks, in_pause, peak_worker_processes, read_at
from loaderprof.measure.sampler import Sample
from loaderprof.model.trials import TrialMemory, WorkerState

ByKind = Mapping[str, list[Mapping[str, Any]]]


def memory_window(by_kind: ByKind, t_end_ns: int) -> tuple[int | None, int]:
    """NOTE [memory window]: from the loader's construction until it is dropped after
    the last epoch. What follows, its workers shutting down, is each worker's own
    interpreter teardown (decrefs that copy inherited pages, finalizers): a
    persistent pool pays it once, when training is over, so it has a figure of its
    own (`shutdown_peak_total_pss_bytes`), while a non-persistent pool's workers
    exit inside every epoch, and that stays in the window. A trial that failed ends
    its window at the error (what follows is the trial process unwinding); one
    stopped from outside (a timeout, an interrupt, a crash) at the moment the
    parent stopped it."""

    def first(kind: str) -> int | None:
        evs = by_kind.get(kind)
        return evs[0]["t"] if evs else None

    start = first(Ev.LOADER_BUILDING) or first(Ev.LOADER_BUILT) or first(Ev.EPOCH_START)
    end = first(Ev.LOADER_CLOSING) or first(Ev.LOADER_CLOSED) or first(Ev.ERROR) or t_end_ns
    return start, end


def own_collections(by_kind: ByKind, t_end_ns: int) -> list[tuple[int, int]]:
    """See NOTE [memory window]. The spans of loaderprof's own garbage collections in the
    trial's main process (one at shutdown, when a reference cycle keeps the loader's
    iterator alive). A full collection writes to every object the main process
    holds: each page it copies leaves the original to the workers forked from it,
    whose USS then jumps by the parent's whole heap (130 MiB after importing torch).
    That is loaderprof's doing, not the loader's, so no reading taken during one
    counts. A collection with no end (the trial was stopped in it) runs to the end."""
    ends = sorted(ev["t"] for ev in by_kind.get(Ev.COLLECTED, []))
    spans = []
    for ev in by_kind.get(Ev.COLLECTING, []):
        end = next((t for t in ends if t >= ev["t"]), t_end_ns)
        spans.append((ev["t"], end))
    return spans


def _overlaps(s: Sample, spans: Sequence[tuple[int, int]]) -> bool:
    done = s.read_ns or s.t_ns
    return any(s.t_ns <= hi and done >= lo for lo, hi in spans)


def in_window(
    samples: Sequence[Sample], lo: int | None, hi: int, own: Sequence[tuple[int, int]]
) -> list[Sample]:
    """The samples read wholly inside the memory window and outside loaderprof's own
    collections. A walk with some of its readings left out is no longer a sum over
    the tree: the readings it keeps count for each process's own figures, marked so
    that they are never summed."""
    if lo is None:
        return []

    def counts(s: Sample) -> bool:
        return lo <= s.t_ns and (s.read_ns or s.t_ns) <= hi and not _overlaps(s, own)

    groups: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.tick].append(s)
    cut = {tick for tick, g in groups.items() if not all(counts(s) for s in g)}
    return [
        dataclasses.replace(s, whole=False) if s.tick in cut else s for s in samples if counts(s)
    ]


def idle_windows(
    by_kind: ByKind,
) -> list[tuple[int, int, int]]:
    """(start, end, epoch) of each pause after an epoch."""
    ends = {ev["epoch"]: ev["t"] for ev in by_kind.get(Ev.IDLE_END, [])}
    return [
        (ev["t"], ends[ev["epoch"]], ev["epoch"])
        for ev in by_kind.get(Ev.IDLE_START, [])
        if ev["epoch"] in ends
    ]


def window_memory(
    samples: Sequence[Sample],
    main_pid: int,
    worker_pids: set[int],
    pauses: Sequence[tuple[int, int, int]],
    worker_until: Mapping[int, int] | None = None,
) -> TrialMemory:
    """Figures from the samples inside the memory window; a worker's own peak from
    those read before `worker_until` (its pool whole: `readings.pool_whole_until`)."""
    if not samples:
        return TrialMemory(None, None, None, None, None, None, None, None, 0, 0)
    per_pid = per_process(samples)
    ticks: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        ticks[s.tick].append(s)
    deep = deep_ticks(samples)

    def total(group: list[Sample], attr: str, only: set[int] | None = None) -> int | None:
        # None when a process's figure was not measured (psutil without PSS): a
        # missing figure is not 0 B.
        values = [getattr(s, attr) for s in group if only is None or s.pid in only]
        return None if any(v is None for v in values) else sum(values)

    def whole_peak(values: Iterable[int | None]) -> int | None:
        return peak(values) if all(v is not None for v in values) else None

    until = worker_until or {}
    worker_peaks = [
        p
        for p in (
            peak(s.uss for s in per_pid.get(pid, []) if read_at(s) < until.get(pid, 2**63))
            for pid in worker_pids
        )
        if p is not None
    ]
    idle_uss: list[int] = []
    idle_pss: list[int] = []
    for lo, hi, _ in pauses:
        walks = [g for g in deep if in_pause(g, lo, hi)]
        if not walks:
            continue
        uss = whole_peak([total(g, "uss", worker_pids) for g in walks])
        pss = whole_peak([total(g, "pss", worker_pids) for g in walks])
        if uss is not None:
            idle_uss.append(uss)
        if pss is not None:
            idle_pss.append(pss)
    main = per_pid.get(main_pid, [])
    return TrialMemory(
        peak_total_pss_bytes=whole_peak([total(g, "pss") for g in deep]),
        peak_workers_uss_bytes=whole_peak([total(g, "uss", worker_pids) for g in deep]),
        peak_worker_uss_bytes=max(worker_peaks) if worker_peaks else None,
        idle_workers_uss_bytes=int(statistics.median(idle_uss)) if idle_uss else None,
        idle_workers_pss_bytes=int(statistics.median(idle_pss)) if idle_pss else None,
        peak_main_uss_bytes=peak(s.uss for s in main),
        peak_main_pss_bytes=peak(s.pss for s in main),
        peak_main_rss_bytes=max((s.rss for s in main), default=None),
        samples=len(ticks),
        deep_samples=len(deep),
        peak_worker_processes=peak_worker_processes(samples, worker_pids),
    )


def held_during_val(inside: Sequence[Sample], train: set[int], by_kind: ByKind) -> int | None:
    """USS the train loader's workers hold while the validation pass runs: the peak
    of each pass's whole walks, the median over epochs (0 where the pool is gone)."""
    ends = {ev["epoch"]: ev["t"] for ev in by_kind.get(Ev.VAL_END, [])}
    deep = deep_ticks(inside)
    held: list[int] = []
    for ev in by_kind.get(Ev.VAL_START, []):
        if ev["epoch"] not in ends:
            continue
        walks = [g for g in deep if in_pause(g, ev["t"], ends[ev["epoch"]])]
        sums = [sum(s.uss or 0 for s in g if s.pid in train) for g in walks]
        if sums:
            held.append(max(sums))
    return int(statistics.median(held)) if held else None


def setup_sample(
    main: Sequence[Sample], asked: int | None, window_start: int | None
) -> Sample | None:
    """The main process just before the loader was built: its last deep sample begun
    after the trial asked for it (NOTE [sampled pauses]). A trial that did not ask
    (a timing trial) has none: its last walk may date from before its imports."""
    if asked is None or window_start is None:
        return None
    # Read wholly before the loader was built: the trial waits for one such walk. A
    # forked trial's PSS includes its template's share, read just after it; a reading
    # that ran past the loader's first workers would find that share split with them.
    before = [
        s
        for s in main
        if s.uss is not None
        and s.t_ns >= asked
        and s.read_ns is not None
        and s.read_ns < window_start
    ]
    return before[-1] if before else None


def shutdown_peak(samples: Sequence[Sample], by_kind: ByKind, t_end_ns: int) -> int | None:
    """The peak PSS total while the loader shut its workers down after the last epoch
    (outside the memory window: NOTE [memory window]), up to the trial's end when the
    shutdown never finished."""
    closing = by_kind.get(Ev.LOADER_CLOSING)
    if not closing:
        return None
    lo = closing[0]["t"]
    ends = [evs[0]["t"] for kind in (Ev.LOADER_CLOSED, Ev.ERROR) if (evs := by_kind.get(kind))]
    hi = min(ends, default=t_end_ns)
    ticks = deep_ticks(s for s in samples if lo <= s.t_ns <= hi)
    if any(s.pss is None for g in ticks for s in g):
        return None
    return max((sum(s.pss or 0 for s in g) for g in ticks), default=None)


def worker_states(
    series: Sequence[Sample], pauses: Sequence[tuple[int, int, int]], t0_ns: int
) -> tuple[WorkerState, ...]:
    """The first sample with handles, then the last one read in each pause after an
    epoch."""
    held = [s for s in series if s.handles is not None]
    if not held:
        return ()
    picked: list[tuple[int, Sample]] = [(0, held[0])]
    for lo, hi, epoch in pauses:
        inside = [s for s in held if in_pause((s,), lo, hi)]
        if inside:
            picked.append((epoch, inside[-1]))
    out = []
    for epoch, s in picked:
        h = s.handles
        assert h is not None
        out.append(
            WorkerState(
                epoch, (s.t_ns - t0_ns) / NS, s.uss, s.rss, h.files, h.inet, h.threads, h.children
            )
        )
    return tuple(out)


def shm_base(
    shm_used: Sequence[tuple[int, int]], windows: Sequence[tuple[int, int, int]]
) -> int | None:
    if not shm_used:
        return None
    first_epoch = windows[0][1] if windows else None
    before = [u for t, u in shm_used if first_epoch is None or t < first_epoch]
    return before[-1] if before else shm_used[0][1]


def per_process(samples: Iterable[Sample]) -> dict[int, list[Sample]]:
    out: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.pid].append(s)
    return out


def peak(values: Iterable[int | None]) -> int | None:
    return max((v for v in values if v is not None), default=None)
