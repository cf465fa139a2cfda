"""What runs inside each DataLoader worker.

The probes wrap `worker_init_fn` and `collate_fn`, chain to the user's own, and
report through the event file. They are top-level classes holding only
picklable state so they work under spawn and forkserver too. Workers are
identified by these events (pid + worker id), never by guessing among child
processes: the forkserver and the resource tracker are children too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loaderprof.inside import events, schedstat
from loaderprof.inside.clock import process_start_ns
from loaderprof.inside.events import Ev
from loaderprof.inside.seed import pool_seed

# The worker id of this process, set by the init probe (None outside workers).
_worker_id: int | None = None
# The last epoch whose Dataset state this worker reported (see report_state).
_state_epoch: int | None = None
# When the batch being built began fetching (IndexProbe; an IterableDataset's:
# `_time_iterable_fetches`), taken by CollateProbe: a batch span is fetch + collate.
_fetch_started: int | None = None
# This thread's run-queue wait (ns) as that fetch began: the batch's own wait for a CPU,
# another process's load, is what the straggler check leaves out of its span.
_fetch_waited: int | None = None
# See NOTE [start-up breakdown]. When this worker began and finished unpickling its
# Dataset (spawn/forkserver: fork copies it instead), stamped by the probes' reducers.
_unpickle_start: int | None = None
_unpickle_end: int | None = None
# Of that, the time spent importing the modules the pickle names (torchvision, the
# user's own): what spawn costs a worker whatever the Dataset holds. The total so far,
# and at the last stamp.
_import_ns = 0
_unpickle_import_ns: int | None = None
_import_depth = 0
_real_import: Callable[..., Any] | None = None
# Batches this worker has built: its threads are reported at the 1st, 2nd, 4th, 8th...
_batches_built = 0
# Python threads that are the worker's own plumbing (the result queue's feeder, the
# file-descriptor sharer), not compute: told apart by where their target lives.
_PLUMBING = ("multiprocessing.", "torch.")
# CPU time a thread must have used to count as computing (2 clock ticks), and what
# each had used when the worker's init began.
_BUSY_TICKS = 2
_thread_cpu_base: dict[int, int] = {}
# See NOTE [worker threads]. What each thread had run or waited to run (ns, from
# schedstat) when the worker's init began, and when that was: its CPU demand since.
_thread_demand_base: dict[int, tuple[int, int, int]] = {}
_init_ns: int | None = None


def _on_exit(path: str, worker_id: int, count_held: bool = False) -> None:
    # A finalizer's error would only print a traceback into the worker's last words.
    with contextlib.suppress(OSError):
        fields = {"held": held_now(path)} if count_held else {}
        events.emit(path, Ev.WORKER_EXIT, worker_id=worker_id, **fields)


def _inheriting() -> bool:
    """In a spawned (or forkserver) child unpickling what its parent sent: what the
    stamps time. Not a `copy.deepcopy` of the Dataset in the main process, which
    rebuilds the probes too."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def _started_unpickling() -> None:
    """Called by the unpickler as it reaches a probe's payload (see `_Stamp`): from
    here until the worker's init, imports are timed (the unpickler imports each module
    the pickle names through `builtins.__import__`; the worker has no other thread yet
    to import at the same time)."""
    global _unpickle_start, _real_import
    if _unpickle_start is None and _inheriting():
        _unpickle_start = time_ns()
        import builtins

        _real_import = builtins.__import__
        builtins.__import__ = _timed_import


def _timed_import(*args: Any, **kwargs: Any) -> Any:
    global _import_ns, _import_depth
    assert _real_import is not None
    if _import_depth:  # inside an import being timed
        return _real_import(*args, **kwargs)
    _import_depth = 1
    start = time_ns()
    try:
        return _real_import(*args, **kwargs)
    finally:
        _import_ns += time_ns() - start
        _import_depth = 0


def _stop_timing_imports() -> None:
    if _real_import is not None:
        import builtins

        builtins.__import__ = _real_import


class _Stamp:
    """Pickled just before a probe's payload: unpickling it stamps the start."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_started_unpickling, ())


def _rebuilt(cls: type[Any], _stamp: None, *state: Any) -> Any:
    """A probe rebuilt in a spawned worker, its payload (the Dataset, or the user's
    function) unpickled before this call: stamp the end."""
    global _unpickle_end, _unpickle_import_ns
    if _inheriting():
        _unpickle_end = time_ns()
        _unpickle_import_ns = _import_ns if _unpickle_start is not None else None
    return cls(*state)


def time_ns() -> int:
    import time

    return time.monotonic_ns()


class WorkerInitProbe:
    # The hook's workers count what they hold as they exit: after a persistent pool's
    # last epoch, the reading its later epochs' own counts lack (`held_now`).
    count_held_at_exit = False

    def __init__(
        self, events_path: str, user_fn: Callable[[int], Any] | None, loader: str = "train"
    ) -> None:
        self.events_path = events_path
        self.user_fn = user_fn
        # Which loader's worker this is (NOTE [validation pass]).
        self.loader = loader

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # torch pickles the worker_init_fn after the Dataset and the collate_fn: its
        # rebuild marks the end of the worker's unpickling, for every kind of Dataset
        # (the start only a map-style Dataset's probe can stamp).
        return (_rebuilt, (type(self), None, self.events_path, self.user_fn, self.loader))

    def __call__(self, worker_id: int) -> None:
        global _worker_id, _thread_cpu_base, _thread_demand_base, _init_ns
        _worker_id = worker_id
        _thread_cpu_base = schedstat.thread_cpu()
        _thread_demand_base = schedstat.thread_demand()
        _init_ns = time_ns()
        _stop_timing_imports()
        _time_iterable_fetches()
        self._emit(
            Ev.WORKER_INIT,
            worker_id=worker_id,
            held=_held(self.events_path),
            proc_start=process_start_ns(os.getpid()),
            unpickle_start=_unpickle_start,
            unpickle_end=_unpickle_end,
            unpickle_import_ns=_unpickle_import_ns,
            loader=self.loader,
            pool=pool_seed(worker_id),
        )
        # multiprocessing runs its finalizers when the worker loop returns
        # normally (the usual shutdown); a killed worker gets its exit time
        # from the parent's sampler instead.
        from multiprocessing import util

        args = (self.events_path, worker_id, self.count_held_at_exit)
        util.Finalize(None, _on_exit, args=args, exitpriority=100)
        if self.user_fn is not None:
            self.user_fn(worker_id)
        self._emit(Ev.WORKER_READY, worker_id=worker_id)

    def _emit(self, ev: str, **fields: Any) -> None:
        events.emit(self.events_path, ev, **fields)


def _held(events_path: str) -> dict[str, int] | None:
    """NOTE [held at init]: what the worker holds before it has run any of the user's
    code (its worker_init_fn, its first item): the baseline the state it carries is
    counted from. The sampler's first reading of a worker lands wherever it lands, before
    or after a file the Dataset opens lazily at its first item; this one does not."""
    from loaderprof.inside import procfs

    held = procfs.handles(os.getpid(), frozenset({events_path, os.path.realpath(events_path)}))
    if held is None:
        return None
    return {"files": held.files, "inet": held.inet, "children": held.children}


def held_now(events_path: str, pid: int | None = None) -> dict[str, int] | None:
    """What a worker (this one by default) holds now, as the sampler counts it
    (`procfs.HANDLE_LABELS`): a persistent worker's count as its next epoch begins, or
    as the program exits, is what it kept from the epoch before, read with no pause
    between the epochs needed (`watch`'s leak readings)."""
    from loaderprof.inside import procfs

    ignore = frozenset({events_path, os.path.realpath(events_path)})
    held = procfs.handles(os.getpid() if pid is None else pid, ignore)
    return None if held is None else {k: int(getattr(held, k)) for k in procfs.HANDLE_LABELS}


def held_by_children(events_path: str, pid: int) -> dict[int, dict[str, int]]:
    """`held_now` for each child of `pid`: a persistent pool's workers, alive as the
    program exits (multiprocessing then terminates them: they count nothing at their
    own exit), after their last epoch."""
    from loaderprof.inside import procfs

    counts = {c: held_now(events_path, c) for c in procfs.children(pid)}
    return {c: h for c, h in counts.items() if h is not None}


def report_state(events_path: str, counter: Any, dataset: Any) -> None:
    """See NOTE [stale worker state]. At its first fetch of each epoch a worker
    fingerprints its own copy of the Dataset. The main process writes the epoch
    into `counter` (shared memory) before each epoch, so a persistent worker,
    which the loader never rebuilds, still learns that a new epoch began."""
    global _state_epoch
    if counter is None or _worker_id is None:
        return
    epoch = int(counter.value)
    if epoch == _state_epoch or epoch < 1:
        return
    _state_epoch = epoch
    from loaderprof.inside.fingerprint import timed_fingerprint

    events.emit(
        events_path,
        Ev.WORKER_STATE,
        worker_id=_worker_id,
        epoch=epoch,
        **timed_fingerprint(dataset),
    )


def nbytes(obj: Any) -> int:
    """Bytes of tensor / array payload in a (nested) batch: what crosses shared memory."""
    size = getattr(obj, "nbytes", None)
    if isinstance(size, int):
        return size
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v) for v in obj)
    return 0


def _feed(h: Any, obj: Any) -> None:
    # Tensors and arrays hash by dtype, shape and bytes; containers recurse;
    # anything else by its pickle (or repr when it cannot be pickled).
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):
        import torch

        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif hasattr(obj, "tobytes") and hasattr(obj, "dtype"):
        h.update(f"A{obj.dtype}{getattr(obj, 'shape', ())}".encode())
        h.update(obj.tobytes())
    elif isinstance(obj, dict):
        h.update(b"{")
        for k in sorted(obj, key=repr):
            h.update(repr(k).encode())
            _feed(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[")
        for v in obj:
            _feed(h, v)
        h.update(b"]")
    else:
        import pickle

        try:
            h.update(pickle.dumps(obj, protocol=4))
        except Exception:
            h.update(repr(obj).encode())


def sample_digest(obj: Any) -> str:
    """A 64-bit content digest of one sample."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    _feed(h, obj)
    return h.hexdigest()


@dataclass(frozen=True)
class CollateProbe:
    """Stamps every batch a worker produces; returns the user's result untouched.
    Pickled into every worker (spawn/forkserver) with the loader."""

    events_path: str
    inner: Callable[[Any], Any]
    auto_collation: bool
    # Content digests of every sample (`loaderprof check`): costs time.
    digests: bool = False
    # Set for IterableDatasets only, whose fetches no index probe sees.
    epoch_counter: Any = None

    def __call__(self, data: Any) -> Any:
        import time

        global _fetch_started, _fetch_waited
        start = time.monotonic_ns()
        fetch, _fetch_started = _fetch_started, None
        # A batch without a fetch stamp spans its collate alone: its wait counts from now.
        waited = _fetch_waited if fetch is not None else schedstat.run_queue_ns()
        _fetch_waited = None
        if self.epoch_counter is not None:
            from torch.utils.data import get_worker_info

            info = get_worker_info()
            if info is not None:
                report_state(self.events_path, self.epoch_counter, info.dataset)
        out = self.inner(data)
        n = len(data) if self.auto_collation else 1
        fields: dict[str, Any] = {
            "worker_id": _worker_id,
            "start": start,
            "n": n,
            "bytes": nbytes(out),
        }
        if fetch is not None:
            fields["fetch"] = fetch
        now_waited = schedstat.run_queue_ns()
        if waited is not None and now_waited is not None:
            fields["waited"] = now_waited - waited
        if self.digests:
            samples = data if self.auto_collation else [data]
            fields["d"] = [sample_digest(s) for s in samples]
        events.emit(self.events_path, Ev.BATCH, **fields)
        global _batches_built
        _batches_built += 1
        if _worker_id is not None and _batches_built & (_batches_built - 1) == 0:
            report_threads(self.events_path)
        return out


def _origin(tid: int, python: dict[int, Any]) -> str:
    """What started a thread: a Python thread's target module (or its class), else
    the name the native thread gave itself (an OpenMP/BLAS/OpenCV pool)."""
    t = python.get(tid)
    if t is not None:
        target = getattr(t, "_target", None)
        if target is not None:
            return f"python:{getattr(target, '__module__', None) or '?'}"
        kind = type(t)
        return f"python:{kind.__module__}.{kind.__qualname__}"
    try:
        with open(f"/proc/{os.getpid()}/task/{tid}/comm") as f:
            return f"native:{f.read().strip()}"
    except OSError:
        return "native:?"


def report_threads(events_path: str) -> None:
    """NOTE [worker threads]: how many threads this worker runs, and how many of
    them compute. A thread computes when it has used CPU (≥ 2 ticks) since the
    worker's init began and is neither the main thread nor multiprocessing's or
    torch's plumbing (the queue feeder, the fd sharer), which a plain worker has
    too; native pools (OpenMP, BLAS, OpenCV) have no Python Thread object and count
    when busy, while a thread busy only while imports ran (spawn) does not. Read at
    the worker's 1st, 2nd, 4th, 8th... batch: CPU times are cumulative, so a pool
    that ran once is seen."""
    import threading

    python = {t.native_id: t for t in threading.enumerate() if t.native_id is not None}
    plumbing = {
        tid
        for tid, t in python.items()
        if (getattr(getattr(t, "_target", None), "__module__", None) or "").startswith(_PLUMBING)
    }
    pid = os.getpid()
    cpu = schedstat.thread_cpu()
    if not cpu:
        return
    busy = [
        tid
        for tid, ticks in cpu.items()
        if tid != pid
        and tid not in plumbing
        and ticks - _thread_cpu_base.get(tid, 0) >= _BUSY_TICKS
    ]
    origins: dict[str, int] = {}
    for tid in busy:
        name = _origin(tid, python)
        origins[name] = origins.get(name, 0) + 1
    import torch

    events.emit(
        events_path,
        Ev.WORKER_THREADS,
        worker_id=_worker_id,
        threads=len(cpu),
        compute=1 + len(busy),
        torch_threads=torch.get_num_threads(),
        origins=origins,
        **_demand(pid, plumbing),
    )


def _demand(pid: int, plumbing: set[int]) -> dict[str, float]:
    """See NOTE [worker threads]. The cores this worker's threads wanted on average since
    its init (a computing thread's run + run-queue wait, another's run, over the wall
    time): its main thread's, and its other threads' (plumbing left out: every worker
    has it), with the run-queue wait inside each: another process's load lengthens
    that wait too, and the check takes its share out (NOTE [worker threads])."""
    if _init_ns is None:
        return {}
    wall = time_ns() - _init_ns
    if wall <= 0:
        return {}
    # [run, wait] of the main thread, then of the others.
    main, other = [0, 0], [0, 0]
    for tid, now in schedstat.thread_demand().items():
        if tid in plumbing:
            continue
        run, wait = schedstat.wanted(now, _thread_demand_base.get(tid, (0, 0, 0)))
        into = main if tid == pid else other
        into[0] += run
        into[1] += wait
    return {
        "main_demand": round(sum(main) / wall, 4),
        "thread_demand": round(sum(other) / wall, 4),
        "main_wait": round(main[1] / wall, 4),
        "thread_wait": round(other[1] / wall, 4),
    }


_OWN = ("inner", "events_path", "epoch_counter")


def _time_iterable_fetches() -> None:
    """An IterableDataset's fetches stamped as an index probe stamps a map-style one's:
    from the fetcher's iter(), where a Dataset's __iter__ may open its files before its
    first item (litdata's does), and from each later batch's first next(). torch's
    own fetcher, patched in this worker only (torch builds it right after the init
    function); a DataLoader class with a fetcher of its own keeps it, unstamped."""
    try:
        from torch.utils.data._utils.fetch import _IterableDatasetFetcher as fetcher
    except ImportError:
        return
    if getattr(fetcher, "_loaderprof_stamped", False):
        return
    init, fetch = fetcher.__init__, fetcher.fetch

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _mark_fetch()
        init(self, *args, **kwargs)

    def stamped_fetch(self: Any, possibly_batched_index: Any) -> Any:
        _mark_fetch()
        return fetch(self, possibly_batched_index)

    fetcher.__init__ = __init__
    fetcher.fetch = stamped_fetch
    fetcher._loaderprof_stamped = True


def _mark_fetch() -> None:
    global _fetch_started, _fetch_waited
    if _fetch_started is None:
        import time

        _fetch_started = time.monotonic_ns()
        _fetch_waited = schedstat.run_queue_ns()


class IndexProbe:
    """Wraps a map-style Dataset so a failing `__getitem__` reports its index.

    Attribute reads and writes pass through to the user's dataset, so a
    worker_init_fn that sets `get_worker_info().dataset.x` still reaches it.
    """

    # How loaderprof.inside.fingerprint.unwrap finds the user's Dataset.
    __loaderprof_inner__ = "inner"

    def __init__(self, inner: Any, events_path: str, epoch_counter: Any = None) -> None:
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "events_path", events_path)
        object.__setattr__(self, "epoch_counter", epoch_counter)

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: Any) -> Any:
        _mark_fetch()
        report_state(self.events_path, self.epoch_counter, self)
        try:
            return self.inner[index]
        except Exception as exc:
            self._report(index, exc)
            raise

    def _report(self, index: Any, exc: BaseException) -> None:
        shown = repr(index)
        events.emit(
            self.events_path,
            Ev.GETITEM_ERROR,
            worker_id=_worker_id,
            index=shown if len(shown) <= 200 else shown[:197] + "...",
            error=f"{type(exc).__name__}: {exc}",
        )

    def __getattr__(self, name: str) -> Any:
        if name in _OWN:  # during unpickling, before __init__ state exists
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The stamp comes first, so a spawned worker's unpickling of the Dataset lies
        # between the two stamps (NOTE [start-up breakdown]).
        return (
            _rebuilt,
            (type(self), _Stamp(), self.inner, self.events_path, self.epoch_counter),
        )


class BatchedIndexProbe(IndexProbe):
    """For datasets with `__getitems__` (batched fetching): keep the fast path."""

    def __getitems__(self, indices: Any) -> Any:
        _mark_fetch()
        report_state(self.events_path, self.epoch_counter, self)
        try:
            return self.inner.__getitems__(indices)
        except Exception as exc:
            self._report(indices, exc)
            raise


def index_probe(dataset: Any, events_path: str, epoch_counter: Any = None) -> IndexProbe:
    cls = BatchedIndexProbe if hasattr(dataset, "__getitems__") else IndexProbe
    return cls(dataset, events_path, epoch_counter)
