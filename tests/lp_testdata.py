"""Test-only datasets whose costs are known by construction.

Loaded by the CLI as `tests/lp_testdata.py:Name` (a file path spec) or as
`lp_testdata:Name` with tests/ as the current directory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

MiB = 1024 * 1024


class AllocDataset(Dataset[torch.Tensor]):
    """Each worker process allocates and touches `alloc_mib` MiB of private memory
    on first use and keeps it (so a persistent worker holds it between epochs)."""

    def __init__(self, n: int = 64, alloc_mib: int = 64, item_sleep_s: float = 0.0) -> None:
        self.n = n
        self.alloc_mib = alloc_mib
        self.item_sleep_s = item_sleep_s
        self._owner: int | None = None
        self._block: bytes = b""

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._owner != os.getpid():
            # b"Z" * n writes every byte, so every page is resident and private.
            self._block = b"Z" * (self.alloc_mib * MiB)
            self._owner = os.getpid()
        if self.item_sleep_s:
            time.sleep(self.item_sleep_s)
        return torch.tensor([index], dtype=torch.float32)


class FailingDataset(Dataset[torch.Tensor]):
    def __init__(self, n: int = 64, bad_index: int = 3) -> None:
        self.n = n
        self.bad_index = bad_index

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.bad_index:
            raise ValueError(f"bad sample {index}")
        return torch.tensor([index])


class RaisingConstructor(Dataset[torch.Tensor]):
    def __init__(self) -> None:
        raise RuntimeError("cannot open /data/train.lmdb")


class Stream(IterableDataset[torch.Tensor]):
    """Sharded IterableDataset that yields a small known stream."""

    def __init__(self, n: int = 96) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield torch.tensor([i])


class LazyStream(IterableDataset[torch.Tensor]):
    """A sharded stream that opens its source in __iter__ once per worker process,
    before its first item, as litdata's StreamingDataset sets itself up: `open_s`."""

    def __init__(self, n: int = 64, open_s: float = 0.2) -> None:
        self.n, self.open_s = n, open_s
        self._opened_in: int | None = None

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[torch.Tensor]:
        if self._opened_in != os.getpid():
            time.sleep(self.open_s)
            self._opened_in = os.getpid()
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return (torch.tensor([i]) for i in range(start, self.n, step))


def make_tiny(n: int = 32, blob_mib: int = 0) -> Dataset[torch.Tensor]:
    """A factory function returning a Dataset; with `blob_mib`, one that also holds that
    many MiB of bytes in `blob` (pickled whole into every spawn/forkserver worker)."""
    from loaderprof.examples import CheapDataset

    ds = CheapDataset(n=n, dim=4)
    if blob_mib:
        ds.blob = bytes(blob_mib * MiB)  # type: ignore[attr-defined]
    return ds


def make_number() -> int:
    return 42


NOT_A_DATASET = 42
INSTANCE = Stream(n=16)


def _marker(kind: str) -> None:
    folder = os.environ.get("LP_TEST_MARKERS")
    if folder:
        Path(folder, f"{kind}-{os.getpid()}").touch()


def marking_worker_init(worker_id: int) -> None:
    _marker("init")


def marking_collate(batch: list[torch.Tensor]) -> torch.Tensor:
    _marker("collate")
    return torch.stack(batch)


def slow_start_init(worker_id: int) -> None:
    time.sleep(0.05)


def make_local() -> Dataset[torch.Tensor]:
    """A Dataset class defined inside a function: it cannot be pickled under spawn."""

    class Local(Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> torch.Tensor:
            return torch.tensor([index])

    return Local()
