"""Does the adaptive plan (--trials auto) reach the fixed plan's verdict sooner?

See NOTE [sequential looks]. On each bundled example, side by side in one run, run
`compare` with the default adaptive plan and with a fixed plan of --fixed
trials per arm, alternating which goes first. Reports both walls, their ratio,
the trials each ran, both verdicts and whether they agree.

It also reports the floor no stopping rule can go below, from the fixed run's
own parts: its wall less every timing trial (from its start to the next trial's),
plus one (median) timing trial per arm, over its wall. What is left in it (the
memory trials, and the template's import of torch, which the first trial waits
for) is paid whatever the plan. The report's own time falls in the last trial's
span, which the floor replaces by a median trial: the floor leaves it out, so it
errs low. `first_look_ratio` is the same with two timing trials per arm: what
the adaptive plan costs when it settles at its first look.

    python benchmarks/adaptive_plan.py --rounds 2 --out benchmarks/results/adaptive_plan.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from loaderprof.comparing.session import run_compare
from loaderprof.config.build import build_config

EXAMPLES = (
    "loaderprof.examples:LazyResourceDataset",
    "loaderprof.examples:CheapDataset",
    "loaderprof.examples:CachedDecodeDataset",
)


def _run(flags: dict[str, Any]) -> dict[str, Any]:
    # Each trial's time from its start to the next one's: the whole cost of running
    # it (its kill, the wait for its processes, its assembly), not its wall alone.
    starts: list[tuple[float, Any]] = []

    def started(plan: Any, ev: Any) -> None:
        if ev is None:
            starts.append((time.monotonic(), plan))

    start = time.monotonic()
    report = run_compare(build_config(flags), on_progress=started)
    wall = time.monotonic() - start
    epochs = sum(e.wall_s for a in report.arms.values() for t in a.trials for e in t.epochs)
    plan = report.plan
    ends = [t for t, _ in starts[1:]] + [start + wall]
    timing: dict[str, list[float]] = {}
    memory_s = 0.0
    for (t0, trial), t1 in zip(starts, ends, strict=True):
        if trial.role == "timing":
            timing.setdefault(trial.arm, []).append(t1 - t0)
        elif trial.role == "memory":
            memory_s += t1 - t0
    untimed = wall - sum(sum(w) for w in timing.values())
    one_each = sum(statistics.median(w) for w in timing.values() if w)
    return {
        "floor_one_timing_trial_s": untimed + one_each,
        # What a plan that settled at its first look (two timing trials per arm) costs.
        "first_look_s": untimed + 2 * one_each,
        "memory_trials_s": memory_s,
        "rest_s": untimed - memory_s,
        "wall_s": wall,
        "epoch_walls_s": epochs,
        "wall_over_epochs": wall / epochs if epochs else None,
        "verdict": report.recommendation,
        "decided": report.verdict.decided if report.verdict else None,
        "trials_per_arm": plan.trials_per_arm if plan else None,
        "stopped": plan.stopped if plan else None,
        "steady_ratio": vars(report.comparison.steady_epoch_ratio)
        if report.comparison and report.comparison.steady_epoch_ratio
        else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixed", type=int, default=5, help="trials per arm of the fixed plan")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1, help="runs of every example")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.rounds < 1 or a.fixed < 1 or a.epochs < 2:
        ap.error("--rounds and --fixed must be at least 1, --epochs at least 2")
    rows = []
    for i, (rnd, dataset) in enumerate((r, d) for r in range(a.rounds) for d in EXAMPLES):
        base = {"dataset": dataset, "epochs": a.epochs}
        runs = [("adaptive", base), ("fixed", {**base, "trials": a.fixed})]
        if i % 2:
            runs.reverse()
        out = {name: _run(flags) for name, flags in runs}
        row = {
            "dataset": dataset,
            "round": rnd,
            **out,
            "wall_ratio_adaptive_over_fixed": out["adaptive"]["wall_s"] / out["fixed"]["wall_s"],
            "floor_ratio": out["fixed"]["floor_one_timing_trial_s"] / out["fixed"]["wall_s"],
            "first_look_ratio": out["fixed"]["first_look_s"] / out["fixed"]["wall_s"],
            "same_verdict": out["adaptive"]["verdict"] == out["fixed"]["verdict"],
        }
        rows.append(row)
        print(
            f"{dataset.split(':')[1]:<22} adaptive {out['adaptive']['wall_s']:5.1f} s "
            f"({out['adaptive']['trials_per_arm']} trials/arm, {out['adaptive']['verdict']}) · "
            f"fixed {out['fixed']['wall_s']:5.1f} s ({out['fixed']['verdict']}) · "
            f"ratio {row['wall_ratio_adaptive_over_fixed']:.2f} (first look "
            f"{row['first_look_ratio']:.2f}, floor {row['floor_ratio']:.2f})",
            file=sys.stderr,
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps({"config": vars(a) | {"out": str(a.out)}, "rows": rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
