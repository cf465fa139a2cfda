"""Is `compare -- COMMAND` right about the user's own clock, and what does it cost?

See NOTE [command arms]. Side by side in one run, each round runs a training script
(a plain loop whose workers open a 0.2 s resource lazily, a 10 ms training step per
batch) bare, without loaderprof, with persistence on and off (A B B A, the script's
own flag), and `loaderprof compare --trials T --epochs E -- python script.py`, the
bare runs first in even rounds and last in odd ones.
The script times its own epochs. Two ratios per round:

* saving_ratio: compare's saving per steady epoch ÷ the same saving by the script's
  own clock in the bare runs (median steady epoch off − on). Target 0.9–1.1.
* saving_ratio_hooked_clock: the same saving ÷ the script's own clock inside compare's
  trials: how well the hook's stamps read the script's clock, apart from what the
  hook adds to every worker start (its probe), which the first ratio includes.
* wall_ratio: compare's wall ÷ the bare runs' walls for its trials (each bare run
  runs exactly E epochs and exits by itself; the sum over the same arms). Target ≤ 1.15.

    python benchmarks/command_compare.py --rounds 3 --out benchmarks/results/command_compare.json
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

SCRIPT = """
import sys, time
import torch
from torch.utils.data import DataLoader

# Its workers open a 0.2 s resource lazily: what persistence keeps.
from loaderprof.examples import LazyResourceDataset


if __name__ == "__main__":
    log, epochs, persistent = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    data = LazyResourceDataset(n=128, dim=4)
    loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=persistent)
    for epoch in range(epochs):
        t = time.perf_counter()
        for batch in loader:
            time.sleep(0.01)
        with open(log, "a") as f:
            f.write(f"{loader.persistent_workers} {epoch} {time.perf_counter() - t}\\n")
"""


def _bare(script: Path, log: Path, epochs: int, persistent: bool) -> float:
    start = time.monotonic()
    cmd = [sys.executable, str(script), str(log), str(epochs), "1" if persistent else "0"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def _steady(log: Path) -> dict[str, float]:
    rows = [ln.split() for ln in log.read_text().splitlines()]
    return {
        arm: statistics.median(float(w) for p, e, w in rows if p == arm and int(e) >= 1)
        for arm in ("True", "False")
    }


def _round(tmp: Path, r: int, epochs: int, trials: int) -> dict[str, Any]:
    script = tmp / "train.py"
    script.write_text(SCRIPT)
    bare_log = tmp / f"bare{r}.txt"
    walls: dict[bool, list[float]] = {True: [], False: []}

    def bare() -> None:
        for i in range(trials):
            for persistent in (True, False) if i % 2 == 0 else (False, True):
                walls[persistent].append(_bare(script, bare_log, epochs, persistent))

    out = tmp / f"r{r}.json"
    cmd = [sys.executable, "-m", "loaderprof", "compare", "-q", "--epochs", str(epochs)]
    cmd += ["--trials", str(trials), "--json", str(out), "--", sys.executable, str(script)]
    cmd += [str(tmp / f"cmp{r}.txt"), "1000", "0"]
    # Bare runs first in even rounds, compare first in odd ones: drift over a round
    # falls on both sides alike.
    if r % 2 == 0:
        bare()
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    if r % 2 == 1:
        bare()
    own = _steady(bare_log)
    report = json.loads(out.read_text())
    own_saving = own["False"] - own["True"]
    # The script's own clock inside compare's trials: how well the hook's stamps read
    # it, apart from what the hook adds to the runs it measures.
    hooked = _steady(tmp / f"cmp{r}.txt")
    hooked_saving = hooked["False"] - hooked["True"]
    bare_total = sum(walls[True]) + sum(walls[False])
    return {
        "round": r,
        "own_steady_s": own,
        "own_saving_s": own_saving,
        "compare_saving_s": report["saving"]["saved_s"],
        "compare_saving_ci_s": [report["saving"]["low_s"], report["saving"]["high_s"]],
        "saving_ratio": report["saving"]["saved_s"] / own_saving,
        "hooked_own_steady_s": hooked,
        "saving_ratio_hooked_clock": report["saving"]["saved_s"] / hooked_saving,
        "bare_walls_s": {"persistent": walls[True], "non_persistent": walls[False]},
        "compare_wall_s": wall,
        "wall_ratio": wall / bare_total,
        "verdict": report["verdict"]["recommendation"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="lp-cmd-bench-") as d:
        for r in range(args.rounds):
            rounds.append(_round(Path(d), r, args.epochs, args.trials))
            print(json.dumps(rounds[-1]), file=sys.stderr)
    result = {
        "epochs": args.epochs,
        "trials_per_arm": args.trials,
        "rounds": rounds,
        "saving_ratio_median": statistics.median(x["saving_ratio"] for x in rounds),
        "saving_ratio_range": [
            min(x["saving_ratio"] for x in rounds),
            max(x["saving_ratio"] for x in rounds),
        ],
        "saving_ratio_hooked_clock_median": statistics.median(
            x["saving_ratio_hooked_clock"] for x in rounds
        ),
        "wall_ratio_median": statistics.median(x["wall_ratio"] for x in rounds),
        "wall_ratio_range": [
            min(x["wall_ratio"] for x in rounds),
            max(x["wall_ratio"] for x in rounds),
        ],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
