"""The Dataset of the e2e tests that set loaderprof's data-wait figures against the
training script's own clock (`loaderprof.examples.timed_epoch`): its workers take 0.3 s
to start (worker_init_fn), each sample `read_s`. A test copies this file beside its
script."""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset

WORKER_START_S = 0.3


class Slow(Dataset):  # type: ignore[type-arg]
    """48 samples of `read_s` each."""

    def __init__(self, read_s: float) -> None:
        self.read_s = read_s

    def __len__(self) -> int:
        return 48

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.read_s)
        return torch.full((4,), float(i))


def start(worker_id: int) -> None:
    """The worker_init_fn: a pool's start-up, paid again by every fresh pool."""
    time.sleep(WORKER_START_S)
