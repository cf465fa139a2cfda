"""Does a CPU hog beside the run make a pool look oversubscribed?

See NOTE [worker threads]. A worker's CPU demand counts a computing thread's run-queue
wait, which other processes lengthen too; the thread-oversubscription check counts the
wait in the share the pool's own CPU time has of the two. Each round runs
`loaderprof check` on a Dataset whose 2 workers each compute on their main thread and
on a helper thread (2 ms an item each, then 4 ms of I/O): about 0.9 cores a worker,
under the 2 cores of a 2-core runner together. Once on the idle machine, once beside
`--hogs` busy loops (default: the cores + 1), in turn (idle first in even rounds).
Per run: the median worker's demand as measured (`raw`) and as the check weighs it
(`own`), the pool's share of the wait, and whether the check warned. Ratio per round:
busy `own` ÷ idle `raw` (target about 1: the hog is not the pool's demand), and busy
`raw` ÷ idle `raw` (what the hog adds when nothing is taken out).

    python benchmarks/busy_threads.py --rounds 2 --out benchmarks/results/busy_threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _shared import paired, report

from loaderprof.checks.loader import own_demand
from loaderprof.model.codec import from_dict
from loaderprof.model.results import Report

DATASET = """
import hashlib, os, time
from concurrent.futures import ThreadPoolExecutor
import torch
from torch.utils.data import Dataset

_BLOCK = b"x" * (1 << 20)


def _spin(seconds):
    # sha256 releases the GIL for blocks this large: the two threads run at once.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(_BLOCK).digest()


class Bursty(Dataset):
    def __init__(self, n=256, cpu_ms=2.0, io_ms=4.0):
        self.n, self.cpu, self.io = n, cpu_ms / 1000, io_ms / 1000
        self._pool, self._owner = None, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self._owner != os.getpid():
            self._pool, self._owner = ThreadPoolExecutor(1), os.getpid()
        helper = self._pool.submit(_spin, self.cpu)
        _spin(self.cpu)
        helper.result()
        time.sleep(self.io)
        return torch.tensor([i])
"""


def _check(folder: Path, hogs: int) -> dict[str, Any]:
    out = folder / "r.json"
    spin = [sys.executable, "-c", "while 1: pass"]
    loops = [subprocess.Popen(spin) for _ in range(hogs)]
    try:
        cmd = ["loaderprof", "check", "bursty:Bursty", "--json", str(out)]
        env = {**os.environ, "PYTHONPATH": str(folder)}
        run = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    report = from_dict(Report, json.loads(out.read_text()))
    n = report.config.loader.num_workers
    others = float(report.environment.get("other_cpu_cores") or 0.0)
    arm = report.arms["non_persistent"]  # the most workers: one pool per epoch
    workers = [w for t in arm.trials for w in t.workers if w.cpu_demand is not None]
    demand = own_demand(workers, n, others)
    raw = own_demand(workers, n, 0.0)
    return {
        "hogs": hogs,
        "other_cpu_cores": others,
        "raw": round(raw.per_worker, 3),
        "own": round(demand.per_worker, 3),
        "own_share_of_wait": round(demand.own_share, 3),
        "warned": any(f.id == "thread-oversubscription" for f in report.findings),
        "returncode": run.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=(os.cpu_count() or 1) + 1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    own, raw = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bursty.py").write_text(DATASET)
        for r in range(args.rounds):
            order = [0, args.hogs] if r % 2 == 0 else [args.hogs, 0]
            got = {hogs: _check(folder, hogs) for hogs in order}
            runs += [{"round": r, **got[h]} for h in order]
            idle, busy = got[0], got[args.hogs]
            own.append(busy["own"] / idle["raw"])
            raw.append(busy["raw"] / idle["raw"])
            print(f"round {r}: idle {idle} busy {busy}", file=sys.stderr)
    result = {
        "ratios": {"busy_own_vs_idle": paired(own), "busy_raw_vs_idle": paired(raw)},
        "runs": runs,
    }
    report(result, ["ratios"], args.out)


if __name__ == "__main__":
    main()
