"""See NOTE [data wait]. The split's arithmetic and the clock that takes it, on a fake
iterator of known waits (no processes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from loaderprof.inside.waits import WaitClock, wait_split
from loaderprof.model.codec import from_dict, to_dict
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.trials import EpochResult


def test_shares_and_the_step_are_the_epoch_less_its_waits() -> None:
    w = WaitSplit(epoch_s=10.0, first_s=3.0, steady_s=0.5, batches=20)
    assert w.wait_s == 3.5
    assert w.step_s == pytest.approx(6.5)
    assert (w.wait_share, w.share(w.first_s), w.share(w.steady_s)) == pytest.approx(
        (0.35, 0.3, 0.05)
    )
    # A zero-length epoch has no shares, and waits never make a step negative.
    empty = WaitSplit(0.0, 0.0, 0.0, 0)
    assert empty.wait_share is None and empty.step_s == 0.0


def test_of_is_the_median_epoch_itself_so_its_wall_is_the_tables() -> None:
    splits = [WaitSplit(1.0, 0.1, 0.3, 10), None, WaitSplit(3.0, 0.5, 0.1, 10)]
    splits.append(WaitSplit(2.0, 0.2, 0.2, 12))
    w = WaitSplit.of(splits)
    assert w == WaitSplit(2.0, 0.2, 0.2, 12)
    assert w is not None and w.wait_s == w.first_s + w.steady_s
    # Of an even number, the faster of the middle two (the table's median lies between).
    assert WaitSplit.of(splits[:2] + splits[3:]) == WaitSplit(1.0, 0.1, 0.3, 10)
    assert WaitSplit.of([None, None]) is None


def test_an_old_epoch_without_a_wait_still_loads() -> None:
    epoch = EpochResult(1, 0.0, 1.0, 0.5, 4, 128, 128.0, (1,), (1,))
    data = to_dict(epoch)
    del data["wait"]
    assert from_dict(EpochResult, data).wait is None
    waited = dataclasses.replace(epoch, wait=WaitSplit(1.0, 0.5, 0.1, 4))
    assert from_dict(EpochResult, to_dict(waited)) == waited


class _Ticks:
    """perf_counter() as a script of readings, so each wait is known."""

    def __init__(self, readings: list[float]) -> None:
        self.readings = iter(readings)

    def __call__(self) -> float:
        return next(self.readings)


def test_the_clock_counts_iter_and_the_first_next_as_the_first_batchs_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import loaderprof.inside.waits as waits

    # iter() 0→2; next() 2→3 (batch 1), 3→3.5 (batch 2), 3.5→3.75 (StopIteration).
    monkeypatch.setattr(waits.time, "perf_counter", _Ticks([0, 2, 2, 3, 3, 3.5, 3.5, 3.75]))
    clock = WaitClock()
    assert list(clock.batches(clock.iter([10, 20]))) == [10, 20]
    assert (clock.first_s, clock.steady_s) == (3.0, 0.75)
    end = {"batches": 2, "wait_first": 3.0, "wait_steady": 0.75}
    assert wait_split(end, 5.0) == WaitSplit(5.0, 3.0, 0.75, 2)
    assert wait_split({"batches": 2}, 5.0) is None


def test_a_second_pass_waits_for_its_first_batch_again() -> None:
    clock = WaitClock()
    clock.start_pass(1.0)
    clock.took(0.5, batch=True)
    clock.took(0.25, batch=True)
    # The validation pass: its iter() and first batch are a start-up again.
    clock.start_pass(2.0)
    clock.took(0.5, batch=True)
    clock.took(0.125, batch=False)
    assert (clock.first_s, clock.steady_s) == (4.0, 0.375)
    # The end event says how many first batches `first_s` holds, and the split keeps it.
    end = {"batches": 3, **clock.fields()}
    assert wait_split(end, 6.0) == WaitSplit(6.0, 4.0, 0.375, 3, passes=2)
    assert wait_split({"batches": 3, "wait_first": 1, "wait_steady": 0}, 2.0) == WaitSplit(
        2.0, 1.0, 0.0, 3, passes=1
    )
    # A pass that ends before any batch: its whole wait was for a first batch.
    empty = WaitClock()
    empty.start_pass(0.25)
    empty.took(0.25, batch=False)
    assert (empty.first_s, empty.steady_s) == (0.5, 0.0)


def test_the_median_epochs_parts_add_up_and_never_exceed_it() -> None:
    # Medians taken apart would put waits of 0.30 + 0.45 s in a 0.70 s "median epoch"
    # (107 %); the median epoch itself waits 0.30 + 0.35 s of its 0.70 s.
    epochs = [
        WaitSplit(0.70, 0.30, 0.35, 8),
        WaitSplit(0.80, 0.20, 0.45, 8),
        WaitSplit(0.60, 0.35, 0.50, 8),
    ]
    m = WaitSplit.of(epochs)
    assert m is not None
    assert (m.epoch_s, m.first_s, m.steady_s) == (0.70, 0.30, 0.35)
    assert m.step_s == pytest.approx(0.05) and m.wait_share is not None
    assert m.wait_share <= 1.0


class _Clock:
    """perf_counter and sleep on a fake clock that the loader below advances too."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_the_scripts_own_clock_splits_an_epoch_as_the_note_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`examples.timed_epoch`, the clock the e2e tests and benchmarks set loaderprof's
    data wait against: the first batch's wait, the later ones' (the StopIteration's
    included), and the steps, apart."""
    from loaderprof import examples

    clock = _Clock()
    monkeypatch.setattr(examples, "time", clock)

    def batches() -> Iterator[int]:
        clock.sleep(0.3)  # a fresh pool starting
        yield 0
        for i in range(1, 4):
            clock.sleep(0.05)
            yield i
        clock.sleep(0.01)  # the StopIteration's own wait

    got = examples.timed_epoch(_Once(batches), step_s=0.02)
    assert got["batches"] == 4
    assert got["first_s"] == pytest.approx(0.3)
    assert got["steady_s"] == pytest.approx(3 * 0.05 + 0.01)
    assert got["step_s"] == pytest.approx(4 * 0.02)
    assert got["epoch_s"] == pytest.approx(0.3 + 0.16 + 0.08)


class _Once:
    def __init__(self, make: Callable[[], Iterator[int]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[int]:
        return self.make()
