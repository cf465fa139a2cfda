"""The user's own clean-up runs in every trial (NOTE [no teardown], NOTE [stopping a
command]): what a Dataset or a script removes at exit (mosaicml-streaming's /dev/shm
segments, temporary files, locks) must not outlive loaderprof's trials."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conftest import assert_nothing_left, run_cli

pytestmark = pytest.mark.e2e

# Each process that builds the Dataset logs its pid, and again from an atexit handler
# registered there, as a library that owns shared memory does.
MODULE = """
import atexit, os, sys
import torch
from torch.utils.data import Dataset

LOG = os.environ["LP_CLEAN_LOG"]


def _log(what):
    with open(LOG, "a") as f:
        f.write(f"{what} {os.getpid()}\\n")


class Owning(Dataset):
    def __init__(self):
        _log("built")
        atexit.register(_log, "cleaned")

    def __len__(self):
        return 32

    def __getitem__(self, i):
        return torch.tensor([i])
"""

SCRIPT = """
import sys
from torch.utils.data import DataLoader
from lp_owning import Owning

loader = DataLoader(Owning(), batch_size=4, num_workers=2)
for epoch in range(int(sys.argv[1])):
    for batch in loader:
        pass
"""


def _pids(log: Path) -> tuple[set[str], set[str]]:
    lines = [line.split() for line in log.read_text().splitlines()]
    return {p for w, p in lines if w == "built"}, {p for w, p in lines if w == "cleaned"}


def _write(tmp_path: Path) -> Path:
    (tmp_path / "lp_owning.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    return tmp_path / "clean.log"


def test_a_datasets_exit_handlers_run_in_every_trial(tmp_path: Path) -> None:
    log = _write(tmp_path)
    run = run_cli(
        "compare",
        "lp_owning:Owning",
        *("--epochs", "2", "--trials", "1", "--num-workers", "2", "--batch-size", "4"),
        cwd=tmp_path,
        env={"LP_CLEAN_LOG": str(log)},
    )
    assert run.returncode == 0, run.stderr
    built, cleaned = _pids(log)
    assert len(built) >= 2 and cleaned == built
    assert_nothing_left()


def test_a_stopped_commands_clean_up_runs_in_every_trial(tmp_path: Path) -> None:
    # The script would run 20 epochs: each trial is stopped after 2 of them.
    log = _write(tmp_path)
    run = run_cli(
        *("compare", "--epochs", "2", "--trials", "1", "--"),
        *(sys.executable, "train.py", "20"),
        cwd=tmp_path,
        env={"LP_CLEAN_LOG": str(log), "PYTHONPATH": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    assert "stopped each after epoch 2" in " ".join(run.stdout.split())
    built, cleaned = _pids(log)
    assert len(built) >= 2 and cleaned == built
    assert_nothing_left()
