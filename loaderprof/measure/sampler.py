"""Parent-side sampler: memory of every process under the trial child.

It runs as two threads in the parent, never inside the measured process, so
the measured loop carries no observer thread and no extra GIL contention.

Two depths, one thread each. RSS comes from /proc/PID/statm: kernel counters,
nearly free, read for every process on every tick of the *ticker* (the
`TreeSampler` thread itself), which keeps its interval whatever the tree's size.
USS (pages only this process maps: a worker's marginal cost) and PSS (shared
pages split among their users: sums to the true total) need
/proc/PID/smaps_rollup, a walk of the page tables under the process's mmap lock,
about 9 ms for a torch process on a small machine: with 32 workers one pass over
the tree takes 0.3 s. The *walker* thread (`_Walker`) makes those passes, walks,
so that they never delay a tick; its reads spend their time in the kernel, with
the GIL released.

DataLoader batches travel through shared memory that is mapped and unmapped for
every batch, so frequent walks stall the loader itself (measured: smaps every
50 ms doubled a 0.23 s epoch; statm every 50 ms did not change it). So while an
epoch runs the walker reads:

* a process that appeared, or whose RSS rose above its high-water mark at its
  last deep read by more than GROWTH_TRIGGER, at once and ahead of the rest (the
  ticker sees it within one interval): allocations and short-lived workers'
  peaks are caught, and such a process starts a walk over the others;
* every process, when `deep_interval_s` has passed since the last walk began
  (catches USS that grows without RSS growing, such as copy-on-write pages
  turning private);
* every process, when a worker delivered its first batch (`request_deep`): what
  its start-up cost, apart from what reading adds later.

Outside timed epochs (set-up, the idle pauses between epochs, where the memory
held by persistent workers is measured) a walk starts every interval, or as soon
as the last one ends when a walk takes longer. Figures summed over processes
(PSS totals, idle memory) come only from walks that read every process: PSS
moves when another process maps or unmaps a shared page, so a figure carried
from an earlier walk could not be summed honestly. A walk cut short (the trial
ends, or a timing trial's sampler is held) keeps its readings for each
process's own peaks and is marked so that it is never summed.

See NOTE [timing and memory trials]. Even those reads cost a CPU-bound epoch on a
small machine (the threads compete with the workers), so the epochs whose times
count are not sampled at all: in a timing trial the runner `hold`s the sampler
from just before the loader is built and `release`s it only for the untimed
pause after each epoch. Each arm's memory trial is sampled as above throughout,
and its peaks (inside epochs) are the arm's memory figures.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from dataclasses import dataclass

from loaderprof.inside import procfs

# Relative and absolute RSS rise over the last deep high-water mark that
# triggers a deep read inside an epoch.
GROWTH_TRIGGER = 0.03
GROWTH_TRIGGER_MIN_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Sample:
    # The tick or walk it belongs to: samples of one group were read together.
    tick: int
    t_ns: int
    pid: int
    ppid: int
    rss: int
    # None on the ticker's (RSS-only) samples.
    uss: int | None
    pss: int | None
    # Handles (files, network connections, threads, children): read between
    # epochs only, where reading them costs the measured loop nothing.
    handles: procfs.Handles | None = None
    # When this process's USS/PSS and handles had been read (t_ns is when the
    # walk began): a reading counts for a pause only if it was over before the
    # pause ended, and a walk can run into the next epoch.
    read_ns: int | None = None
    # False for a walk's readings that may not be summed: the walk was cut short,
    # or processes appeared or vanished while it ran (see `_Walker._finish`). They
    # still count for each process's own figures.
    whole: bool = True


class _Walk:
    """One pass of USS/PSS reads over the tree, begun at `t_ns`."""

    def __init__(self, walk_id: int, t_ns: int, pids: set[int], between: bool) -> None:
        self.id = walk_id
        self.t_ns = t_ns
        self.began = time.monotonic()
        self.between = between
        self.members = frozenset(pids)
        self.pending = set(pids)
        self.read: dict[int, Sample] = {}
        # Begun at a watched pause's start: never restarted (see `pause_began`).
        self.pause_start = False


class TreeSampler(threading.Thread):
    """The ticker (RSS of every process, every interval), owning the walker."""

    def __init__(
        self,
        root_pid: int,
        interval_s: float,
        deep_interval_s: float,
        ignore_files: frozenset[str] = frozenset(),
        template_pid: int | None = None,
        handles_always: bool = False,
    ) -> None:
        super().__init__(name="loaderprof-sampler", daemon=True)
        self.root_pid = root_pid
        # Read handles in every walk, not only between epochs (`watch`, which
        # cannot tell a real run's epochs from its pauses while it runs).
        self.handles_always = handles_always
        self.template = _TemplateShare(template_pid)
        self.interval_s = interval_s
        self.deep_interval_s = max(deep_interval_s, interval_s)
        self.samples: list[Sample] = []
        self.ignore_files = ignore_files
        # pid -> monotonic ns of the first tick it was no longer seen.
        self.gone_ns: dict[int, int] = {}
        # Seconds both threads spent reading /proc, for the sampler's duty cycle.
        self.busy_s = 0.0
        self.ticks = 0
        # Walks that read every process, and walks cut short (never summed).
        self.deep_ticks = 0
        self.targeted_ticks = 0
        # See NOTE [sampled pauses]. When the last walk between epochs that read every
        # process (memory and handles) began, monotonic ns.
        self.last_pause_read_ns = 0
        # Gaps between consecutive ticks while the sampler ran (not held), seconds.
        self.tick_gaps: list[float] = []
        # (monotonic ns, bytes used) of /dev/shm; its size.
        self.shm_used: list[tuple[int, int]] = []
        self.shm_size: int | None = None
        # See NOTE [timing and memory trials]. A timing trial's sampler is held still
        # while epochs run (`hold`), and released for the untimed pauses.
        self._held = False
        self._release_until: float | None = None
        self._wake = threading.Event()
        self._stop_event = threading.Event()
        self._in_epoch = threading.Event()
        self._lock = threading.Lock()
        # Set once stop() has collected the samples: a thread that outlived its
        # join (a read stuck on a process in D state) adds nothing after that.
        self._closed = False
        # The first error that ended a thread's sampling, for the trial's warnings.
        self.error: str | None = None
        self._ids = itertools.count()
        self._last_tick: float | None = None
        self._known: set[int] = set()
        # The latest RSS of every live process (the ticker's), and its parent.
        self.latest: dict[int, tuple[int, int]] = {}
        self.walker = _Walker(self)

    # -- steering, from the runner's thread ---------------------------------

    def request_deep(self) -> None:
        """Walk the whole tree now (a worker's first batch: the memory its start-up
        cost, apart from what reading adds later)."""
        self.walker.requested.set()
        self.walker.wake.set()

    def pause_began(self) -> None:
        """The watched command's passes have all ended (NOTE [pauses not read]): a walk
        under way, begun inside the pass, gives way to one that begins now, so that a
        pause shorter than two walks still holds a whole one."""
        self.walker.restart.set()
        self.request_deep()

    def epoch_started(self) -> None:
        self._in_epoch.set()

    def epoch_ended(self) -> None:
        self._in_epoch.clear()
        self.walker.wake.set()

    @property
    def between(self) -> bool:
        return not self._in_epoch.is_set()

    def hold(self) -> None:
        """Take no sample until `release`."""
        self._held = True

    def release(self, for_s: float | None) -> None:
        """Sample again: for `for_s` seconds (then hold), or until told otherwise (None)."""
        if for_s is not None and for_s <= 0:
            return
        self._release_until = None if for_s is None else time.monotonic() + for_s
        self._held = False
        self._wake.set()
        self.walker.wake.set()

    @property
    def held(self) -> bool:
        """Taking no samples until `release`: the threads then sleep until `release`
        or `stop` wakes them, rather than waking every interval to look (see NOTE
        [timing and memory trials]; a timing trial's epochs get no sampler CPU)."""
        return self._held

    def still(self, now: float) -> bool:
        if not self._held and self._release_until is not None and now >= self._release_until:
            self._held = True
        return self._held

    def start(self) -> None:
        super().start()
        self.walker.start()

    def stop(self) -> None:
        """Stop both threads; the samples are then in time order."""
        self._stop_event.set()
        self._wake.set()
        self.walker.wake.set()
        for thread in (self, self.walker):
            if thread.is_alive():
                thread.join(timeout=5)
        with self._lock:
            self._closed = True
            self.samples.sort(key=lambda s: (s.t_ns, s.tick))
            self.shm_used.sort()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def next_id(self) -> int:
        return next(self._ids)

    def add(self, samples: list[Sample]) -> None:
        with self._lock:
            if not self._closed:
                self.samples.extend(samples)

    def add_busy(self, seconds: float) -> None:
        with self._lock:
            self.busy_s += seconds

    def read_shm(self) -> None:
        t_ns = time.monotonic_ns()
        shm = procfs.shm_usage()
        if shm is not None:
            with self._lock:
                if not self._closed:
                    self.shm_size = shm[0]
                    self.shm_used.append((t_ns, shm[1]))

    def failed(self, exc: BaseException) -> None:
        """A thread's sampling ended on an unexpected error: keep the first."""
        with self._lock:
            if self.error is None:
                self.error = f"{type(exc).__name__}: {exc}"

    # -- the ticker ----------------------------------------------------------

    def run(self) -> None:
        next_t = time.monotonic()
        while not self._stop_event.is_set():
            began = time.monotonic()
            if self.still(began):
                self._last_tick = None
            else:
                if self._last_tick is not None:
                    self.tick_gaps.append(began - self._last_tick)
                self._last_tick = began
                try:
                    self._tick(began)
                except Exception as exc:  # a thread must not die unreported
                    self.failed(exc)
                    return
                self.add_busy(time.monotonic() - began)
                self.ticks += 1
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:
                # Fell behind (a busy machine): skip missed ticks rather than
                # sampling in a burst.
                next_t = time.monotonic()
                delay = 0
            if self._wake.wait(None if self.held else delay):
                self._wake.clear()
                next_t = time.monotonic()

    def _tick(self, now: float) -> None:
        t_ns = time.monotonic_ns()
        tick = self.next_id()
        rows: list[Sample] = []
        latest: dict[int, tuple[int, int]] = {}
        for pid in procfs.tree(self.root_pid):
            r = procfs.rss(pid)
            if r is None or r <= 0:  # gone, or a zombie with no pages left
                continue
            parent = procfs.ppid(pid) if pid != self.root_pid else 0
            latest[pid] = (r, parent or 0)
            if pid == self.root_pid:
                # See NOTE [template]. The pages the main would hold as a fresh interpreter,
                # as of its last walk (they only shrink: a file page it touches again
                # is in its statm from then on, and at most counted twice till then).
                r += self.template.rss_pages(pid, fresh=False)
            rows.append(Sample(tick, t_ns, pid, parent or 0, r, None, None))
        self.latest = latest
        self.add(rows)
        self.walker.offer(latest)
        if self.between:
            self.read_shm()
        for pid in self._known - latest.keys():
            if pid not in self.gone_ns:
                self.gone_ns[pid] = t_ns
        self._known.update(latest)


class _Walker(threading.Thread):
    """Reads USS/PSS (and, between epochs, handles) of the tree, one walk at a time."""

    def __init__(self, owner: TreeSampler) -> None:
        super().__init__(name="loaderprof-walker", daemon=True)
        self.owner = owner
        self.wake = threading.Event()
        self.requested = threading.Event()
        # Set by `pause_began`: the walk under way gives way to a fresh one.
        self.restart = threading.Event()
        self._lock = threading.Lock()
        # Processes to read ahead of any walk order: new, or grown past the trigger.
        self._urgent: list[int] = []
        self._hw: dict[int, int] = {}
        self._read_at: dict[int, float] = {}
        self._handled: set[int] = set()
        # Live processes whose smaps cannot be read (not ours to read): left out of
        # walks, or no walk could ever read every process.
        self.unreadable: set[int] = set()
        self._walk: _Walk | None = None
        self._last_walk_began = 0.0

    def offer(self, latest: dict[int, tuple[int, int]]) -> None:
        """From the ticker: flag the processes that appeared or grew."""
        urgent = []
        for pid, (r, _) in latest.items():
            if pid in self.unreadable:
                continue
            hw = self._hw.get(pid)
            if hw is None or r > hw + max(GROWTH_TRIGGER_MIN_BYTES, GROWTH_TRIGGER * hw):
                urgent.append(pid)
        with self._lock:
            self._urgent.extend(p for p in urgent if p not in self._urgent)
        if urgent or self.owner.between:
            self.wake.set()

    def run(self) -> None:
        owner = self.owner
        while not owner.stopping:
            self.wake.wait(None if owner.held else owner.interval_s)
            self.wake.clear()
            if owner.stopping:
                break
            if owner.still(time.monotonic()):
                continue
            began = time.monotonic()
            try:
                self._walk_while_due()
            except Exception as exc:  # a thread must not die unreported
                owner.failed(exc)
                return
            owner.add_busy(time.monotonic() - began)
        if self._walk is not None:
            self._finish(complete=False)

    def _due(self) -> bool:
        """Whether a walk should begin now (none is under way)."""
        now = time.monotonic()
        with self._lock:
            urgent = bool(self._urgent)
        return (
            urgent
            or self.requested.is_set()
            or self.owner.between
            or now - self._last_walk_began >= self.owner.deep_interval_s
        )

    def _walk_while_due(self) -> None:
        owner = self.owner
        if self._walk is None:
            if not owner.latest or not self._due():
                return
            self._begin()
        while not owner.stopping and self._walk is not None:
            walk = self._walk
            # A walk that began inside the epoch that just ended gives way at once to
            # one of the pause (see NOTE [sampled pauses]; the trial waits for it).
            if owner.still(time.monotonic()) or (owner.between and not walk.between):
                self._finish(complete=False)
                return
            # Only a walk that may have begun in a pass gives way: one begun at a
            # pause's start runs to its end (a pass that ends meanwhile makes the next
            # walk one too), so that passes ending faster than a walk lasts still leave
            # whole walks. The readings of the one given up keep each process's peaks.
            if self.restart.is_set() and not walk.pause_start:
                self._finish(complete=False)
                self._begin()
                continue
            pid = self._next(walk)
            if pid is None:
                self._finish(complete=True)
                return
            self._read(walk, pid)

    def _begin(self) -> None:
        """A walk over every process the ticker last saw; one begun at a watched pause's
        start (`pause_began` since the last walk began) is marked so."""
        owner = self.owner
        in_pause = self.restart.is_set()
        self.requested.clear()
        self.restart.clear()
        self._last_walk_began = time.monotonic()
        self._walk = _Walk(
            owner.next_id(),
            time.monotonic_ns(),
            set(owner.latest) - self.unreadable,
            owner.between,
        )
        self._walk.pause_start = in_pause

    def _next(self, walk: _Walk) -> int | None:
        with self._lock:
            if self._urgent:
                pid = self._urgent.pop(0)
                walk.pending.discard(pid)
                return pid
        if not walk.pending:
            return None
        pid = min(walk.pending, key=lambda p: self._read_at.get(p, 0.0))
        walk.pending.discard(pid)
        return pid

    def _read(self, walk: _Walk, pid: int) -> None:
        owner = self.owner
        mem = procfs.memory(pid)
        if mem is None:
            walk.read.pop(pid, None)
            if (procfs.rss(pid) or 0) > 0:  # alive, but its smaps are not ours to read
                self.unreadable.add(pid)
                walk.members -= {pid}
            return
        raw_rss = mem.rss
        if pid == owner.root_pid:
            mem = owner.template.corrected(pid, mem)
        first = pid not in self._handled
        wanted = owner.between or first or owner.handles_always
        held = procfs.handles(pid, owner.ignore_files) if wanted else None
        if held is not None:
            self._handled.add(pid)
        parent = owner.latest.get(pid, (0, procfs.ppid(pid) or 0))[1]
        # The ticker's trigger compares statm's figure, without the template's pages.
        self._hw[pid] = max(self._hw.get(pid, 0), raw_rss)
        self._read_at[pid] = time.monotonic()
        # A process read again in the same walk (it grew) keeps its later figure.
        walk.read[pid] = Sample(
            walk.id, walk.t_ns, pid, parent, mem.rss, mem.uss, mem.pss, held, time.monotonic_ns()
        )

    def _finish(self, complete: bool) -> None:
        """Hand the walk's readings over, marked whole only if they can be summed.

        A PSS total is a sum of readings taken one after another, so it is true
        only if the processes sharing pages were the same throughout: a process
        that exits after being read hands its share of the pages to those read
        after it (counted twice), one that exits before being read takes its share
        out of those read before it (counted nowhere), and a fork mid-walk does
        the same the other way round. So a walk is whole only if it read every
        process, and the tree at its end is the tree it began with."""
        walk, self._walk = self._walk, None
        if walk is None:
            return
        owner = self.owner
        whole = (
            complete
            and set(walk.read) == walk.members
            and _alive(owner.root_pid) - self.unreadable == walk.members
        )
        if whole:
            owner.deep_ticks += 1
            if walk.between and owner.between:
                owner.last_pause_read_ns = walk.t_ns
            owner.read_shm()
        else:
            owner.targeted_ticks += 1
        rows = [s if whole else dataclasses.replace(s, whole=False) for s in walk.read.values()]
        if rows:
            owner.add(rows)


def _alive(root: int) -> set[int]:
    """The processes of the tree that hold pages (a zombie holds none)."""
    return {pid for pid in procfs.tree(root) if (procfs.rss(pid) or 0) > 0}


class _TemplateShare:
    """See NOTE [template]. What a fresh interpreter would hold in the trial main but the
    template's page tables hold instead, added to the main's figures.

    PSS: the template's part of the pages it still shares with the trial (PSS −
    USS), and the clean file pages (torch's code, faulted in by the import) that
    only the template maps because the trial, forked after the import, never
    touched them again. Its dirty private pages are left out: those are originals
    whose copy the trial made, and holds, when it wrote.

    RSS: a fork copies the parent's anonymous page tables but not those of its file
    mappings, so the trial's RSS lacks every file page of the import that it has
    not touched since: 70 MiB of torch's, measured on the CPU build, all of them in
    the PSS added above (as the template's private pages, or its share of those
    it shares outside the run). Without them the main read a PSS 60 MiB above its
    RSS. The template's resident file pages are found once in its pagemap; at
    each walk of the main, those absent from the main's page tables, at the same
    addresses (it is a fork), are added to its RSS: with them, its RSS is the
    union a fresh interpreter holds, and the corrected PSS stays below it."""

    def __init__(self, template_pid: int | None) -> None:
        self.pid = template_pid
        self._runs: list[tuple[int, int]] | None = None
        self._rss_pages: int | None = None

    def corrected(self, pid: int, mem: procfs.Mem) -> procfs.Mem:
        """The trial main's reading `mem` with the template's pages in."""
        if self.pid is None:
            return mem
        share = procfs.memory(self.pid)
        if share is None or share.pss is None or mem.pss is None:
            return mem
        pss = mem.pss + max(0, share.pss - share.uss) + share.private_clean
        return dataclasses.replace(mem, rss=mem.rss + self.rss_pages(pid), pss=pss)

    def rss_pages(self, pid: int, fresh: bool = True) -> int:
        """Bytes of the template's resident file pages that `pid` does not map: read
        now (`fresh`), or as of the last read (the ticker, whose reads stay cheap)."""
        if self.pid is None:
            return 0
        if fresh or self._rss_pages is None:
            if self._runs is None:
                self._runs = procfs.resident_file_pages(self.pid) or []
            absent = procfs.absent_pages(pid, self._runs) if self._runs else None
            self._rss_pages = absent * procfs.PAGE if absent is not None else self._clean()
        return self._rss_pages

    def _clean(self) -> int:
        """Without a pagemap to read: every clean page of the template, the file pages a
        fork leaves out of the trial's page tables among them. It counts those the main
        maps too, so it can only overstate the RSS, never leave it below the PSS."""
        assert self.pid is not None
        share = procfs.memory(self.pid)
        return 0 if share is None else share.private_clean + share.shared_clean
