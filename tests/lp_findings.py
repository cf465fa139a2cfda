"""Test-only datasets that each trigger exactly one lifecycle finding."""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset

MiB = 1024 * 1024


class LeakyFiles(Dataset[torch.Tensor]):
    """Opens a new file every `every` items and never closes it: with 2 workers and
    n=32 each worker reads 16 items an epoch, so it leaks one file per epoch."""

    def __init__(self, n: int = 32, every: int = 16) -> None:
        self.n, self.every = n, every
        self._count = 0
        self._open: list[IO[bytes]] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._count % self.every == 0:
            # Deliberately never closed: this dataset exists to leak.
            self._open.append(tempfile.TemporaryFile())  # noqa: SIM115
        self._count += 1
        return torch.tensor([index])


class LazyFile(Dataset[torch.Tensor]):
    """Opens its file at a worker's first item and keeps it open (an HDF5 or LMDB handle
    opened lazily, as their docs advise under DataLoader workers): state carried."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self._file: IO[bytes] | None = None
        self._owner: int | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._owner != os.getpid():
            self._file = tempfile.TemporaryFile()  # noqa: SIM115
            self._owner = os.getpid()
        return torch.tensor([index])


class ChunkFiles(Dataset[torch.Tensor]):
    """litdata's pattern: items live in chunk files, and a worker opens each chunk the
    first time it reads from it and keeps it open. Each epoch reaches `per_epoch` chunks
    not opened before until all `chunks` are open, then the count stays: it levels off."""

    def __init__(self, n: int = 32, chunks: int = 8, per_epoch: int = 2) -> None:
        self.n, self.chunks, self.per_epoch = n, chunks, per_epoch
        self._reads = 0
        self._open: dict[int, IO[bytes]] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        # Each worker reads n/2 items an epoch (2 workers); its k-th epoch reaches
        # chunks up to k·per_epoch.
        epoch = self._reads // (self.n // 2)
        self._reads += 1
        chunk = min(self.chunks, (epoch + 1) * self.per_epoch) - 1 - (index % self.per_epoch)
        if chunk not in self._open:
            self._open[chunk] = tempfile.TemporaryFile()  # noqa: SIM115
        return torch.tensor([index])


class GrowingCache(Dataset[torch.Tensor]):
    """Caches a fresh 1 MiB entry on every read, never evicting: grows every epoch."""

    def __init__(self, n: int = 32, entry_mib: int = 1) -> None:
        self.n, self.entry = n, entry_mib * MiB
        self._cache: list[bytes] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        self._cache.append(bytes([index % 251]) * self.entry)
        return torch.tensor([index])


class PythonObjects(Dataset[torch.Tensor]):
    """Holds millions of Python ints built in the parent; reading them in a forked
    worker writes every object's refcount, turning shared pages private. Each read
    takes the next slice, as a shuffled epoch reaches objects not read before: a
    worker copies a further eighth of the list every epoch, not all of it in a burst
    at its start that a sampler on a busy machine could miss."""

    def __init__(self, n: int = 32, objects: int = 4_000_000) -> None:
        self.n = n
        self.objects = list(range(10**6, 10**6 + objects))
        self.chunk = objects // (8 * n // 2)
        self._cursor = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        start = self._cursor % len(self.objects)
        self._cursor += self.chunk
        part = self.objects[start : start + self.chunk]
        return torch.tensor([float(len(part))])


class StartupCopy(PythonObjects):
    """Touches every parent object once as a worker starts, then reads nothing new: a
    one-time start-up copy (flat private memory after the first batch), not copy-on-read."""

    def __getitem__(self, index: int) -> torch.Tensor:
        if getattr(self, "_owner", None) != os.getpid():
            self._total = sum(self.objects)  # writes every object's refcount, once
            self._owner = os.getpid()
        return torch.tensor([float(index)])


class UnshardedStream(IterableDataset[torch.Tensor]):
    """Every worker yields the whole stream: each sample arrives num_workers times."""

    def __init__(self, n: int = 64) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[torch.Tensor]:
        for i in range(self.n):
            yield torch.tensor([i])


class SelfShuffling(IterableDataset[torch.Tensor]):
    """litdata's StreamingDataset without set_epoch: each worker's copy counts its
    epochs and reshuffles its share by that count. Kept workers count on; a fresh pool
    copies the main process's count, 0, and yields epoch 1's order again."""

    def __init__(self, n: int = 64) -> None:
        self.n, self.epoch = n, 0

    def __iter__(self) -> Iterator[torch.Tensor]:
        self.epoch += 1
        info = torch.utils.data.get_worker_info()
        wid, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        share = list(range(wid, self.n, workers))
        random.Random(self.epoch).shuffle(share)
        for i in share:
            yield torch.tensor([i])


class RandomAugment(Dataset[torch.Tensor]):
    """A random augmentation drawn from the worker's torch RNG."""

    def __init__(self, n: int = 32) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index)]) + torch.rand(1)


class TorchvisionStyle(Dataset[torch.Tensor]):
    """Random crops and flips as torchvision's v1 transforms draw them (RandomResizedCrop's
    torch.empty().uniform_() and torch.randint, RandomHorizontalFlip's torch.rand), plus
    Python's `random` and numpy's global state, which the DataLoader reseeds too."""

    def __init__(self, n: int = 32, size: int = 16) -> None:
        self.n, self.size = n, size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        image = torch.arange(float(self.size * self.size)).reshape(self.size, self.size) + index
        scale = float(torch.empty(1).uniform_(0.5, 1.0))
        side = max(2, int(self.size * scale))
        top = int(torch.randint(0, self.size - side + 1, size=(1,)))
        left = int(torch.randint(0, self.size - side + 1, size=(1,)))
        crop = image[top : top + side, left : left + side]
        if torch.rand(1) < 0.5:
            crop = crop.flip(-1)
        jitter = random.random() + float(np.random.rand())
        return torch.nn.functional.interpolate(crop[None, None], size=(8, 8))[0, 0] + jitter


# Made once, at import: every fresh worker starts from this same state (fork copies it,
# spawn re-imports it), and torch reseeds only its own, `random`'s and numpy's global RNG.
_NOISE = np.random.default_rng(0)


class ModuleGenerator(Dataset[torch.Tensor]):
    """Noise from a numpy Generator made at import, not on the Dataset (its fingerprint
    cannot see it): without persistence every epoch draws the same values."""

    def __init__(self, n: int = 32) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), float(_NOISE.random())])


class Clean(Dataset[torch.Tensor]):
    """Deterministic, nothing opened, nothing cached: no finding."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.pid = os.getpid()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((4,), float(index))


class SlowWorker(Dataset[torch.Tensor]):
    """Worker 0 takes `delay_ms` per item, the others nothing: in-order delivery waits
    for worker 0's every other batch."""

    def __init__(self, n: int = 32, delay_ms: float = 20.0) -> None:
        self.n, self.delay = n, delay_ms / 1000

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        info = torch.utils.data.get_worker_info()
        if info is not None and info.id == 0:
            time.sleep(self.delay)
        return torch.tensor([index])


_BLOCK = bytes(256 * 1024)


def _spin(seconds: float) -> None:
    """CPU work that releases the GIL, as an OpenCV or BLAS call does: hashlib lets go
    of it for buffers this large, so the pool's threads really run at once."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(_BLOCK).digest()


class ThreadedWorker(Dataset[torch.Tensor]):
    """Each worker runs every item on a pool of `threads` threads, each spinning 5 ms
    of CPU outside the GIL (as an OpenCV or BLAS call with its own pool would)."""

    def __init__(self, n: int = 32, threads: int = 4) -> None:
        self.n, self.threads = n, threads
        self._pool: ThreadPoolExecutor | None = None
        self._owner: int | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._owner != os.getpid():
            self._pool = ThreadPoolExecutor(self.threads)
            self._owner = os.getpid()
        assert self._pool is not None
        list(self._pool.map(_spin, [0.005] * self.threads))
        return torch.tensor([index])


class PollingThread(Dataset[torch.Tensor]):
    """Each worker starts a thread that wakes every 1 ms to look for work, as
    mosaicml-streaming's download/prepare threads do: a second thread that uses CPU,
    but wants a fraction of a core."""

    def __init__(self, n: int = 32, item_ms: float = 2.0) -> None:
        self.n, self.item = n, item_ms / 1000
        self._owner: int | None = None

    def __len__(self) -> int:
        return self.n

    def _poll(self) -> None:
        while True:
            time.sleep(0.001)
            sum(range(6000))  # about 0.1 ms: what it finds to do

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._owner != os.getpid():
            self._owner = os.getpid()
            threading.Thread(target=self._poll, daemon=True).start()
        time.sleep(self.item)  # reading a local shard
        return torch.tensor([index])


class FewShards(IterableDataset[torch.Tensor]):
    """HF datasets' IterableDataset pattern: the stream is split into `shards` shards
    (n_shards), and each worker takes shards id, id + W, ...: with fewer shards than
    workers, a worker gets none and yields nothing, every epoch."""

    def __init__(self, shards: int = 1, per_shard: int = 32) -> None:
        self.shards, self.per_shard = shards, per_shard

    @property
    def n_shards(self) -> int:
        return self.shards

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = torch.utils.data.get_worker_info()
        wid, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for shard in range(wid, self.shards, workers):
            for i in range(self.per_shard):
                yield torch.tensor([shard * self.per_shard + i])
