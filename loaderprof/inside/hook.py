"""What `loaderprof watch` runs inside the user's own training process.

NOTE [watch hook]: `watch` puts a `sitecustomize` on the command's PYTHONPATH that
calls `install()`. Nothing is imported or patched until the script itself imports
`torch.utils.data`; then DataLoader and its iterators report through the same
event channel `compare` uses:

* `loader_created`: each DataLoader (any subclass) once its __init__ is done, with
  its construction site (the first frame outside torch and loaderprof) and settings;
  its worker_init_fn is wrapped in the same probe `compare` uses, tagged with the
  loader's id, so every worker names its loader and pid;
* `iter_start` / `iter_first_batch` / `iter_end`: each `iter(loader)` (an epoch),
  its first batch and its end, with the batch count; `iter_pool`: the base seed its
  workers share (`inside/seed.py`), which names them whenever each begins. An epoch
  ends `exhausted` (its StopIteration) or `left`: the loop stopped taking batches and
  started the loader's next iterator, or the program ended normally, first (Lightning
  never lets an iterator raise StopIteration; a hand-written loop may `break`). A left
  epoch ends at its last batch. An iterator with no batch, or open when the program
  died, is abandoned (cut): the parent tells so from the stamps.
* `loader_rebuilt`: a DataLoader a framework (Lightning, the HF Trainer, accelerate)
  built from the user's loader (the same Dataset object): it takes that loader's id,
  so its epochs and workers are the user's loader's, named by the user's site.

The cost is one wrapper call per batch in the main process; workers only run the
init probe once. Nothing the hook records may break the program it watches: every
piece of its bookkeeping is guarded (`_emit`, `_warn_once`), and a record it cannot write
(a full disk) is dropped with one line on stderr.

Loader ids are unique across the command's processes (`<pid>.<n>`: each torchrun
rank counts from 1); the parent names them L1, L2... in the order they were built.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.abc
import importlib.machinery
import inspect
import itertools
import multiprocessing.util
import os
import sys
import time
import weakref
from typing import Any

from loaderprof.inside import events
from loaderprof.inside.cut import cut_after, planned
from loaderprof.inside.events import Ev
from loaderprof.inside.frameworks import (
    TRAINER_SETTING,
    TrainerBuild,
    building_trainer,
    trainer_follows,
)
from loaderprof.inside.probe import WorkerInitProbe, held_by_children
from loaderprof.inside.site import switched, user_site
from loaderprof.inside.waits import WaitClock

ENV_EVENTS = "LOADERPROF_WATCH_EVENTS"
# `compare -- COMMAND`'s arm (NOTE [command arms]): "1" or "0" forces persistent_workers
# on every loader with workers, or only on those built at FILE:LINE.
ENV_PERSIST = "LOADERPROF_PERSIST"
ENV_LOADER_SITE = "LOADERPROF_LOADER_SITE"
_TARGET = "torch.utils.data.dataloader"
_ids = itertools.count(1)
_patched: set[type] = set()
# The last loader of each Dataset object that was not itself a rebuild (by id,
# checked through the weak reference): the one a framework's rebuild of that
# Dataset's loader comes from (NOTE [framework rebuilds]).
_by_dataset: dict[int, weakref.ref[Any]] = {}
# Ids of the loaders that have begun an epoch.
_iterated: set[str] = set()


class _Epoch:
    """An iterator's count: its batches (None once its end is recorded), its last one's
    stamp, its waits (NOTE [data wait]); apart from it, whose workers go when it does."""

    __slots__ = ("batches", "cut", "last", "waits")

    def __init__(self, iter_s: float = 0.0, cut: int | None = None) -> None:
        self.batches: int | None = 0
        self.last = 0
        self.waits = WaitClock()
        self.waits.start_pass(iter_s)
        # --max-batches: the batches after which this epoch ends (NOTE [cut epochs]).
        self.cut = cut


# Each loader id's latest epoch: the loader's next iter(), or the program's normal end,
# closes it as `left` when it did not end.
_open: dict[str, _Epoch] = {}
_warned = False


def _emit(path: str, ev: str, **fields: Any) -> None:
    try:
        events.emit(path, ev, **fields)
    except Exception as exc:
        _warn_once(exc)


class _QuietProbe(WorkerInitProbe):
    """compare's worker probe, whose records never fail the user's worker."""

    count_held_at_exit = True

    def __call__(self, worker_id: int) -> None:
        global _worker_loader
        _worker_loader = self.loader
        super().__call__(worker_id)

    def _emit(self, ev: str, **fields: Any) -> None:
        _emit(self.events_path, ev, **fields)


# In a worker: its loader's id (set by its init probe) and the fetchers it has had.
# torch builds a worker's fetcher as it starts and again at each later epoch of a
# persistent pool (`_ResumeIteration`): that rebuild is where a persistent worker
# starts an epoch with the Dataset copy it kept (NOTE [stale worker state]).
_worker_loader: str | None = None
_fetchers = 0
# The Dataset the worker loop's first fetcher served: a Dataset that iterates an inner
# DataLoader(num_workers=0) builds fetchers of its own, which are not epochs.
_worker_dataset: Any = None


def _state(path: str, ev: str, dataset: Any, **fields: Any) -> None:
    """The Dataset's fingerprint as this process sees it, as `compare` takes it."""
    from loaderprof.inside.fingerprint import timed_fingerprint

    _emit(path, ev, **timed_fingerprint(dataset), **fields)


def _patch_fetcher(module: Any, path: str) -> None:
    kinds = module._DatasetKind
    original = kinds.__dict__["create_fetcher"].__func__

    @functools.wraps(original)
    def create_fetcher(kind: Any, dataset: Any, *args: Any, **kwargs: Any) -> Any:
        global _fetchers, _worker_dataset
        if _worker_loader is not None and _fetchers == 0:
            _worker_dataset = dataset
        if _worker_loader is not None and dataset is _worker_dataset:
            _fetchers += 1
            if _fetchers > 1:  # a persistent worker's later epoch
                try:
                    from loaderprof.inside import probe

                    _state(
                        path,
                        Ev.WORKER_STATE,
                        dataset,
                        loader=_worker_loader,
                        worker_id=probe._worker_id,
                        held=probe.held_now(path),
                    )
                except Exception as exc:
                    _warn_once(exc, "a Dataset state record was lost")
        return original(kind, dataset, *args, **kwargs)

    kinds.create_fetcher = staticmethod(create_fetcher)


def install() -> None:
    """Called from the injected sitecustomize: hook the import of torch's DataLoader."""
    path = os.environ.get(ENV_EVENTS)
    if not path or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    if _TARGET in sys.modules:
        _patch(sys.modules[_TARGET], path)
        return
    sys.meta_path.insert(0, _Finder(path))


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, path: str) -> None:
        self.path = path

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, self.path)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    """Runs the real module, then patches it."""

    def __init__(self, inner: Any, path: str) -> None:
        self.inner, self.path = inner, path

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        _patch(module, self.path)


def _describe(loader: Any) -> dict[str, Any]:
    ctx = loader.multiprocessing_context
    if ctx is not None and hasattr(ctx, "get_start_method"):
        method = ctx.get_start_method()
    else:
        # Not get_start_method(): asking without allow_none fixes the default, and a
        # script that calls set_start_method() afterwards would then fail.
        method = (
            multiprocessing.get_start_method(allow_none=True)
            or getattr(
                getattr(multiprocessing.context, "_default_context", None),
                "_default_context",
                None,
            )
            .__class__.__name__.removesuffix("Context")
            .lower()
        )
    dataset = loader.dataset
    try:
        length: int | None = len(dataset)
    except Exception:
        length = None
    return {
        "cls": f"{type(loader).__module__}.{type(loader).__qualname__}",
        "num_workers": loader.num_workers,
        "persistent_workers": bool(loader.persistent_workers),
        "prefetch_factor": loader.prefetch_factor,
        "pin_memory": bool(loader.pin_memory),
        "batch_size": loader.batch_size,
        "start_method": method if loader.num_workers else None,
        "dataset_type": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
        "dataset_len": length,
    }


def _patch(module: Any, path: str) -> None:
    loader_cls = module.DataLoader
    if loader_cls in _patched:
        return
    _patched.add(loader_cls)
    # After multiprocessing.util's (imported above): runs before it ends a pool's workers.
    atexit.register(_at_exit, path, os.getpid())
    _wrap_init(loader_cls, path)
    _patch_iter(loader_cls, path)
    try:
        _patch_fetcher(module, path)
    except Exception as exc:  # another torch's layout: no state check, all else works
        _warn_once(exc, "the Dataset state check is off for this torch")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        # A subclass whose __init__ does not call DataLoader's (torchdata's
        # StatefulDataLoader reimplements it) is wrapped as it is defined.
        super(loader_cls, cls).__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            _wrap_init(cls, path)

    loader_cls.__init_subclass__ = classmethod(__init_subclass__)


def _wrap_init(cls: type, path: str) -> None:
    original_init = cls.__dict__["__init__"]

    # wraps: code that rebuilds a loader from its __init__ signature (Lightning,
    # accelerate) must still see DataLoader's parameters.
    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # Registered by the outermost __init__ only (a subclass's, calling DataLoader's
        # through super()), so the site is where the training script built it.
        depth = self.__dict__.get("_lp_depth", 0)
        object.__setattr__(self, "_lp_depth", depth + 1)
        try:
            original_init(self, *args, **kwargs)
        finally:
            object.__setattr__(self, "_lp_depth", depth)
        if depth or "_lp_id" in self.__dict__:
            return
        try:
            _register(self, path)
        except Exception as exc:  # the hook's own failure: the program runs on
            _warn_once(exc, "a DataLoader could not be followed")

    setattr(cls, "__init__", __init__)  # noqa: B010 (a class found at run time)


def _origin(loader: Any) -> Any:
    """The followed loader a framework's `loader` rebuilds, or None. NOTE [framework
    rebuilds]: a framework rebuilds a loader from another of the same Dataset object
    (Lightning re-creates the user's to inject its sampler; accelerate's `prepare`
    re-creates the one the HF Trainer built). The origin is the last loader of that
    Dataset that was not itself a rebuild: the user's own, or one a framework built
    and has not iterated yet (the Trainer's, before `prepare`). A framework loader
    whose origin already ran epochs is a new loader: the Trainer builds one each
    evaluation, each named apart."""
    ref = _by_dataset.get(id(loader.dataset))
    other = ref() if ref is not None else None
    if other is None or other.dataset is not loader.dataset:
        return None
    if other.__dict__.get("_lp_framework") and other.__dict__.get("_lp_id") in _iterated:
        return None
    return other


def _switched(loader: Any, site: str) -> bool:
    """Whether the arm switches this loader: one with workers, at the chosen site if
    one was chosen (NOTE [command arms])."""
    if os.environ.get(ENV_PERSIST) not in ("0", "1"):
        return False
    return switched(loader.num_workers, site, os.environ.get(ENV_LOADER_SITE))


def _force_persistence(loader: Any, site: str, build: TrainerBuild | None = None) -> bool:
    """The arm's persistent_workers (see NOTE [command arms]) on a loader the arm switches,
    past DataLoader.__setattr__ (which refuses it after __init__ checked the script's
    settings), and on the HF Trainer building it, if one is (inside/frameworks.py). Returns what
    this loader was asked for (a framework's rebuild takes its origin's: `_register`)."""
    asked = bool(loader.persistent_workers)
    if not _switched(loader, site):
        return asked
    persistent = os.environ.get(ENV_PERSIST) == "1"
    object.__setattr__(loader, "persistent_workers", persistent)
    if build is not None:
        trainer_follows(build.trainer, persistent)
    cut_after(loader)
    return asked


def _preload() -> None:
    """What the init probe imports in each worker (procfs, psutil: about 60 ms cold), once
    here: a forked worker inherits it, so a pool started every epoch does not pay it, a
    cost persistence would seem to remove (benchmarks/command_compare.py)."""
    try:
        from loaderprof.inside import procfs  # noqa: F401
    except Exception as exc:
        _warn_once(exc, "the worker probe's imports failed")


def _register(loader: Any, path: str) -> None:
    rank = os.environ.get("RANK")
    site, framework = user_site()
    build = building_trainer()
    asked = _force_persistence(loader, site, build)
    described = _describe(loader)
    origin = _origin(loader) if framework else None
    lid = origin.__dict__["_lp_id"] if origin is not None else f"{os.getpid()}.{next(_ids)}"
    if origin is not None:
        # A rebuild copies the arm's persistent_workers: the script asked what its
        # origin was asked. Its cut too, where its own site (a framework's line) is
        # not --loader-site's.
        asked = origin.__dict__.get("_lp_asked", asked)
        if "_lp_cut" in origin.__dict__ and "_lp_cut" not in loader.__dict__:
            cut_after(loader)
    # Named only once described: a loader the hook could not describe is not followed.
    object.__setattr__(loader, "_lp_id", lid)
    object.__setattr__(loader, "_lp_asked", asked)
    object.__setattr__(loader, "_lp_framework", framework)
    if origin is None:
        with contextlib.suppress(TypeError):
            _by_dataset[id(loader.dataset)] = weakref.ref(loader)
    _emit(
        path,
        Ev.LOADER_REBUILT if origin else Ev.LOADER_CREATED,
        loader=lid,
        site=site,
        rank=int(rank) if rank and rank.isdecimal() else None,
        persistent_asked=asked,
        # What the user sets persistence with, where not the DataLoader's own flag.
        setting=TRAINER_SETTING if build is not None else None,
        # Which of the Trainer's loaders it is: they share the user's site.
        built_for=build.built_for if build is not None else None,
        **described,
    )
    if loader.num_workers > 0:
        _preload()
        user_fn = loader.worker_init_fn
        # A loader rebuilt from another (accelerate, Lightning) copies its probe:
        # wrap the user's function, not the other loader's probe.
        if isinstance(user_fn, WorkerInitProbe):
            user_fn = user_fn.user_fn
        loader.worker_init_fn = _QuietProbe(path, user_fn, loader=lid)
    _patch_iter(type(loader), path)


def _warn_once(exc: BaseException, what: str = "a record was lost") -> None:
    global _warned
    if not _warned:
        _warned = True
        with contextlib.suppress(Exception):
            sys.stderr.write(f"loaderprof watch: {what} ({exc}); measuring on\n")


def _patch_iter(cls: type, path: str) -> None:
    """Wrap `cls.__iter__` where `cls` defines its own (torch's, or a subclass's that
    does not call it: torchdata's StatefulDataLoader)."""
    if "__iter__" not in cls.__dict__ or ("_lp_iter", cls) in _patched_iters:
        return
    _patched_iters.add(("_lp_iter", cls))
    original = cls.__dict__["__iter__"]
    if inspect.isgeneratorfunction(original):
        # A generator __iter__ (a subclass moving batches to a device) runs its body
        # only when iterated: the DataLoader.__iter__ it calls then counts the epoch.
        return

    @functools.wraps(original)
    def __iter__(self: Any) -> Any:
        lid = self.__dict__.get("_lp_id")
        outer = lid is not None and not self.__dict__.get("_lp_in_iter")
        if outer:
            object.__setattr__(self, "_lp_in_iter", True)
            # Before the epoch's stamp, so the fingerprint's cost is not in its wall.
            try:
                if self.num_workers > 0 and self.persistent_workers:
                    _state(path, Ev.MAIN_STATE, self.dataset, loader=lid)
            except Exception as exc:
                _warn_once(exc, "a Dataset state record was lost")
            _leave(path, lid)
            _iterated.add(lid)
            _emit(path, Ev.ITER_START, loader=lid, planned=planned(self))
        global _timing
        began = time.perf_counter()
        _timing += 1
        try:
            it = original(self)
        finally:
            _timing -= 1
            if outer:
                object.__setattr__(self, "_lp_in_iter", False)
        state = getattr(it, "__dict__", None)
        if outer and state is not None:
            _emit(path, Ev.ITER_POOL, loader=lid, pool=getattr(it, "_base_seed", None))
            state["_lp_loader"] = lid
            # iter() starts a non-persistent pool's workers: a wait for the first batch.
            state["_lp_epoch"] = _open[lid] = _Epoch(
                time.perf_counter() - began, self.__dict__.get("_lp_cut")
            )
            try:
                _patch_next(type(it), path)
                _patch_shutdown(type(it))
            except Exception as exc:  # an iterator class that cannot be patched
                _warn_once(exc)
        return it

    setattr(cls, "__iter__", __iter__)  # noqa: B010 (a class found at run time)


_patched_iters: set[tuple[str, type]] = set()
# Loader calls being timed now (iter(), __next__): a pool shut down inside one (an old
# iterator collected there) is in that call's time already (see `_timed_shutdown`).
_timing = 0


def _patch_method(cls: type, name: str, wrap: Any) -> None:
    """Replace method `name` where `cls`'s MRO defines it with `wrap(original)`, once."""
    owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
    if owner is None or (name, owner) in _patched_iters:
        return
    _patched_iters.add((name, owner))
    original = owner.__dict__[name]
    setattr(owner, name, functools.wraps(original)(wrap(original)))


def _patch_next(cls: type, path: str) -> None:
    """Count each iterator's batches; stamp its first and its end."""
    _patch_method(cls, "__next__", lambda original: _counted_next(original, path))


def _counted_next(original: Any, path: str) -> Any:
    def __next__(self: Any) -> Any:
        state = self.__dict__
        lid = state.get("_lp_loader")
        rec = state.get("_lp_epoch")
        if state.get("_lp_in_next"):  # a subclass's __next__ calling its base's
            return original(self)
        if (
            rec is not None
            and rec.cut is not None
            and (rec.batches is None or rec.batches >= rec.cut)
        ):
            _cut(path, lid, rec)  # see NOTE [cut epochs]; once ended, it stays ended
            raise StopIteration
        global _timing
        state["_lp_in_next"] = True
        began = time.perf_counter()
        _timing += 1
        try:
            batch = original(self)
        except StopIteration:
            if lid is not None and rec is not None and rec.batches is not None:
                rec.waits.took(time.perf_counter() - began, batch=False)
                _emit(
                    path,
                    Ev.ITER_END,
                    loader=lid,
                    batches=rec.batches,
                    ended="exhausted",
                    **rec.waits.fields(),
                )
                rec.batches = None
            raise
        finally:
            _timing -= 1
            state["_lp_in_next"] = False
        if lid is not None and rec is not None and rec.batches is not None:
            rec.waits.took(time.perf_counter() - began, batch=True)
            rec.batches += 1
            rec.last = time.monotonic_ns()
            if rec.batches == 1:
                _emit(path, Ev.ITER_FIRST_BATCH, loader=lid)
        return batch

    return __next__


def _patch_shutdown(cls: type) -> None:
    """See NOTE [data wait]. A left iterator's workers are shut down when it is dropped:
    a framework drops it once the loader's next `iter()` replaced it (Lightning does),
    and the main process joins the old pool's workers before it asks for the new
    epoch's first batch. That join is counted with the new epoch's first batch."""
    _patch_method(cls, "_shutdown_workers", _timed_shutdown)


def _timed_shutdown(original: Any) -> Any:
    def _shutdown_workers(self: Any) -> Any:
        state = self.__dict__
        # Inside a timed loader call (an exhausted epoch's __next__, an old iterator
        # collected in a new one's), or a subclass's override calling this one: its
        # time is counted there.
        if _timing or state.get("_lp_in_shutdown") or state.get("_shutdown", True):
            return original(self)
        state["_lp_in_shutdown"] = True
        began = time.perf_counter()
        try:
            return original(self)
        finally:
            state["_lp_in_shutdown"] = False
            rec = _open.get(state.get("_lp_loader", ""))
            if rec is not None and rec is not state.get("_lp_epoch") and rec.batches == 0:
                rec.waits.before_first(time.perf_counter() - began)

    return _shutdown_workers


def _cut(path: str, lid: Any, rec: _Epoch) -> None:
    """The epoch ends `cut`, now, with its last batch's stamp for the projection (NOTE
    [cut epochs], in inside/cut.py)."""
    if rec.batches is None:
        return
    _end(path, lid, rec, "cut", last_batch=rec.last)


def _leave(path: str, lid: str) -> None:
    """Close `lid`'s previous epoch at its last batch, when the loop stopped taking its
    batches without a StopIteration: as left, or as cut where it stopped at the cut
    (NOTE [cut epochs]); one without a batch stays abandoned."""
    rec = _open.pop(lid, None)
    if rec is None or not rec.batches:
        return
    if rec.cut is not None and rec.batches >= rec.cut:
        # A loop told of the cut by len() stopped at it by itself (NOTE [cut epochs]).
        _end(path, lid, rec, "cut", t=rec.last, last_batch=rec.last)
        return
    _end(path, lid, rec, "left", t=rec.last)


def _end(path: str, lid: str, rec: _Epoch, ended: str, **stamp: Any) -> None:
    """The epoch's iter_end with its batches and waits; its count closed."""
    fields = {"batches": rec.batches, "ended": ended, **stamp, **rec.waits.fields()}
    _emit(path, Ev.ITER_END, loader=lid, **fields)
    rec.batches = None


def _at_exit(path: str, pid: int) -> None:
    """A normal end closes each loader's last epoch as left; one open when an uncaught
    exception ended the program (Ctrl-C included) stays abandoned: it was cut."""
    if os.getpid() != pid:
        return
    if _iterated:
        # What its forkserver and the workers it forked ran: no process of loaderprof's
        # reaps them, so they are counted apart (measure/contention.py).
        from loaderprof.inside import procfs

        with contextlib.suppress(Exception):
            _emit(path, Ev.EXITING, unreaped_cpu_s=procfs.forkserver_cpu_s(pid))
            _emit(path, Ev.HELD_AT_EXIT, held=held_by_children(path, pid))
    if getattr(sys, "last_value", None) or getattr(sys, "last_exc", None):
        return
    for lid in list(_open):
        try:
            _leave(path, lid)
        except Exception as exc:
            _warn_once(exc)
