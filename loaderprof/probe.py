"""What runs inside each DataLoader worker.

The probes wrap `worker_init_fn` and `collate_fn`, chain to the user's own, and
report through the event file. They are top-level classes holding only
picklable state so they work under spawn and forkserver too. Workers are
identified by these events (pid + worker id), never by guessing among child
processes: the forkserver and the resource tracker are children too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from loaderprof import events
from loaderprof.clock import process_start_ns

# The worker id of this process, set by the init probe (None outside workers).
_worker_id: int | None = None


def _on_exit(path: str, worker_id: int) -> None:
    events.emit(path, "worker_exit", worker_id=worker_id)


class WorkerInitProbe:
    def __init__(self, events_path: str, user_fn: Callable[[int], Any] | None) -> None:
        self.events_path = events_path
        self.user_fn = user_fn

    def __call__(self, worker_id: int) -> None:
        global _worker_id
        _worker_id = worker_id
        events.emit(
            self.events_path,
            "worker_init",
            worker_id=worker_id,
            proc_start=process_start_ns(os.getpid()),
        )
        # multiprocessing runs its finalizers when the worker loop returns
        # normally (the usual shutdown); a killed worker gets its exit time
        # from the parent's sampler instead.
        from multiprocessing import util

        util.Finalize(None, _on_exit, args=(self.events_path, worker_id), exitpriority=100)
        if self.user_fn is not None:
            self.user_fn(worker_id)
        events.emit(self.events_path, "worker_ready", worker_id=worker_id)


class CollateProbe:
    """Stamps every batch a worker produces; returns the user's result untouched."""

    def __init__(self, events_path: str, inner: Callable[[Any], Any], auto_collation: bool) -> None:
        self.events_path = events_path
        self.inner = inner
        self.auto_collation = auto_collation

    def __call__(self, data: Any) -> Any:
        import time

        start = time.monotonic_ns()
        out = self.inner(data)
        n = len(data) if self.auto_collation else 1
        events.emit(self.events_path, "batch", worker_id=_worker_id, start=start, n=n)
        return out
