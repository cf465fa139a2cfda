"""Other processes' CPU during a run: the machine's busy time less the run's own."""

from __future__ import annotations

import time

import pytest

from loaderprof.measure.contention import CpuMark, busy_warning, mark, other_cores


def test_the_run_s_own_cpu_is_not_counted_as_another_s() -> None:
    start = CpuMark(busy_s=100.0, own_s=10.0, at_s=0.0)
    # 2 s of wall: the machine was busy 3 CPU-seconds, 1 of them the run's own.
    assert other_cores(start, CpuMark(103.0, 11.0, 2.0)) == pytest.approx(1.0)
    # Rounding between the two clocks never makes a negative share.
    assert other_cores(start, CpuMark(100.5, 11.0, 2.0)) == 0.0
    assert other_cores(start, CpuMark(103.0, 11.0, 0.5)) is None  # too short to say
    assert other_cores(None, CpuMark(103.0, 11.0, 2.0)) is None


def test_marks_read_the_real_clocks() -> None:
    a = mark()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # this process's own work
        pass
    b = mark()
    assert a is not None and b is not None
    assert b.own_s - a.own_s >= 0.25
    # The machine was at least as busy as this process was.
    assert b.busy_s - a.busy_s >= (b.own_s - a.own_s) * 0.8


def test_the_busy_warning_says_who_was_busy() -> None:
    env = {"cpu_count": 2, "cpus_usable": 2, "load_average": [0.2, 0.2, 0.2]}
    said = busy_warning(env, 1.04)
    assert said is not None and "other processes kept 1.0 of 2 cores busy" in said
    assert env["other_cpu_cores"] == 1.04
    assert busy_warning({**env}, 0.2) is None
    # Capped below the host's cores: the host's other tenants are not competitors;
    # only a load above the usable cores says the run competed.
    capped = {"cpu_count": 64, "cpus_usable": 2, "load_average": [3.0, 1.0, 1.0]}
    said = busy_warning(capped, 30.0)
    assert said is not None and "load average 3.0 on 2 usable cores" in said
    assert busy_warning({**capped, "load_average": [1.0, 1.0, 1.0]}, 30.0) is None


def test_what_an_orphan_ran_counts_as_the_runs_own() -> None:
    """A trial's forkserver and the workers it forks are orphaned when the trial ends:
    no process of the run reaps them, so `os.times()` never sees their CPU, which
    read as other processes' load (a busy-machine warning on every forkserver run).
    Each exiting process says what they ran (tests/unit/inside/test_procfs.py reads it
    from a real forkserver); the run counts it as its own."""
    from loaderprof.inside.events import Ev
    from loaderprof.measure import contention

    said = [
        {"ev": Ev.EXITING, "t": 1, "pid": 10, "code": 0, "unreaped_cpu_s": 0.4},  # a trial
        {"ev": Ev.EXITING, "t": 2, "pid": 11, "unreaped_cpu_s": 0.1},  # a hooked process
        {"ev": Ev.BATCH, "t": 3, "pid": 12},
    ]
    ran = contention.unreaped_cpu_s(said)
    assert ran == pytest.approx(0.5)
    before = mark()
    contention.count_unreaped(ran)
    after = mark()
    assert before is not None and after is not None
    assert after.own_s - before.own_s >= ran - 0.011  # os.times() counts in 10 ms ticks
