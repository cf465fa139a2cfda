"""The DataLoaders a trial measures, from one recipe: the train loader and, with
--val, the validation loader (see NOTE [validation pass]), built like it with its
own options. The probes wrap the user's functions and Dataset (inside/probe.py)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loaderprof.config.refs import ObjectRef, one_line
from loaderprof.errors import UsageError
from loaderprof.inside import events
from loaderprof.inside.events import Ev
from loaderprof.inside.probe import CollateProbe, WorkerInitProbe, index_probe

if TYPE_CHECKING:
    from loaderprof.config.run import LoaderOptions, RunConfig


class OrderRecorder:
    """A sampler wrapper: yields its inner sampler's indices unchanged and digests
    their order (the epoch's `order`)."""

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


def accelerator_available() -> bool:
    import torch

    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        return bool(acc.is_available())
    return bool(torch.cuda.is_available())


@dataclass(frozen=True)
class LoaderRecipe:
    """Everything a loader is built from, resolved before it is built: a bad option
    fails here, before the memory window opens (see NOTE [memory window])."""

    role: str  # "train" or "val": what its workers' `worker_init` events say
    cls: Any
    dataset: Any
    iterable: bool
    options: LoaderOptions
    kwargs: dict[str, Any]
    counter: Any
    recorder: OrderRecorder | None

    def build(self, path: str) -> Any:
        """The loader; a map-style Dataset is wrapped so a failing __getitem__ names
        its index."""
        served = self.dataset if self.iterable else index_probe(self.dataset, path, self.counter)
        cls = self.cls
        try:
            return cls(served, **self.kwargs, **self.options.loader_args)
        except (ValueError, TypeError) as exc:
            what = "the validation loader's options" if self.role == "val" else "the options"
            raise UsageError(f"{cls.__name__} rejected {what}: {one_line(exc)}") from exc
        except Exception as exc:
            # A --loader class's own constructor failing is bad input too, said in one line.
            raise UsageError(
                f"building the loader failed: {cls.__name__}(...) raised {one_line(exc)}",
                detail=traceback.format_exc(),
            ) from exc


def recipe(
    path: str, cfg: RunConfig, dataset: Any, *, val: bool, persistent: bool, counter: Any
) -> LoaderRecipe:
    """The train loader's recipe, or (`val`) the validation loader's: the same class,
    start method, prefetch, pinning and functions, with its own batch size and
    workers, in order and unshuffled, and no order recorded or state checked."""
    import torch
    from torch.utils.data import IterableDataset

    lo = cfg.val_loader if val else cfg.loader
    assert lo is not None, "a validation recipe needs --val"
    role = "val" if val else "train"
    counter = None if val else counter
    iterable = isinstance(dataset, IterableDataset)
    user_collate, user_init = _user_functions(lo)
    generator = torch.Generator()
    generator.manual_seed(cfg.seed + 1 if val else cfg.seed)
    kwargs: dict[str, Any] = {
        "batch_size": lo.batch_size,
        "num_workers": lo.num_workers,
        "collate_fn": CollateProbe(
            path,
            user_collate,
            lo.batch_size is not None,
            digests=cfg.digests and not val,
            epoch_counter=counter if iterable else None,
        ),
        "worker_init_fn": WorkerInitProbe(path, user_init, loader=role),
        "pin_memory": _pin_memory(path, lo),
        "drop_last": lo.drop_last,
        "timeout": lo.timeout,
        "persistent_workers": persistent,
        "generator": generator,
    }
    recorder: OrderRecorder | None = None
    if iterable:
        if lo.shuffle is not None:
            kwargs["shuffle"] = lo.shuffle  # torch rejects it with a clear message
    elif not val:
        recorder = _order_recorder(dataset, cfg, generator)
        kwargs["sampler"] = recorder
    kwargs.update(_optional_kwargs(lo))
    return LoaderRecipe(role, _loader_class(lo), dataset, iterable, lo, kwargs, counter, recorder)


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


def _pin_memory(path: str, lo: LoaderOptions) -> bool:
    if lo.pin_memory and not accelerator_available():
        events.emit(
            path,
            Ev.WARNING,
            message="--pin-memory asked for, but no accelerator is available: "
            "running with pin_memory=False",
        )
        return False
    return lo.pin_memory


def _order_recorder(dataset: Any, cfg: RunConfig, generator: Any) -> OrderRecorder:
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
    return OrderRecorder(base)


def _optional_kwargs(lo: LoaderOptions) -> dict[str, Any]:
    """The options passed only when given (torch's defaults otherwise)."""
    out: dict[str, Any] = {}
    if lo.prefetch_factor is not None:
        out["prefetch_factor"] = lo.prefetch_factor
    if lo.mp_context is not None:
        out["multiprocessing_context"] = lo.mp_context
    if lo.in_order is not None:
        check_in_order(lo)
        out["in_order"] = lo.in_order
    return out


def check_in_order(lo: LoaderOptions) -> None:
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
