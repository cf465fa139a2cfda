"""When should the adaptive plan look? Trials per arm spent and decisions made.

NOTE [sequential looks] in loaderprof/stats.py: the plan spends α over its looks
(α·t²), so a schedule with more looks pays for them at its cap. This benchmark
draws synthetic trial figures (one log-normal figure per trial, the unit the
plan tests) for effects like the bundled examples' and for effects on or near
the --min-gain line, and runs each look schedule on the same draws with
loaderprof's own Welch interval and stopping rule:

* blocks: 2, 4, 6 (a look after every A B B A block);
* loaderprof: 2, 3, 4, 6 (one extra look, one trial pair after the first);
* pairs: 2, 3, 4, 5, 6 (a look after every pair);
* fixed 5 and fixed 6 at 95 %, for reference;
* "+ memory trials": loaderprof's looks with each arm's spread pooled with two
  memory trials' figures (NOTE [spread of an arm]; drawn with the same spread, their
  level 1.2× the timing trials'), as the plan runs now. The epoch floor is left out
  (no epochs are drawn), so this errs slow.

For each it reports the mean trials per arm at the stop, how often it ended
undecided at the cap, and how often it decided wrongly (enable with a true
ratio above the line, or the reverse).

    python benchmarks/look_schedule.py --runs 4000 \\
        --out benchmarks/results/look_schedule.json

Pure computation, no processes: its figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from loaderprof.analysis.stats import arm_spread, log_ratio_test, look_points, spent_confidences
from loaderprof.analysis.verdict import settled
from loaderprof.config.run import RunConfig

MIN_GAIN = RunConfig.min_gain  # the default --min-gain
LINE = 1 - MIN_GAIN
CAP = 6

MEMORY_TRIALS = 2
MEMORY_SHIFT = 1.2
WITH_MEMORY = "loaderprof " + ",".join(map(str, look_points(CAP))) + " + memory trials"

SCHEDULES: dict[str, list[int]] = {
    "blocks 2,4,6": [2, 4, 6],
    "loaderprof " + ",".join(map(str, look_points(CAP))): look_points(CAP),
    "pairs 2,3,4,5,6": [2, 3, 4, 5, 6],
    "fixed 5": [5],
    "fixed 6": [6],
    WITH_MEMORY: look_points(CAP),
}

# name: (true persistent ÷ non-persistent ratio, log-SD of persistent trial
# figures, log-SD of non-persistent ones). The 16-fold rows have spreads of the
# lazy example's order, the persistent arm several times wider (one 6-trial run
# measured 0.14 and 0.023).
SCENARIOS: dict[str, tuple[float, float, float]] = {
    "16-fold saving, persistent spreads 3x": (0.057, 0.12, 0.035),
    "16-fold saving, noisy": (0.057, 0.25, 0.05),
    "40 % saving": (0.6, 0.1, 0.1),
    "25 % saving, spread as wide as it": (0.75, 0.15, 0.15),
    "7 % saving (just past the line)": (0.93, 0.05, 0.05),
    "no difference": (1.0, 0.1, 0.1),
    "3 % saving, spreads 5x apart": (0.97, 0.1, 0.02),
}


def run_schedule(
    a: np.ndarray,
    b: np.ndarray,
    points: list[int],
    memory: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[int, str]:
    """(trials per arm at the stop, 'enable' / 'keep_off' / 'undecided')."""
    ma, mb = memory if memory is not None else ([], [])
    for k, level in zip(points, spent_confidences(points), strict=True):
        fa, fb = list(a[:k]), list(b[:k])
        sa, sb = arm_spread(fa, list(ma)), arm_spread(fb, list(mb))
        assert sa is not None and sb is not None
        r, _ = log_ratio_test(fa, fb, sa, sb, level)
        if settled(r, MIN_GAIN):
            return k, "enable" if r.ci_high < LINE else "keep_off"
    return points[-1], "undecided"


def scenario(ratio: float, sd_a: float, sd_b: float, runs: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    draws = [
        (rng.lognormal(math.log(ratio), sd_a, CAP), rng.lognormal(0.0, sd_b, CAP))
        for _ in range(runs)
    ]
    # Drawn after the timing figures, so the other schedules see the same draws as before.
    shift = math.log(MEMORY_SHIFT)
    memory = [
        (
            rng.lognormal(math.log(ratio) + shift, sd_a, MEMORY_TRIALS),
            rng.lognormal(shift, sd_b, MEMORY_TRIALS),
        )
        for _ in range(runs)
    ]
    out: dict[str, Any] = {}
    for name, points in SCHEDULES.items():
        trials, undecided, wrong = 0, 0, 0
        for (a, b), mem in zip(draws, memory, strict=True):
            k, decision = run_schedule(a, b, points, mem if name == WITH_MEMORY else None)
            trials += k
            undecided += decision == "undecided"
            wrong += (decision == "enable" and ratio >= LINE) or (
                decision == "keep_off" and ratio < LINE
            )
        out[name] = {
            "mean_trials_per_arm": trials / runs,
            "undecided": undecided / runs,
            "wrong": wrong / runs,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    rows = []
    for i, (name, (ratio, sd_a, sd_b)) in enumerate(SCENARIOS.items()):
        res = scenario(ratio, sd_a, sd_b, args.runs, args.seed + i)
        rows.append(
            {
                "scenario": name,
                "ratio": ratio,
                "sd_persistent": sd_a,
                "sd_non_persistent": sd_b,
                "schedules": res,
            }
        )
        cells = "  ".join(
            f"{s}: {v['mean_trials_per_arm']:.2f} / {v['undecided']:.3f} / {v['wrong']:.3f}"
            for s, v in res.items()
        )
        print(f"{name}\n  (mean trials per arm / undecided / wrong)  {cells}")
    if args.out:
        payload = {
            "config": {"runs": args.runs, "seed": args.seed, "cap": CAP, "line": LINE},
            "rows": rows,
        }
        args.out.write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
