"""Run-time failures and interrupts: exit code, one line, nothing left, nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, ROOT, TESTS, finish, leftover_processes, run_cli

pytestmark = pytest.mark.e2e
FAULTS = str(TESTS / "lp_faults.py")


def _line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("loaderprof: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_getitem_error_names_worker_index_and_exception(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "compare",
        f"{DATA}:FailingDataset",
        "--arg",
        "bad_index=40",
        "--trials",
        "1",
        "--epochs",
        "2",
        "--batch-size",
        "8",
        "--json",
        str(out),
    )
    assert run.returncode == 3
    line = _line(run.stderr)
    assert "DataLoader worker 1 raised ValueError: bad sample 40 at index 40" in line
    # It failed in its first epoch: the line says why the file asked for is not there.
    assert line.endswith(f"; nothing measured: no report written ({out})") and not out.exists()


def test_worker_killed_by_sigkill() -> None:
    run = run_cli(
        "compare",
        f"{FAULTS}:KillsItself",
        "--arg",
        "at=14",
        "--trials",
        "1",
        "--epochs",
        "2",
        "--batch-size",
        "4",
    )
    assert run.returncode == 3, run.stderr
    line = _line(run.stderr)
    # Index 14 is in batch 3, which goes to worker 1 of 2.
    assert "DataLoader worker 1 (pid" in line
    assert "was killed by SIGKILL (the kernel's OOM killer" in line
    assert "at its last sample it had RSS" in line


def test_hanging_worker_hits_trial_timeout() -> None:
    # The timeout is the hang guard: the worker never returns, so without
    # --trial-timeout the run would never end.
    run = run_cli(
        "compare",
        f"{FAULTS}:Hangs",
        "--trials",
        "1",
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--trial-timeout",
        "8",
        timeout=120,
    )
    assert run.returncode == 3, run.stderr
    line = _line(run.stderr)
    assert "did not finish within --trial-timeout 8 s, stalled in epoch 1" in line
    # Index 5 is in batch 1: worker 1 of 2 hangs on it.
    assert "worker 1 (pid" in line and "produced no batch in the" in line


def test_failure_in_epoch_2_keeps_epoch_1(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    csv = tmp_path / "r.csv"
    run = run_cli(
        "compare",
        f"{FAULTS}:FailsInEpoch2",
        "--arg",
        f"marker={tmp_path / 'seen'}",
        "--trials",
        "1",
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--json",
        str(out),
        "--csv",
        str(csv),
    )
    assert run.returncode == 3, run.stderr
    assert "raised KeyError" in _line(run.stderr) and "(epoch 2)" in run.stderr
    report = json.loads(out.read_text())
    assert report["complete"] is False
    (trial,) = [t for a in report["arms"].values() for t in a["trials"]]
    assert [e["epoch"] for e in trial["epochs"]] == [1]
    assert trial["error"]["epoch"] == 2
    assert csv.read_text().count("\n") == 2  # header + the one measured epoch
    # Atomic writes leave no temp files behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.json", "seen"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_stops_everything_and_keeps_results(tmp_path: Path, sig: int, code: int) -> None:
    out = tmp_path / "r.json"
    reads = tmp_path / "reads"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loaderprof",
            "compare",
            f"{FAULTS}:Slow",
            "--arg",
            "n=64",
            "--arg",
            f"reads={reads}",
            "--epochs",
            "20",
            "--trials",
            "2",
            "--batch-size",
            "4",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "160"},
    )
    # Wait until the first trial has measured epochs: a read past the second epoch's
    # items means the first two have ended (the next epoch's indices go out only then).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if reads.exists() and reads.stat().st_size > 2 * 64:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it was interrupted"
    proc.send_signal(sig)
    # The timeout is the hang guard: an interrupt that did not stop everything would
    # leave the 20-epoch run going far longer.
    _, stderr = finish(proc, timeout=30)
    assert proc.returncode == code, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert not leftover_processes()
    report = json.loads(out.read_text())
    assert report["complete"] is False
    assert any(t["epochs"] for a in report["arms"].values() for t in a["trials"])


def test_trial_process_crash() -> None:
    run = run_cli("compare", f"{FAULTS}:CrashesTrial", "--trials", "1", "--epochs", "2")
    assert run.returncode == 3
    assert "the trial process was killed by SIGKILL before it finished" in _line(run.stderr)
