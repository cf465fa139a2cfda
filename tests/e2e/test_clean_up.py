"""The user's own clean-up runs in every trial (NOTE [no teardown], NOTE [stopping a
command]): what a Dataset or a script removes at exit (mosaicml-streaming's /dev/shm
segments, temporary files, locks) must not outlive loaderprof's trials."""

from __future__ import annotations

import json
import shlex
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


def _fail():
    os._exit(3)  # a clean-up that ends the process its own way


class Owning(Dataset):
    def __init__(self):
        _log("built")
        if os.environ.get("LP_FAIL_AT_EXIT"):
            atexit.register(_fail)  # runs after the handler below (last in, first out)
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


def test_an_exit_handler_that_ends_the_process_fails_no_trial(tmp_path: Path) -> None:
    log = _write(tmp_path)
    out = tmp_path / "r.json"
    run = run_cli(
        "compare",
        "lp_owning:Owning",
        *("--epochs", "2", "--trials", "1", "--num-workers", "2", "--json", str(out)),
        cwd=tmp_path,
        env={"LP_CLEAN_LOG": str(log), "LP_FAIL_AT_EXIT": "1"},
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    trials = [t for arm in report["arms"].values() for t in arm["trials"]]
    assert trials and all(t["complete"] and t["error"] is None for t in trials)
    # Its figures end at the trial's last event, before the handlers ran.
    assert all(t["wall_parts"]["exit_s"] < 1.0 for t in trials)


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_stopped_commands_clean_up_runs_in_every_trial(tmp_path: Path, wrapped: bool) -> None:
    # The script would run 20 epochs: each trial is stopped after 2 of them. Wrapped
    # in a shell, as a terminal's Ctrl-C reaches it: the whole group gets SIGINT.
    log = _write(tmp_path)
    command = (sys.executable, "train.py", "20")
    if wrapped:
        command = ("bash", "-c", f"{shlex.join(command)}; echo done")
    run = run_cli(
        *("compare", "--epochs", "2", "--trials", "1", "--"),
        *command,
        cwd=tmp_path,
        env={"LP_CLEAN_LOG": str(log), "PYTHONPATH": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    assert "stopped each after epoch 2" in " ".join(run.stdout.split())
    built, cleaned = _pids(log)
    assert len(built) >= 2 and cleaned == built
    assert_nothing_left()
