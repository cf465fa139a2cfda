"""A figure with its spread: the median and quartiles of what was measured, and a
ratio with its interval (schema_version 1)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class PauseMemory:
    """A pool's memory in each pause between its epochs, what the growth check reads
    (`checks.series.idle_growth`): its workers' USS together and their RSS together."""

    idle_uss_by_epoch: tuple[int, ...] = ()
    idle_rss_by_epoch: tuple[int, ...] = ()
    # The epoch each pause followed: a pause with no whole reading is left out, so a
    # step may span two epochs (NOTE [pauses not read]). () in reports before it.
    idle_after_epochs: tuple[int, ...] = ()


@dataclass(frozen=True)
class Stat:
    """A median with its spread; quartiles by linear interpolation."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float:
        return self.iqr / self.median if self.median else math.inf

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat | None:
        vals = sorted(float(v) for v in values)
        if not vals:
            return None
        if len(vals) == 1:
            v = vals[0]
            return cls(v, v, v, v, v, 1)
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
        return cls(statistics.median(vals), q1, q3, vals[0], vals[-1], len(vals))


# See NOTE [earned intervals]. An interval reaching more than this factor from its
# point estimate on either side says nothing a user could act on (a t with one
# degree of freedom on two trials per arm gives such); it is reported as "cannot
# decide with this many trials", never as a finding.
UNINFORMATIVE_FACTOR = 10.0


def informative_interval(value: float, low: float, high: float, has_interval: bool) -> bool:
    """NOTE [earned intervals], the one rule: an interval was earned, is finite, and
    (for positive figures, read on the log scale) reaches no more than
    UNINFORMATIVE_FACTOR from the value on either side. An interval on values that may
    be zero (idle memory) is judged by being earned alone."""
    if not has_interval or not all(math.isfinite(x) for x in (value, low, high)):
        return False
    if value > 0 and low > 0:
        return high <= value * UNINFORMATIVE_FACTOR and low >= value / UNINFORMATIVE_FACTOR
    return value > 0 or low <= value <= high


class _Interval:
    """A figure with its 95 % interval. NOTE [earned intervals]: an interval is
    printed, exported and gated only where it was earned. A figure read once has none:
    `has_interval` is False and ci_low = ci_high = value stand for "no interval"
    (n=1), never for certainty. An interval reaching more than UNINFORMATIVE_FACTOR
    from the value on either side is not `informative`: it is reported as "cannot
    decide with this many trials"."""

    value: float
    ci_low: float
    ci_high: float
    has_interval: bool

    @property
    def informative(self) -> bool:
        return informative_interval(self.value, self.ci_low, self.ci_high, self.has_interval)


@dataclass(frozen=True)
class Ratio(_Interval):
    """persistent / non_persistent, with its interval (see Comparison.confidence)."""

    value: float
    ci_low: float
    ci_high: float
    has_interval: bool = True

    @property
    def informative(self) -> bool:
        # A ratio is positive: an interval reaching 0 says nothing.
        return self.ci_low > 0 and super().informative


@dataclass(frozen=True)
class MetricValue(_Interval):
    """A gateable figure with its interval and the number of values behind it: no gate
    may fail with certainty on one without an interval."""

    value: float
    ci_low: float
    ci_high: float
    n: int
    has_interval: bool = True
    # The interval's level: 0.95, or the adaptive plan's look level for the steady
    # epoch (NOTE [sequential looks]), which its gates must name.
    confidence: float = 0.95
    # A difference (the seconds saved per epoch), which may lie near or below zero:
    # its interval comes from a ratio's that was informative, and its own ends say
    # nothing of its width on the log scale (an interval of 5–240 ms around 118 ms was
    # called too wide, where one of −50–300 ms was not).
    signed: bool = False

    @property
    def informative(self) -> bool:
        if self.signed:
            ends = (self.value, self.ci_low, self.ci_high)
            return self.has_interval and all(math.isfinite(x) for x in ends)
        return super().informative
