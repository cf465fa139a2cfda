"""The training script's own clock, for the e2e tests that set loaderprof's data-wait
figures against it: a Dataset whose workers take 0.3 s to start, and an epoch loop that
times iter(), the wait for the first batch, the waits for the rest (its StopIteration
included) and the training step apart. A test copies this file beside its script."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

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


def timed_epoch(loader: DataLoader, step_s: float) -> dict[str, Any]:  # type: ignore[type-arg]
    """One epoch: `first` is iter() and the first next(), `steady` every later next(),
    `step` the training step after each batch, `epoch_s` the whole."""
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
        "first": first,
        "steady": steady,
        "step": step,
        "batches": batches,
    }
