"""Does the sampler slow the epochs it times? Sampling on and off, trial by trial.

`observer_effect.py` compares whole compare runs with sampling on and off, a
minute apart, and this machine drifts by far more than the effect it looks for
between runs that far apart. Here the two settings alternate trial by trial in
one scheduler session, through the same warm template (NOTE [template]):

    per arm, pairs of timing trials: on off | off on | on off | ...

A timing trial with sampling on is what `compare` runs by default (the parent's
sampler reads the set-up, then holds still while the epochs run: NOTE [timing and
memory trials]); with sampling off there is no sampler at all. Each pair's ratio
is its two trials' median steady epochs, on ÷ off, taken seconds apart; the
figure is the median of the pairs' ratios with a seeded bootstrap 95 % interval
over pairs (the pair is the unit).

    python benchmarks/observer_interleaved.py --pairs 12 \\
        --out benchmarks/results/observer_interleaved.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from typing import Any

from observer_effect import add_workload_args, workload

from loaderprof.config import build_config
from loaderprof.runner import TrialPlan
from loaderprof.scheduler import Scheduled, run_trials

ARMS = (("persistent", True), ("non_persistent", False))


def paired(ratios: list[float], seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(4000))
    return {"value": statistics.median(ratios), "ci_low": boots[100], "ci_high": boots[3899]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=12, help="on/off pairs per arm")
    ap.add_argument("--epochs", type=int, default=6)
    add_workload_args(ap)
    a = ap.parse_args()
    common = workload(a, trials=1)
    cfgs = {
        "on": build_config({**common, "sample_interval_ms": a.sample_interval}),
        "off": build_config({**common, "sample_interval_ms": 0.0}),
    }
    labels: list[tuple[str, str]] = []
    items = []
    for i in range(a.pairs):
        for arm, persistent in ARMS:
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for label in order:
                labels.append((arm, label))
                plan = TrialPlan(arm, persistent, len(labels), role="timing")
                items.append(Scheduled(cfgs[label], plan))
    outcome = run_trials(items)
    trials = outcome.trials
    if len(trials) != len(items) or not all(t.complete for t in trials):
        sys.exit("a trial failed or was stopped: no figure")
    medians: dict[str, dict[str, list[float]]] = {arm: {"on": [], "off": []} for arm, _ in ARMS}
    for (arm, label), t in zip(labels, trials, strict=True):
        medians[arm][label].append(statistics.median(e.wall_s for e in t.epochs[1:]))
    result: dict[str, Any] = {"config": vars(a) | {"out": str(a.out)}, "arms": {}}
    for arm, _ in ARMS:
        ratios = [x / y for x, y in zip(medians[arm]["on"], medians[arm]["off"], strict=True)]
        r = paired(ratios)
        result["arms"][arm] = {
            "sampling_on_over_off": r,
            "pair_ratios": ratios,
            "steady_median_s": medians[arm],
        }
        print(
            f"{arm:<16} sampling on ÷ off {r['value']:.3f} [{r['ci_low']:.3f}–{r['ci_high']:.3f}]"
            f" over {len(ratios)} pairs",
            file=sys.stderr,
        )
    if a.out:
        a.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
