"""A Dataset that writes down the process it was built in: the trial main."""

from __future__ import annotations

import json
import os

import torch
from torch.utils.data import Dataset


class WhereAmI(Dataset[torch.Tensor]):
    def __init__(self, out: str, n: int = 16) -> None:
        self.n = n
        with open(out, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "pgid": os.getpgid(0),
                        "sid": os.getsid(0),
                        "ppid": os.getppid(),
                    }
                )
                + "\n"
            )

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([index], dtype=torch.float32)
