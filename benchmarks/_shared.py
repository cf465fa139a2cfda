"""What the data-wait benchmarks share: the training script's Dataset and its own
clock (written into each benchmark's script, which runs from a scratch folder), and
how a ratio measured once per round is summed up and reported."""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

# A Dataset that opens a 0.2 s resource lazily in each worker and reads each sample
# for 3 ms, and an epoch timed as NOTE [data wait] counts its waits: perf_counter()
# around iter() and each next(), the first batch apart, a `step_s` sleep per batch.
LAZY_TIMED_LOOP = """
import json, os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n=96):
        self.n = n
        self.pid = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.pid != os.getpid():
            time.sleep(0.2)  # a lazily opened resource, once per worker process
            self.pid = os.getpid()
        time.sleep(0.003)
        return torch.full((16,), float(i))


def epoch(it_of, step_s):
    began = time.perf_counter()
    it = it_of()
    first = time.perf_counter() - began
    steady, batches = 0.0, 0
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
        time.sleep(step_s)
    return {"epoch_s": time.perf_counter() - began, "first_s": first, "steady_s": steady}
"""


def paired(ratios: list[float], seed: int = 0) -> dict[str, Any]:
    """The median of the rounds' ratios, and its seeded bootstrap 95 % interval over
    rounds from 2 rounds on (one round earns none)."""
    out: dict[str, Any] = {"ratio": statistics.median(ratios), "rounds": ratios}
    if len(ratios) >= 2:
        rng = random.Random(seed)
        boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
        out.update(ci_low=boots[50], ci_high=boots[1949])
    return out


def report(result: dict[str, Any], arms: list[str], out: Path | None) -> None:
    """The result as JSON on stdout (and in `out`), each arm's ratios in a line each
    on stderr."""
    text = json.dumps(result, indent=2)
    print(text)
    for arm in arms:
        for name, fig in result[arm].items():
            ci = f" [{fig['ci_low']:.3f}, {fig['ci_high']:.3f}]" if "ci_low" in fig else ""
            print(f"{arm:<15} {name:<20} {fig['ratio']:.3f}{ci}", file=sys.stderr)
    if out:
        out.write_text(text + "\n")
