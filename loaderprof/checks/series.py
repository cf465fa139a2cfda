"""Shapes of short series of readings (one per epoch), shared by the checks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

# Idle USS growth between pauses that counts as "grows every epoch": at least this
# much per epoch, and this share of where it started.
GROWTH_MIN_BYTES = 4 * 1024 * 1024
GROWTH_MIN_FRACTION = 0.05


def rises_steadily(values: Sequence[float], min_step: float, epochs: int | None = None) -> bool:
    """Rises at ≥ 75 % of the steps and by ≥ min_step per epoch overall: growth every
    epoch, told apart from a one-off step (a warm-up) or noise. `epochs`: how many
    epochs the series spans, where a pause without a reading left one out (NOTE
    [pauses not read]); by default one a step."""
    steps = len(values) - 1
    if steps < 2:
        return False
    ups = sum(1 for a, b in itertools.pairwise(values) if b > a)
    spanned = steps if epochs is None else max(epochs, steps)
    return ups >= 0.75 * steps and values[-1] - values[0] >= min_step * spanned * 0.75


# NOTE [growth to tell]: a series that rose after each of a few epochs does not say
# whether it keeps rising (a leak) or levels off (a cache filling, files opened once per
# chunk until every chunk is open, an allocator settling). A warning needs this many
# pauses, rising to the last third of them; fewer that rise are reported as growth too
# early to tell, at info, naming this many epochs.
GROWTH_EPOCHS_TO_TELL = 10


def growth_trend(values: Sequence[float], min_step: float, after: Sequence[int] = ()) -> str | None:
    """ "grows": rises steadily over ≥ GROWTH_EPOCHS_TO_TELL pauses and still does over
    their last third (it has not levelled off); "too-few": rises steadily over fewer;
    None: does not rise steadily, or levelled off. `after`: the epoch each value was
    read after, where pauses may be missing (NOTE [pauses not read])."""
    if not rises_steadily(values, min_step, epochs_spanned(after)):
        return None
    if len(values) < GROWTH_EPOCHS_TO_TELL:
        return "too-few"
    cut = len(values) // 3 + 1
    tail = values[-cut:]
    return "grows" if rises_steadily(tail, min_step, epochs_spanned(after[-cut:])) else None


# NOTE [pauses not read]: a watched job's pauses between epochs are read by whichever
# whole walk (every USS reading) falls inside them. watch reads the hook's events as
# they come (every 50 ms) and begins a fresh walk once every pass has ended, the walk
# under way giving way to it (watching/run.py `_Pauses`): a walk takes a few hundred ms
# on a busy machine, and one begun late in the epoch left a 0.4 s pause unread. A pause
# shorter than a walk still gets none: its series then skips an epoch, and one step
# covers two. Each reading keeps the epoch it followed, so growth is counted per epoch,
# not per reading.


def epochs_spanned(after: Sequence[int]) -> int | None:
    """How many epochs a series read after these epochs spans; None: one a step."""
    return after[-1] - after[0] if len(after) >= 2 else None


# What a cache or a leak allocates is new to RSS too, so RSS grows about as much as
# USS; pages copied on a write were already in RSS (NOTE [copy-on-read]), so it stays
# put. A quarter tells them apart with room for an RSS reading a step behind (a pause
# read before the last pages were touched).
NEW_MEMORY_MIN_RSS_SHARE = 0.25


def new_memory(uss_growth: float, rss_growth: float) -> bool:
    """USS growth is new memory (a cache, a leak), not pages copied on a write: RSS
    grew by at least a quarter as much, first to last. One rule for compare and watch."""
    return rss_growth >= NEW_MEMORY_MIN_RSS_SHARE * uss_growth


def idle_growth(
    uss: Sequence[float], rss: Sequence[float], after: Sequence[int] = ()
) -> str | None:
    """The trend (`growth_trend`) of a pool's or worker's memory in the pauses between
    epochs, where it is new memory (`new_memory`); None where it does not grow. One rule
    for compare's workers, watch's loaders and an attached job's pools."""
    if not uss or not rss:
        return None
    trend = growth_trend(uss, max(GROWTH_MIN_BYTES, GROWTH_MIN_FRACTION * uss[0]), after)
    # Overall, not step by step (RSS can lag a step behind).
    if trend is None or not new_memory(uss[-1] - uss[0], rss[-1] - rss[0]):
        return None
    return trend


# NOTE [copy-on-read]: a forked worker that reads Python objects it inherited writes
# their reference counts, and every page it touches turns from shared to private: its
# USS rises with what it reads while RSS stays flat (those pages were already in RSS).
# Measured from the worker's first USS reading after its first batch (what it copied
# while starting is start-up; watch, which sees no worker's own batches, takes the later
# of its epoch's first batch and the worker's ready) to its USS peak (PyTorch issue
# #13246), and only where that growth spread over the readings: one step carrying most
# of it is a one-off (a start-up copy still finishing on a busy machine, a gc pass over
# inherited objects), however large (`measure.readings.copy_window`).
COW_MIN_BYTES = 16 * 1024 * 1024
COW_MIN_FRACTION_OF_USS = 0.10
COW_MAX_RSS_SHARE = 0.5


def copies_on_read(uss_growth: float, rss_growth: float, start_uss: float) -> bool:
    """USS grew with reading by ≥ 16 MiB and 10 % of where it started, and RSS by at
    most half as much: shared pages turned private, not new memory."""
    return (
        uss_growth >= max(COW_MIN_BYTES, COW_MIN_FRACTION_OF_USS * start_uss)
        and rss_growth <= COW_MAX_RSS_SHARE * uss_growth
    )
