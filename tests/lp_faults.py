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


class FailsFromNthRead(_Base):
    """Raises ValueError from the `fail_from`-th read of index `at` on, counted over
    the whole run in the file `counter` (one byte appended per read).

    Each epoch reads every index exactly once (no shuffle), so with `--epochs E`
    and `fail_from = k * E + 2` the first k trials complete and trial k + 1 fails
    in its epoch 2, after its epoch 1 was measured. A file, unlike a counter in
    memory, is shared by the trial processes and every (forked) worker.
    """

    def __init__(self, n: int = 64, at: int = 5, counter: str = "", fail_from: int = 2) -> None:
        super().__init__(n, at)
        self.counter, self.fail_from = counter, fail_from

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.at:
            fd = os.open(self.counter, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, b"r")
                reads = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if reads >= self.fail_from:
                raise ValueError(f"bad sample {index}")
        return torch.tensor([index])


class Slow(_Base):
    """With `reads`, every read appends a byte to that file: its size tells a test
    how far the run has got, whichever process read the item."""

    def __init__(self, n: int = 32, at: int = 5, reads: str = "") -> None:
        super().__init__(n, at)
        self.reads = reads

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.01)
        if self.reads:
            fd = os.open(self.reads, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, b"r")
            finally:
                os.close(fd)
        return torch.tensor([index])


class CrashesTrial(Dataset[torch.Tensor]):
    """Kills the trial process itself (the main process of the DataLoader)."""

    def __init__(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([index])
