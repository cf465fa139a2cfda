"""See NOTE [watch hook]. Epochs a loop left, and loaders a framework rebuilt, from events."""

from __future__ import annotations

from test_watch_pipeline import S, _epoch, _ev, _loader

from loaderprof.report.rows import epoch_count
from loaderprof.watching.assemble import by_kind, loaders, pools
from loaderprof.watching.findings import find


def test_a_rebuilt_loader_is_the_users_loader_with_the_settings_it_ran_with() -> None:
    user = _loader("100.1", 0.1, "train.py:12", False)
    rebuilt = {**_loader("100.1", 0.2, "train.py:40", True), "ev": "loader_rebuilt"}
    evs = [user, rebuilt, *_epoch("100.1", 1.0, 0.1, 0.5, (201, 202))]
    (found,) = loaders(by_kind(evs), [], {}, 0, int(3 * S))
    assert found.id == "L1" and found.site == "train.py:12"
    assert found.persistent_workers and len(found.epochs) == 1
    assert [w.pid for w in found.workers] == [201, 202]


def test_an_epoch_left_early_ends_at_its_last_batch_and_keeps_its_plan() -> None:
    evs = [_loader("L1", 0.1, "t.py:3", True)]
    for start, batches, ended in ((1.0, 5, "left"), (2.0, 8, "left"), (3.0, 8, "exhausted")):
        evs += [
            _ev("iter_start", start, loader="L1", planned=8),
            _ev("iter_first_batch", start + 0.1, loader="L1"),
            _ev("iter_end", start + 0.4, loader="L1", batches=batches, ended=ended),
        ]
    # A last iter() the program died in: cut, told apart from the left ones.
    evs.append(_ev("iter_start", 4.0, loader="L1", planned=8))
    (found,) = loaders(by_kind(evs), [], {}, 0, int(5 * S))
    assert [e.ended for e in found.epochs] == ["left", "left", "exhausted", None]
    # The first was left 3 batches short of its len(); the cut one ran none.
    assert [(e.batches, e.planned_batches) for e in found.epochs] == [
        (5, 8),
        (8, 8),
        (8, 8),
        (None, 8),
    ]
    assert [e.wall_s is not None for e in found.epochs] == [True, True, True, False]
    assert found.epochs[0].wall_s is not None and abs(found.epochs[0].wall_s - 0.4) < 1e-9


def test_a_non_persistent_pool_left_alive_beside_another_loader_is_an_idle_pool() -> None:
    # L1 (validation, not persistent): its iterator is left, its pool lives on through
    # L2's epoch, and ends when L1's next iter() replaces it.
    val = [e for e in _epoch("L1", 1.0, 0.1, 0.3, (201, 202)) if e["ev"] != "worker_exit"]
    evs = [_loader("L1", 0.1, "dm.py:9", False), _loader("L2", 0.2, "dm.py:5", True), *val]
    evs += _epoch("L2", 2.0, 0.1, 1.0, (301, 302))
    evs += [_ev("worker_exit", 4.01, pid=p) for p in (201, 202)]
    evs += _epoch("L1", 4.0, 0.1, 0.3, (203, 204))
    found = loaders(by_kind(evs), [], {}, 0, int(6 * S))
    # The left pool served no batch of the epoch that replaced it: fresh workers each.
    assert found[0].workers_reused is False
    (idle,) = [f for f in find(found, pools(found, 6.0), ()) if f.id == "idle-pools"]
    assert idle.title.startswith(
        "loader L1's 2 non-persistent workers stay alive and idle while loader L2 runs"
    )
    assert idle.evidence["persistent_workers"] is False and "iterator" in idle.fix


def _run(
    lid: str, epochs: tuple[tuple[float, float, int, str], ...], planned: int
) -> list[dict[str, object]]:
    """(start, wall, batches, ended) per epoch, each 0.05 s to its first batch."""
    evs: list[dict[str, object]] = []
    for start, wall, batches, ended in epochs:
        evs += [
            _ev("iter_start", start, loader=lid, planned=planned),
            _ev("iter_first_batch", start + 0.05, loader=lid),
            _ev("iter_end", start + wall, loader=lid, batches=batches, ended=ended),
        ]
    return evs


def test_an_epoch_left_short_among_whole_ones_is_no_epoch_figure() -> None:
    """See NOTE [epochs left early]. Lightning's sanity check (2 of 13 validation
    batches) read as the loader's cold epoch, faster than its steady ones; a run
    stopped by Ctrl-C mid-epoch read as a steady epoch."""
    sanity = (1.0, 0.09, 2, "left")
    full = tuple((2.0 + i, 0.21, 13, "left") for i in range(3))
    stopped = (6.0, 0.05, 4, "left")
    evs = [_loader("L1", 0.1, "val.py:3", False), *_run("L1", (sanity, *full, stopped), 13)]
    (found,) = loaders(by_kind(evs), [], {}, 0, int(8 * S))
    assert found.cold_epoch_s is None
    assert found.steady_epoch_s is not None and found.steady_epoch_s.n == 3
    assert abs(found.steady_epoch_s.median - 0.21) < 1e-9
    # The first batch of a short epoch was waited for all the same.
    assert found.cold_first_batch_s is not None and abs(found.cold_first_batch_s - 0.05) < 1e-9
    assert epoch_count(found) == "3 (+2 short)"


def test_epochs_left_after_the_same_count_every_time_are_the_users_epochs() -> None:
    # limit_train_batches=5 of 13: every epoch is short, and each is an epoch.
    limited = tuple((1.0 + i, 0.1, 5, "left") for i in range(4))
    evs = [_loader("L1", 0.1, "t.py:3", True), *_run("L1", limited, 13)]
    (found,) = loaders(by_kind(evs), [], {}, 0, int(6 * S))
    assert found.cold_epoch_s is not None and found.steady_epoch_s is not None
    assert found.steady_epoch_s.n == 3 and epoch_count(found) == "4"
