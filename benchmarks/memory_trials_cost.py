"""What a second memory trial per arm costs the time to a verdict.

NOTE [earned intervals] in loaderprof/results.py: two memory trials per arm give
every memory figure a spread of its own. Memory trials are not timed, so they
cost wall time only; this measures compare's total wall ÷ the sum of its
measured epoch walls (the time-to-verdict ratio of benchmarks/observer_effect.py)
with --memory-trials 1 and 2, side by side, alternating, on the same data.

    python benchmarks/memory_trials_cost.py --rounds 3 \
        --out benchmarks/results/memory_trials_cost.json

By default CheapDataset at n=12288 (about 0.4 s epochs on the 2-core machine),
6 epochs, 3 timing trials per arm, as in the issue that asked for the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import loaderprof


def _ratio(report: Any) -> tuple[float, float]:
    epochs = sum(e.wall_s for a in report.arms.values() for t in a.trials for e in t.epochs)
    return report.wall_s / epochs, report.wall_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=12288)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("memory_trials_cost.py: --rounds must be ≥ 1")
    rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for r in range(a.rounds):
        order = (1, 2) if r % 2 == 0 else (2, 1)
        for count in order:
            report = loaderprof.compare(
                "loaderprof.examples:CheapDataset",
                args={"n": a.n},
                epochs=a.epochs,
                trials=a.trials,
                num_workers=2,
                memory_trials=count,
            )
            ratio, wall = _ratio(report)
            rows[count].append({"ratio": ratio, "wall_s": wall})
            print(f"round {r + 1}, --memory-trials {count}: wall {wall:.1f} s, ratio {ratio:.2f}")
    summary = {
        str(k): {
            "ratio_median": statistics.median(x["ratio"] for x in v),
            "ratio_min": min(x["ratio"] for x in v),
            "ratio_max": max(x["ratio"] for x in v),
            "wall_median_s": statistics.median(x["wall_s"] for x in v),
        }
        for k, v in rows.items()
    }
    for k, s in summary.items():
        print(
            f"--memory-trials {k}: ratio {s['ratio_median']:.2f} "
            f"({s['ratio_min']:.2f}–{s['ratio_max']:.2f}), wall {s['wall_median_s']:.1f} s"
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps(
                {"args": vars(a) | {"out": str(a.out)}, "rounds": rows, "summary": summary},
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
