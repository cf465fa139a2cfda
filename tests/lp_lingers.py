"""A worker that outlives its loader's shutdown (the workers-outlive-loader check).

Importing this module (the trial does, to build the Dataset) shortens torch's 5 s
join before it sends SIGTERM, so the test spends seconds, not tens of them.
"""

from __future__ import annotations

import signal
import time
from multiprocessing import util

import torch
import torch.utils.data._utils
from torch.utils.data import Dataset

torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL = 0.2


def _linger(seconds: float) -> None:
    time.sleep(seconds)


def lingering_worker(worker_id: int) -> None:
    """Ignores SIGTERM and blocks 4 s in a finalizer as the worker exits."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    util.Finalize(None, _linger, args=(4.0,), exitpriority=1)


class Tiny(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((4,), float(index))
