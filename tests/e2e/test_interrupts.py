"""Issue 29: a signal ends the run cleanly in every phase, and watch's grace period.

Each signal lands at its own offset over the first seconds of a small compare:
start-up, the template's import of torch, trial set-up, epochs, analysis, writing.
Whatever the phase: the exit code is 128 + the signal, stderr is one line, a JSON
report said to be written is there (and partial), and no process of the run is
left 2 s after loaderprof exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from conftest import DATA, ROOT, finish, leftover_processes

pytestmark = pytest.mark.e2e

MARKER = "LOADERPROF_TEST_RUN"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Start-up and the template's import dominate the first 2-3 s; the later offsets
# reach trial set-up, epochs and the end of the (short) run.
OFFSETS = (0.1, 0.25, 0.5, 0.8, 1.2, 1.7, 2.3, 3.0)


def _marked(run_id: str) -> list[psutil.Process]:
    """Processes alive (not zombies) whose environment carries this run's marker."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(MARKER) == run_id:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _gone_within(run_id: str, seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    while (left := _marked(run_id)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize(
    ("offset", "sig"), [(t, SIGNALS[i % 3]) for i, t in enumerate(OFFSETS)], ids=str
)
def test_a_signal_in_any_phase_ends_the_run_cleanly(
    tmp_path: Path, offset: float, sig: signal.Signals
) -> None:
    out = tmp_path / "r.json"
    run_id = uuid.uuid4().hex
    args = [f"{DATA}:make_tiny", "--epochs", "2", "--trials", "2", "--json", str(out), "-q"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "loaderprof", "compare", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, MARKER: run_id, "COLUMNS": "160"},
    )
    time.sleep(offset)
    if proc.poll() is not None:
        pytest.fail(f"the run ended before {offset} s: nothing was interrupted")
    proc.send_signal(sig)
    _, err = finish(proc, timeout=30)
    left = _gone_within(run_id, 2.0) + leftover_processes(timeout=0)
    for p in left:
        p.kill()
    assert not left, f"alive 2 s after loaderprof exited: {[p.cmdline() for p in left]}"
    if proc.returncode == -sig:
        # The signal came before Python ran any of loaderprof (interpreter start-up):
        # the shell reports the same 128 + N.
        return
    assert proc.returncode == 128 + sig, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("loaderprof: interrupted by"), err
    assert sig.name in lines[0]
    if "partial report written" in lines[0]:
        report = json.loads(out.read_text())
        assert report["complete"] is False
        assert any(t["epochs"] for a in report["arms"].values() for t in a["trials"])
    else:
        assert not out.exists(), "a report was written but the line does not say so"


_GRACEFUL = """
import signal, sys, time
def stop(signum, frame):
    time.sleep(1.5)  # a checkpoint save
    sys.exit(7)
signal.signal(signal.SIGINT, stop)
open(sys.argv[1], "w").close()
while True:
    time.sleep(0.05)
"""

_STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
open(sys.argv[1], "w").close()
time.sleep(60)
"""


def _watch(tmp_path: Path, script: str, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    path, ready = tmp_path / "train.py", tmp_path / "ready"
    path.write_text(textwrap.dedent(script))
    command = (sys.executable, str(path), str(ready))
    proc = subprocess.Popen(
        [sys.executable, "-m", "loaderprof", "watch", *extra, "--", *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), "the script did not start"
    return proc, ready


def test_watch_gives_the_command_its_grace_period(tmp_path: Path) -> None:
    """A script that handles Ctrl-C itself and needs 1.5 s to stop exits with its own
    status under watch, as it does alone (it used to get SIGTERM after 1 s)."""
    proc, _ = _watch(tmp_path, _GRACEFUL)
    proc.send_signal(signal.SIGINT)
    _, err = finish(proc, timeout=30)
    assert proc.returncode == 7, err


def test_a_second_ctrl_c_under_watch_ends_the_command_at_once(tmp_path: Path) -> None:
    proc, _ = _watch(tmp_path, _STUBBORN, "--kill-after", "30")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    # The timeout is below the 30 s grace period: only the escalation ends it in time.
    _, err = finish(proc, timeout=20)
    # SIGTERM at once, which the script does not handle.
    assert proc.returncode == 128 + signal.SIGTERM, err
