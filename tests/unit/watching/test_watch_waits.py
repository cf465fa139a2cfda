"""See NOTE [data wait]. A watched loader's waits, from its `iter_end` events."""

from __future__ import annotations

import pytest

from loaderprof.model.datawait import WaitSplit
from loaderprof.watching.assemble import by_kind, loaders

S = 1_000_000_000


def _ev(ev: str, t: float, **kw: object) -> dict[str, object]:
    return {"ev": ev, "t": int(t * S), "pid": 100, **kw}


def _loader(lid: str) -> dict[str, object]:
    return _ev("loader_created", 0.1, loader=lid, site="t.py:1", num_workers=2)


def _epoch(lid: str, start: float, wall: float, **waits: float) -> list[dict[str, object]]:
    return [
        _ev("iter_start", start, loader=lid),
        _ev("iter_first_batch", start + 0.1, loader=lid),
        _ev("iter_end", start + wall, loader=lid, batches=8, **waits),
    ]


def test_each_epochs_wait_and_the_loaders_median_of_its_steady_epochs() -> None:
    evs = [_loader("a")]
    evs += _epoch("a", 1.0, 1.0, wait_first=0.5, wait_steady=0.25)
    evs += _epoch("a", 3.0, 0.5, wait_first=0.125, wait_steady=0.25)
    evs += _epoch("a", 4.0, 0.75, wait_first=0.0625, wait_steady=0.125)
    (ld,) = loaders(by_kind(evs), [], {}, 0, int(6 * S))
    assert ld.epochs[0].wait == WaitSplit(1.0, 0.5, 0.25, 8)
    assert ld.wait_epochs == "steady"
    assert ld.wait is not None
    # The median steady epoch itself: of two (0.5 and 0.75 s), the faster, whole.
    assert (ld.wait.epoch_s, ld.wait.first_s, ld.wait.steady_s) == pytest.approx((0.5, 0.125, 0.25))


def test_a_loader_iterated_once_gives_its_only_epoch_and_old_events_none() -> None:
    evs = [_loader("once"), *_epoch("once", 1.0, 1.0, wait_first=0.5, wait_steady=0.25)]
    evs += [_loader("old"), *_epoch("old", 2.0, 1.0), *_epoch("old", 3.5, 1.0)]
    once, old = loaders(by_kind(evs), [], {}, 0, int(6 * S))
    assert once.wait == WaitSplit(1.0, 0.5, 0.25, 8) and once.wait_epochs == "first"
    assert old.wait is None and old.wait_epochs is None
    assert all(e.wait is None for e in old.epochs)
