"""Do the state checks make the workers larger than the user's training would?

See NOTE [stale worker state]. Every worker fingerprints its copy of the Dataset at
each epoch; reading an object writes its reference count, which under fork copies
the page it lives on into the worker (NOTE [copy-on-read]). Each round runs
`loaderprof compare --trials 2 --epochs 3` with the state checks on and off, in turn,
on Datasets whose index the main process built and the workers never walk whole:
a dict holding a list of 2,000,000 ints, and the same list inside an object of the
user's own class. Ratio per round and Dataset: the median worker's peak USS with the
checks ÷ without, per arm (target 1.0; before the digests sampled every depth: about
6.5 for the dict, 1.5 for the object).

    python benchmarks/state_memory.py --rounds 2 --out benchmarks/results/state_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from _shared import paired, report

DATASETS = """
import torch
from torch.utils.data import Dataset


class InDict(Dataset):
    def __init__(self, n=2_000_000):
        self.meta = {"ids": list(range(n)), "split": "train"}

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.tensor([self.meta["ids"][i]])


class _Index:
    def __init__(self, n):
        self.ids = list(range(n))


class InObject(Dataset):
    def __init__(self, n=2_000_000):
        self.index = _Index(n)

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.tensor([self.index.ids[i]])
"""

ARMS = ("persistent", "non_persistent")


def _peaks(folder: Path, dataset: str, checks: bool) -> dict[str, float]:
    out = folder / "r.json"
    flag = "--state-checks" if checks else "--no-state-checks"
    cmd = ["loaderprof", "compare", f"index:{dataset}", "--trials", "2", "--epochs", "3"]
    env = {**os.environ, "PYTHONPATH": str(folder)}
    subprocess.run(
        [*cmd, flag, "--json", str(out)], cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL
    )
    report = json.loads(out.read_text())
    return {a: report["arms"][a]["summary"]["peak_worker_uss_bytes"]["median"] for a in ARMS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    ratios: dict[str, list[float]] = {}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "index.py").write_text(DATASETS)
        for r in range(args.rounds):
            for dataset in ("InDict", "InObject"):
                order = [True, False] if r % 2 == 0 else [False, True]
                got = {checks: _peaks(folder, dataset, checks) for checks in order}
                for arm in ARMS:
                    key = f"{dataset}/{arm}"
                    ratios.setdefault(key, []).append(got[True][arm] / got[False][arm])
                runs.append({"round": r, "dataset": dataset, "on": got[True], "off": got[False]})
    result = {"ratios": {k: paired(v) for k, v in ratios.items()}, "runs": runs}
    report(result, ["ratios"], args.out)


if __name__ == "__main__":
    main()
