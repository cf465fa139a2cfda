"""See NOTE [pools from outside]. Grouping a job's children into pools and lineages,
epochs inferred from CPU activity, and series that stay bounded."""

from __future__ import annotations

import pytest

from loaderprof.watching.pools import (
    BIRTH_WINDOW_S,
    SERIES_POINTS,
    SPLIT_AFTER_S,
    Activity,
    Bounded,
    Crowd,
    Pools,
    classify,
    lineages,
)

PY = "/usr/bin/python3"
JOB = [PY, "train.py", "--lr", "0.1"]


@pytest.mark.parametrize(
    ("cmdline", "exe", "parent", "expected"),
    [
        (
            [PY, "-c", "from multiprocessing.resource_tracker import main;main(5)"],
            PY,
            JOB,
            ("resource tracker", ""),
        ),
        (
            [PY, "-c", "from multiprocessing.forkserver import main; main(7, 8)"],
            PY,
            JOB,
            ("forkserver", ""),
        ),
        (
            ["/x/torch/bin/torch_shm_manager", "/tmp/sock"],
            "/x/torch/bin/torch_shm_manager",
            JOB,
            ("torch_shm_manager", ""),
        ),
        (["/bin/sh", "-c", "nvidia-smi"], "/bin/sh", JOB, ("not Python", "")),
        (
            [PY, "-c", "from multiprocessing.spawn import spawn_main", "--multiprocessing-fork"],
            PY,
            JOB,
            ("worker", "spawn"),
        ),
        (JOB, PY, JOB, ("worker", "fork")),
        ([PY, "other.py"], PY, JOB, ("Python process", "")),
    ],
)
def test_a_child_is_told_by_its_command_line(
    cmdline: list[str], exe: str, parent: list[str], expected: tuple[str, str]
) -> None:
    assert classify(cmdline, exe, parent) == expected


def test_a_forkservers_child_is_a_forkserver_worker() -> None:
    server = [PY, "-c", "from multiprocessing.forkserver import main; main(7, 8)"]
    # Forked from the server, it has the server's command line: not a second server.
    assert classify(server, PY, server) == ("worker", "forkserver")
    assert classify(server, PY, JOB) == ("forkserver", "")


def test_workers_of_one_parent_born_together_are_one_pool() -> None:
    pools = Pools()
    a = pools.place(10, 1, 5.00, "fork")
    b = pools.place(11, 1, 5.02, "fork")
    # Another parent, and a later birth, are other pools.
    c = pools.place(12, 2, 5.03, "fork")
    d = pools.place(13, 1, 5.0 + BIRTH_WINDOW_S + 0.5, "fork")
    assert a is b
    assert len({id(a), id(c), id(d)}) == 3
    assert a.pids == [10, 11]


def test_processes_with_workers_of_their_own_are_no_pool() -> None:
    pools = Pools()
    pools.place(10, 1, 1.0, "spawn")  # two torchrun ranks
    pools.place(11, 1, 1.0, "spawn")
    workers = pools.place(20, 10, 3.0, "fork")
    assert pools.parents == {10}
    assert pools.worker_pools() == [workers]


def _crowd_peak(lives: list[tuple[int, float, float, float]], interval: float = 0.05) -> int:
    """Replays a watch's ticks: each worker (pid, birth, first tick it is placed at,
    first tick it is seen gone at) is in the alive PIDs of the ticks between."""
    crowd = Crowd(keep_s=1.0)
    end = max(gone for *_, gone in lives)
    for k in range(round(end / interval) + 2):
        t = k * interval
        crowd.tick(t, {pid: b for pid, b, met, gone in lives if met <= t < gone})
    return crowd.peak


def test_workers_placed_late_count_with_those_alive_since_their_birth() -> None:
    # Lightning's epochs (`watch --pid` on its user's job): the train pool (10, 11) and
    # the validation pool (20, 21) alive, the next pool (30, 31) born at 1.328 s and
    # 1.348 s, some 0.1 s before the train pool's exit (seen gone at the 1.45 s tick).
    # Forked, the newcomers are placed only 0.2 s after their birth (FORK_EXEC_S).
    lives = [
        (10, 0.308, 0.55, 1.45),
        (11, 0.328, 0.55, 1.45),
        (20, 0.748, 0.95, 1.95),
        (21, 0.758, 1.0, 2.0),
        (30, 1.328, 1.55, 2.6),
        (31, 1.348, 1.55, 2.55),
    ]
    assert _crowd_peak(lives) == 6
    # Counted only as placed, they overlap none of the train pool: the 4 the watch said.
    placed_at_birth = [(pid, met, met, gone) for pid, _, met, gone in lives]
    assert _crowd_peak(placed_at_birth) == 4


def test_a_pool_born_after_the_last_tick_its_predecessor_was_seen_at_is_not_beside_it() -> None:
    # Rebuilt every epoch: the old pair was alive at the 1.00 s tick, gone at 1.05 s;
    # the new pair was born at 1.02 s, after that tick, and at 0.995 s, within a clock
    # tick of it (a birth is read in whole ticks, rounded down): never 4 at once.
    lives = [(10, 0.0, 0.2, 1.05), (11, 0.0, 0.2, 1.05), (20, 1.02, 1.25, 3.0)]
    assert _crowd_peak([*lives, (21, 0.995, 1.25, 3.0)]) == 2
    # Born a clock tick before the 1.00 s tick, it was alive beside the old pair.
    assert _crowd_peak([*lives, (21, 0.985, 1.25, 3.0)]) == 3


def test_a_crowd_keeps_only_its_last_ticks() -> None:
    crowd = Crowd(keep_s=1.0)
    for k in range(1000):
        crowd.tick(k * 0.05, {k: k * 0.05})
    assert crowd.peak == 1
    assert len(crowd._ticks) <= 1.0 / 0.05 + 1


def _ended(pools: Pools, pids: list[int], t: float) -> None:
    for pid in pids:
        pools.exited(pid, t)


def test_a_pool_born_after_its_like_exited_replaced_it() -> None:
    pools = Pools()
    train = pools.place(10, 1, 0.0, "fork")
    pools.place(11, 1, 0.0, "fork")
    for epoch in range(3):
        t = 1.0 + 2 * epoch
        pools.place(20 + 2 * epoch, 1, t, "fork")
        pools.place(21 + 2 * epoch, 1, t, "fork")
        _ended(pools, [20 + 2 * epoch, 21 + 2 * epoch], t + 0.5)
    chains = lineages(pools.worker_pools(), tolerance_s=0.05)
    assert [len(c) for c in chains] == [1, 3]
    assert chains[0] == [train]


def test_a_pool_rebuilt_sooner_than_the_birth_window_is_still_a_new_pool() -> None:
    # Non-persistent workers of a short epoch: the pair exits at 0.252 s and the next
    # pair is born at 0.264 s, inside the window of the first pair's birth (0.0 s).
    pools = Pools()
    for k in range(4):
        t = 0.264 * k
        pools.place(10 + 2 * k, 1, t, "fork")
        pools.place(11 + 2 * k, 1, t + 0.002, "fork")
        _ended(pools, [10 + 2 * k, 11 + 2 * k], t + 0.252)
    assert [p.pids for p in pools.worker_pools()] == [[10, 11], [12, 13], [14, 15], [16, 17]]
    (chain,) = lineages(pools.worker_pools(), tolerance_s=0.05)
    assert len(chain) == 4


def test_a_pool_of_another_size_or_alive_beside_it_is_another_lineage() -> None:
    pools = Pools()
    pools.place(10, 1, 0.0, "fork")
    pools.place(11, 1, 0.0, "fork")
    _ended(pools, [10, 11], 1.0)
    pools.place(20, 1, 2.0, "fork")  # one worker, not two
    pools.place(30, 1, 4.0, "fork")  # born while 20 lives
    chains = lineages(pools.worker_pools(), tolerance_s=0.05)
    assert [len(c) for c in chains] == [1, 1, 1]


def test_an_exit_seen_a_tick_late_still_came_before_the_next_birth() -> None:
    pools = Pools()
    pools.place(10, 1, 0.0, "fork")
    _ended(pools, [10], 1.04)  # seen gone at the first tick after it exited
    pools.place(11, 1, 1.0, "fork")
    assert [len(c) for c in lineages(pools.worker_pools(), tolerance_s=0.05)] == [2]
    assert [len(c) for c in lineages(pools.worker_pools(), tolerance_s=0.0)] == [1, 1]


def _feed(activity: Activity, pattern: str, *, dt: float = 0.1, uss: int = 100) -> float:
    """B: a busy tick, i: an idle tick with a reading of `uss` (rising by one each)."""
    t = 0.0
    for i, mark in enumerate(pattern):
        t += dt
        activity.feed(t, mark == "B", None if mark == "B" else (uss + i, 2 * uss + i))
    return t


def test_busy_runs_apart_by_pauses_are_inferred_epochs() -> None:
    activity = Activity(pause_min_s=0.3)
    end = _feed(activity, "BBBiiiiBBBiiiiBBBiiii")
    activity.close(end)
    assert activity.busy_runs == 3
    # One reading per pause: the last taken inside it.
    assert [v for _, v in activity.pauses.rows] == [(106, 206), (113, 213), (120, 220)]
    assert activity.idle_median() == 113


def test_a_short_idle_gap_inside_an_epoch_is_no_pause() -> None:
    activity = Activity(pause_min_s=0.3)
    end = _feed(activity, "BBiBBiiBBBiiii")
    activity.close(end)
    assert activity.busy_runs == 1
    assert len(activity.pauses.rows) == 1


def test_an_idle_run_cut_short_by_the_watchs_end_is_no_pause() -> None:
    activity = Activity(pause_min_s=0.3)
    end = _feed(activity, "BBBiiiiBBBii")
    activity.close(end)
    assert activity.busy_runs == 2
    assert len(activity.pauses.rows) == 1


def test_a_bounded_series_keeps_its_size_and_every_peak() -> None:
    series = Bounded(points=8)
    values = [(i * 7919) % 1000 for i in range(1000)]
    for i, v in enumerate(values):
        series.add(float(i), (v, None))
    assert len(series.rows) <= 8
    assert max(v[0] or 0 for _, v in series.rows) == max(values)
    # Times stay in order and begin where the series began.
    times = [t for t, _ in series.rows]
    assert times == sorted(times) and times[0] == 0.0


def test_the_default_series_is_bounded_over_a_long_watch() -> None:
    series = Bounded()
    for i in range(20 * SERIES_POINTS):
        series.add(i * 0.05, (i, i))
    assert len(series.rows) <= SERIES_POINTS
    assert series.rows[-1][1] == (20 * SERIES_POINTS - 1, 20 * SERIES_POINTS - 1)


def test_two_iterators_born_within_the_window_are_split_when_one_ends_first() -> None:
    """Lightning starts the train pool 0.09 s after a short validation epoch's workers,
    which end after the train pool was born: placed as one pool of four, then split
    once two of them have outlived the others' exit by SPLIT_AFTER_S."""
    pools = Pools()
    val = pools.place(10, 1, 0.000, "fork")
    pools.place(11, 1, 0.010, "fork")
    pools.place(12, 1, 0.110, "fork")
    pools.place(13, 1, 0.125, "fork")
    assert val.pids == [10, 11, 12, 13]
    _ended(pools, [10, 11], 0.2)
    # Still within the window: the others may be ending too.
    assert pools.split(0.2 + SPLIT_AFTER_S / 2) == []
    (train,) = pools.split(0.2 + SPLIT_AFTER_S)
    assert val.pids == [10, 11] and val.ended_s == 0.2 and val.last_born_s == 0.010
    assert train.pids == [12, 13] and train.born_s == 0.110 and train.ended_s is None
    assert pools.by_pid[12] is train and pools.by_pid[10] is val
    # The train pool ends as one and is no longer split; its like born later replaces it.
    _ended(pools, [12, 13], 1.8)
    assert pools.split(5.0) == []
    pools.place(14, 1, 1.9, "fork")
    pools.place(15, 1, 1.92, "fork")
    chains = lineages(pools.worker_pools(), tolerance_s=0.05)
    assert [[len(p.pids) for p in c] for c in chains] == [[2], [2, 2]]


def test_workers_ended_together_are_one_pool() -> None:
    pools = Pools()
    pool = pools.place(10, 1, 0.0, "fork")
    pools.place(11, 1, 0.01, "fork")
    pools.exited(10, 2.0)
    pools.exited(11, 2.0 + SPLIT_AFTER_S / 2)
    assert pools.split(9.0) == [] and pool.pids == [10, 11]


def test_workers_that_leave_their_pool_early_by_themselves_stay_in_it() -> None:
    """An IterableDataset with more workers than shards: torch tells the exhausted
    workers to exit mid-epoch. They were born in the pool's even run of forks, and
    are no second pool; nor are exits a slow sampling interval apart."""
    pools = Pools()
    pool = pools.place(10, 1, 0.00, "fork")
    for pid, born in ((11, 0.01), (12, 0.02), (13, 0.03)):
        pools.place(pid, 1, born, "fork")
    _ended(pools, [10, 11], 0.5)
    assert pools.split(5.0) == [] and pool.pids == [10, 11, 12, 13]
    slow = Pools(interval_s=1.0)
    pair = slow.place(20, 1, 0.0, "fork")
    slow.place(21, 1, 0.12, "fork")  # apart at birth, but their exits only a tick apart
    slow.exited(20, 6.0)
    slow.exited(21, 7.0)
    assert slow.split(9.0) == [] and pair.pids == [20, 21]


def test_a_pause_asks_for_its_own_reading_once() -> None:
    """See NOTE [pauses not read]. `watch --pid` reads a pool once it has been idle a
    pause's length; a reading that failed is not tried again at every idle tick."""
    activity = Activity(pause_min_s=0.25)
    asked = []
    t = 0.0
    for mark in "BBiiiiiiiBBiiiiii":
        t += 0.1
        asked.append(mark == "i" and activity.take_pause_reading(t))
        activity.feed(t, mark == "B", None)  # no reading comes: it failed
    # Asked once in each pause, once idle 0.25 s (ticks 0.1 s apart); never in an epoch.
    assert [i for i, a in enumerate(asked) if a] == [5, 14]


def test_a_long_watchs_pauses_merge_named_by_their_last_epoch() -> None:
    """See NOTE [bounded series]. A pool growing 1 MiB an epoch for 1100 epochs: each
    merged bucket holds its larger reading, the later epoch's, and is named by it."""
    activity = Activity(pause_min_s=0.3)
    for epoch in range(1, 1101):
        _feed(activity, "B")
        activity.pauses.add(float(epoch), (epoch * 2**20, 300 * 2**20 + epoch * 2**20))
    rows = activity.pauses.rows
    assert len(rows) <= SERIES_POINTS < activity.pauses.added == 1100
    assert all(uss == int(epoch) * 2**20 for epoch, (uss, _) in rows)
    assert rows[-1][0] == 1100.0
