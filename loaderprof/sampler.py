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
change it). Deep samples are therefore taken every `deep_interval_s` while an
epoch is being timed, on every tick outside epochs (set-up, the idle pauses
between epochs, where the memory held by persistent workers is measured), and
once as soon as a new process appears.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from loaderprof import procfs


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


class TreeSampler(threading.Thread):
    def __init__(self, root_pid: int, interval_s: float, deep_interval_s: float) -> None:
        super().__init__(name="loaderprof-sampler", daemon=True)
        self.root_pid = root_pid
        self.interval_s = interval_s
        self.deep_interval_s = max(deep_interval_s, interval_s)
        self.samples: list[Sample] = []
        # pid -> monotonic ns of the first tick it was no longer seen.
        self.gone_ns: dict[int, int] = {}
        # Seconds spent sampling, to report the sampler's own duty cycle.
        self.busy_s = 0.0
        self.ticks = 0
        self._stop_event = threading.Event()
        self._in_epoch = threading.Event()
        self._known: set[int] = set()
        self._last_deep = 0.0

    def epoch_started(self) -> None:
        self._in_epoch.set()

    def epoch_ended(self) -> None:
        self._in_epoch.clear()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)

    def run(self) -> None:
        next_t = time.monotonic()
        while not self._stop_event.is_set():
            began = time.monotonic()
            deep = not self._in_epoch.is_set() or began - self._last_deep >= self.deep_interval_s
            if deep:
                self._last_deep = began
            self._sample_once(self.ticks, deep)
            self.busy_s += time.monotonic() - began
            self.ticks += 1
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:
                # Fell behind (slow /proc reads on a busy machine): skip
                # missed ticks rather than sampling in a burst.
                next_t = time.monotonic()
                delay = 0
            self._stop_event.wait(delay)

    def _sample_once(self, tick: int, deep: bool) -> None:
        pids = procfs.tree(self.root_pid)
        seen: set[int] = set()
        t_ns = time.monotonic_ns()
        for pid in pids:
            if deep or pid not in self._known:
                mem = procfs.memory(pid)
                if mem is None:
                    continue
                rss, uss, pss = mem.rss, mem.uss, mem.pss
            else:
                r = procfs.rss(pid)
                if r is None:
                    continue
                rss, uss, pss = r, None, None
            seen.add(pid)
            self._known.add(pid)
            parent = procfs.ppid(pid) if pid != self.root_pid else 0
            self.samples.append(Sample(tick, t_ns, pid, parent or 0, rss, uss, pss))
        for pid in self._known - seen:
            if pid not in self.gone_ns:
                self.gone_ns[pid] = t_ns
