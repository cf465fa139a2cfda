"""Test-only datasets that fail in known ways."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import torch
from torch.utils.data import Dataset


class _Base(Dataset[torch.Tensor]):
    def __init__(self, n: int = 32, at: int = 5) -> None:
        self.n, self.at = n, at

    def __len__(self) -> int:
        return self.n


class KillsItself(_Base):
    """The worker that reads index `at` is killed by SIGKILL, as the OOM killer would."""

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.02)  # lives long enough to be sampled before it dies
        if index == self.at:
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.tensor([index])


class Hangs(_Base):
    """The worker that reads index `at` never returns."""

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.at:
            time.sleep(3600)
        return torch.tensor([index])


class FailsInEpoch2(_Base):
    """Raises the second time index `at` is read (a marker file survives epochs)."""

    def __init__(self, n: int = 32, at: int = 5, marker: str = "") -> None:
        super().__init__(n, at)
        self.marker = marker

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.at:
            if Path(self.marker).exists():
                raise KeyError(f"sample {index} vanished")
            Path(self.marker).touch()
        return torch.tensor([index])


class Slow(_Base):
    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.01)
        return torch.tensor([index])


class CrashesTrial(Dataset[torch.Tensor]):
    """Kills the trial process itself (the main process of the DataLoader)."""

    def __init__(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([index])
