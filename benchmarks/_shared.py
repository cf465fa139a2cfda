"""What the data-wait benchmarks share: the head of the training script (its Dataset and
its own clock, from loaderprof.examples; the script runs from a scratch folder), and
how a ratio measured once per round is summed up and reported."""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

# A Dataset that opens a 0.2 s resource lazily in each worker and reads each sample
# for 3 ms, and the training loop's own clock for its waits, as NOTE [data wait] counts
# them (`loaderprof.examples.timed_epoch`): the head of each benchmark's script.
LAZY_TIMED_LOOP = """
import json, sys
from torch.utils.data import DataLoader
from loaderprof.examples import LazyResourceDataset, timed_epoch


def Slow(n=96):
    return LazyResourceDataset(n=n, dim=16, read_ms=3)
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
