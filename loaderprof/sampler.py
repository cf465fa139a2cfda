"""Parent-side sampler: memory of every process under the trial child.

It runs as a thread in the parent, never inside the measured process, so
the measured loop carries no observer thread and no extra GIL contention.

Two depths. RSS comes from /proc/PID/statm on every tick: kernel counters,
nearly free. USS (pages only this process maps: a worker's marginal cost)
and PSS (shared pages split among their users: sums to the true total) need
/proc/PID/smaps_rollup, a walk of the page tables under the process's mmap
lock. DataLoader batches travel through shared memory that is mapped and
unmapped for every batch, so frequent walks stall the loader itself
(measured: smaps every 50 ms doubled a 0.23 s epoch; statm every 50 ms did not
change it). So while an epoch is timed a deep sample of the whole tree is
taken only when memory moves or time passes:

* a process appeared (its first sample is deep);
* some process's RSS rose above its high-water mark at the last deep sample by
  more than GROWTH_TRIGGER (allocations and peaks are caught within one tick);
  this and the first case read those processes first and start a walk over
  the others, so that with many workers a new or growing one is read at once,
  not after a walk of all the others;
* `deep_interval_s` passed since the last walk over every process began
  (catches USS that grows without RSS growing, such as copy-on-write pages
  turning private);
* a worker delivered its first batch (`request_deep`): what its start-up cost,
  apart from what reading adds later.

Outside timed epochs (set-up, the idle pauses between epochs, where the memory
held by persistent workers is measured) every process is due on every tick.
Inside an epoch, beyond the reads it must make (new and grown processes) and
the first ALWAYS_READ, a tick reads the due processes, least recently read
first, only for TICK_BUDGET of the interval: with many workers a walk of all of
them is spread over several ticks and the sampler keeps its interval while the
workers run (`tick_gap_p95_s` in the JSON). Figures summed over processes (PSS
totals, idle memory) come only from ticks that read every process: PSS moves
when another process maps or unmaps a shared page, so a figure carried from an
earlier tick could not be summed honestly. Between epochs every tick reads
every process.

NOTE [timing and memory trials]: even those reads cost a CPU-bound epoch on a
small machine (the sampler's thread competes with the workers), so the epochs
whose times count are not sampled at all: in a timing trial the runner `hold`s
the sampler from just before the loader is built and `release`s it only for the
untimed pause after each epoch. Each arm's memory trial is sampled as above
throughout, and its peaks (inside epochs) are the arm's memory figures.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

from loaderprof import procfs

# Relative and absolute RSS rise over the last deep high-water mark that
# triggers a deep sample inside an epoch.
GROWTH_TRIGGER = 0.03
GROWTH_TRIGGER_MIN_BYTES = 2 * 1024 * 1024
# Share of the interval a tick inside an epoch may spend on USS/PSS reads beyond the
# ones it must make, once it has read ALWAYS_READ processes (so that with a few
# workers every due tick reads them all, and its figures can be summed).
TICK_BUDGET = 0.5
ALWAYS_READ = 8


@dataclass(frozen=True)
class Sample:
    tick: int
    t_ns: int
    pid: int
    ppid: int
    rss: int
    # None on shallow (RSS-only) ticks.
    uss: int | None
    pss: int | None
    # Handles (files, network connections, threads, children): read between
    # epochs only, where reading them costs the measured loop nothing.
    handles: procfs.Handles | None = None
    # When this process's USS/PSS and handles had been read (t_ns is when the tick
    # began): a reading counts for a pause only if it was over before the pause
    # ended, and a slow tick can run into the next epoch.
    read_ns: int | None = None


class TreeSampler(threading.Thread):
    def __init__(
        self,
        root_pid: int,
        interval_s: float,
        deep_interval_s: float,
        ignore_files: frozenset[str] = frozenset(),
        template_pid: int | None = None,
    ) -> None:
        super().__init__(name="loaderprof-sampler", daemon=True)
        self.root_pid = root_pid
        self.template_pid = template_pid
        self.interval_s = interval_s
        self.deep_interval_s = max(deep_interval_s, interval_s)
        self.samples: list[Sample] = []
        self.ignore_files = ignore_files
        # pid -> monotonic ns of the first tick it was no longer seen.
        self.gone_ns: dict[int, int] = {}
        # Seconds spent sampling, to report the sampler's own duty cycle.
        self.busy_s = 0.0
        self.ticks = 0
        # NOTE [timing and memory trials]: a timing trial's sampler is held still
        # while epochs run (`hold`), and released for the untimed pauses.
        self._held = False
        self._release_until: float | None = None
        # Set to take a sample now rather than at the next tick (a pause began).
        self._wake = threading.Event()
        self._stop_event = threading.Event()
        self._in_epoch = threading.Event()
        self._deep_requested = threading.Event()
        self._known: set[int] = set()
        self._deep_hw: dict[int, int] = {}
        # pid -> monotonic time of its last USS/PSS read.
        self._read_at: dict[int, float] = {}
        # The processes the current walk has still to read, and when it began.
        self._walk: set[int] = set()
        self._walk_began = 0.0
        self.deep_ticks = 0
        # NOTE [sampled pauses]: when the last tick between epochs that read every
        # process (memory and handles) began, monotonic ns.
        self.last_pause_read_ns = 0
        # Ticks inside an epoch that read only the new or grown processes.
        self.targeted_ticks = 0
        # Gaps between consecutive ticks while the sampler ran (not held), seconds.
        self.tick_gaps: list[float] = []
        self._last_tick: float | None = None
        # (monotonic ns, bytes used) of /dev/shm at deep ticks; its size.
        self.shm_used: list[tuple[int, int]] = []
        self.shm_size: int | None = None

    def request_deep(self) -> None:
        """Read USS/PSS of the whole tree at the next tick (a worker's first batch: the
        memory its start-up cost, apart from what reading adds later)."""
        self._deep_requested.set()

    def epoch_started(self) -> None:
        self._in_epoch.set()

    def epoch_ended(self) -> None:
        self._in_epoch.clear()

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

    def _still(self, now: float) -> bool:
        if not self._held and self._release_until is not None and now >= self._release_until:
            self._held = True
        return self._held

    def stop(self) -> None:
        self._stop_event.set()
        self._wake.set()
        if self.is_alive():
            self.join(timeout=5)

    def run(self) -> None:
        next_t = time.monotonic()
        while not self._stop_event.is_set():
            began = time.monotonic()
            if self._still(began):
                self._last_tick = None
            else:
                if self._last_tick is not None:
                    self.tick_gaps.append(began - self._last_tick)
                self._last_tick = began
                self._sample_once(self.ticks, began)
                self.busy_s += time.monotonic() - began
                self.ticks += 1
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:
                # Fell behind (slow /proc reads on a busy machine): skip
                # missed ticks rather than sampling in a burst.
                next_t = time.monotonic()
                delay = 0
            if self._wake.wait(delay):
                self._wake.clear()
                next_t = time.monotonic()

    def _deep_order(self, now: float, rss: dict[int, int]) -> tuple[list[int], list[int]]:
        """Whose USS/PSS this tick reads: (must, then as the tick's budget allows).

        Must: processes that appeared or grew past the trigger (a short-lived worker
        is read first, at once). Then the rest of a walk over every process, which
        starts between epochs on every tick, and inside one when a process appeared
        or grew, on request, or when `deep_interval_s` has passed since the last walk
        began. With a few processes a walk fits in its tick; one that the budget cuts
        short goes on at the next tick, least recently read first.
        """
        must = []
        for pid, r in rss.items():
            hw = self._deep_hw.get(pid)
            if hw is None or r > hw + max(GROWTH_TRIGGER_MIN_BYTES, GROWTH_TRIGGER * hw):
                must.append(pid)
        # A process that appeared or grew starts a walk too: the PSS total at that
        # moment is a peak candidate, and it is a sum over every process.
        start = (
            bool(must)
            or self._deep_requested.is_set()
            or not self._in_epoch.is_set()
            or now - self._walk_began >= self.deep_interval_s
        )
        self._deep_requested.clear()
        if start:
            self._walk = set(rss)
            self._walk_began = now
        due = [pid for pid in rss if pid in self._walk and pid not in must]
        due.sort(key=lambda pid: self._read_at.get(pid, 0.0))
        return must, due

    def _template_share(self) -> int:
        """NOTE [template]: what a fresh interpreter would hold in the trial main but
        PSS gives the template: its part of the pages it still shares with the trial
        (PSS − USS), and the clean file pages (torch's code, faulted in by the
        import) that only the template maps because the trial, forked after the
        import, never touched them again. Its dirty private pages are left out:
        those are originals whose copy the trial made, and holds, when it wrote."""
        if self.template_pid is None:
            return 0
        mem = procfs.memory(self.template_pid)
        if mem is None or mem.pss is None:
            return 0
        return max(0, mem.pss - mem.uss) + mem.private_clean

    def _read_deep(
        self, pid: int, handles: bool
    ) -> tuple[procfs.Mem | None, procfs.Handles | None, int]:
        mem = procfs.memory(pid)
        if mem is not None and pid == self.root_pid and mem.pss is not None:
            mem = dataclasses.replace(mem, pss=mem.pss + self._template_share())
        held = procfs.handles(pid, self.ignore_files) if handles and mem is not None else None
        return mem, held, time.monotonic_ns()

    def _sample_once(self, tick: int, now: float) -> None:
        t_ns = time.monotonic_ns()
        rss: dict[int, int] = {}
        for pid in procfs.tree(self.root_pid):
            r = procfs.rss(pid)
            if r is not None and r > 0:  # a zombie has no pages left
                rss[pid] = r
        must, due = self._deep_order(now, rss)
        # Handles need /proc/net scans: read them between epochs, and once when a
        # process first appears (the baseline it started with; new ones are `must`).
        between = not self._in_epoch.is_set()
        budget_end = now + TICK_BUDGET * self.interval_s
        read = {pid: self._read_deep(pid, between or pid not in self._known) for pid in must}
        for i, pid in enumerate(due):
            # Between epochs the whole walk happens (the pause's figures are sums over
            # every process, read at one tick); inside one, past the first few reads
            # the tick keeps to its budget.
            if not between and i >= ALWAYS_READ and time.monotonic() >= budget_end:
                break
            read[pid] = self._read_deep(pid, between)
        deep = len(read) == len(rss)
        if read and not deep:
            self.targeted_ticks += 1
        seen: set[int] = set()
        for pid, r in rss.items():
            uss = pss = None
            mem, held, read_ns = read.get(pid, (None, None, None))
            if pid in read:
                if mem is None:
                    continue
                r, uss, pss = mem.rss, mem.uss, mem.pss
                self._deep_hw[pid] = max(self._deep_hw.get(pid, 0), r)
                self._read_at[pid] = now
                self._walk.discard(pid)
            seen.add(pid)
            self._known.add(pid)
            parent = procfs.ppid(pid) if pid != self.root_pid else 0
            self.samples.append(Sample(tick, t_ns, pid, parent or 0, r, uss, pss, held, read_ns))
        if deep:
            self.deep_ticks += 1
            if between and len(seen) == len(rss):
                self.last_pause_read_ns = t_ns
        if deep or not self._in_epoch.is_set():
            shm = procfs.shm_usage()
            if shm is not None:
                self.shm_size = shm[0]
                self.shm_used.append((t_ns, shm[1]))
        for pid in self._known - seen:
            if pid not in self.gone_ns:
                self.gone_ns[pid] = t_ns
