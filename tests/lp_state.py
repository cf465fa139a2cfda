"""Datasets whose per-epoch state is known by construction (stale worker state,
repeated randomness), and their fixed twins that must stay quiet."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset


class SetEpochDataset(Dataset[torch.Tensor]):
    """Keeps the epoch from set_epoch() in a plain attribute (HF datasets#6673)."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), float(self.epoch)])


class SharedEpochDataset(SetEpochDataset):
    """The fix HF datasets shipped: the epoch lives in a shared-memory tensor."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.epoch_t = torch.zeros(1, dtype=torch.int64).share_memory_()

    def set_epoch(self, epoch: int) -> None:
        self.epoch_t[0] = epoch  # in place: the workers map the same page

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), float(self.epoch_t[0])])


class MosaicDataset(Dataset[torch.Tensor]):
    """A YOLO-style augmentation switch the trainer flips on loader.dataset."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.mosaic = True

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), 1.0 if self.mosaic else 0.0])


def close_mosaic(loader: Any, epoch: int) -> None:
    """The trainer's `close_mosaic`: augmentation off from epoch 1 (counted from 0)."""
    if epoch >= 1:
        loader.dataset.mosaic = False


def raising_hook(loader: Any, epoch: int) -> None:
    if epoch >= 1:
        raise RuntimeError("curriculum file missing")


NOT_CALLABLE = 42


class NumpyRngDataset(Dataset[torch.Tensor]):
    """Noise from a numpy Generator stored on the Dataset, never reseeded per worker."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), float(self.rng.random())])


class TorchRngDataset(Dataset[torch.Tensor]):
    """The same with a torch.Generator."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.gen = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.cat([torch.tensor([float(index)]), torch.rand(1, generator=self.gen)])


def reseed_rng(worker_id: int) -> None:
    """The fix: seed the Dataset's generator from the worker's own seed."""
    info = torch.utils.data.get_worker_info()
    assert info is not None
    info.dataset.rng = np.random.default_rng(info.seed % 2**32)


class EveryStateDataset(Dataset[torch.Tensor]):
    """Each kind of state at once, for one run under spawn: a plain epoch (stale), an
    epoch in shared memory (not stale), a numpy Generator (repeated randomness)."""

    def __init__(self, n: int = 32) -> None:
        self.n = n
        self.epoch = 0
        self.epoch_t = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.rng = np.random.default_rng(0)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.epoch_t[0] = epoch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        noise = float(self.rng.random())
        return torch.tensor([float(index), float(self.epoch), float(self.epoch_t[0]), noise])
