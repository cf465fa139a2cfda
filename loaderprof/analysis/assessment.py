"""What the steady ratio says against the --min-gain line, before any words: the
numbers the verdict (loaderprof.analysis.verdict) words, and the adaptive plan's
stop rule reads."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from loaderprof.analysis.stats import CONFIDENCE, Direction, significant_direction
from loaderprof.model.metrics import Ratio

Side = Literal["below", "above", "straddles"]


@dataclass(frozen=True)
class Assessment:
    """NOTE [words follow numbers]: everything the verdict says about the steady
    ratio, computed once, on the log scale, from the interval and test it prints:
    whether it is significant, where it lies against the --min-gain line, whether it
    means anything at all, and how many more units would decide it."""

    ratio: Ratio
    p: float | None
    confidence: float
    n: int
    unit: str | None
    line: float
    direction: Direction | None
    side: Side
    informative: bool
    # The line the interval must clear to decide: the --min-gain line, or 1.
    target: float
    # About how many more units per arm would put the interval on one side of
    # `target`; None when the ratio sits at it (or nothing can be said).
    more: int | None
    at_line: bool


def assess(
    r: Ratio, p: float | None, confidence: float, min_gain: float, n: int, unit: str | None
) -> Assessment:
    line = 1.0 - min_gain
    side: Side = "below" if r.ci_high < line else "above" if r.ci_low > line else "straddles"
    direction = significant_direction(r, p, 1 - confidence)
    target = line if (r.value <= line or r.ci_low <= line) else 1.0
    more, at_line = None, False
    if r.has_interval and r.ci_low > 0 and r.value > 0 and n > 0:
        half = math.log(r.ci_high / r.ci_low) / 2
        distance = abs(math.log(r.value / target))
        at_line = half > 0 and distance < 0.1 * half
        if half > 0 and not at_line:
            more = max(1, math.ceil(n * (half / distance) ** 2) - n)
    return Assessment(
        r, p, confidence, n, unit, line, direction, side, r.informative, target, more, at_line
    )


def settled(r: Ratio, min_gain: float) -> bool:
    """The adaptive plan's stop rule: the steady ratio's interval means something and
    lies wholly on one side of the --min-gain line (a saving worth enabling for, or
    not). NOTE [earned intervals]."""
    line = 1.0 - min_gain
    return r.informative and (r.ci_high < line or r.ci_low > line)


def epochs_to_decide(r: Ratio, n: int, min_gain: float) -> int | None:
    """About how many more units per arm would put the interval wholly on one side of
    1 − min_gain (or of 1), from the measured spread, on the log scale: the interval
    narrows as 1/√n. None when the ratio sits on the line itself."""
    return assess(r, None, CONFIDENCE, min_gain, n, None).more
