"""Do `compare -- COMMAND --baseline` gates cry wolf, and do they catch a regression?

See NOTE [command baseline]. Side by side in one run, each round saves a baseline of a
training script (a plain loop whose 2 workers open a 0.2 s resource lazily, a 10 ms
training step per batch) with `--save-baseline`, then runs, in an order that
alternates between rounds, the same script unchanged and the script with its
training step doubled (20 ms: a regression of the persistent arm's steady epoch, by
construction), each with `--baseline` and the same four gates at 10 %:

* steady_epoch_ratio:+10%, persistent.steady_epoch_s:+10%,
  non_persistent.steady_epoch_s:+10%, saved_s_per_epoch:-10%.

Reported: the gates that failed on unchanged runs (false alarms: target 0), the
regressed runs whose persistent.steady_epoch_s:+10% gate failed (target: all), and
each gate's new ÷ baseline per run.

    python benchmarks/command_baseline.py --rounds 3 --out benchmarks/results/command_baseline.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SCRIPT = """
import os, sys, time
from torch.utils.data import DataLoader

# Its workers open a 0.2 s resource lazily: what persistence keeps.
from loaderprof.examples import LazyResourceDataset

if __name__ == "__main__":
    step = float(os.environ.get("STEP_S", "0.01"))
    loader = DataLoader(LazyResourceDataset(n=64, dim=4), batch_size=8, num_workers=2)
    for epoch in range(int(sys.argv[1])):
        for batch in loader:
            time.sleep(step)
"""
GATES = (
    "steady_epoch_ratio:+10%",
    "persistent.steady_epoch_s:+10%",
    "non_persistent.steady_epoch_s:+10%",
    "saved_s_per_epoch:-10%",
)
REGRESSION = "persistent.steady_epoch_s:+10%"


def _compare(script: Path, out: Path, step_s: float, *args: str, trials: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "loaderprof", "compare", "-q", "--trials", str(trials)]
    cmd += ["--epochs", "3", *args, "--json", str(out), "--", sys.executable, str(script), "5"]
    env = {**os.environ, "STEP_S": str(step_s)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"compare failed ({done.returncode}): {done.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _gates(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        g["gate"]: {"status": g["status"], "value": g["value"], "ci": [g["ci_low"], g["ci_high"]]}
        for g in report["gates"]
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        script = d / "train.py"
        script.write_text(SCRIPT)
        gate_args = [a for g in GATES for a in ("--fail-on", g)]
        for r in range(args.rounds):
            base = d / f"base{r}.json"
            _compare(
                script, d / "saved.json", 0.01, "--save-baseline", str(base), trials=args.trials
            )
            runs = {}
            order = [("unchanged", 0.01), ("regressed", 0.02)]
            for name, step in order if r % 2 == 0 else order[::-1]:
                rep = _compare(
                    script,
                    d / f"{name}.json",
                    step,
                    "--baseline",
                    str(base),
                    *gate_args,
                    trials=args.trials,
                )
                runs[name] = _gates(rep)
            rounds.append(runs)
            print(json.dumps({"round": r, **runs}), flush=True)
    false_alarms = sum(g["status"] == "fail" for run in rounds for g in run["unchanged"].values())
    caught = sum(run["regressed"][REGRESSION]["status"] == "fail" for run in rounds)
    unchanged = {
        g: statistics.median(run["unchanged"][g]["value"] for run in rounds) for g in GATES
    }
    regressed = statistics.median(run["regressed"][REGRESSION]["value"] for run in rounds)
    summary = {
        "rounds": args.rounds,
        "trials_per_arm": args.trials,
        "false_alarms": false_alarms,
        "unchanged_gates_judged": len(GATES) * args.rounds,
        "regressions_caught": caught,
        "median_new_over_baseline_unchanged": unchanged,
        "median_new_over_baseline_regressed": regressed,
        "rounds_detail": rounds,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rounds_detail"}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
