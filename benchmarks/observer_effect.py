"""How much does loaderprof disturb what it measures, and what does a verdict cost?

Measured side by side in one run, in interleaved rounds, on this machine:

1. Sampler observer effect: median steady epoch of the timing trials with the
   parent's sampler on (--sample-interval, default 50 ms; held still while timed
   epochs run, see NOTE [timing and memory trials]) ÷ with it off (0), per arm, and
   the sampler's duty cycle in timing and in memory trials.
2. Probe effect: loaderprof's measured steady epoch with sampling off ÷ the same
   DataLoader timed by a plain loop with no probes, in a fresh interpreter.
3. Time-to-verdict overhead: compare's total wall ÷ the sum of its measured
   epoch walls (trial start, dataset build, pauses), with trials forked from the
   template (the default) and with --fresh-interpreter.

    python benchmarks/observer_effect.py --rounds 3 --out benchmarks/results/observer_effect.json

Ratios are the median of the rounds' own ratios (each round's median steady epoch,
one setting ÷ the other, run side by side), with a seeded bootstrap 95 % interval
over rounds: the round is the unit, as the trial is in loaderprof's own statistics
(NOTE [trial is the unit]); pooling epochs made intervals too narrow.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from loaderprof.analysis.summary import steady_walls
from loaderprof.comparing.session import run_compare
from loaderprof.config.build import build_config
from loaderprof.model.results import Report

DATASET = "loaderprof.examples:CheapDataset"

RAW_LOOP = """
import json, sys, time, torch
from torch.utils.data import DataLoader
from loaderprof.examples import CheapDataset
n, workers, batch, epochs, persistent = map(int, sys.argv[1:6])
idle_s = float(sys.argv[6])
torch.manual_seed(0)
loader = DataLoader(CheapDataset(n=n), batch_size=batch, num_workers=workers,
                    persistent_workers=bool(persistent))
walls = []
for _ in range(epochs):
    t = time.monotonic()
    for _b in loader:
        pass
    walls.append(time.monotonic() - t)
    time.sleep(idle_s)  # the same untimed pause loaderprof takes between epochs
print(json.dumps(walls))
"""


def steady(report: Report, arm: str) -> list[float]:
    """The steady epochs the statistics use: timing trials only."""
    return steady_walls(report.arms[arm].trials)


def duty(report: Report, role: str) -> list[float]:
    return [
        t.sampler.duty_cycle
        for arm in report.arms.values()
        for t in arm.trials
        if t.role == role and t.sampler is not None
    ]


def readings_in_timed_epochs(report: Report) -> tuple[int, int]:
    """(sampler readings taken inside the timing trials' steady epochs, those epochs):
    NOTE [timing and memory trials] says the first is 0, by construction."""
    readings = epochs = 0
    for arm in report.arms.values():
        for t in arm.trials:
            if t.role != "timing":
                continue
            steady = [(e.start_s, e.start_s + e.wall_s) for e in t.epochs if e.epoch > 1]
            epochs += len(steady)
            readings += sum(
                1 for line in t.timeline for ts in line.t_s if any(a < ts < b for a, b in steady)
            )
    return readings, epochs


def verdict_overhead(report: Report, total: float) -> float:
    epoch_sum = sum(e.wall_s for arm in report.arms.values() for t in arm.trials for e in t.epochs)
    return total / epoch_sum


def raw_steady(
    n: int, workers: int, batch: int, epochs: int, persistent: bool, idle_s: float
) -> list[float]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            RAW_LOOP,
            str(n),
            str(workers),
            str(batch),
            str(epochs),
            str(int(persistent)),
            str(idle_s),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    walls: list[float] = json.loads(out.stdout)
    return walls[1:]


def paired_ratio(a: list[float], b: list[float], seed: int) -> dict[str, float]:
    """The median of the per-round ratios a/b, with a bootstrap interval over rounds."""
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(4000))
    return {
        "value": statistics.median(ratios),
        "ci_low": boots[int(0.025 * len(boots))],
        "ci_high": boots[int(0.975 * len(boots)) - 1],
    }


def fmt_boot_interval(r: Any) -> str:
    return "–" if r is None else f"{r['value']:.3f} [{r['ci_low']:.3f}–{r['ci_high']:.3f}]"


def add_workload_args(ap: argparse.ArgumentParser) -> None:
    """The workload both observer benchmarks time (observer_interleaved.py too)."""
    ap.add_argument("--n", type=int, default=8192, help="samples per epoch")
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--sample-interval", type=float, default=50.0)
    ap.add_argument("--out", type=Path, default=None)


def workload(a: argparse.Namespace, *, trials: int) -> dict[str, Any]:
    return {
        "dataset": DATASET,
        "args": {"n": a.n},
        "epochs": a.epochs,
        "num_workers": a.num_workers,
        "batch_size": a.batch_size,
        "trials": trials,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6)
    add_workload_args(ap)
    ap.add_argument("--trials", type=int, default=3, help="timing trials per arm (fixed plan)")
    a = ap.parse_args()
    common = workload(a, trials=a.trials)
    # Defaults in both: timing trials take no pause after their epochs (only memory
    # trials do), and with sampling off the pause is 3 × 0 ms; the plain loop takes
    # none either. A pause would change the epochs after it (a 150 ms one measured
    # them 25 % slower here), so all three run their timed epochs back to back.
    idle = 0.0
    cfg_on = build_config({**common, "sample_interval_ms": a.sample_interval})
    cfg_off = build_config({**common, "sample_interval_ms": 0.0})
    cfg_fresh = build_config(
        {**common, "sample_interval_ms": a.sample_interval, "fresh_interpreter": True}
    )

    on: dict[str, list[float]] = {"persistent": [], "non_persistent": []}
    off: dict[str, list[float]] = {"persistent": [], "non_persistent": []}
    raw: dict[str, list[float]] = {"persistent": [], "non_persistent": []}
    overhead: list[float] = []
    overhead_fresh: list[float] = []
    duty_cycles: dict[str, list[float]] = {"timing": [], "memory": []}
    in_timed = [0, 0]
    for r in range(a.rounds):
        # Alternate which goes first so drift falls on both.
        order = [("on", cfg_on), ("off", cfg_off)]
        if r % 2:
            order.reverse()
        for label, cfg in order:
            start = time.monotonic()
            report = run_compare(cfg)
            total = time.monotonic() - start
            if label == "on":
                overhead.append(verdict_overhead(report, total))
                for role in duty_cycles:
                    duty_cycles[role].extend(duty(report, role))
                readings, epochs = readings_in_timed_epochs(report)
                in_timed[0] += readings
                in_timed[1] += epochs
            for arm in on:
                (on if label == "on" else off)[arm].append(statistics.median(steady(report, arm)))
        start = time.monotonic()
        report = run_compare(cfg_fresh)
        overhead_fresh.append(verdict_overhead(report, time.monotonic() - start))
        for arm in raw:
            walls = raw_steady(
                a.n, a.num_workers, a.batch_size, a.epochs, arm == "persistent", idle / 1000
            )
            raw[arm].append(statistics.median(walls))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    results: dict[str, Any] = {"config": vars(a) | {"out": str(a.out)}, "arms": {}}
    print(
        f"\nloaderprof observer effect · {DATASET} n={a.n} · {a.num_workers} workers · "
        f"batch {a.batch_size} · {a.epochs} epochs · {a.rounds} rounds\n"
    )
    print(f"{'arm':<16}{'sampling on ÷ off':>28}{'probes ÷ plain loop':>30}")
    for arm in on:
        s = paired_ratio(on[arm], off[arm], seed=1)
        p = paired_ratio(off[arm], raw[arm], seed=2)
        print(f"{arm:<16}{fmt_boot_interval(s):>28}{fmt_boot_interval(p):>30}")
        results["arms"][arm] = {
            "sampling_ratio": s,
            "probe_ratio": p,
            # Each round's median steady epoch, per setting.
            "round_medians_s": {
                "sampling_on": on[arm],
                "sampling_off": off[arm],
                "plain_loop": raw[arm],
            },
            "steady_median_s": {
                "sampling_on": statistics.median(on[arm]),
                "sampling_off": statistics.median(off[arm]),
                "plain_loop": statistics.median(raw[arm]),
            },
            "rounds": len(on[arm]),
        }
    med = statistics.median(overhead)
    print(
        f"\ntime-to-verdict: compare wall ÷ measured epoch walls = {med:.2f} "
        f"(min {min(overhead):.2f}, max {max(overhead):.2f}, n={len(overhead)})"
    )
    fresh = statistics.median(overhead_fresh)
    print(f"  with --fresh-interpreter: {fresh:.2f} (n={len(overhead_fresh)})")
    for role, values in duty_cycles.items():
        if values:
            print(f"sampler duty cycle, {role} trials: median {statistics.median(values):.3f}")
    results["time_to_verdict_ratio"] = {
        "median": med,
        "min": min(overhead),
        "max": max(overhead),
        "n": len(overhead),
        "fresh_interpreter_median": fresh,
    }
    print(f"sampler readings inside timed steady epochs: {in_timed[0]} in {in_timed[1]} epochs")
    results["readings_in_timed_epochs"] = {"readings": in_timed[0], "epochs": in_timed[1]}
    results["sampler_duty_cycle"] = {
        role: statistics.median(v) if v else None for role, v in duty_cycles.items()
    }
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
