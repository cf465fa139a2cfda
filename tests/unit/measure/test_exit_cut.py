"""The parent's cut of a trial's exit handlers (NOTE [no teardown]), with a real child
process that reports an error and then never exits, as one whose clean-up holds the GIL
(which the child's own timer cannot then cut)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from loaderprof.config.run import RunConfig
from loaderprof.inside.events import Ev, EventReader
from loaderprof.measure import runner

CHILD = f"""
import sys, time
from loaderprof.inside import events
events.emit(sys.argv[1], {Ev.ERROR!r}, category="usage", kind="usage", message="no such file")
events.emit(sys.argv[1], {Ev.EXITING!r}, code=2)
time.sleep(120)
"""


def test_a_failed_trial_whose_exit_handlers_hang_is_cut_with_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "EXIT_HANDLERS_S", 0.2)
    monkeypatch.setattr(runner, "_CUT_LATE_S", 0.1)
    events = tmp_path / "events.jsonl"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(events)])
    watch = runner._Watch(events=[], t0=time.monotonic_ns())
    # Without the cut, the trial would wait out its timeout and fail as timed out.
    cfg = RunConfig(dataset="a:B", trial_timeout_s=30.0)
    try:
        slot = runner.TrialSlot("persistent", True, 0)
        runner._follow(child, EventReader(str(events)), None, cfg, slot, watch, None)
        assert child.poll() is None  # the parent's cut, not the child's own end
    finally:
        child.kill()
        child.wait()
    assert not watch.timed_out
    error = runner._trial_error(watch.events, child.returncode, False, None, cfg, tmp_path / "e")
    assert error is not None and (error.kind, error.message) == ("usage", "no such file")
