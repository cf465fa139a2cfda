"""The main process's waits for data, as it takes them (NOTE [data wait]).

One `WaitClock` per epoch, in compare's trial child (inside/trial.py) and in the
user's own process under `watch` (inside/hook.py). It costs two `perf_counter()`
calls and a few additions per batch, and allocates nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    # The hook imports this module in the user's process: the model only when assembling.
    from loaderprof.model.datawait import WaitSplit

T = TypeVar("T")


class WaitClock:
    """The epoch's waits so far: `first_s` until each pass has its first batch,
    `steady_s` after."""

    __slots__ = ("_starting", "first_s", "passes", "steady_s")

    def __init__(self) -> None:
        self.first_s = 0.0
        self.steady_s = 0.0
        self.passes = 0
        self._starting = True

    def start_pass(self, took_s: float) -> None:
        """An `iter()` that took `took_s`: a new pass (the epoch's, or its validation
        pass), whose first batch is a start-up wait again."""
        self.first_s += took_s
        self.passes += 1
        self._starting = True

    def before_first(self, took_s: float) -> None:
        """Main-process time the loader's last pool took to shut down after this pass's
        `iter()`, before its first batch: a wait persistent workers remove too."""
        if self._starting:
            self.first_s += took_s

    def took(self, took_s: float, *, batch: bool) -> None:
        """One `__next__`: `batch` False when it ended the pass (StopIteration)."""
        if self._starting:
            self.first_s += took_s
            self._starting = not batch
        else:
            self.steady_s += took_s

    def fields(self) -> dict[str, float]:
        """What the epoch's end event carries."""
        return {
            "wait_first": round(self.first_s, 6),
            "wait_steady": round(self.steady_s, 6),
            "wait_passes": max(1, self.passes),
        }

    def iter(self, loader: Iterable[T]) -> Iterator[T]:
        """`iter(loader)`, timed: the loader's own iterator (its workers stay readable)."""
        t = time.perf_counter()
        it = iter(loader)
        self.start_pass(time.perf_counter() - t)
        return it

    def batches(self, it: Iterator[T]) -> Iterator[T]:
        """Each `next(it)`, timed: what `for batch in it` does."""
        clock = time.perf_counter
        while True:
            t = clock()
            try:
                batch = next(it)
            except StopIteration:
                self.took(clock() - t, batch=False)
                return
            self.took(clock() - t, batch=True)
            yield batch


def wait_split(end: Any, wall_s: float) -> WaitSplit | None:
    """An epoch's waits as its end event (`epoch_end`, `iter_end`) carries them, with its
    wall; None in events written before they did."""
    from loaderprof.model.datawait import WaitSplit

    first, steady = end.get("wait_first"), end.get("wait_steady")
    if first is None or steady is None:
        return None
    batches, passes = int(end.get("batches", 0)), int(end.get("wait_passes", 1))
    return WaitSplit(wall_s, float(first), float(steady), batches, passes)
