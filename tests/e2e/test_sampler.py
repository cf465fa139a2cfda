"""The two-thread sampler on a real process tree: the ticker reads every process's RSS
on every tick, the walker's summable walks read every process, and a held sampler
takes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

from loaderprof.inside import procfs
from loaderprof.measure.sampler import Sample, TreeSampler

pytestmark = pytest.mark.e2e


@pytest.fixture
def tree() -> Iterator[tuple[int, set[int]]]:
    """A shell and three children that sleep: a tree that holds still (not this
    process's, which may adopt orphans of other tests)."""
    root = subprocess.Popen(
        ["sh", "-c", "sleep 30 & sleep 30 & sleep 30 & wait"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 10
        while len(procfs.tree(root.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        yield root.pid, set(procfs.tree(root.pid))
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()


def _groups(samples: list[Sample]) -> dict[int, list[Sample]]:
    out: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.tick].append(s)
    return out


def _run_until(sampler: TreeSampler, walks: int) -> None:
    deadline = time.monotonic() + 20
    while sampler.deep_ticks < walks and time.monotonic() < deadline:
        time.sleep(0.01)


def _settled(sampler: TreeSampler) -> int:
    """The sample count once it has not moved for 0.3 s (what was under way when a
    hold came has been handed over)."""
    deadline = time.monotonic() + 10
    count = -1
    while time.monotonic() < deadline:
        now = len(sampler.samples)
        if now == count:
            return now
        count = now
        time.sleep(0.3)
    return count


def test_ticks_and_walks_cover_the_whole_tree(tree: tuple[int, set[int]]) -> None:
    root, pids = tree
    assert len(pids) == 4
    sampler = TreeSampler(root, 0.02, 0.1)
    sampler.start()
    _run_until(sampler, 3)
    sampler.stop()
    assert sampler.deep_ticks >= 3
    groups = _groups(sampler.samples)
    ticks = [g for g in groups.values() if all(s.uss is None for s in g)]
    walks = [g for g in groups.values() if all(s.uss is not None for s in g)]
    assert ticks and walks
    # Every group, tick or walk, holds each process once, and all of them.
    for g in groups.values():
        assert sorted(s.pid for s in g) == sorted(pids)
    for g in walks:
        assert all(s.pss is not None and s.read_ns is not None for s in g)
        # A walk's readings come after it began.
        assert all(s.read_ns is not None and s.read_ns >= s.t_ns for s in g)
    # Between epochs (the sampler starts there) every walk reads handles too.
    assert all(s.handles is not None for g in walks for s in g)
    assert [s.t_ns for s in sampler.samples] == sorted(s.t_ns for s in sampler.samples)


def test_a_held_sampler_takes_nothing(tree: tuple[int, set[int]]) -> None:
    sampler = TreeSampler(tree[0], 0.02, 0.1)
    sampler.start()
    _run_until(sampler, 1)
    sampler.hold()
    taken = _settled(sampler)
    time.sleep(0.3)
    assert len(sampler.samples) == taken
    sampler.release(None)
    _run_until(sampler, sampler.deep_ticks + 1)
    sampler.stop()
    assert len(sampler.samples) > taken
