"""Pure: a running job's worker pools as seen from outside (`watch --pid`).

NOTE [pools from outside]: with no hook in the job, a DataLoader's workers are known
only by what /proc says of each child process: its parent, when it was born, its
command line. A worker is forked (its parent's command line), spawned or the
forkserver's; workers of one iterator start together, so such children born from one
parent each within BIRTH_WINDOW_S of the one before are one pool (and
they end together, so a pool some of whose workers outlive the others' exit by
SPLIT_AFTER_S was two, and is split); its
helpers (multiprocessing's resource tracker and forkserver, torch_shm_manager, a
Python program of its own such as a metrics service or torchrun's ranks, anything
that is not Python) are named by their command line and are no pool. A
pool born after an earlier pool of the same parent, start method and size had
exited replaced it: one lineage, rebuilt (its loader's workers started again); a
pool that lives on through its own epochs is persistent. Epochs are inferred, from
a lineage's births or from a pool's CPU activity (busy runs apart by idle pauses of
at least PAUSE_MIN_S), and always said to be inferred: a main process that trains
slower than its workers load leaves them idle mid-epoch too.

NOTE [workers by name]: a command line cannot tell a DataLoader's forked worker from
any other fork of the job (a multiprocessing Pool's, for preprocessing). torch 2.5 and
later names each worker process `pt_data_worker` (/proc/PID/comm) first thing in its
loop, milliseconds after the fork; so where the job has such a torch loaded, a fork
still unnamed NAMED_WITHIN_S after its birth is no worker ("multiprocessing child"),
and one is held until it is named or that old. Spawned and forkserver children name
themselves only after their imports and unpickling, and older torch never: they are
told by command line alone.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

# Workers of one iterator start within milliseconds of one another (spawn's included:
# `Process.start` does not wait for the child's imports; 0.15 s leaves room for a
# loaded machine), and an epoch is longer: a pool rebuilt every 0.26 s read as one
# pool of twice its workers when the window was 0.5 s from the pool's first birth.
BIRTH_WINDOW_S = 0.15
# Births this close are one iterator's workers even when one already exited.
TOGETHER_S = 0.02
# One iterator's workers are ended together (its shutdown signals them all, then joins
# them): a pool whose first-born workers exited together while the others lived on this
# much longer (and two sampling intervals) held two iterators' workers, born close
# enough to be placed as one (Lightning starts the train pool 0.09 s after its sanity
# check's validation workers, which end after it)...
SPLIT_AFTER_S = 1.0
# ...when the two were also born apart: the gap between the groups' births at least
# this many times the largest gap inside either (at least a clock tick). Workers of one
# pool leave it early by themselves too (an IterableDataset's exhausted workers, more
# workers than shards), but they were born in the pool's even run of forks.
SPLIT_BIRTH_GAPS = 3.0
BIRTH_TICK_S = 0.01
# An idle run of a pool's workers shorter than this is a gap inside an epoch (the
# main process training on a batch), not a pause between two.
PAUSE_MIN_S = 0.3
# A pool is busy in a tick where its workers together used at least this share of
# one CPU: a DataLoader worker waiting on its index queue uses none.
BUSY_CPU_SHARE = 0.10
# See NOTE [workers by name].
WORKER_COMM = "pt_data_worker"
NAMES_WORKERS_FROM = (2, 5)
NAMED_WITHIN_S = 0.5
# Points a downsampled series keeps, whatever the watch's length (NOTE [bounded series]).
SERIES_POINTS = 512


# -- who a child process is ------------------------------------------------------

HELPERS = {
    "multiprocessing.resource_tracker": "resource tracker",
    "multiprocessing.forkserver": "forkserver",
    "multiprocessing.semaphore_tracker": "resource tracker",
}


def classify(cmdline: Sequence[str], exe: str, parent_cmdline: Sequence[str]) -> tuple[str, str]:
    """(role, start method) of a child from its command line and its parent's: role
    "worker" (a Python child that could be a DataLoader worker), or what else it is
    ("resource tracker", "forkserver", "torch_shm_manager", "Python process", "not
    Python"); the start
    method as it can be read ("spawn", "fork", "forkserver", or "" where unknown)."""
    text = " ".join(cmdline)
    server = "multiprocessing.forkserver" in " ".join(parent_cmdline)
    # The forkserver's children are forked from it: its command line is theirs.
    if server and list(cmdline) == list(parent_cmdline):
        return "worker", "forkserver"
    for module, name in HELPERS.items():
        if module in text:
            return name, ""
    head = os.path.basename(cmdline[0]) if cmdline else os.path.basename(exe)
    if "torch_shm_manager" in head or "torch_shm_manager" in os.path.basename(exe):
        return "torch_shm_manager", ""
    if not _python(head) and not _python(os.path.basename(exe)):
        return "not Python", ""
    if server:
        return "worker", "forkserver"
    if "multiprocessing.spawn" in text or "--multiprocessing-fork" in cmdline:
        return "worker", "spawn"
    # A forked child keeps its parent's command line.
    if list(cmdline) == list(parent_cmdline):
        return "worker", "fork"
    # A Python program of its own (a logging or metrics service, an evaluation script,
    # torchrun's ranks): a DataLoader worker is forked, spawned or the forkserver's,
    # never exec'd with other arguments. Its own children are told against it.
    return "Python process", ""


def _python(name: str) -> bool:
    return name.startswith("python") or name.startswith("pypy")


def runs_python(cmdline: Sequence[str], exe: str) -> bool:
    """Whether a process is a Python interpreter, by its command or its executable."""
    head = os.path.basename(cmdline[0]) if cmdline else ""
    return _python(head) or _python(os.path.basename(exe))


# -- bounded series ----------------------------------------------------------------

# NOTE [bounded series]: a watch of hours at 50 ms would keep hundreds of thousands of
# readings. A series keeps at most SERIES_POINTS buckets: when full, neighbours merge,
# each bucket's time its first and each value its largest, so every peak survives
# (the resolution halves, never the height). A series of pauses names a bucket by its
# last epoch, after which a growing pool's largest reading was taken, and counts the
# pauses it read apart from the buckets it keeps.


@dataclass
class Bounded:
    """A downsampled series of (seconds, values...) with every peak kept."""

    points: int = SERIES_POINTS
    rows: list[tuple[float, tuple[int | None, ...]]] = field(default_factory=list)
    # A merged bucket's time: its last reading's (pauses), else its first's.
    name_by_last: bool = False
    # Readings added, merged or not.
    added: int = 0
    # Readings per bucket now (doubles at each merge) and in the last bucket so far.
    per_bucket: int = 1
    _in_last: int = 0

    def add(self, t_s: float, values: tuple[int | None, ...]) -> None:
        self.added += 1
        if self.rows and self._in_last < self.per_bucket:
            t0, old = self.rows[-1]
            self.rows[-1] = (t_s if self.name_by_last else t0, most_each(old, values))
            self._in_last += 1
            return
        if len(self.rows) >= self.points:
            self._halve()  # whose last bucket counts as full
        self.rows.append((t_s, values))
        self._in_last = 1

    def _halve(self) -> None:
        merged = []
        for i in range(0, len(self.rows), 2):
            pair = self.rows[i : i + 2]
            t0 = pair[-1][0] if self.name_by_last else pair[0][0]
            vals = pair[0][1]
            for _, other in pair[1:]:
                vals = most_each(vals, other)
            merged.append((t0, vals))
        self.rows = merged
        self.per_bucket *= 2
        # The last bucket may hold one merged pair already: it counts as full.
        self._in_last = self.per_bucket


def most(a: int | None, b: int | None) -> int | None:
    """The larger of two readings, either of which may be missing."""
    if a is None:
        return b
    return a if b is None else max(a, b)


def most_each(old: Sequence[int | None], new: Sequence[int | None]) -> tuple[int | None, ...]:
    """Peaks kept as tuples (USS, PSS, RSS...), each raised by a new reading."""
    return tuple(most(a, b) for a, b in zip(old, new, strict=True))


# -- pools ---------------------------------------------------------------------------


@dataclass
class Pool:
    """Workers of one parent born together: one generation of a lineage (`lineages`)."""

    id: str
    parent: int
    start_method: str
    born_s: float
    pids: list[int] = field(default_factory=list)
    exited: dict[int, float] = field(default_factory=dict)
    activity: Activity = field(default_factory=lambda: Activity())
    # (USS, PSS, RSS) of the pool's workers together, from readings of all of them.
    series: Bounded = field(default_factory=Bounded)
    peaks: tuple[int | None, ...] = (None, None, None)
    # Other pools of its parent that were busy while it was idle.
    idle_beside: set[str] = field(default_factory=set)
    # Its latest worker's birth: the next worker within the window joins it.
    last_born_s: float = float("-inf")
    # Each worker's birth, to split the pool should it turn out to be two.
    births: dict[int, float] = field(default_factory=dict)
    # Ended, and checked for a split: it needs no look again.
    settled: bool = False

    def __post_init__(self) -> None:
        self.last_born_s = max(self.last_born_s, self.born_s, *self.births.values())

    @property
    def ended_s(self) -> float | None:
        """When its last worker was seen gone; None while one lives."""
        if len(self.exited) < len(self.pids):
            return None
        return max(self.exited.values(), default=None)

    def alive(self) -> list[int]:
        return [p for p in self.pids if p not in self.exited]

    def record(self, t_s: float, totals: tuple[int, int | None, int]) -> None:
        self.series.add(t_s, totals)
        self.peaks = most_each(self.peaks, totals)


# Generations whose series are kept once they ended; older ones keep their peaks only
# (see NOTE [bounded series]), as for a job that rebuilds a pool every epoch for days.
ENDED_SERIES_KEPT = 64


class Pools:
    """Places each worker as it is seen (in birth order) into its pool."""

    def __init__(self, window_s: float = BIRTH_WINDOW_S, interval_s: float = 0.0) -> None:
        self.window_s = window_s
        # Exits are seen a tick late: two exits one tick apart may have been moments apart.
        self.split_after_s = max(SPLIT_AFTER_S, 2 * interval_s)
        self.pools: list[Pool] = []
        self.by_pid: dict[int, Pool] = {}
        # Parents whose pools turned out to hold processes with workers of their own
        # (torchrun's ranks): not worker pools.
        self.parents: set[int] = set()

    def place(self, pid: int, parent: int, born_s: float, start_method: str) -> Pool:
        if parent in self.by_pid:
            self.parents.add(parent)
        for pool in reversed(self.pools):
            # A pool whose workers began to exit is over (exits are read before
            # births in each tick), unless the newcomer was born with its last one
            # and met a tick late.
            gap = born_s - pool.last_born_s
            if (
                pool.parent == parent
                and pool.start_method == start_method
                and 0 <= gap <= self.window_s
                and (not pool.exited or gap <= TOGETHER_S)
            ):
                pool.pids.append(pid)
                pool.births[pid] = born_s
                pool.last_born_s = max(pool.last_born_s, born_s)
                self.by_pid[pid] = pool
                return pool
        pool = Pool(f"G{len(self.pools) + 1}", parent, start_method, born_s, [pid])
        pool.births[pid] = born_s
        self.pools.append(pool)
        self.by_pid[pid] = pool
        return pool

    def split(self, now_s: float) -> list[Pool]:
        """Pools that turned out to be two (see SPLIT_AFTER_S): the workers that ended
        first keep the pool, now ended; the others become a new pool, which starts its
        series and activity here (the pool's readings before were of both). Returns the
        new pools."""
        out = []
        for pool in list(self.pools):
            if not pool.exited or pool.settled:
                continue
            # An ended pool's exits change no more: it is checked once.
            pool.settled = pool.ended_s is not None
            later = self._later_pool(pool, now_s)
            if not later:
                continue
            births = {p: pool.births.get(p, pool.born_s) for p in later}
            rest = Pool(
                f"G{len(self.pools) + 1}",
                pool.parent,
                pool.start_method,
                min(births.values()),
                sorted(later, key=births.__getitem__),
                {p: pool.exited[p] for p in later if p in pool.exited},
                births=births,
            )
            pool.pids = [p for p in pool.pids if p not in births]
            pool.births = {p: b for p, b in pool.births.items() if p not in births}
            for p in later:
                pool.exited.pop(p, None)
            pool.born_s = min(pool.births.values(), default=pool.born_s)
            pool.last_born_s = max(pool.births.values(), default=pool.born_s)
            self.pools.append(rest)
            self.by_pid.update(dict.fromkeys(later, rest))
            out.append(rest)
        return out

    def _later_pool(self, pool: Pool, now_s: float) -> list[int]:
        """The workers of `pool` that are a second pool (see SPLIT_AFTER_S), or none."""
        # A worker still alive ends no sooner than now.
        ends = sorted((pool.exited.get(p, now_s), p) for p in pool.pids)
        gaps = range(1, len(ends))
        cut = next((i for i in gaps if ends[i][0] - ends[i - 1][0] >= self.split_after_s), None)
        if cut is None:
            return []
        first, later = [p for _, p in ends[:cut]], [p for _, p in ends[cut:]]
        born = pool.births.get
        b_first = sorted(born(p, pool.born_s) for p in first)
        b_later = sorted(born(p, pool.born_s) for p in later)
        if b_first[-1] >= b_later[0]:
            return []
        inside = [b - a for g in (b_first, b_later) for a, b in itertools.pairwise(g)]
        step = max([BIRTH_TICK_S, *inside])
        return later if b_later[0] - b_first[-1] >= SPLIT_BIRTH_GAPS * step else []

    def exited(self, pid: int, t_s: float) -> None:
        pool = self.by_pid.get(pid)
        if pool is None or pid in pool.exited:
            return
        pool.exited[pid] = t_s
        if pool.ended_s is not None:
            ended = [p for p in self.pools if p.ended_s is not None and p.series.rows]
            for old in ended[:-ENDED_SERIES_KEPT]:
                old.series = Bounded()

    def worker_pools(self) -> list[Pool]:
        """Pools of workers (not of processes that have workers of their own)."""
        return [p for p in self.pools if not self.parents & set(p.pids)]


class Crowd:
    """The most worker processes alive at once, counted from PIDs tick by tick.

    A worker is often placed some ticks after its birth (a forked child is met again
    until it is old enough not to be about to exec, `attach.FORK_EXEC_S`), and an older
    pool may have exited by then: counting only the workers placed at each tick missed
    every overlap shorter than that delay (Lightning starts the next loader's workers
    moments before the last iterator's exit: 6 alive read as 4). So each tick's alive
    PIDs are kept for `keep_s`, and a worker placed later is added to those of them
    taken after its birth: it was alive then, as it is now."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self.peak = 0
        # (tick's time, worker PIDs alive at it), oldest first, the last `keep_s` only.
        self._ticks: deque[tuple[float, set[int]]] = deque()
        self._known: set[int] = set()

    def tick(self, t_s: float, alive: dict[int, float]) -> None:
        """`alive`: each worker alive at `t_s` and its birth (seconds, the same clock)."""
        while self._ticks and self._ticks[0][0] < t_s - self.keep_s:
            self._ticks.popleft()
        new = {p: b for p, b in alive.items() if p not in self._known}
        for t, pids in self._ticks:
            # A birth is read in whole clock ticks, rounded down: one a tick before `t`
            # may have come after it.
            pids.update(p for p, b in new.items() if b + BIRTH_TICK_S <= t)
            self.peak = max(self.peak, len(pids))
        self._ticks.append((t_s, set(alive)))
        self.peak = max(self.peak, len(alive))
        # Only the PIDs still alive: a long watch's exited workers are not kept.
        self._known = set(alive)


def lineages(pools: Sequence[Pool], tolerance_s: float) -> list[list[Pool]]:
    """Pools chained into lineages: a pool born once an earlier one of the same parent,
    start method and size had exited replaced it (the latest such, whose lineage has
    no later generation). `tolerance_s`: how late an exit may have been seen (one
    interval): ended up to that much after the next was born still ended before it."""
    chains: list[list[Pool]] = []
    for pool in sorted(pools, key=lambda p: p.born_s):
        ends = [
            c
            for c in chains
            if c[-1].parent == pool.parent
            and c[-1].start_method == pool.start_method
            and len(c[-1].pids) == len(pool.pids)
            and c[-1].ended_s is not None
            and c[-1].ended_s - tolerance_s <= pool.born_s
        ]
        if ends:
            max(ends, key=lambda c: c[-1].ended_s or 0.0).append(pool)
        else:
            chains.append([pool])
    return chains


# -- epochs inferred from a pool's CPU ------------------------------------------------


@dataclass
class Activity:
    """A pool's busy runs (inferred epochs) and the pauses between them, fed tick by
    tick: a pause is an idle run of at least PAUSE_MIN_S after a busy run, and its
    reading the last memory reading taken wholly inside it (the pool after its epoch,
    as `watch` reads a pause)."""

    pause_min_s: float = PAUSE_MIN_S
    busy_runs: int = 0
    # (uss, rss) of the pool in each pause, bounded as any series (NOTE [bounded series]).
    pauses: Bounded = field(default_factory=lambda: Bounded(name_by_last=True))
    # Each pause's USS, for the median held while idle.
    idle_uss: list[int] = field(default_factory=list)
    _busy: bool = False
    _idle_since: float | None = None
    _reading: tuple[int, int] | None = None
    # The pause's own reading was taken (`take_pause_reading`): once a pause.
    _looked: bool = False

    def feed(self, t_s: float, busy: bool, reading: tuple[int, int] | None) -> None:
        if busy:
            if not self._busy and (self.busy_runs == 0 or self._pause_over(t_s)):
                self.busy_runs += 1
            self._busy, self._idle_since, self._reading = True, None, None
            self._looked = False
            return
        if self._busy:
            self._busy, self._idle_since = False, t_s
        if reading is not None and self._idle_since is not None:
            self._reading = reading

    def take_pause_reading(self, t_s: float) -> bool:
        """Idle long enough by `t_s` to be a pause with no reading in it yet: true once a
        pause (a reading that fails, a pool with a worker gone, is not tried again at
        every tick of a long idle)."""
        idle_since = self._idle_since
        due = (
            not self._busy
            and not self._looked
            and idle_since is not None
            and t_s - idle_since >= self.pause_min_s
            and self._reading is None
        )
        self._looked = self._looked or due
        return due

    def _pause_over(self, t_s: float) -> bool:
        """The idle run that just ended was a pause: keep its reading."""
        if self._idle_since is None or t_s - self._idle_since < self.pause_min_s:
            return False
        self._keep()
        return True

    def close(self, t_s: float) -> None:
        """The watch ended: an idle run long enough by then was a pause too."""
        idle_since = self._idle_since
        if not self._busy and idle_since is not None and t_s - idle_since >= self.pause_min_s:
            self._keep()
        self._idle_since = None

    def _keep(self) -> None:
        if self._reading is not None:
            self.pauses.add(float(self.busy_runs), self._reading)
            if len(self.idle_uss) < 4 * SERIES_POINTS:
                self.idle_uss.append(self._reading[0])
        self._reading = None

    def idle_median(self) -> int | None:
        return int(statistics.median(self.idle_uss)) if self.idle_uss else None
