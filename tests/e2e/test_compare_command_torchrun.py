"""See NOTE [ranks in a command]. `loaderprof compare -- torchrun ...` on a real 2-rank
job (gloo on the CPU): each rank builds its loader at the same line, and the command's
epoch is its slowest rank's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import assert_nothing_left, run_cli, script_site
from loaderprof.report.json_report import load_schema

pytestmark = pytest.mark.e2e

TRAIN = """
import time
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

# Its workers open a 0.2 s resource lazily: what persistence keeps.
from loaderprof.examples import LazyResourceDataset


if __name__ == "__main__":
    dist.init_process_group("gloo")
    data = LazyResourceDataset(n=64, dim=4)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=4, num_workers=2, sampler=sampler)  # TRAIN
    for epoch in range(6):
        sampler.set_epoch(epoch)
        for batch in loader:
            dist.all_reduce(batch)  # the ranks meet at every step, as training does
    dist.destroy_process_group()
"""


def test_two_ranks_each_build_the_main_loader_and_persistence_is_measured(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    out = tmp_path / "cmd.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    run = run_cli(
        "compare",
        "--epochs",
        "3",
        "--trials",
        "1",
        "--json",
        str(out),
        "--",
        *torchrun,
        "--nproc-per-node",
        "2",
        str(tmp_path / "train.py"),
        env={"COLUMNS": "80"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema("compare-command"), cls=jsonschema.Draft202012Validator)
    by_arm = {t["arm"]: t for t in report["trials"]}
    for trial in by_arm.values():
        main = trial["main"]
        assert main["site"] == script_site(tmp_path, "# TRAIN")
        assert (main["ranks"], main["built"]) == (2, 1)
        assert trial["stopped"] and len(trial["epochs"]) == 3
    # Every rank's workers open the resource again each epoch without persistence: its
    # steady epochs pay 0.2 s that the persistent arm's do not (a wide margin).
    steady = {arm: max(e["wall_s"] for e in t["epochs"][1:]) for arm, t in by_arm.items()}
    assert steady["persistent"] < 0.5 * steady["non_persistent"], steady
    assert "2 ranks built it: each epoch is its slowest rank's" in run.stdout
    assert max(len(line) for line in run.stdout.splitlines()) <= 80
    assert_nothing_left()
