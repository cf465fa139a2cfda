"""See NOTE [pauses not read]. `watch` tells its sampler when the command's passes
have all ended, and a walk begun inside a pass gives way to a fresh one: real event
files, a real sampler walking real processes (this one and a child)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loaderprof.inside import events
from loaderprof.inside.events import Ev
from loaderprof.measure.sampler import TreeSampler, _Walk
from loaderprof.watching.run import _Pauses


def _emit(path: Path, kind: str, loader: str) -> None:
    events.emit(str(path), kind, loader=loader, t=time.monotonic_ns())


def test_a_pause_begins_when_every_pass_has_ended(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sampler = TreeSampler(0, 1.0, 1.0)
    pauses = _Pauses(str(path), sampler)
    restart = sampler.walker.restart
    _emit(path, Ev.ITER_START, "1.1")
    _emit(path, Ev.ITER_START, "1.2")  # a validation pass beside the train pass
    _emit(path, Ev.ITER_END, "1.1")
    pauses.poll()
    assert not restart.is_set()  # the other loader's pass still runs
    _emit(path, Ev.ITER_END, "1.2")
    pauses.poll()
    assert restart.is_set() and sampler.walker.requested.is_set()


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_walk_begun_in_the_pass_gives_way_to_one_of_the_pause(
    child: subprocess.Popen[bytes],
) -> None:
    """The walk under way when the pause begins is handed over unsummed (its readings
    keep each process's peaks), and a whole walk begun after the pause's start follows."""
    sampler = TreeSampler(os.getpid(), 1.0, 1.0)
    sampler.epoch_started()  # as watch's sampler always is: it never holds the command
    sampler._tick(time.monotonic())
    assert child.pid in sampler.latest
    walker = sampler.walker
    began_in_pass = time.monotonic_ns()
    walker._walk = _Walk(sampler.next_id(), began_in_pass, set(sampler.latest), False)
    sampler.pause_began()
    walker._walk_while_due()
    assert (sampler.targeted_ticks, sampler.deep_ticks) == (1, 1)
    whole = [s for s in sampler.samples if s.uss is not None and s.whole]
    assert {s.pid for s in whole} == set(sampler.latest)
    assert min(s.t_ns for s in whole) > began_in_pass
    assert not walker.restart.is_set()


def test_passes_ending_faster_than_a_walk_still_leave_whole_walks(
    child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass ends during every read (a helper loader iterated every step): the walk
    begun at a pause's start is not restarted again, so it ends whole (restarting every
    walk left none, and recursed until the walker thread died)."""
    sampler = TreeSampler(os.getpid(), 1.0, 1.0)
    sampler.epoch_started()
    sampler._tick(time.monotonic())
    walker = sampler.walker
    read = walker._read

    def read_then_a_pass_ends(walk: _Walk, pid: int) -> None:
        read(walk, pid)
        sampler.pause_began()

    monkeypatch.setattr(walker, "_read", read_then_a_pass_ends)
    walker._walk = _Walk(sampler.next_id(), time.monotonic_ns(), set(sampler.latest), False)
    for _ in range(3):
        walker._walk_while_due()
    assert sampler.error is None
    assert sampler.targeted_ticks == 1 and sampler.deep_ticks >= 2
