"""What do the state checks (NOTE [stale worker state]) cost the epochs they time?

Measured side by side in one run, in interleaved rounds: the median steady epoch
with --state-checks on ÷ with it off, per arm, on a Dataset that carries the kind
of state real ones do (a list of 8,192 file names, a label array, a numpy
Generator, a transform config, the epoch). Sampling is off in both, so the
ratio is the fingerprinting alone: the main process's is outside the timed
epoch, each worker's runs at its first fetch of every epoch, inside it.

    python benchmarks/state_overhead.py --rounds 6 --out benchmarks/results/state_overhead.json

Ratios carry a seeded bootstrap 95 % interval over rounds × steady epochs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from loaderprof.analysis.stats import bootstrap_ratio
from loaderprof.comparing.session import run_compare
from loaderprof.config.build import build_config
from loaderprof.model.results import Report

DATASET = f"{Path(__file__).resolve()}:StatefulDataset"


class StatefulDataset(Dataset[torch.Tensor]):
    """Cheap samples, realistic state: the fingerprint is a visible share of an epoch."""

    def __init__(self, n: int = 8192) -> None:
        self.n = n
        self.files = [f"/data/shard-{i // 512:03d}/sample-{i:06d}.jpg" for i in range(n)]
        self.labels = np.arange(n, dtype=np.int64) % 1000
        self.rng = np.random.default_rng(0)
        self.transform = {"size": 224, "flip": 0.5, "mean": [0.485, 0.456, 0.406]}
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((64,), float(self.labels[index]))


def steady(report: Report, arm: str) -> list[float]:
    return [e.wall_s for t in report.arms[arm].trials for e in t.epochs if e.epoch >= 2]


def direct_shares(report: Report, arm: str) -> list[float]:
    """Per steady epoch: the slowest worker's fingerprinting time ÷ the epoch's wall
    (workers run in parallel, so the epoch waits at most for the slowest one)."""
    out = []
    for t in report.arms[arm].trials:
        for e in t.epochs:
            took = [
                s.took_s
                for s in t.dataset_states
                if s.role == "worker" and s.epoch == e.epoch and s.took_s is not None
            ]
            if e.epoch >= 2 and took:
                out.append(max(took) / e.wall_s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    common = {
        "dataset": DATASET,
        "epochs": a.epochs,
        "num_workers": a.num_workers,
        "batch_size": a.batch_size,
        "trials": 1,
        "sample_interval_ms": 0.0,
        "idle_ms": 150.0,
    }
    cfgs = {
        "on": build_config({**common, "state_checks": True}),
        "off": build_config({**common, "state_checks": False}),
    }
    walls: dict[str, dict[str, list[float]]] = {
        k: {"persistent": [], "non_persistent": []} for k in cfgs
    }
    shares: dict[str, list[float]] = {"persistent": [], "non_persistent": []}
    start = time.monotonic()
    for r in range(a.rounds):
        # Alternate which goes first so drift falls on both.
        for label in ("on", "off") if r % 2 == 0 else ("off", "on"):
            report = run_compare(cfgs[label])
            for arm in walls[label]:
                walls[label][arm].extend(steady(report, arm))
                if label == "on":
                    shares[arm].extend(direct_shares(report, arm))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    results: dict[str, Any] = {
        "config": vars(a) | {"out": str(a.out)},
        "wall_s": time.monotonic() - start,
        "arms": {},
    }
    print(f"\nstate checks · {a.num_workers} workers · {a.rounds} rounds")
    print(f"{'arm':<16}{'steady epochs on ÷ off':>26}{'fingerprint ÷ epoch (direct)':>34}")
    for arm in ("persistent", "non_persistent"):
        r = bootstrap_ratio(walls["on"][arm], walls["off"][arm], seed=1)
        assert r is not None
        share = statistics.median(shares[arm])
        print(
            f"{arm:<16}{r.value:>10.3f} [{r.ci_low:.3f}–{r.ci_high:.3f}]"
            f"{share * 100:>20.2f} % (max {max(shares[arm]) * 100:.2f} %)"
        )
        results["arms"][arm] = {
            "ratio": vars(r),
            "direct_share": {"median": share, "max": max(shares[arm]), "n": len(shares[arm])},
            "steady_median_s": {k: statistics.median(walls[k][arm]) for k in walls},
            "n": len(walls["on"][arm]),
        }
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
