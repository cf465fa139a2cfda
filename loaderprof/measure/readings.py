"""Pure: what the sampler's readings may be used for, one rule each, shared by
compare's assembly (`measure.assemble`, `checks`) and watch's (`watching`).

Which walks can be summed, which readings speak for a pause, how many worker
processes were alive at once, whether later epochs reused the workers, the
window a copy-on-read reading spans, the Dataset's state a state event reports, and
a hooked loader's epochs in its `iter_*` events.
"""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev
from loaderprof.measure.sampler import Sample
from loaderprof.model.trials import DatasetState


def deep_ticks(samples: Iterable[Sample]) -> list[list[Sample]]:
    """Walks that read USS/PSS of every process while the tree held still: only
    those can be summed."""
    ticks: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        ticks[s.tick].append(s)
    return [g for g in ticks.values() if all(s.uss is not None and s.whole for s in g)]


def in_pause(samples: Iterable[Sample], lo: int, hi: int) -> bool:
    """Read wholly inside the pause [lo, hi] (monotonic ns): begun after its start,
    over before its end (a tick that runs into the next epoch reads that epoch's
    state)."""
    return all(lo <= s.t_ns and (s.read_ns or s.t_ns) <= hi for s in samples)


def read_at(sample: Sample) -> int:
    """When the sample's process was read (a walk's reads follow its start)."""
    return sample.read_ns or sample.t_ns


# Exits this close to a pool's last are its shutdown: torch stops a pool's workers
# together (ms apart); a worker that ran out of its stream earlier (an IterableDataset
# shard) is no shutdown of the others.
SHUTDOWN_SPAN_NS = 2 * NS


def pool_whole_until(
    inits: Iterable[Mapping[str, Any]], exits: Mapping[int, int], gone: Mapping[int, int]
) -> dict[int, int]:
    """Per worker (by its `worker_init` event), until when its memory counts: its own
    exit (`worker_exit`, or killed, its disappearance) and its pool's shutdown, the first
    exit of the pool's last group (its loader's workers of one iterator, by base seed and
    lifetime). USS is the pages a process alone maps, so a sibling's exit can hand the
    survivor pages the two shared (a library both workers touched and the main process
    did not): under spawn a non-persistent pool's last worker read 475-499 MiB where
    both had read 370 MiB, 124 MiB a worker that the persistent pool never held. One
    rule for compare and watch."""
    never = 2**63 - 1
    until: dict[int, int] = {}
    for members in _pools(inits, exits, gone):
        ends = [exits.get(p, gone.get(p)) for p in members]
        shutdown = never
        if ends and all(t is not None for t in ends):
            last = max(t for t in ends if t is not None)
            shutdown = min(t for t in ends if t is not None and t >= last - SHUTDOWN_SPAN_NS)
        for pid, end in zip(members, ends, strict=True):
            until[pid] = min(shutdown, never if end is None else end)
    return until


def _pools(
    inits: Iterable[Mapping[str, Any]], exits: Mapping[int, int], gone: Mapping[int, int]
) -> list[list[int]]:
    """The workers of each pool: one loader's, one iterator's base seed, and begun before
    any of them exited (a script that seeds the same value before every pass gives every
    pool one seed); a worker without a seed is a pool of its own."""
    by_seed: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for ev in inits:
        seed = ev.get("pool")
        by_seed[(ev.get("loader"), seed) if seed is not None else ("pid", ev["pid"])].append(ev)
    pools: list[list[int]] = []
    for evs in by_seed.values():
        current: list[int] = []
        first_end: int | None = None
        for ev in sorted(evs, key=lambda e: e["t"]):
            if current and first_end is not None and ev["t"] > first_end:
                pools.append(current)
                current, first_end = [], None
            current.append(int(ev["pid"]))
            end = exits.get(int(ev["pid"]), gone.get(int(ev["pid"])))
            if end is not None:
                first_end = end if first_end is None else min(first_end, end)
        pools.append(current)
    return pools


def peak_worker_processes(samples: Iterable[Sample], worker_pids: Collection[int]) -> int | None:
    """The most worker processes alive at once, counted in the ticker's readings only:
    each is one pass over the tree within a few ms, where a walk may run long enough
    to see one pool exit and the next one start (a validation pool after a
    non-persistent train pool). None: no tick was read."""
    ticks: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        ticks[s.tick].append(s)
    return max(
        (
            sum(1 for s in g if s.pid in worker_pids)
            for g in ticks.values()
            if all(s.uss is None for s in g)
        ),
        default=None,
    )


# One epoch of a run, as (epoch number from 1, the workers it started, the workers
# that served it).
EpochWorkers = tuple[int, Collection[int], Collection[int]]


def workers_reused(runs: Iterable[Iterable[EpochWorkers]]) -> bool | None:
    """True: epochs 2..N of every run ran on workers started before them. False: every
    one of those epochs started its own workers and ran on them alone. None: neither
    (or no epoch 2 to tell from)."""
    reused = fresh = True
    seen_steady = False
    for epochs in runs:
        started_so_far: set[int] = set()
        for number, started, served_by in epochs:
            new, served = set(started), set(served_by)
            if number >= 2:
                seen_steady = True
                if new or not served <= started_so_far:
                    reused = False
                if not new or not served <= new:
                    fresh = False
            started_so_far |= new
    if not seen_steady:
        return None
    if reused and not fresh:
        return True
    if fresh and not reused:
        return False
    return None


# A worker's reading: (seconds, USS, RSS).
Point = tuple[float, int, int]

# See NOTE [copy-on-read]. The most of a window's USS growth one step between two readings
# may carry: reading copies page after page, so its growth spreads over the readings; a
# one-off (a start-up copy still finishing, a gc pass over inherited objects) lands
# between two of them...
COW_MAX_STEP_SHARE = 2 / 3
# ...or, read in the middle, between three: no run of readings shorter than this share
# of the window may carry that share of the growth. An HF IterableDataset's
# workers were seen flat at 19 MiB for 5.5 s, then 46 and 76 MiB at the next two
# readings 0.5 s apart, then flat again: a gc pass (gc.freeze() in the parent removed it).
COW_MIN_TIME_SHARE = 1 / 3


def copy_window(points: Sequence[Point]) -> tuple[Point, Point] | None:
    """See NOTE [copy-on-read]. Of a worker's (time, USS, RSS) readings from its first batch
    on, in time order, the first (what it copied while starting is paid by then) and
    the USS peak after it; None with fewer than two, or where USS rose to its peak in
    one step (more than COW_MAX_STEP_SHARE of its growth) or in a run of readings over a
    short part of the window (COW_MIN_TIME_SHARE): a one-off, which readings cannot
    tell from a per-sample cost (reading copies over the epochs, pause after pause)."""
    if len(points) < 2:
        return None
    peak = max(range(1, len(points)), key=lambda i: points[i][1])
    growth = points[peak][1] - points[0][1]
    step = max(b[1] - a[1] for a, b in itertools.pairwise(points[: peak + 1]))
    if growth > 0 and step > COW_MAX_STEP_SHARE * growth:
        return None
    brief = COW_MIN_TIME_SHARE * (points[peak][0] - points[0][0])
    if growth > 0 and _rose_within(points[: peak + 1], COW_MAX_STEP_SHARE * growth, brief):
        return None
    return points[0], points[peak]


def _rose_within(points: Sequence[Point], rise: float, span_s: float) -> bool:
    """Whether USS rose by more than `rise` between two readings less than `span_s`
    apart (the lowest reading of the last `span_s` kept at the deque's front)."""
    low: deque[int] = deque()
    for j, (t, uss, _) in enumerate(points):
        while low and t - points[low[0]][0] >= span_s:
            low.popleft()
        if low and uss - points[low[0]][1] > rise:
            return True
        while low and points[low[-1]][1] >= uss:
            low.pop()
        low.append(j)
    return False


def dataset_state(ev: Mapping[str, Any], epoch: int) -> DatasetState:
    """A `main_state` / `worker_state` event (compare's trial, watch's hook) as the
    Dataset's state at the start of `epoch`."""
    return DatasetState(
        epoch=epoch,
        role="main" if ev["ev"] == Ev.MAIN_STATE else "worker",
        pid=int(ev["pid"]),
        worker_id=ev.get("worker_id"),
        values=dict(ev.get("values") or {}),
        skipped=tuple(ev.get("skipped") or ()),
        took_s=ev.get("took_s"),
    )


@dataclass(frozen=True)
class IterSpan:
    """One epoch of a hooked loader (NOTE [watch hook]): its `iter()`, its first
    batch, and the event that ended it (None while it runs, or where the next `iter()`
    came first)."""

    start_ns: int
    planned: int | None
    first_ns: int | None
    end: Mapping[str, Any] | None


# Equal stamps: an epoch's end before the next one's start, its start before its
# first batch.
_ITER_ORDER = {Ev.ITER_END: 0, Ev.ITER_START: 1, Ev.ITER_FIRST_BATCH: 2}


def add_iter_event(spans: list[IterSpan], ev: Mapping[str, Any]) -> None:
    """One loader's `iter_*` event applied to its epochs so far, in time order: an
    `iter_start` opens an epoch, which takes the first `iter_first_batch` and the
    first `iter_end` before the next opens. compare -- COMMAND feeds it each event as
    it is read (one process writes a loader's events, in order); watch through
    `iter_spans`, once the command ended."""
    kind = ev.get("ev")
    if kind == Ev.ITER_START:
        planned = ev.get("planned")
        spans.append(
            IterSpan(int(ev["t"]), planned if isinstance(planned, int) else None, None, None)
        )
    elif spans and kind == Ev.ITER_FIRST_BATCH and spans[-1].first_ns is None:
        spans[-1] = replace(spans[-1], first_ns=int(ev["t"]))
    elif spans and kind == Ev.ITER_END and spans[-1].end is None:
        spans[-1] = replace(spans[-1], end=ev)


def iter_spans(events: Iterable[Mapping[str, Any]], loader: str) -> list[IterSpan]:
    """`loader`'s epochs, in time order, by `add_iter_event`."""
    mine = sorted(
        (ev for ev in events if ev.get("loader") == loader and ev.get("ev") in _ITER_ORDER),
        key=lambda ev: (ev["t"], _ITER_ORDER[ev["ev"]]),
    )
    spans: list[IterSpan] = []
    for ev in mine:
        add_iter_event(spans, ev)
    return spans
