"""What does `loaderprof watch` cost the training it watches?

A tiny training script (a persistent train loader and a validation loader, 2 workers
each, CPU work per item and a simulated step per batch) runs alternately bare and
under `loaderprof watch`, in interleaved rounds. Two ratios, watched ÷ bare, medians
over rounds with a seeded bootstrap 95 % interval:

1. training wall: the script's own clock from before its first DataLoader to the end
   of its last epoch (what the hook and the sampler cost the training itself);
2. command wall: the whole process from outside, and for `watch` the CLI's own
   start-up and report as well.

    python benchmarks/watch_overhead.py --rounds 6 --out benchmarks/results/watch_overhead.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import sys, time, torch
from torch.utils.data import DataLoader, Dataset

class Work(Dataset):
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        x = torch.full((64, 64), float(i))
        for _ in range(20):
            x = x @ x.T / 64
        return x[0]

if __name__ == "__main__":
    t0 = time.monotonic()
    train = DataLoader(Work(512), batch_size=16, num_workers=2, persistent_workers=True)
    val = DataLoader(Work(128), batch_size=16, num_workers=2, persistent_workers=True)
    for epoch in range(int(sys.argv[1])):
        for batch in train:
            time.sleep(0.005)
        for batch in val:
            pass
    print(f"TRAIN_WALL {time.monotonic() - t0:.6f}")
"""


def _run(cmd: list[str]) -> tuple[float, float]:
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    total = time.monotonic() - start
    line = next(ln for ln in out.splitlines() if ln.startswith("TRAIN_WALL"))
    return float(line.split()[1]), total


def _ratio(a: list[float], b: list[float], seed: int = 0) -> dict[str, float]:
    rng = random.Random(seed)
    point = statistics.median(a) / statistics.median(b)
    boots = sorted(
        statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(2000)
    )
    return {"ratio": point, "ci_low": boots[50], "ci_high": boots[1949]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(SCRIPT)
        bare_cmd = [sys.executable, str(script), str(args.epochs)]
        watch_cmd = [sys.executable, "-m", "loaderprof", "watch", "--", *bare_cmd]
        runs: dict[str, list[tuple[float, float]]] = {"bare": [], "watch": []}
        for r in range(args.rounds):
            order = ["bare", "watch"] if r % 2 == 0 else ["watch", "bare"]
            for name in order:
                runs[name].append(_run(bare_cmd if name == "bare" else watch_cmd))
                print(name, runs[name][-1], file=sys.stderr)
    result = {
        "rounds": args.rounds,
        "epochs": args.epochs,
        "training_wall_s": {k: [t for t, _ in v] for k, v in runs.items()},
        "command_wall_s": {k: [c for _, c in v] for k, v in runs.items()},
        "training_wall_ratio": _ratio([t for t, _ in runs["watch"]], [t for t, _ in runs["bare"]]),
        "command_wall_ratio": _ratio([c for _, c in runs["watch"]], [c for _, c in runs["bare"]]),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
