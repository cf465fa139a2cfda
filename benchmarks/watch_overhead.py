"""What does `loaderprof watch` cost the training it watches?

A tiny training script (a persistent train loader and a validation loader, 2 workers
each, CPU work per item and a simulated step per batch) runs alternately bare and
under `loaderprof watch`, in interleaved rounds (which goes first alternates). Three
ratios, watched ÷ bare, each the median of the rounds' own ratios (a round's two
runs sit side by side, so slow drift of a noisy machine cancels), with a seeded
bootstrap 95 % interval over rounds:

1. training wall: the script's own clock from before its first DataLoader to the end
   of its last epoch (what the hook and the sampler cost the training itself);
2. script wall: the command's whole life, from its start to its exit (for `watch`
   the report's `wall_s`, taken around the command's process; bare, from outside);
3. invocation wall: the whole `loaderprof watch` process from outside, its own
   start-up and report included.

    python benchmarks/watch_overhead.py --rounds 10 --epochs 8 \\
        --out benchmarks/results/watch_overhead.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import paired

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


def _run(cmd: list[str], report: Path | None = None) -> tuple[float, float, float]:
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    total = time.monotonic() - start
    line = next(ln for ln in out.splitlines() if ln.startswith("TRAIN_WALL"))
    script = json.loads(report.read_text())["wall_s"] if report else total
    return float(line.split()[1]), script, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(SCRIPT)
        report = Path(tmp) / "watch.json"
        bare_cmd = [sys.executable, str(script), str(args.epochs)]
        watch_cmd = [sys.executable, "-m", "loaderprof", "watch", "--json", str(report), "--"]
        runs: dict[str, list[tuple[float, float, float]]] = {"bare": [], "watch": []}
        for r in range(args.rounds):
            order = ["bare", "watch"] if r % 2 == 0 else ["watch", "bare"]
            for name in order:
                if name == "bare":
                    runs[name].append(_run(bare_cmd))
                else:
                    runs[name].append(_run([*watch_cmd, *bare_cmd], report))
                print(name, runs[name][-1], file=sys.stderr)
    result: dict[str, object] = {"rounds": args.rounds, "epochs": args.epochs}
    for i, figure in enumerate(("training_wall", "script_wall", "invocation_wall")):
        values = {k: [run[i] for run in v] for k, v in runs.items()}
        result[f"{figure}_s"] = values
        result[f"{figure}_ratio"] = paired(
            [w / b for w, b in zip(values["watch"], values["bare"], strict=True)]
        )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
