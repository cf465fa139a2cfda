"""What does compare's adaptive plan cost and decide on `compare -- COMMAND`?

See NOTE [command arms]. Side by side in one run, each round runs `loaderprof compare
-- python script.py` on command_compare.py's script (a plain loop whose workers open
a 0.2 s resource lazily, a 10 ms training step per batch) twice: with the default
plan (`--trials auto`: compare's looks at 2, 3, 4, 6 trials per arm, stopping at the
first look whose verdict is decided) and with `--trials 2` (fixed), the adaptive
one first in even rounds and last in odd ones, `--seed` the round. Per round:

* where the adaptive plan stopped (trials per arm, looks taken, settled) and its
  verdict;
* wall_ratio: its wall ÷ the fixed plan's (what deciding with compare's error
  control costs over 4 trials);
* saving_ratio: its saving per steady epoch ÷ the fixed plan's.

    python benchmarks/command_plan.py --rounds 6 --out benchmarks/results/command_plan.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from command_compare import SCRIPT


def _run(tmp: Path, name: str, r: int, epochs: int, plan: list[str]) -> dict[str, Any]:
    out = tmp / f"{name}{r}.json"
    cmd = [sys.executable, "-m", "loaderprof", "compare", "-q", "--epochs", str(epochs)]
    cmd += [*plan, "--seed", str(r), "--json", str(out), "--", sys.executable]
    cmd += [str(tmp / "train.py"), str(tmp / f"{name}{r}.txt"), "1000", "0"]
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    report = json.loads(out.read_text())
    return {
        "wall_s": wall,
        "trials_per_arm": report["plan"]["trials_per_arm"],
        "looks_taken": report["plan"]["looks_taken"],
        "settled": report["plan"]["settled"],
        "confidence": report["plan"]["confidence"],
        "saving_s": report["saving"]["saved_s"],
        "ratio": report["saving"]["ratio"]["value"],
        "verdict": report["verdict"]["recommendation"],
    }


def _round(tmp: Path, r: int, epochs: int) -> dict[str, Any]:
    (tmp / "train.py").write_text(SCRIPT)
    runs: dict[str, dict[str, Any]] = {}
    order = [("auto", []), ("fixed", ["--trials", "2"])]
    for name, plan in order if r % 2 == 0 else order[::-1]:
        runs[name] = _run(tmp, name, r, epochs, plan)
    auto, fixed = runs["auto"], runs["fixed"]
    return {
        "round": r,
        "auto": auto,
        "fixed": fixed,
        "wall_ratio": auto["wall_s"] / fixed["wall_s"],
        "saving_ratio": auto["saving_s"] / fixed["saving_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="lp-cmd-plan-") as d:
        for r in range(args.rounds):
            rounds.append(_round(Path(d), r, args.epochs))
            print(json.dumps(rounds[-1]), file=sys.stderr)
    stopped = [x["auto"]["trials_per_arm"] for x in rounds]
    result = {
        "epochs": args.epochs,
        "rounds": rounds,
        "auto_trials_per_arm": {str(k): stopped.count(k) for k in sorted(set(stopped))},
        "auto_settled": sum(x["auto"]["settled"] for x in rounds),
        "auto_verdicts": [x["auto"]["verdict"] for x in rounds],
        "wall_ratio_median": statistics.median(x["wall_ratio"] for x in rounds),
        "wall_ratio_range": [
            min(x["wall_ratio"] for x in rounds),
            max(x["wall_ratio"] for x in rounds),
        ],
        "saving_ratio_median": statistics.median(x["saving_ratio"] for x in rounds),
        "saving_ratio_range": [
            min(x["saving_ratio"] for x in rounds),
            max(x["saving_ratio"] for x in rounds),
        ],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
