"""Issue 29, rest: a run killed with SIGKILL leaves its scratch directory; the next
run removes it (its owner is provably gone), a live run's never."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loaderprof.measure.scratch import OWNER

pytestmark = pytest.mark.e2e

DATASET = "loaderprof.examples:CheapDataset"


def _compare(tmp: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TMPDIR": str(tmp)}  # tempfile.gettempdir() follows it
    argv = [sys.executable, "-m", "loaderprof", "compare", DATASET, "-q", *extra]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _owned(tmp: Path) -> list[Path]:
    return [d for d in tmp.glob("loaderprof-*") if (d / OWNER).exists()]


def test_a_killed_run_s_scratch_dir_is_removed_by_the_next_run(tmp_path: Path) -> None:
    killed = _compare(tmp_path, "--trials", "10")
    deadline = time.monotonic() + 60
    while not _owned(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    (left,) = _owned(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    time.sleep(1)  # its template and trials end by PR_SET_PDEATHSIG
    assert left.exists(), "SIGKILL leaves the scratch dir (the case to clean up)"
    live = _compare(tmp_path, "--trials", "10")
    try:
        while len(_owned(tmp_path)) < 2 and left.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left.exists(), "the next run did not remove the dead run's dir"
        # A third run while the second is alive leaves the second's dir alone.
        third = _compare(tmp_path, "--trials", "1", "--epochs", "2")
        assert third.wait(120) == 0
        assert len(_owned(tmp_path)) == 1, "a live run's dir was removed"
    finally:
        live.kill()
        live.wait()
