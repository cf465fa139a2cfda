"""Does loaderprof's data wait (NOTE [data wait]) agree with what a training script
measures itself?

A training script times its own waits for data, as loops that log a data-wait share
do: `time.perf_counter()` around `iter(loader)` and each `next()`, the first batch
apart from the rest, and its epoch wall. Its Dataset opens a 0.2 s resource lazily in
each worker and reads each sample for 3 ms (a batch of 8: 24 ms a worker, 2 workers);
its step sleeps 5 ms a batch, so the loop waits for data in steady state too.

1. watch: the script runs under `loaderprof watch`, persistence on and off; in the
   same run, loaderprof's waits of its steady epochs (2..N, each figure's median) are
   set against the script's own. Ratios: the wait share of the epoch, and the wait
   before the first batch, loaderprof's ÷ the script's.
2. compare: `loaderprof compare train.py:Slow --step-ms 5` (the same Dataset and
   step in compare's own loop), and the bare script with persistence on and off,
   side by side in the same round: each arm's steady wait share, compare's ÷ the bare
   script's.

Each ratio is the median over rounds of that round's ratio, with a seeded bootstrap
95 % interval over rounds (given from 2 rounds on).

    python benchmarks/data_wait.py --rounds 5 --epochs 4 --out benchmarks/results/data_wait.json
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
    persistent, epochs, out = sys.argv[1] == "on", int(sys.argv[2]), sys.argv[3]
    loader = DataLoader(Slow(), batch_size=8, num_workers=2, persistent_workers=persistent)
    mine = [timed_epoch(loader, 0.005) for _ in range(epochs)]
    with open(out, "w") as f:
        json.dump(mine, f)
"""
)

ARMS = {"on": "persistent", "off": "non_persistent"}


def _steady(epochs: list[dict[str, float]]) -> dict[str, float]:
    """The steady epochs' (2..N) median of each figure, and the wait's share of the epoch."""
    later = epochs[1:]
    out = {k: statistics.median(e[k] for e in later) for k in ("epoch_s", "first_s", "steady_s")}
    out["share"] = (out["first_s"] + out["steady_s"]) / out["epoch_s"]
    return out


def _split(wait: dict[str, Any]) -> dict[str, float]:
    share = (wait["first_s"] + wait["steady_s"]) / wait["epoch_s"]
    return {"epoch_s": wait["epoch_s"], "first_s": wait["first_s"], "share": share}


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, capture_output=True, text=True, check=True)


def _round(tmp: Path, epochs: int) -> dict[str, dict[str, dict[str, float]]]:
    """One round: per arm, the bare script's own, watch's with the script's own
    beside it, and compare's."""
    script, own, report = tmp / "train.py", tmp / "own.json", tmp / "report.json"
    lp = [sys.executable, "-m", "loaderprof"]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for flag, arm in ARMS.items():
        args = [sys.executable, str(script), flag, str(epochs), str(own)]
        _run(args)
        bare = _steady(json.loads(own.read_text()))
        _run([*lp, "watch", "-q", "--json", str(report), "--", *args])
        watched = json.loads(report.read_text())["loaders"][0]
        out[arm] = {
            "bare": bare,
            "watch_own": _steady(json.loads(own.read_text())),
            "watch": _split(watched["wait"]),
        }
    loader = ["--num-workers", "2", "--batch-size", "8", "--step-ms", "5"]
    _run(
        [
            *lp,
            "compare",
            f"{script}:Slow",
            "--epochs",
            str(epochs),
            "--trials",
            "1",
            *loader,
            "--json",
            str(report),
            "-q",
        ]
    )
    arms = json.loads(report.read_text())["arms"]
    for arm in ARMS.values():
        out[arm]["compare"] = _split(arms[arm]["summary"]["steady_wait"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.py").write_text(SCRIPT)
        for r in range(args.rounds):
            rounds.append(_round(Path(tmp), args.epochs))
            print(f"round {r + 1}: {json.dumps(rounds[-1])}", file=sys.stderr)
    result: dict[str, Any] = {"rounds": args.rounds, "epochs": args.epochs, "readings": rounds}
    for arm in ARMS.values():
        per = [r[arm] for r in rounds]
        result[arm] = {
            "watch_share_ratio": paired(
                [p["watch"]["share"] / p["watch_own"]["share"] for p in per]
            ),
            "watch_first_ratio": paired(
                [p["watch"]["first_s"] / p["watch_own"]["first_s"] for p in per]
            ),
            "compare_share_ratio": paired(
                [p["compare"]["share"] / p["bare"]["share"] for p in per]
            ),
            "compare_first_ratio": paired(
                [p["compare"]["first_s"] / p["bare"]["first_s"] for p in per]
            ),
        }
    report(result, list(ARMS.values()), args.out)


if __name__ == "__main__":
    main()
