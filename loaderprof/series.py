"""Shapes of short series of readings (one per epoch), shared by the checks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

# Idle USS growth between pauses that counts as "grows every epoch": at least this
# much per epoch, and this share of where it started.
GROWTH_MIN_BYTES = 4 * 1024 * 1024
GROWTH_MIN_FRACTION = 0.05


def rises_steadily(values: Sequence[float], min_step: float) -> bool:
    """Rises at ≥ 75 % of the steps and by ≥ min_step·(steps) overall: growth every
    epoch, told apart from a one-off step (a warm-up) or noise."""
    steps = len(values) - 1
    if steps < 2:
        return False
    ups = sum(1 for a, b in itertools.pairwise(values) if b > a)
    return ups >= 0.75 * steps and values[-1] - values[0] >= min_step * steps * 0.75


# NOTE [copy-on-read]: a forked worker that reads Python objects it inherited writes
# their reference counts, and every page it touches turns from shared to private: its
# USS rises with what it reads while RSS stays flat (those pages were already in RSS).
# Measured from the worker's first USS reading after its first batch (what it copied
# while starting is start-up) to its USS peak (PyTorch issue #13246).
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
