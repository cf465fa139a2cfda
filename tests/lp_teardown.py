"""A Dataset whose module grows the main process at interpreter exit.

A separate module so the atexit handler exists only in the runs that use it.
"""

from __future__ import annotations

import atexit
import os
import time

import torch
from torch.utils.data import Dataset

MiB = 1024 * 1024
TEARDOWN_MIB = 300
_MAIN_PID = os.getpid()
_held: list[bytes] = []


def _grow_at_exit() -> None:
    # Only the process that imported this module first (the trial's main
    # process); forked workers leave through os._exit and skip atexit anyway.
    if os.getpid() != _MAIN_PID:
        return
    _held.append(b"T" * (TEARDOWN_MIB * MiB))  # every page written: resident
    time.sleep(4.0)  # long enough for any sampler to see it, and for a test to tell


atexit.register(_grow_at_exit)


class TeardownDataset(Dataset[torch.Tensor]):
    def __init__(self, n: int = 64, item_sleep_s: float = 0.005) -> None:
        self.n = n
        # Workers live a few sampling ticks, so all of them are seen at once.
        self.item_sleep_s = item_sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(self.item_sleep_s)
        return torch.full((8,), float(index))
