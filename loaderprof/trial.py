"""The trial child: one arm, N epochs, in a fresh interpreter.

Run as `python -m loaderprof.trial PLAN.json` by the parent. It builds the
user's Dataset and a real DataLoader, runs the epochs, and reports only
through events: no sampler runs in here, so the measured loop carries no
observer thread. Exit status: 0 done, 2 the dataset or options are unusable,
3 the run failed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import sys
import time
import traceback
from typing import Any

from loaderprof import events
from loaderprof.errors import UsageError
from loaderprof.probe import CollateProbe, WorkerInitProbe, index_probe
from loaderprof.spec import ObjectRef, build_dataset, one_line

# torch itself gives each worker MP_STATUS_CHECK_INTERVAL (5 s) to join.
_SHUTDOWN_WAIT_S = 10.0

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
    def __init__(self, data: dict[str, Any]) -> None:
        self.events_path: str = data["events_path"]
        self.persistent: bool = data["persistent"]
        self.config: dict[str, Any] = data["config"]


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


def run(plan: _Plan) -> None:
    path = plan.events_path
    cfg = plan.config
    lo = cfg["loader"]

    import multiprocessing

    import torch
    from torch.utils.data import DataLoader, IterableDataset
    from torch.utils.data._utils.collate import default_collate, default_convert

    events.emit(
        path,
        "imported",
        torch=torch.__version__,
        start_method=lo["mp_context"] or multiprocessing.get_start_method(),
        accelerator=_accelerator_available(),
    )
    seed = int(cfg["seed"])
    torch.manual_seed(seed)

    dataset = build_dataset(ObjectRef.parse(cfg["dataset"], what="dataset"), cfg["dataset_args"])
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
    )

    auto_collation = lo["batch_size"] is not None
    user_collate = (
        ObjectRef.parse(lo["collate_fn"], what="--collate-fn").resolve()
        if lo["collate_fn"]
        else (default_collate if auto_collation else default_convert)
    )
    user_init = (
        ObjectRef.parse(lo["worker_init_fn"], what="--worker-init-fn").resolve()
        if lo["worker_init_fn"]
        else None
    )
    for name, fn in (("--collate-fn", user_collate), ("--worker-init-fn", user_init)):
        if fn is not None and not callable(fn):
            raise UsageError(f"{name} {lo[name[2:].replace('-', '_')]} is not callable")

    pin_memory = bool(lo["pin_memory"])
    if pin_memory and not _accelerator_available():
        events.emit(
            path,
            "warning",
            message="--pin-memory asked for, but no accelerator is available: "
            "running with pin_memory=False",
        )
        pin_memory = False

    generator = torch.Generator()
    generator.manual_seed(seed)
    kwargs: dict[str, Any] = {
        "batch_size": lo["batch_size"],
        "num_workers": lo["num_workers"],
        "collate_fn": CollateProbe(
            path, user_collate, auto_collation, digests=bool(cfg.get("digests"))
        ),
        "worker_init_fn": WorkerInitProbe(path, user_init),
        "pin_memory": pin_memory,
        "drop_last": lo["drop_last"],
        "timeout": lo["timeout"],
        "persistent_workers": plan.persistent,
        "generator": generator,
    }
    recorder: RecordingSampler | None = None
    if iterable:
        if lo["shuffle"] is not None:
            kwargs["shuffle"] = lo["shuffle"]  # torch rejects it with a clear message
    else:
        # The sampler DataLoader would build itself, wrapped to record the order.
        from torch.utils.data import RandomSampler, SequentialSampler

        world = int(cfg.get("world_size", 1))
        base: Any
        if world > 1:
            from torch.utils.data.distributed import DistributedSampler

            base = DistributedSampler(
                dataset,
                num_replicas=world,
                rank=int(cfg.get("rank", 0)),
                shuffle=bool(lo["shuffle"]),
                seed=seed,
                drop_last=bool(lo["drop_last"]),
            )
        else:
            base = (
                RandomSampler(dataset, generator=generator)
                if lo["shuffle"]
                else SequentialSampler(dataset)
            )
        recorder = RecordingSampler(base)
        kwargs["sampler"] = recorder
    if lo["prefetch_factor"] is not None:
        kwargs["prefetch_factor"] = lo["prefetch_factor"]
    if lo["mp_context"] is not None:
        kwargs["multiprocessing_context"] = lo["mp_context"]
    # NOTE [memory window]: every memory figure covers the loader's life, from
    # here to `loader_closed`; what the process holds now is the set-up baseline.
    events.emit(path, "loader_building")
    try:
        # Map-style datasets are wrapped so a failing __getitem__ names its index.
        served = dataset if iterable else index_probe(dataset, path)
        loader = DataLoader(served, **kwargs)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"DataLoader rejected the options: {one_line(exc)}") from exc
    events.emit(path, "loader_built")

    step_s = float(cfg["step_ms"]) / 1000
    idle_s = float(cfg["idle_ms"]) / 1000
    it: Any = None
    for epoch in range(1, int(cfg["epochs"]) + 1):
        if recorder is not None and hasattr(recorder.inner, "set_epoch"):
            recorder.inner.set_epoch(epoch)  # as a distributed training loop does
        events.emit(path, "epoch_start", epoch=epoch)
        batches = 0
        # An explicit iterator (what `for batch in loader` makes) so that after a
        # failure the workers' exit codes can still be read.
        it = None
        try:
            it = iter(loader)
            for _batch in it:
                if batches == 0:
                    events.emit(path, "first_batch", epoch=epoch)
                batches += 1
                if step_s:
                    time.sleep(step_s)
        except Exception as exc:
            info = _classify_worker_error(exc)
            workers = getattr(it, "_workers", None) or []
            info["exitcodes"] = {str(w.pid): w.exitcode for w in workers if w.exitcode}
            events.emit(
                path, "error", category="run", epoch=epoch, detail=traceback.format_exc(), **info
            )
            raise SystemExit(3) from None
        events.emit(
            path,
            "epoch_end",
            epoch=epoch,
            batches=batches,
            order=recorder.last_digest if recorder is not None else None,
        )
        if idle_s:
            events.emit(path, "idle_start", epoch=epoch)
            time.sleep(idle_s)
            events.emit(path, "idle_end", epoch=epoch)
    events.emit(path, "loader_closing")
    # Dropping the last references runs the iterator's shutdown, which joins
    # persistent workers; cycles are collected so no worker outlives this.
    del it, loader
    gc.collect()
    alive = _wait_for_workers(timeout_s=_SHUTDOWN_WAIT_S)
    events.emit(path, "loader_closed", workers_alive=alive)


def _wait_for_workers(timeout_s: float) -> int:
    """Wait until the loader's worker processes have exited; return how many still live.

    `active_children()` lists the live processes this process started through
    multiprocessing (the DataLoader's workers) and reaps those that ended.
    """
    import multiprocessing

    deadline = time.monotonic() + timeout_s
    while True:
        alive = multiprocessing.active_children()
        if not alive or time.monotonic() >= deadline:
            return len(alive)
        time.sleep(0.005)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as f:
        plan = _Plan(json.load(f))
    events.emit(plan.events_path, "child_start")
    try:
        run(plan)
    except UsageError as exc:
        events.emit(
            plan.events_path,
            "error",
            category="usage",
            kind="usage",
            message=exc.message,
            detail=exc.detail or traceback.format_exc(),
        )
        _exit_now(2)
    except SystemExit as exc:
        _exit_now(exc.code if isinstance(exc.code, int) else 3)
    except BaseException as exc:
        events.emit(
            plan.events_path,
            "error",
            category="run",
            kind="internal",
            message=one_line(exc),
            detail=traceback.format_exc(),
        )
        _exit_now(3)
    events.emit(plan.events_path, "trial_end")
    # NOTE [no teardown]: the loader is closed and every event is written, so
    # end here. Interpreter teardown (module finalizers, atexit handlers, the
    # allocator returning memory) is not part of the user's training and would
    # only lengthen the trial; the parent's process-group kill cleans up the
    # rest (forkserver, resource tracker).
    _exit_now(0)


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
