"""`compare -- COMMAND`: its data wait (NOTE [data wait]) against the script's own
clock in the same trials, and its --max-batches projection (NOTE [cut epochs])
against whole epochs.

1. Data wait: a training script times its own waits as NOTE [data wait] counts them
   (`perf_counter()` around `iter(loader)` and each `next()`, the first batch apart)
   and appends them, with the arm it ran in, to a log. `loaderprof compare --epochs E
   --trials 1 -- python train.py LOG E+1` runs it as both arms; each arm's steady wait
   (loaderprof's) is set against the script's own steady epochs of the same trial
   (epochs 2..E-1: the script may be stopped before it logs epoch E). Ratios: the wait
   share of the epoch, the wait before the 1st batch, the wait after it, each the
   median over the same epochs on both clocks.
2. Projection: the same command with a Dataset 8 times longer, run with
   `--max-batches 16` and without; each arm's projected steady epoch ÷ its measured
   whole steady epoch, side by side in the round.

Its Dataset opens a 0.2 s resource lazily in each worker and reads each sample for
3 ms (a batch of 8: 24 ms a worker, 2 workers); its step sleeps 5 ms a batch, so the
loop waits in steady state too. Each ratio is the median over rounds of that round's
ratio, with a seeded bootstrap 95 % interval over rounds (from 2 rounds on).

    python benchmarks/command_wait.py --rounds 5 --out benchmarks/results/command_wait.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _shared import LAZY_TIMED_LOOP, paired, report

SCRIPT = (
    LAZY_TIMED_LOOP
    + """
if __name__ == "__main__":
    log, epochs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    loader = DataLoader(Slow(n), batch_size=8, num_workers=2)
    for k in range(epochs):
        mine = timed_epoch(loader, 0.005)
        row = {"persistent": loader.persistent_workers, "epoch": k, **mine}
        with open(log, "a") as f:
            f.write(json.dumps(row) + "\\n")
"""
)

ARMS = {"persistent": True, "non_persistent": False}
FIGURES = ("share", "first_s", "steady_s")


def _compare(tmp: Path, epochs: int, n: int, *extra: str) -> tuple[dict[str, Any], list[Any]]:
    log, report = tmp / "own.jsonl", tmp / "report.json"
    log.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "loaderprof", "compare", "-q", "--epochs", str(epochs)]
    cmd += ["--trials", "1", "--json", str(report), *extra, "--", sys.executable]
    cmd += [str(tmp / "train.py"), str(log), str(epochs + 1), str(n)]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    own = [json.loads(line) for line in log.read_text().splitlines()]
    return json.loads(report.read_text()), own


def _figures(epoch_s: float, first_s: float, steady_s: float) -> dict[str, float]:
    return {"share": (first_s + steady_s) / epoch_s, "first_s": first_s, "steady_s": steady_s}


def _round(tmp: Path, epochs: int) -> dict[str, Any]:
    report, own = _compare(tmp, epochs, 96)
    out: dict[str, Any] = {}
    keys = ("epoch_s", "first_s", "steady_s")
    for arm, persistent in ARMS.items():
        (trial,) = [t for t in report["trials"] if t["arm"] == arm]
        # The same epochs on both clocks: 2..E-1, each logged by the script.
        theirs = [trial["epochs"][i]["wait"] for i in range(1, epochs - 1)]
        mine = [r for r in own if r["persistent"] is persistent and 1 <= r["epoch"] < epochs - 1]
        lp = {k: statistics.median(w[k] for w in theirs) for k in keys}
        med = {k: statistics.median(r[k] for r in mine) for k in keys}
        out[arm] = {
            "loaderprof": _figures(lp["epoch_s"], lp["first_s"], lp["steady_s"]),
            "own": _figures(med["epoch_s"], med["first_s"], med["steady_s"]),
        }
    cut, _ = _compare(tmp, epochs, 768, "--max-batches", "16")
    whole, _ = _compare(tmp, epochs, 768)
    for arm in ARMS:
        out[arm]["projected_s"] = cut[arm]["projected_steady_epoch_s"]["median"]
        out[arm]["whole_s"] = whole[arm]["steady_epoch_s"]["median"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.epochs < 3:
        ap.error("--epochs must be ≥ 3 (the script's own steady epochs are 2..E-1)")
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.py").write_text(SCRIPT)
        for r in range(args.rounds):
            rounds.append(_round(Path(tmp), args.epochs))
            print(f"round {r + 1}: {json.dumps(rounds[-1])}", file=sys.stderr)
    result: dict[str, Any] = {"rounds": args.rounds, "epochs": args.epochs, "readings": rounds}
    for arm in ARMS:
        per = [r[arm] for r in rounds]
        result[arm] = {
            f"{k}_ratio": paired([p["loaderprof"][k] / p["own"][k] for p in per]) for k in FIGURES
        }
        result[arm]["projected_ratio"] = paired([p["projected_s"] / p["whole_s"] for p in per])
    report(result, list(ARMS), args.out)


if __name__ == "__main__":
    main()
