"""Small datasets that show the typical cases, for trying loaderprof out.

    loaderprof compare loaderprof.examples:LazyResourceDataset --epochs 5

Each one's cost is known by construction, so what loaderprof reports about
it can be checked against what it should find; `timed_epoch` is a training loop's own
clock for its waits, to set loaderprof's data-wait figures against.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class CheapDataset(Dataset[torch.Tensor]):
    """Cheap to start: nothing to open, nothing to cache. Under fork a worker
    costs a few ms to start, so persistence saves little and holds memory."""

    def __init__(self, n: int = 2048, dim: int = 64) -> None:
        self.n = n
        self.dim = dim

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((self.dim,), float(index))


class LazyResourceDataset(Dataset[torch.Tensor]):
    """Opens an expensive resource (a database connection, an HDF5/LMDB file, a
    remote bucket client) lazily, on first use in each worker process: the
    common, recommended pattern. `open_cost_s` (default 0.2 s) is what opening
    costs. Without persistence every epoch's fresh workers pay it again. `read_ms`
    (default 0) is what reading each sample costs after that."""

    def __init__(
        self, n: int = 512, dim: int = 64, open_cost_s: float = 0.2, read_ms: float = 0.0
    ) -> None:
        self.n = n
        self.dim = dim
        self.open_cost_s = open_cost_s
        self.read_s = read_ms / 1000
        self._handle_pid: int | None = None

    def _ensure_open(self) -> None:
        if self._handle_pid != os.getpid():
            time.sleep(self.open_cost_s)  # stands in for connect()/open()
            self._handle_pid = os.getpid()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        self._ensure_open()
        if self.read_s:
            time.sleep(self.read_s)
        return torch.full((self.dim,), float(index))


class CachedDecodeDataset(Dataset[torch.Tensor]):
    """Decodes each sample at a cost (`decode_ms`) and memoizes it in a per-worker
    cache of `sample_kib` KiB per sample. Persistent workers keep their cache,
    so steady epochs are fast, and the cache is memory held between epochs.
    Non-persistent workers start each epoch with an empty cache."""

    def __init__(self, n: int = 512, decode_ms: float = 2.0, sample_kib: int = 64) -> None:
        self.n = n
        self.decode_s = decode_ms / 1000
        self.numel = sample_kib * 1024 // 4
        self._cache: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        hit = self._cache.get(index)
        if hit is None:
            time.sleep(self.decode_s)  # stands in for JPEG / audio decoding
            hit = torch.full((self.numel,), float(index))
            self._cache[index] = hit
        # Return a small view: the cached tensor stays private to the worker.
        return hit[:16].clone()


class ShardedStream(IterableDataset[torch.Tensor]):
    """An IterableDataset that shards its stream by `get_worker_info()`, so each
    of `n` samples is produced exactly once per epoch across all workers."""

    def __init__(self, n: int = 2048, dim: int = 64) -> None:
        self.n = n
        self.dim = dim

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(start, self.n, step):
            yield torch.full((self.dim,), float(index))


def timed_epoch(loader: Iterable[object], step_s: float = 0.0) -> dict[str, float]:
    """One epoch timed by the training loop's own clock, as NOTE [data wait] counts its
    waits: `first_s` is iter() and the first next(), `steady_s` every later next() (the
    StopIteration's included), `step_s` the training step (a sleep of `step_s`) after
    each batch, `epoch_s` the whole, beside its `batches`."""
    began = time.perf_counter()
    it = iter(loader)
    first = time.perf_counter() - began
    steady = step = 0.0
    batches = 0
    while True:
        t = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            steady += time.perf_counter() - t
            break
        if batches == 0:
            first += time.perf_counter() - t
        else:
            steady += time.perf_counter() - t
        batches += 1
        t = time.perf_counter()
        time.sleep(step_s)
        step += time.perf_counter() - t
    return {
        "epoch_s": time.perf_counter() - began,
        "first_s": first,
        "steady_s": steady,
        "step_s": step,
        "batches": batches,
    }
