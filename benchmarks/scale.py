"""Does the sampler keep up with many workers?

At --num-workers 32 a non-persistent run starts 32 short-lived workers every
epoch. This runs `compare` once and reports, from the memory trials (sampled
deeply throughout): how many worker processes got a USS figure, and the
sampler's 95th-percentile gap between ticks against its nominal interval.

    python benchmarks/scale.py --num-workers 32 --out benchmarks/results/scale.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loaderprof.comparing.session import run_compare
from loaderprof.config.build import build_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-workers", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    cfg = build_config(
        {
            "dataset": "loaderprof.examples:CheapDataset",
            "args": {"n": a.n},
            "num_workers": a.num_workers,
            "epochs": a.epochs,
            "trials": 2,
            "batch_size": 8,
        }
    )
    report = run_compare(cfg)
    out: dict[str, object] = {"config": vars(a) | {"out": str(a.out)}, "arms": {}}
    for name, arm in report.arms.items():
        memory = [t for t in arm.trials if t.role == "memory"]
        workers = [w for t in memory for w in t.workers]
        with_uss = [w for w in workers if w.peak_uss_bytes is not None]
        gaps = [t.sampler.tick_gap_p95_s for t in memory if t.sampler and t.sampler.tick_gap_p95_s]
        row = {
            "worker_processes": len(workers),
            "with_peak_uss": len(with_uss),
            "tick_gap_p95_s": max(gaps) if gaps else None,
            "interval_s": cfg.sample_interval_ms / 1000,
            "targeted_ticks": sum(t.sampler.targeted_ticks for t in memory if t.sampler),
            # Every process must be read in each pause for the idle figure to exist.
            "idle_workers_uss_bytes": (
                arm.summary.idle_workers_uss_bytes.median
                if arm.summary.idle_workers_uss_bytes
                else None
            ),
            "peak_total_pss_bytes": (
                arm.summary.peak_total_pss_bytes.median
                if arm.summary.peak_total_pss_bytes
                else None
            ),
        }
        out["arms"][name] = row  # type: ignore[index]
        print(
            f"{name:<15} workers {row['worker_processes']:>4}, with peak USS "
            f"{row['with_peak_uss']:>4}; tick gap p95 {row['tick_gap_p95_s']} s "
            f"(nominal {row['interval_s']} s); idle workers USS {row['idle_workers_uss_bytes']}",
            file=sys.stderr,
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
