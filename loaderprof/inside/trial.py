"""The trial child: one arm, N epochs, in a fresh interpreter.

Run as `python -m loaderprof.inside.trial SPEC.json` by the parent (see NOTE [trial
spec]). It builds the user's Dataset and a real DataLoader (inside/loader.py), runs
the epochs, and reports only through events: no sampler runs in here, so the
measured loop carries no observer thread. Exit status: 0 done, 2 the dataset or
options are unusable, 3 the run failed.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loaderprof.config.refs import ObjectRef, build_dataset, one_line
from loaderprof.errors import ExitCode, UsageError
from loaderprof.inside import events
from loaderprof.inside.events import Ev
from loaderprof.inside.loader import OrderRecorder, accelerator_available, recipe
from loaderprof.inside.procfs import forkserver_cpu_s
from loaderprof.inside.spec import EXIT_HANDLERS_S, TrialSpec
from loaderprof.inside.waits import WaitClock

if TYPE_CHECKING:
    from loaderprof.config.run import RunConfig

# How long workers may outlive the loader: torch's own shutdown has by then given
# each MP_STATUS_CHECK_INTERVAL (5 s) to join and sent SIGTERM to the rest, so a
# worker alive this much later ignores SIGTERM or is stuck in the kernel.
_SHUTDOWN_WAIT_S = 1.0

_WORKER_EXC = re.compile(r"Caught (\w+) in DataLoader worker process (\d+)")
_WORKER_DIED = re.compile(
    r"DataLoader worker \(pid\(?s?\)? ?([\d, ]+)\) "
    r"(?:is killed by signal: (.+?)\.|exited unexpectedly)"
)


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
        Ev.IMPORTED,
        torch=torch.__version__,
        start_method=cfg.loader.mp_context or multiprocessing.get_start_method(),
        accelerator=accelerator_available(),
    )
    torch.manual_seed(cfg.seed)


def _build_dataset(path: str, cfg: RunConfig) -> Any:
    """The user's Dataset."""
    from torch.utils.data import IterableDataset

    dataset = build_dataset(ObjectRef.parse(cfg.dataset, what="dataset"), cfg.dataset_args)
    iterable = isinstance(dataset, IterableDataset)
    try:
        length: int | None = len(dataset)
    except Exception:
        length = None
    events.emit(
        path,
        Ev.DATASET_BUILT,
        kind="iterable" if iterable else "map",
        length=length,
        type=f"{type(dataset).__module__}.{type(dataset).__qualname__}",
        **_shards(dataset),
    )
    return dataset


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
    the user's hook FN(loader, epoch). See NOTE [stale worker state]. Then the main
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
        recorder: OrderRecorder | None,
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
                    Ev.ERROR,
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
        from loaderprof.inside.fingerprint import timed_fingerprint

        events.emit(self.path, Ev.MAIN_STATE, epoch=epoch, **timed_fingerprint(self.dataset))
        self.counter.value = epoch


def _epoch_counter(cfg: RunConfig) -> Any:
    """A shared int the workers read (fork inherits it; spawn pickles it with the
    probes while starting each worker)."""

    if not cfg.state_checks:
        return None
    return multiprocessing.get_context(cfg.loader.mp_context).RawValue("i", 0)


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
    recorder: OrderRecorder | None,
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
        events.emit(path, Ev.EPOCH_START, epoch=epoch)
        it = None
        # One clock for the epoch's passes, train and validation (see NOTE [data wait]).
        clock = WaitClock()
        it, batches, last = _run_epoch(
            path, loader, epoch, step_s, cfg.max_batches, seen, clock=clock
        )
        cut = cfg.max_batches is not None and batches >= cfg.max_batches
        if val_loader is not None:
            # See NOTE [validation pass]. Inside the epoch, so its time counts in the epoch's
            # wall as it does in training; `val_start` splits the two passes.
            events.emit(path, Ev.VAL_START, epoch=epoch)
            _, val_batches, _ = _run_epoch(
                path,
                val_loader,
                epoch,
                step_s,
                None,
                seen,
                first_event=Ev.VAL_FIRST_BATCH,
                clock=clock,
            )
            events.emit(path, Ev.VAL_END, epoch=epoch, batches=val_batches)
        events.emit(
            path,
            Ev.EPOCH_END,
            epoch=epoch,
            batches=batches,
            last_batch=last,
            # A cut epoch's sampler never finished its pass: no order to digest.
            order=recorder.last_digest if recorder is not None and not cut else None,
            # Nor did its workers' streams (`measure.assemble._stream_order`).
            cut=cut,
            **clock.fields(),
        )
        if idle_s:
            events.emit(path, Ev.IDLE_START, epoch=epoch)
            time.sleep(idle_s)
            _wait_until_sampled(pause_ack_path, epoch)
            events.emit(path, Ev.IDLE_END, epoch=epoch)
    return it


# See NOTE [sampled pauses]. How long a pause may outlast --idle-ms waiting for the
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
    first_event: str = Ev.FIRST_BATCH,
    clock: WaitClock | None = None,
) -> tuple[Any, int, int | None]:
    """One pass over the loader (see NOTE [short epochs]; at most `max_batches`): its
    iterator, the batch count and when the last batch arrived; its waits go on `clock`
    (NOTE [data wait]). A failure is reported as an `error` event and ends the trial
    (exit 3)."""
    clock = clock or WaitClock()
    batches = 0
    last: int | None = None
    # An explicit iterator (what `for batch in loader` makes) so that after a
    # failure the workers' exit codes can still be read.
    it: Any = None
    try:
        it = clock.iter(loader)
        for _batch in clock.batches(it):
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
            path, Ev.ERROR, category="run", epoch=epoch, detail=traceback.format_exc(), **info
        )
        raise SystemExit(ExitCode.RUN_FAILED) from None
    if seen is not None:
        seen.update((w.pid, w) for w in getattr(it, "_workers", None) or [])
    if max_batches is not None and batches >= max_batches and not loader.persistent_workers:
        # A cut epoch ends as a finished one does: its workers are joined inside it
        # (a persistent loader keeps them, and resumes them at the next iter()).
        del it
        events.emit(path, Ev.COLLECTING)
        gc.collect()
        events.emit(path, Ev.COLLECTED)
        it = None
    return it, batches, last


@dataclass
class PickleMeter:
    """NOTE [start-up breakdown]: under spawn and forkserver, multiprocessing pickles
    each worker's Process object (the Dataset, collate_fn and worker_init_fn in its
    arguments) into a buffer with `reduction.dump`, then writes it to the worker's
    pipe. This stands in for that dump: it times it and sizes what it wrote, what
    each worker receives, measured where it happens, not by pickling the Dataset a
    second time."""

    path: str
    original: Callable[..., None]
    # The largest worker pickle measured so far (bytes).
    largest: int = 0

    @classmethod
    def install(cls, path: str) -> PickleMeter:
        from multiprocessing import reduction

        meter = cls(path, reduction.dump)
        reduction.dump = meter
        return meter

    def __call__(self, obj: Any, file: Any, protocol: Any = None) -> None:
        from multiprocessing.process import BaseProcess

        if not isinstance(obj, BaseProcess) or not hasattr(file, "tell"):
            self.original(obj, file, protocol)
            return
        args: tuple[Any, ...] = tuple(getattr(obj, "_args", ()))
        # torch's _worker_loop takes the worker id as its 11th argument.
        wid = args[10] if len(args) > 10 and isinstance(args[10], int) else None
        pos, start = file.tell(), time.perf_counter()
        self.original(obj, file, protocol)
        size = file.tell() - pos
        self.largest = max(self.largest, size)
        events.emit(
            self.path,
            Ev.WORKER_PICKLED,
            worker_id=wid,
            bytes=size,
            seconds=round(time.perf_counter() - start, 6),
        )


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
    events.emit(path, Ev.DATASET_ATTRIBUTES, sizes=top)


def _val_dataset(cfg: RunConfig) -> Any:
    """The --val Dataset (see NOTE [validation pass]), or None."""
    if cfg.val_loader is None or cfg.val is None:
        return None
    return build_dataset(ObjectRef.parse(cfg.val, what="--val"), cfg.val_args, "--val-arg")


def run(spec: TrialSpec) -> None:
    path, cfg = spec.events_path, spec.run_config()
    _seeded_torch(path, cfg)
    spawned = (cfg.loader.mp_context or multiprocessing.get_start_method()) != "fork"
    meter = PickleMeter.install(path) if spawned else None
    dataset = _build_dataset(path, cfg)
    counter = _epoch_counter(cfg)
    train = recipe(path, cfg, dataset, val=False, persistent=spec.persistent, counter=counter)
    protocol = EpochProtocol(path, cfg, dataset, train.recorder, counter)
    # Built before the train loader, so the set-up baseline holds both Datasets.
    val_dataset = _val_dataset(cfg)
    val_loader = None
    if val_dataset is not None:
        val = recipe(path, cfg, val_dataset, val=True, persistent=spec.persistent, counter=None)
        val_loader = val.build(path)
    # See NOTE [sampled pauses]. The set-up baseline is waited for like a pause (as
    # "epoch 0"): on a busy machine the last walk before the loader may otherwise
    # date from before the Dataset was built, or the imports ran.
    if spec.pause_ack_path is not None:
        events.emit(path, Ev.SETUP_READ)
        _wait_until_sampled(spec.pause_ack_path, 0)
    # See NOTE [memory window]. Every memory figure covers the loader's life, from
    # here to `loader_closed`; what the process holds now is the set-up baseline.
    events.emit(path, Ev.LOADER_BUILDING)
    loader = train.build(path)
    events.emit(path, Ev.LOADER_BUILT, full_batches=_full_batches(loader))
    # The loader's own worker processes, of every epoch (a non-persistent epoch's
    # workers may outlive its iterator too); a Dataset may own others (a Manager, a
    # Pool) that are not the loader's and that this does not wait for.
    seen: dict[int, Any] = {}
    it = _run_epochs(
        path, cfg, loader, train.recorder, protocol, spec.pause_ack_path, seen, val_loader
    )
    events.emit(path, Ev.LOADER_CLOSING)
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
        # See NOTE [memory window]. Readings taken during it are left out.
        events.emit(path, Ev.COLLECTING)
        gc.collect()
        events.emit(path, Ev.COLLECTED)
    alive = _wait_for_workers(workers, timeout_s=_SHUTDOWN_WAIT_S)
    events.emit(path, Ev.LOADER_CLOSED, workers_alive=alive)
    if meter is not None and meter.largest >= _ATTRIBUTES_FROM_BYTES:
        _size_attributes(path, dataset)


def _wait_for_workers(workers: list[Any], timeout_s: float) -> int:
    """Wait until the loader's worker processes have exited; return how many still live."""
    deadline = time.monotonic() + timeout_s
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    return sum(1 for w in workers if w.is_alive())


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    spec = TrialSpec.read(args[0])
    events_path = spec.events_path
    events.emit(events_path, Ev.CHILD_START)
    try:
        run(spec)
    except UsageError as exc:
        events.emit(
            events_path,
            Ev.ERROR,
            category="usage",
            kind="usage",
            message=exc.message,
            detail=exc.detail or traceback.format_exc(),
        )
        _finish(events_path, ExitCode.USAGE)
    except SystemExit as exc:
        _finish(events_path, exc.code if isinstance(exc.code, int) else ExitCode.RUN_FAILED)
    except BaseException as exc:
        events.emit(
            events_path,
            Ev.ERROR,
            category="run",
            kind="internal",
            message=one_line(exc),
            detail=traceback.format_exc(),
        )
        _finish(events_path, ExitCode.RUN_FAILED)
    events.emit(events_path, Ev.TRIAL_END)
    _finish(events_path, ExitCode.OK)


# NOTE [no teardown]: the loader is closed and every event is written, so the trial
# ends here, past every figure. The user's atexit handlers run, as at the end of their
# own training: what they clean up (mosaicml-streaming's /dev/shm segments, temporary
# files, locks) would otherwise outlive the trial on the user's machine. The rest of
# the interpreter's teardown (module finalizers, the allocator returning memory) frees
# nothing the process's end does not, and is skipped; the parent's process-group kill
# ends what is left (forkserver, resource tracker). Handlers that hang are cut after
# EXIT_HANDLERS_S (inside/spec.py), by the child or, if a handler holds the GIL, by the
# parent, counting from the EXITING event (after an error too): a trial that ended is
# complete either way, one that failed keeps its own error, and the figures end at the
# trial's last event.


def _finish(events_path: str, code: int) -> None:
    """The user's exit handlers, then the end (NOTE [no teardown]): after an error too,
    where the parent's cut starts from the same event."""
    # What the trial's orphans ran, which the parent's CPU accounting cannot see.
    events.emit(events_path, Ev.EXITING, code=code, unreaped_cpu_s=forkserver_cpu_s(os.getpid()))
    cut = threading.Timer(EXIT_HANDLERS_S, _exit_now, args=(code,))
    cut.daemon = True
    cut.start()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    cut.cancel()
    _exit_now(code)


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main()
