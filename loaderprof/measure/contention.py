"""How much of the machine other processes took while a run measured.

The 1-minute load average read once at the end misses a CPU hog that ran through
the trials and stopped (or started) near the end, and counts loaderprof's own
workers as load. What competes with the trials is the CPU time the whole machine
spent busy less the CPU time of this process and every descendant it reaped (the
template, the trials, their workers): both read at the run's start and end.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# Other processes' share of the usable cores above which timings are flagged: a
# quarter of a 2-core runner is one busy loop on half the run.
BUSY_SHARE = 0.25


@dataclass(frozen=True)
class CpuMark:
    busy_s: float  # the machine's busy CPU seconds since boot (every core)
    own_s: float  # this process and its reaped descendants
    at_s: float  # monotonic clock


def mark() -> CpuMark | None:
    """Now; None where the machine's CPU times cannot be read."""
    import psutil

    try:
        t = psutil.cpu_times()
    except (OSError, AttributeError):
        return None
    # iowait and idle are not busy; guest time is already inside user.
    busy = sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq", "steal"))
    own = os.times()
    return CpuMark(
        busy_s=busy,
        own_s=own.user + own.system + own.children_user + own.children_system,
        at_s=time.monotonic(),
    )


def other_cores(start: CpuMark | None, end: CpuMark | None) -> float | None:
    """Cores other processes kept busy on average between the two marks; None where
    a mark is missing or the span is too short to say."""
    if start is None or end is None or end.at_s - start.at_s < 1.0:
        return None
    others = (end.busy_s - start.busy_s) - (end.own_s - start.own_s)
    return max(0.0, others / (end.at_s - start.at_s))
