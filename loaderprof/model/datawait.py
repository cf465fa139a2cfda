"""Where an epoch waits for data: its wall split into the main process's waits inside
the loader and the step between batches.

NOTE [data wait]: the wait is the time the main process spends inside the loader's
own calls, timed with `time.perf_counter()` around each: its `iter()` and its
`__next__` (inside/waits.py). It is split by what would remove it:

* `first_s`: `iter()` and the `__next__` that returns the epoch's first batch. A
  non-persistent pool starts its workers here (processes, the Dataset's pickle under
  spawn, `worker_init_fn`, lazily opened resources): what `persistent_workers=True`
  removes from every epoch after the first. A framework that leaves its iterators
  (Lightning) drops the last one once the next `iter()` replaced it: the main process
  then joins the old pool's workers before it asks for the first batch, and that join
  (timed around the iterator's `_shutdown_workers`) counts here too: persistence
  removes it as well. Under `watch` on Lightning it was 30–40 ms of a 114 ms wait
  from `iter()` to the first batch, which the step had held.
* `steady_s`: every later `__next__` (batches 2..n, and the call that ends the epoch):
  the batches the workers had not ready in time, what more workers or a larger
  `prefetch_factor` would cut.

The step (`step_s`) is the rest of the epoch: the training loop's own work between
batches (forward, backward, logging), and the loop's bookkeeping. What the loader
does in its workers while the step runs is not a wait and is not counted. With a
validation pass (NOTE [validation pass]) its first batch counts in `first_s` and its
later ones in `steady_s`: its start-up is a start-up too, and `passes` says how many
first batches `first_s` holds (the screen names them, not "the 1st batch"). A
Dataset's `set_epoch`, a sampler's, and loaderprof's own state check run before
`iter()` and are in neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class WaitSplit:
    """One epoch's wall and its waits for data (NOTE [data wait]), in seconds; of
    several epochs, the median one's (`of`)."""

    epoch_s: float
    first_s: float
    steady_s: float
    batches: int
    # The passes whose first batches `first_s` holds: 2 where the epoch ran a validation
    # pass too (each pass starts its workers); 1 in reports written before it was counted.
    passes: int = 1

    @classmethod
    def of(cls, splits: Iterable[WaitSplit | None]) -> WaitSplit | None:
        """The median epoch itself, by wall, of those that have a split (None: none
        has; of an even number, the faster of the two middle ones): its parts add up to
        its wall, its wait never exceeds it, and its wall is the median the epoch table
        prints (within half the gap between the middle two). Each part's median taken
        apart made an epoch no table printed (92 ms beside a 114 ms median steady
        epoch), and the epoch's and each wait's medians apart, waits above the epoch."""
        have = sorted((s for s in splits if s is not None), key=lambda s: s.epoch_s)
        return have[(len(have) - 1) // 2] if have else None

    @property
    def wait_s(self) -> float:
        return self.first_s + self.steady_s

    @property
    def step_s(self) -> float:
        """The epoch less its waits: the training's own time between batches."""
        return max(0.0, self.epoch_s - self.wait_s)

    def share(self, part: float) -> float | None:
        """`part` (seconds) as a share of the epoch."""
        return part / self.epoch_s if self.epoch_s > 0 else None

    @property
    def wait_share(self) -> float | None:
        return self.share(self.wait_s)
