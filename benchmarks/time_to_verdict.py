"""How long does a verdict take, and does --max-batches give the same one?

See NOTE [short epochs]. On a Dataset with long epochs and a known start-up cost, run
`compare` twice, side by side in one run: with full epochs, and with epochs cut
to --max-batches and projected to full length. Reports each run's wall, the
ratio of the walls, both verdicts, and the full and projected steady epochs.

    python benchmarks/time_to_verdict.py --out benchmarks/results/time_to_verdict.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from loaderprof.comparing.session import run_compare
from loaderprof.config.build import build_config

DATASET = f"{Path(__file__).resolve()}:SlowEpochDataset"


class SlowEpochDataset(Dataset[torch.Tensor]):
    """Every item costs `item_s`; each fresh worker opens a resource for `open_cost_s`
    at its first item (what persistence saves, once per epoch)."""

    def __init__(self, n: int = 640, item_s: float = 0.01, open_cost_s: float = 0.3) -> None:
        self.n, self.item_s, self.open_cost_s = n, item_s, open_cost_s
        self._owner: int | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if self._owner != os.getpid():
            time.sleep(self.open_cost_s)
            self._owner = os.getpid()
        time.sleep(self.item_s)
        return torch.full((16,), float(index))


def _run(cfg_flags: dict[str, Any]) -> dict[str, Any]:
    cfg = build_config(cfg_flags)
    start = time.monotonic()
    report = run_compare(cfg)
    wall = time.monotonic() - start
    c = report.comparison
    proj = report.projection
    steady = {
        name: (arm.summary.steady_epoch_s.median if arm.summary.steady_epoch_s else None)
        for name, arm in report.arms.items()
    }
    return {
        "wall_s": wall,
        "trials_per_arm": report.plan.trials_per_arm if report.plan else None,
        "stopped": report.plan.stopped if report.plan else None,
        "verdict": report.verdict.recommendation if report.verdict else None,
        "headline": report.verdict.headline if report.verdict else None,
        "steady_ratio": vars(c.steady_epoch_ratio) if c and c.steady_epoch_ratio else None,
        "saved_s_per_epoch": c.saved_s_per_epoch if c else None,
        "measured_steady_epoch_s": steady,
        "projected_steady_epoch_s": (
            {k: (v.median if v else None) for k, v in proj.steady_epoch_s.items()} if proj else None
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=640)
    ap.add_argument("--item-s", type=float, default=0.01)
    ap.add_argument("--open-cost-s", type=float, default=0.3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-batches", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--trials", default="auto", help="'auto' (the default plan) or N")
    ap.add_argument("--cut-only", action="store_true", help="skip the full-epoch run")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    common = {
        "dataset": DATASET,
        "args": {"n": a.n, "item_s": a.item_s, "open_cost_s": a.open_cost_s},
        "epochs": a.epochs,
        "trials": a.trials,
        "num_workers": 2,
        "batch_size": a.batch_size,
    }
    results: dict[str, Any] = {"config": vars(a) | {"out": str(a.out)}}
    # Cut first, then full: what a user would compare.
    results["cut"] = _run({**common, "max_batches": a.max_batches})
    print("cut run done", file=sys.stderr)
    runs = ["cut"]
    if not a.cut_only:
        results["full"] = _run(common)
        results["wall_ratio_cut_over_full"] = results["cut"]["wall_s"] / results["full"]["wall_s"]
        runs.append("full")
    for k in runs:
        r = results[k]
        print(
            f"{k:<5} wall {r['wall_s']:6.1f} s · verdict {r['verdict']} · "
            f"ratio {r['steady_ratio'] and round(r['steady_ratio']['value'], 3)} · "
            f"measured steady {r['measured_steady_epoch_s']} · "
            f"projected {r['projected_steady_epoch_s']}"
        )
    if "full" in results:
        print(f"wall cut ÷ full = {results['wall_ratio_cut_over_full']:.2f}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
