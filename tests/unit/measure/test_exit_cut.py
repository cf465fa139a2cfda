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


FINISHING = """
import atexit, sys
from loaderprof.inside import events
from loaderprof.inside.trial import _finish

atexit.register(events.emit, sys.argv[1], "handler_ran")
_finish(sys.argv[1], 3)
"""


def test_a_trial_says_it_is_exiting_before_its_exit_handlers_run(tmp_path: Path) -> None:
    """The event the parent's cut counts from comes first, then the user's handlers."""
    events = tmp_path / "events.jsonl"
    done = subprocess.run([sys.executable, "-c", FINISHING, str(events)], timeout=60)
    assert done.returncode == 3
    kinds = [ev["ev"] for ev in EventReader(str(events)).read_new()]
    assert kinds == [Ev.EXITING, "handler_ran"]
