"""Parent-side sampler: memory of every process under the trial child.

It runs as a thread in the parent, never inside the measured process, so
the measured loop carries no observer thread and no extra GIL contention.
`memory_full_info()` reads /proc/PID/smaps_rollup: USS (pages only this process
maps) is a worker's marginal cost, PSS (shared pages split among their users)
sums to the true total of the tree, and RSS counts every copy-on-write page
once per process, so it is kept only to show beside them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Sample:
    tick: int
    t_ns: int
    pid: int
    ppid: int
    rss: int
    uss: int
    pss: int


class TreeSampler(threading.Thread):
    def __init__(self, root_pid: int, interval_s: float) -> None:
        super().__init__(name="loaderprof-sampler", daemon=True)
        self.root_pid = root_pid
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        # pid -> monotonic ns of the first tick it was no longer seen.
        self.gone_ns: dict[int, int] = {}
        self._stop_event = threading.Event()
        self._procs: dict[int, psutil.Process] = {}

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)

    def run(self) -> None:
        try:
            root = psutil.Process(self.root_pid)
        except psutil.Error:
            return
        tick = 0
        next_t = time.monotonic()
        while not self._stop_event.is_set():
            self._sample_once(root, tick)
            tick += 1
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:
                # Fell behind (slow /proc reads on a busy machine): skip
                # missed ticks rather than sampling in a burst.
                next_t = time.monotonic()
                delay = 0
            self._stop_event.wait(delay)

    def _sample_once(self, root: psutil.Process, tick: int) -> None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        seen: set[int] = set()
        t_ns = time.monotonic_ns()
        for proc in tree:
            pid = proc.pid
            cached = self._procs.get(pid)
            if cached is None or not cached.is_running():
                self._procs[pid] = cached = proc
            try:
                with cached.oneshot():
                    mem = cached.memory_full_info()
                    ppid = cached.ppid()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            seen.add(pid)
            self.samples.append(
                Sample(tick, t_ns, pid, ppid, mem.rss, mem.uss, getattr(mem, "pss", mem.uss))
            )
        for pid in list(self._procs):
            if pid not in seen and pid not in self.gone_ns:
                self.gone_ns[pid] = t_ns
