"""Datasets that fail on one torchrun rank only (the RANK torchrun sets)."""

from __future__ import annotations

import os
import signal
import time

import torch
from torch.utils.data import Dataset, get_worker_info


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


class MissingShard(Dataset[torch.Tensor]):
    """Rank `bad_rank` cannot find its shard: the constructor raises."""

    def __init__(self, bad_rank: int = 1, n: int = 64) -> None:
        if _rank() == bad_rank:
            raise FileNotFoundError(f"shard-{bad_rank}.bin is missing")
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([index], dtype=torch.float32)


class KilledWorker(Dataset[torch.Tensor]):
    """On rank `bad_rank` a DataLoader worker is killed (SIGKILL) at its `at_item`-th
    item, mid-epoch (whatever indices the DistributedSampler gives the rank)."""

    def __init__(self, bad_rank: int = 1, n: int = 64, at_item: int = 10) -> None:
        self.bad_rank, self.n, self.at_item = bad_rank, n, at_item
        self._fetched = 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if _rank() == self.bad_rank and get_worker_info() is not None:
            self._fetched += 1
            if self._fetched == self.at_item:
                os.kill(os.getpid(), signal.SIGKILL)
        return torch.tensor([index], dtype=torch.float32)


class HangingRank(Dataset[torch.Tensor]):
    """On rank `bad_rank` every item hangs: only --trial-timeout ends the trial."""

    def __init__(self, bad_rank: int = 1, n: int = 64) -> None:
        self.bad_rank, self.n = bad_rank, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if _rank() == self.bad_rank:
            time.sleep(3600)
        return torch.tensor([index], dtype=torch.float32)
