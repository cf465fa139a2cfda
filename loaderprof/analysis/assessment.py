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
    # `target`; None when none up to MOST_UNITS would (or nothing can be said).
    more: int | None
    # No number of units up to MOST_UNITS would: the ratio sits that close to `target`.
    at_line: bool


# Past this many units per arm the extrapolation stops: the ratio sits at the line.
MOST_UNITS = 100_000
# Degrees of freedom that make the t the normal (a report that did not keep them).
_MANY_DF = 1e9


def assess(
    r: Ratio,
    p: float | None,
    confidence: float,
    min_gain: float,
    n: int,
    unit: str | None,
    df: float | None = None,
) -> Assessment:
    """`df`: the t's degrees of freedom; None (a report written before it was kept)
    counts as many: the t is then the normal's now and later, so the count is the
    1/√n rule's alone, the most it can be (fewer degrees of freedom ask fewer trials)."""
    line = 1.0 - min_gain
    side: Side = "below" if r.ci_high < line else "above" if r.ci_low > line else "straddles"
    direction = significant_direction(r, p, 1 - confidence)
    target = line if (r.value <= line or r.ci_low <= line) else 1.0
    more, at_line = None, False
    if r.has_interval and r.ci_low > 0 and r.value > 0 and n > 0:
        half = math.log(r.ci_high / r.ci_low) / 2
        distance = abs(math.log(r.value / target))
        if half > 0:
            more = _units_to_decide(half, distance, n, df or _MANY_DF, confidence)
            at_line = more is None
    return Assessment(
        r, p, confidence, n, unit, line, direction, side, r.informative, target, more, at_line
    )


def _units_to_decide(
    half: float, distance: float, n: int, df: float, confidence: float
) -> int | None:
    """The fewest more units per arm whose interval's half-width (log scale) falls
    below `distance`: the standard error shrinks as 1/√n, and the t quantile with the
    degrees of freedom, each unit per arm adding at least one (Welch's can add two;
    memory trials add none). None past MOST_UNITS."""
    from scipy.special import stdtrit

    q = 1 - (1 - confidence) / 2
    se = half / float(stdtrit(df, q))

    def decides(total: int) -> bool:
        return float(stdtrit(df + total - n, q)) * se * math.sqrt(n / total) < distance

    if not decides(MOST_UNITS):
        return None
    # The half-width falls as units are added: bisect for the first total that decides.
    lo, hi = n, MOST_UNITS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi - n


def settled(r: Ratio, min_gain: float) -> bool:
    """The adaptive plan's stop rule: the steady ratio's interval means something and
    lies wholly on one side of the --min-gain line (a saving worth enabling for, or
    not). NOTE [earned intervals]."""
    line = 1.0 - min_gain
    return r.informative and (r.ci_high < line or r.ci_low > line)


def epochs_to_decide(r: Ratio, n: int, min_gain: float, df: float | None = None) -> int | None:
    """About how many more units per arm would put the interval wholly on one side of
    1 − min_gain (or of 1), from the measured spread, on the log scale (see
    `_units_to_decide`). None when no practical number would."""
    return assess(r, None, CONFIDENCE, min_gain, n, None, df).more
