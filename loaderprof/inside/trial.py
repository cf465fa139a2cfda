"""The trial child: one arm, N epochs, in a fresh interpreter.

Run as `python -m loaderprof.inside.trial PLAN.json` by the parent. It builds the
user's Dataset and a real DataLoader, runs the epochs, and reports only
through events: no sampler runs in here, so the measured loop carries no
observer thread. Exit status: 0 done, 2 the dataset or options are unusable,
3 the run failed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import multiprocessing
import os
import re
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from loaderprof.config.refs import ObjectRef, build_dataset, one_line
from loaderprof.errors import ExitCode, UsageError
from loaderprof.inside import events
from loaderprof.inside.probe import CollateProbe, WorkerInitProbe, index_probe

if TYPE_CHECKING:
    from loaderprof.config.run import LoaderOptions, RunConfig

# How long workers may outlive the loader: torch's own shutdown has by then given
# each MP_STATUS_CHECK_INTERVAL (5 s) to join and sent SIGTERM to the rest, so a
# worker alive this much later ignores SIGTERM or is stuck in the kernel.
_SHUTDOWN_WAIT_S = 1.0

_WORKER_EXC = re.compile(r"Caught (\w+) in DataLoader worker process (\d+)")
_WORKER_DIED = re.compile(
    r"DataLoader worker \(pid\(?s?\)? ?([\d, ]+)\) "
    r"(?:is killed by signal: (.+?)\.|exited unexpectedly)"
)


class RecordingSampler:
    """Yields its inner sampler's indices unchanged and digests their order."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last_digest: str | None = None

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Any:
        import hashlib

        h = hashlib.blake2b(digest_size=8)
        for index in self.inner:
            h.update(str(int(index)).encode() + b",")
            yield index
        self.last_digest = h.hexdigest()


class _Plan:
    """What the parent asks for: where to write events, which arm, the run's config."""

    def __init__(self, data: dict[str, Any]) -> None:
        # Imported here, after `child_start`: part of the imports phase.
        from loaderprof.config.run import RunConfig

        self.events_path: str = data["events_path"]
        self.persistent: bool = data["persistent"]
        self.pause_ack_path: str | None = data.get("pause_ack_path")
        # `to_dict` stores the effective idle_ms, so `effective_idle_ms` is that value.
        self.config: RunConfig = RunConfig.from_dict(data["config"])


def _accelerator_available() -> bool:
    import torch

    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        return bool(acc.is_available())
    return bool(torch.cuda.is_available())


def _classify_worker_error(exc: BaseException) -> dict[str, Any]:
    """Turn the DataLoader's re-raised worker exception into one line + fields."""
    text = str(exc)
    m = _WORKER_EXC.search(text)
    if m:
        exc_type, worker_id = m.group(1), int(m.group(2))
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else exc_type
        if not last.startswith(exc_type):
            last = f"{exc_type}: {last}"
        return {
            "kind": "worker_exception",
            "worker_id": worker_id,
            "message": f"DataLoader worker {worker_id} raised {last}",
        }
    m = _WORKER_DIED.search(text)
    if m:
        pids = [int(p) for p in re.findall(r"\d+", m.group(1))]
        signal_name = m.group(2)
        how = f"was killed by signal {signal_name}" if signal_name else "exited unexpectedly"
        return {
            "kind": "worker_died",
            "pids": pids,
            "signal": signal_name,
            "message": f"DataLoader worker (pid {', '.join(map(str, pids))}) {how}",
        }
    message = one_line(exc)
    if "pickle" in text.lower() or "pickl" in type(exc).__name__.lower():
        return {
            "kind": "pickling",
            "message": f"{message}: under spawn/forkserver the Dataset, collate_fn and "
            "worker_init_fn are pickled into each worker, so they must be defined at module "
            "top level (not inside a function or __main__) and hold only picklable state",
        }
    return {"kind": "loader_error", "message": message}


def _seeded_torch(path: str, cfg: RunConfig) -> None:
    """Import torch (the `imported` event ends the imports phase) and seed it."""

    import torch

    events.emit(
        path,
        "imported",
        torch=torch.__version__,
        start_method=cfg.loader.mp_context or multiprocessing.get_start_method(),
        accelerator=_accelerator_available(),
    )
    torch.manual_seed(cfg.seed)


def _build_dataset(path: str, cfg: RunConfig) -> tuple[Any, bool]:
    """The user's Dataset, and whether it is iterable-style."""
    from torch.utils.data import IterableDataset

    dataset = build_dataset(ObjectRef.parse(cfg.dataset, what="dataset"), cfg.dataset_args)
    iterable = isinstance(dataset, IterableDataset)
    try:
        length: int | None = len(dataset)
    except Exception:
        length = None
    events.emit(
        path,
        "dataset_built",
        kind="iterable" if iterable else "map",
        length=length,
        type=f"{type(dataset).__module__}.{type(dataset).__qualname__}",
        **_shards(dataset),
    )
    return dataset, iterable


# Where Datasets say how many shards they split into (HF datasets' IterableDataset:
# n_shards; others: num_shards), for NOTE [idle workers].
SHARD_ATTRIBUTES = ("n_shards", "num_shards")


def _shards(dataset: Any) -> dict[str, Any]:
    for attr in SHARD_ATTRIBUTES:
        try:
            value = getattr(dataset, attr, None)
        except Exception:  # a property that fails is the Dataset's business, not ours
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return {"shards": value, "shards_attribute": attr}
    return {}


def _user_functions(lo: LoaderOptions) -> tuple[Any, Any]:
    """The collate_fn (the DataLoader's default when none is given) and worker_init_fn."""
    from torch.utils.data._utils.collate import default_collate, default_convert

    auto_collation = lo.batch_size is not None
    user_collate = (
        ObjectRef.parse(lo.collate_fn, what="--collate-fn").resolve()
        if lo.collate_fn
        else (default_collate if auto_collation else default_convert)
    )
    user_init = (
        ObjectRef.parse(lo.worker_init_fn, what="--worker-init-fn").resolve()
        if lo.worker_init_fn
        else None
    )
    for name, fn in (("--collate-fn", user_collate), ("--worker-init-fn", user_init)):
        if fn is not None and not callable(fn):
            raise UsageError(f"{name} {getattr(lo, name[2:].replace('-', '_'))} is not callable")
    return user_collate, user_init


def _epoch_hook(cfg: RunConfig) -> Any:
    """The user's per-epoch hook, resolved before the loader is built (a usage error)."""
    if cfg.epoch_hook is None:
        return None
    fn = ObjectRef.parse(cfg.epoch_hook, what="--epoch-hook").resolve()
    if not callable(fn):
        raise UsageError(f"--epoch-hook {cfg.epoch_hook} is not callable")
    return fn


class EpochProtocol:
    """What a training loop does before each epoch, in the main process.

    NOTE [epoch protocol]: set_epoch(epoch) on the sampler and the Dataset where
    they define it (epochs from 0, as Lightning and the HF Trainer count), then
    the user's hook FN(loader, epoch). NOTE [stale worker state]: then the main
    process fingerprints its Dataset and writes the epoch (from 1, as the events
    count) into shared memory, where each worker reads it at its first fetch and
    fingerprints its own copy: an attribute changed here but not there is state
    that persistent workers never see.
    """

    def __init__(
        self,
        path: str,
        cfg: RunConfig,
        dataset: Any,
        recorder: RecordingSampler | None,
        counter: Any,
    ) -> None:
        self.path, self.cfg, self.dataset = path, cfg, dataset
        self.recorder, self.counter = recorder, counter
        self.hook = _epoch_hook(cfg)

    def before(self, loader: Any, epoch: int) -> None:
        if self.cfg.set_epoch:
            sampler = self.recorder.inner if self.recorder is not None else None
            for target in (sampler, getattr(loader, "batch_sampler", None), self.dataset):
                if target is not None and callable(getattr(target, "set_epoch", None)):
                    target.set_epoch(epoch - 1)
        if self.hook is not None:
            try:
                self.hook(loader, epoch - 1)
            except Exception as exc:
                events.emit(
                    self.path,
                    "error",
                    category="run",
                    kind="epoch_hook",
                    epoch=epoch,
                    message=f"--epoch-hook {self.cfg.epoch_hook} raised {one_line(exc)} "
                    f"before epoch {epoch}",
                    detail=traceback.format_exc(),
                )
                raise SystemExit(ExitCode.RUN_FAILED) from None
        if self.counter is None:  # --no-state-checks
            return
        from loaderprof.inside.fingerprint import fingerprint

        start = time.perf_counter()
        values, skipped = fingerprint(self.dataset)
        took_s = round(time.perf_counter() - start, 6)
        events.emit(
            self.path, "main_state", epoch=epoch, values=values, skipped=skipped, took_s=took_s
        )
        self.counter.value = epoch


def _epoch_counter(cfg: RunConfig) -> Any:
    """A shared int the workers read (fork inherits it; spawn pickles it with the
    probes while starting each worker)."""

    if not cfg.state_checks:
        return None
    return multiprocessing.get_context(cfg.loader.mp_context).RawValue("i", 0)


def _pin_memory(path: str, lo: LoaderOptions) -> bool:
    if lo.pin_memory and not _accelerator_available():
        events.emit(
            path,
            "warning",
            message="--pin-memory asked for, but no accelerator is available: "
            "running with pin_memory=False",
        )
        return False
    return lo.pin_memory


def _recording_sampler(dataset: Any, cfg: RunConfig, generator: Any) -> RecordingSampler:
    """The sampler DataLoader would build itself, wrapped to record the order."""
    from torch.utils.data import RandomSampler, SequentialSampler

    lo = cfg.loader
    base: Any
    if cfg.world_size > 1:
        from torch.utils.data.distributed import DistributedSampler

        base = DistributedSampler(
            dataset,
            num_replicas=cfg.world_size,
            rank=cfg.rank,
            shuffle=bool(lo.shuffle),
            seed=cfg.seed,
            drop_last=lo.drop_last,
        )
    else:
        base = (
            RandomSampler(dataset, generator=generator)
            if lo.shuffle
            else SequentialSampler(dataset)
        )
    return RecordingSampler(base)


def _loader_kwargs(
    path: str, cfg: RunConfig, dataset: Any, iterable: bool, *, persistent: bool, counter: Any
) -> tuple[dict[str, Any], RecordingSampler | None]:
    """The DataLoader's keyword arguments (probes wrapped around the user's
    functions), and the sampler that records the order (map-style datasets)."""
    import torch

    lo = cfg.loader
    user_collate, user_init = _user_functions(lo)
    pin_memory = _pin_memory(path, lo)
    generator = torch.Generator()
    generator.manual_seed(cfg.seed)
    kwargs: dict[str, Any] = {
        "batch_size": lo.batch_size,
        "num_workers": lo.num_workers,
        "collate_fn": CollateProbe(
            path,
            user_collate,
            lo.batch_size is not None,
            digests=cfg.digests,
            epoch_counter=counter if iterable else None,
        ),
        "worker_init_fn": WorkerInitProbe(path, user_init),
        "pin_memory": pin_memory,
        "drop_last": lo.drop_last,
        "timeout": lo.timeout,
        "persistent_workers": persistent,
        "generator": generator,
    }
    recorder: RecordingSampler | None = None
    if iterable:
        if lo.shuffle is not None:
            kwargs["shuffle"] = lo.shuffle  # torch rejects it with a clear message
    else:
        recorder = _recording_sampler(dataset, cfg, generator)
        kwargs["sampler"] = recorder
    kwargs.update(_optional_kwargs(lo))
    return kwargs, recorder


def _optional_kwargs(lo: LoaderOptions) -> dict[str, Any]:
    """The options passed only when given (torch's defaults otherwise)."""
    out: dict[str, Any] = {}
    if lo.prefetch_factor is not None:
        out["prefetch_factor"] = lo.prefetch_factor
    if lo.mp_context is not None:
        out["multiprocessing_context"] = lo.mp_context
    if lo.in_order is not None:
        _check_in_order(lo)
        out["in_order"] = lo.in_order
    return out


def _check_in_order(lo: LoaderOptions) -> None:
    """`in_order` came with torch 2.6: on an older torch say so in one line (torch's own
    TypeError would blame an unexpected keyword)."""
    import inspect

    import torch
    from torch.utils.data import DataLoader

    if "in_order" not in inspect.signature(DataLoader.__init__).parameters:
        flag = "--in-order" if lo.in_order else "--no-in-order"
        raise UsageError(
            f"{flag} needs torch ≥ 2.6 (DataLoader's in_order); this is torch {torch.__version__}"
        )


def _loader_class(lo: LoaderOptions) -> Any:
    """torch's DataLoader, or the --loader class, which must derive from it (the
    probes and the shutdown rely on its iterator's workers)."""
    from torch.utils.data import DataLoader

    if lo.loader_class is None:
        return DataLoader
    obj = ObjectRef.parse(lo.loader_class, what="--loader").resolve()
    if not (isinstance(obj, type) and issubclass(obj, DataLoader)):
        raise UsageError(
            f"--loader {lo.loader_class} is not a DataLoader class: expected a subclass of "
            f"torch.utils.data.DataLoader, got {type(obj).__name__} {obj!r:.60}"
        )
    return obj


def _val_loader(path: str, cfg: RunConfig, *, persistent: bool) -> Any:
    """NOTE [validation pass]: the validation Dataset's loader, built like the train
    loader (same class, start method, prefetch, pinning, functions) with its own batch
    size and workers, in order and unshuffled; None without --val. It is built before
    the train loader, so the memory window's set-up baseline holds both Datasets."""
    lo = cfg.val_loader
    if lo is None or cfg.val is None:
        return None
    import torch

    dataset = build_dataset(ObjectRef.parse(cfg.val, what="--val"), cfg.val_args, "--val-arg")
    from torch.utils.data import IterableDataset

    iterable = isinstance(dataset, IterableDataset)
    user_collate, user_init = _user_functions(lo)
    generator = torch.Generator()
    generator.manual_seed(cfg.seed + 1)
    kwargs: dict[str, Any] = {
        "batch_size": lo.batch_size,
        "num_workers": lo.num_workers,
        "collate_fn": CollateProbe(path, user_collate, lo.batch_size is not None),
        "worker_init_fn": WorkerInitProbe(path, user_init, loader="val"),
        "pin_memory": _pin_memory(path, lo),
        "timeout": lo.timeout,
        "persistent_workers": persistent,
        "generator": generator,
    }
    kwargs.update(_optional_kwargs(lo))
    served = dataset if iterable else index_probe(dataset, path)
    cls = _loader_class(lo)
    try:
        return cls(served, **kwargs, **lo.loader_args)
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"{cls.__name__} rejected the validation loader's options: {one_line(exc)}"
        ) from exc


def _build_loader(
    path: str, lo: LoaderOptions, dataset: Any, iterable: bool, kwargs: dict[str, Any], counter: Any
) -> Any:
    cls = _loader_class(lo)
    # NOTE [memory window]: every memory figure covers the loader's life, from
    # here to `loader_closed`; what the process holds now is the set-up baseline.
    events.emit(path, "loader_building")
    try:
        # Map-style datasets are wrapped so a failing __getitem__ names its index.
        served = dataset if iterable else index_probe(dataset, path, counter)
        loader = cls(served, **kwargs, **lo.loader_args)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{cls.__name__} rejected the options: {one_line(exc)}") from exc
    except Exception as exc:
        # A --loader class's own constructor failing is bad input too, said in one line.
        raise UsageError(
            f"building the loader failed: {cls.__name__}(...) raised {one_line(exc)}",
            detail=traceback.format_exc(),
        ) from exc
    events.emit(path, "loader_built", full_batches=_full_batches(loader))
    return loader


def _full_batches(loader: Any) -> int | None:
    """Batches in a full epoch (NOTE [short epochs]), when the loader knows its length."""
    try:
        return len(loader)
    except TypeError:
        return None


def _run_epochs(
    path: str,
    cfg: RunConfig,
    loader: Any,
    recorder: RecordingSampler | None,
    protocol: EpochProtocol,
    pause_ack_path: str | None = None,
    seen: dict[int, Any] | None = None,
    val_loader: Any = None,
) -> Any:
    """Every epoch, each followed by the idle pause; returns the last epoch's
    iterator, which the caller drops when it closes the loader. Every worker process
    an epoch used goes into `seen` (by pid)."""
    step_s = float(cfg.step_ms) / 1000
    idle_s = float(cfg.effective_idle_ms) / 1000
    it: Any = None
    for epoch in range(1, cfg.epochs + 1):
        # Untimed, as in training: the epoch's clock starts at iter(loader).
        protocol.before(loader, epoch)
        events.emit(path, "epoch_start", epoch=epoch)
        it = None
        it, batches, last = _run_epoch(path, loader, epoch, step_s, cfg.max_batches, seen)
        cut = cfg.max_batches is not None and batches >= cfg.max_batches
        if val_loader is not None:
            # NOTE [validation pass]: inside the epoch, so its time counts in the epoch's
            # wall as it does in training; `val_start` splits the two passes.
            events.emit(path, "val_start", epoch=epoch)
            _, val_batches, _ = _run_epoch(
                path, val_loader, epoch, step_s, None, seen, first_event="val_first_batch"
            )
            events.emit(path, "val_end", epoch=epoch, batches=val_batches)
        events.emit(
            path,
            "epoch_end",
            epoch=epoch,
            batches=batches,
            last_batch=last,
            # A cut epoch's sampler never finished its pass: no order to digest.
            order=recorder.last_digest if recorder is not None and not cut else None,
        )
        if idle_s:
            events.emit(path, "idle_start", epoch=epoch)
            time.sleep(idle_s)
            _wait_until_sampled(pause_ack_path, epoch)
            events.emit(path, "idle_end", epoch=epoch)
    return it


# NOTE [sampled pauses]: how long a pause may outlast --idle-ms waiting for the
# sampler's reading (a walk over 32 workers and their handles takes about 0.5 s on
# a small machine); past it the pause ends unread (the checks then see one fewer).
_PAUSE_READ_WAIT_S = 15.0


def _wait_until_sampled(ack_path: str | None, epoch: int) -> None:
    """Wait (bounded) until the parent says the sampler has read this pause."""
    if ack_path is None:
        return
    deadline = time.monotonic() + _PAUSE_READ_WAIT_S
    while time.monotonic() < deadline:
        try:
            with open(ack_path, encoding="utf-8") as f:
                if int(f.read() or 0) >= epoch:
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.005)


def _run_epoch(
    path: str,
    loader: Any,
    epoch: int,
    step_s: float,
    max_batches: int | None,
    seen: dict[int, Any] | None = None,
    first_event: str = "first_batch",
) -> tuple[Any, int, int | None]:
    """One pass over the loader (NOTE [short epochs]: at most `max_batches`): its
    iterator, the batch count and when the last batch arrived. A failure is reported
    as an `error` event and ends the trial (exit 3)."""
    batches = 0
    last: int | None = None
    # An explicit iterator (what `for batch in loader` makes) so that after a
    # failure the workers' exit codes can still be read.
    it: Any = None
    try:
        it = iter(loader)
        for _batch in it:
            last = time.monotonic_ns()
            if batches == 0:
                events.emit(path, first_event, epoch=epoch)
            batches += 1
            if step_s:
                time.sleep(step_s)
            if max_batches is not None and batches >= max_batches:
                break
    except Exception as exc:
        info = _classify_worker_error(exc)
        workers = getattr(it, "_workers", None) or []
        info["exitcodes"] = {str(w.pid): w.exitcode for w in workers if w.exitcode}
        events.emit(
            path, "error", category="run", epoch=epoch, detail=traceback.format_exc(), **info
        )
        raise SystemExit(ExitCode.RUN_FAILED) from None
    if seen is not None:
        seen.update((w.pid, w) for w in getattr(it, "_workers", None) or [])
    if max_batches is not None and batches >= max_batches and not loader.persistent_workers:
        # A cut epoch ends as a finished one does: its workers are joined inside it
        # (a persistent loader keeps them, and resumes them at the next iter()).
        del it
        events.emit(path, "collecting")
        gc.collect()
        events.emit(path, "collected")
        it = None
    return it, batches, last


class _PickleMeter:
    """The largest worker pickle measured so far (bytes)."""

    largest = 0


def _measure_worker_pickles(path: str) -> None:
    """NOTE [start-up breakdown]: under spawn and forkserver, multiprocessing pickles
    each worker's Process object (the Dataset, collate_fn and worker_init_fn in its
    arguments) into a buffer with `reduction.dump`, then writes it to the worker's
    pipe. Time that dump and size what it wrote: what each worker receives, measured
    where it happens, not by pickling the Dataset a second time."""
    from multiprocessing import reduction
    from multiprocessing.process import BaseProcess

    original = reduction.dump

    def dump(obj: Any, file: Any, protocol: Any = None) -> None:
        if not isinstance(obj, BaseProcess) or not hasattr(file, "tell"):
            original(obj, file, protocol)
            return
        args: tuple[Any, ...] = tuple(getattr(obj, "_args", ()))
        # torch's _worker_loop takes the worker id as its 11th argument.
        wid = args[10] if len(args) > 10 and isinstance(args[10], int) else None
        pos, start = file.tell(), time.perf_counter()
        original(obj, file, protocol)
        size = file.tell() - pos
        _PickleMeter.largest = max(_PickleMeter.largest, size)
        events.emit(
            path,
            "worker_pickled",
            worker_id=wid,
            bytes=size,
            seconds=round(time.perf_counter() - start, 6),
        )

    reduction.dump = dump


# Pickles at least this large get their Dataset's attributes sized (after the
# epochs), to name the biggest in the large-pickle finding.
_ATTRIBUTES_FROM_BYTES = 1 << 20


def _size_attributes(path: str, dataset: Any) -> None:
    """The Dataset's biggest attributes as a worker receives them (multiprocessing's
    pickler: a tensor goes as a shared-memory handle). Run after the loader closed."""
    from multiprocessing.reduction import ForkingPickler

    sizes: dict[str, int] = {}
    for name, value in list(getattr(dataset, "__dict__", {}).items()):
        try:
            sizes[name] = len(ForkingPickler.dumps(value))
        except Exception:
            continue
    top = dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
    events.emit(path, "dataset_attributes", sizes=top)


def run(plan: _Plan) -> None:
    path, cfg = plan.events_path, plan.config
    _seeded_torch(path, cfg)
    spawned = (cfg.loader.mp_context or multiprocessing.get_start_method()) != "fork"
    if spawned:
        _measure_worker_pickles(path)
    dataset, iterable = _build_dataset(path, cfg)
    counter = _epoch_counter(cfg)
    kwargs, recorder = _loader_kwargs(
        path, cfg, dataset, iterable, persistent=plan.persistent, counter=counter
    )
    protocol = EpochProtocol(path, cfg, dataset, recorder, counter)
    val_loader = _val_loader(path, cfg, persistent=plan.persistent)
    # NOTE [sampled pauses]: the set-up baseline is waited for like a pause (as
    # "epoch 0"): on a busy machine the last walk before the loader may otherwise
    # date from before the Dataset was built, or the imports ran.
    if plan.pause_ack_path is not None:
        events.emit(path, "setup_read")
        _wait_until_sampled(plan.pause_ack_path, 0)
    loader = _build_loader(path, cfg.loader, dataset, iterable, kwargs, counter)
    # The loader's own worker processes, of every epoch (a non-persistent epoch's
    # workers may outlive its iterator too); a Dataset may own others (a Manager, a
    # Pool) that are not the loader's and that this does not wait for.
    seen: dict[int, Any] = {}
    it = _run_epochs(path, cfg, loader, recorder, protocol, plan.pause_ack_path, seen, val_loader)
    events.emit(path, "loader_closing")
    val_live = getattr(val_loader, "_iterator", None)
    seen.update((w.pid, w) for w in getattr(val_live, "_workers", None) or [])
    # `is None`, not `or`: an iterator's truth value calls its len(), which an
    # IterableDataset's sampler does not have.
    live = getattr(loader, "_iterator", None)
    if live is None:
        live = it
    seen.update((w.pid, w) for w in getattr(live, "_workers", None) or [])
    workers = list(seen.values())
    # Dropping the last references runs the iterator's shutdown, which joins
    # persistent workers. Only if some worker outlives that (a reference cycle
    # keeps the iterator) are cycles collected: a full collection of a process
    # that imported torch takes ~0.1 s, which is loaderprof's, not the loader's.
    del it, loader, live, val_loader, val_live
    if any(w.is_alive() for w in workers):
        # NOTE [memory window]: readings taken during it are left out.
        events.emit(path, "collecting")
        gc.collect()
        events.emit(path, "collected")
    alive = _wait_for_workers(workers, timeout_s=_SHUTDOWN_WAIT_S)
    events.emit(path, "loader_closed", workers_alive=alive)
    if spawned and _PickleMeter.largest >= _ATTRIBUTES_FROM_BYTES:
        _size_attributes(path, dataset)


def _wait_for_workers(workers: list[Any], timeout_s: float) -> int:
    """Wait until the loader's worker processes have exited; return how many still live."""
    deadline = time.monotonic() + timeout_s
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    return sum(1 for w in workers if w.is_alive())


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as f:
        data = json.load(f)
    events_path: str = data["events_path"]
    events.emit(events_path, "child_start")
    try:
        run(_Plan(data))
    except UsageError as exc:
        events.emit(
            events_path,
            "error",
            category="usage",
            kind="usage",
            message=exc.message,
            detail=exc.detail or traceback.format_exc(),
        )
        _exit_now(ExitCode.USAGE)
    except SystemExit as exc:
        _exit_now(exc.code if isinstance(exc.code, int) else ExitCode.RUN_FAILED)
    except BaseException as exc:
        events.emit(
            events_path,
            "error",
            category="run",
            kind="internal",
            message=one_line(exc),
            detail=traceback.format_exc(),
        )
        _exit_now(ExitCode.RUN_FAILED)
    events.emit(events_path, "trial_end")
    # NOTE [no teardown]: the loader is closed and every event is written, so
    # end here. Interpreter teardown (module finalizers, atexit handlers, the
    # allocator returning memory) is not part of the user's training and would
    # only lengthen the trial; the parent's process-group kill cleans up the
    # rest (forkserver, resource tracker).
    _exit_now(ExitCode.OK)


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main()
