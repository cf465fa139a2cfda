"""The event channel between the trial child, its workers and the parent.

Every process appends JSON lines to one file with O_APPEND. Each event is a
single `write(2)` far below PIPE_BUF, so lines from concurrent processes never
interleave, and events written before a crash survive it. Stamps are
`time.monotonic_ns()`: CLOCK_MONOTONIC is system-wide on Linux, so stamps from
the parent, the trial child and its workers share one time base.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final


class Ev:
    """Every event kind, written once. Emitters pass these, parsers compare with them;
    a unit test holds both sides to this list (the JSON lines carry the plain strings).
    Every event has `ev` (its kind), `t` (monotonic ns) and `pid`; the comments name
    the fields each kind adds (? where only some events of the kind have it)."""

    # The trial child (inside/trial.py), in the order a trial emits them.
    CHILD_START: Final = "child_start"
    IMPORTED: Final = "imported"  # torch, start_method, accelerator: the imports are done
    DATASET_BUILT: Final = "dataset_built"  # kind, length, type, shards?, shards_attribute?
    SETUP_READ: Final = "setup_read"  # asks for a set-up reading (see NOTE [sampled pauses])
    LOADER_BUILDING: Final = "loader_building"  # see NOTE [memory window]
    LOADER_BUILT: Final = "loader_built"  # full_batches
    # epoch (compare) or loader (watch); values, skipped, took_s: the Dataset's fingerprint
    MAIN_STATE: Final = "main_state"
    EPOCH_START: Final = "epoch_start"  # epoch
    FIRST_BATCH: Final = "first_batch"  # epoch
    VAL_START: Final = "val_start"  # epoch (see NOTE [validation pass])
    VAL_FIRST_BATCH: Final = "val_first_batch"  # epoch
    VAL_END: Final = "val_end"  # epoch, batches
    # epoch, batches, last_batch, order, wait_first, wait_steady (NOTE [data wait])
    EPOCH_END: Final = "epoch_end"
    IDLE_START: Final = "idle_start"  # epoch
    IDLE_END: Final = "idle_end"  # epoch
    COLLECTING: Final = "collecting"  # loaderprof's own gc.collect() (see NOTE [memory window])
    COLLECTED: Final = "collected"
    LOADER_CLOSING: Final = "loader_closing"
    LOADER_CLOSED: Final = "loader_closed"  # workers_alive
    DATASET_ATTRIBUTES: Final = "dataset_attributes"  # sizes
    WORKER_PICKLED: Final = "worker_pickled"  # worker_id, bytes, seconds
    TRIAL_END: Final = "trial_end"
    # code?, unreaped_cpu_s: the user's exit handlers run now (NOTE [no teardown]); from
    # the hook, in a process that iterated a loader
    EXITING: Final = "exiting"
    WARNING: Final = "warning"  # message
    # category, kind, message, detail, epoch?, worker_id?, pids?, signal?, exitcodes?
    ERROR: Final = "error"
    # Each DataLoader worker (inside/probe.py).
    # worker_id, held, proc_start, unpickle_start, unpickle_end, unpickle_import_ns,
    # loader ("train", "val", or watch's loader id), pool (its iterator's seed: seed.py)
    WORKER_INIT: Final = "worker_init"
    WORKER_READY: Final = "worker_ready"  # worker_id
    # worker_id, epoch (compare) or loader (watch); values, skipped, took_s
    WORKER_STATE: Final = "worker_state"
    BATCH: Final = "batch"  # worker_id, start, n, bytes, fetch?, d?
    # worker_id, threads, compute, torch_threads, origins, and main_demand, thread_demand,
    # main_wait, thread_wait all four or none (NOTE [worker threads])
    WORKER_THREADS: Final = "worker_threads"
    GETITEM_ERROR: Final = "getitem_error"  # worker_id, index, error
    WORKER_EXIT: Final = "worker_exit"  # worker_id, held? (the hook's workers)
    # The user's own process under `watch` (inside/hook.py, see NOTE [watch hook]).
    # loader, site, rank, and the settings inside.hook._describe reads
    LOADER_CREATED: Final = "loader_created"
    # loader, site, rank, settings: a framework's rebuild of that loader (same Dataset)
    LOADER_REBUILT: Final = "loader_rebuilt"
    ITER_START: Final = "iter_start"  # loader, planned (len(loader) or None)
    ITER_FIRST_BATCH: Final = "iter_first_batch"  # loader
    ITER_POOL: Final = "iter_pool"  # loader, pool: the base seed of the workers iter() made
    # loader, batches, ended: "exhausted" (StopIteration) or "left" (see inside/hook.py);
    # wait_first, wait_steady (NOTE [data wait])
    ITER_END: Final = "iter_end"
    # held: {pid: counts} of the process's children alive as it exits, after EXITING
    HELD_AT_EXIT: Final = "held_at_exit"


KINDS: Final = frozenset(v for k, v in vars(Ev).items() if k.isupper())

# Per-process cache of open descriptors: a forked worker inherits the parent's
# cache, so it is keyed by pid as well.
_fds: dict[tuple[int, str], int] = {}


def emit(path: str, ev: str, **fields: Any) -> None:
    pid = os.getpid()
    key = (pid, path)
    fd = _fds.get(key)
    if fd is None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        _fds[key] = fd
    record = {"ev": ev, "t": time.monotonic_ns(), "pid": pid, **fields}
    os.write(fd, (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode())


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Every whole event in the file (none when there is no file)."""
    return EventReader(str(path)).read_new()


class EventReader:
    """Reads whole lines appended to an event file since the last call."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return list(_decode(lines))


def _decode(lines: list[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            # A process killed mid-write can leave a torn line; skip it.
            continue
