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
