"""How much of the machine other processes took while a run measured.

The 1-minute load average read once at the end misses a CPU hog that ran through
the trials and stopped (or started) near the end, and counts loaderprof's own
workers as load. What competes with the trials is the CPU time the whole machine
spent busy less the CPU time of this process and every descendant it reaped (the
template, the trials, their workers) and of those it does not (`count_unreaped`):
both read at the run's start and end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loaderprof.inside.events import Ev
from loaderprof.units import plural

# Other processes' share of the usable cores above which timings are flagged: a
# quarter of a 2-core runner is one busy loop on half the run.
BUSY_SHARE = 0.25


# CPU seconds of processes the run started that no process of its own reaps (a
# trial's forkserver and the workers it forked are orphaned when the trial ends), as
# each trial read them before it ended: their time never reaches `os.times()`, and
# would otherwise read as other processes' load.
_unreaped_s = 0.0


def count_unreaped(seconds: float) -> None:
    global _unreaped_s
    _unreaped_s += max(0.0, seconds)


def unreaped_cpu_s(events: Iterable[Mapping[str, Any]]) -> float:
    """What the processes that were exiting said their orphans ran (their EXITING
    events: a trial's, or a hooked command process's)."""
    return sum(float(ev.get("unreaped_cpu_s") or 0) for ev in events if ev["ev"] == Ev.EXITING)


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
        own_s=own.user + own.system + own.children_user + own.children_system + _unreaped_s,
        at_s=time.monotonic(),
    )


def other_cores(start: CpuMark | None, end: CpuMark | None) -> float | None:
    """Cores other processes kept busy on average between the two marks; None where
    a mark is missing or the span is too short to say."""
    if start is None or end is None or end.at_s - start.at_s < 1.0:
        return None
    others = (end.busy_s - start.busy_s) - (end.own_s - start.own_s)
    return max(0.0, others / (end.at_s - start.at_s))


def busy_warning(env: dict[str, Any], other_cores: float | None) -> str | None:
    """Whether other processes competed with the trials. The machine's CPU time less
    the run's own (measure/contention.py) where the run may use every core it counts;
    in a container capped below the host's cores, the host's other tenants are not
    competitors, and only a load average above the usable cores says anything."""
    cores, usable = env.get("cpu_count"), env.get("cpus_usable")
    if other_cores is not None and cores and usable == cores:
        env["other_cpu_cores"] = round(other_cores, 2)
        if other_cores < BUSY_SHARE * cores:
            return None
        return (
            f"the machine was busy: other processes kept {other_cores:.1f} of "
            f"{plural(cores, 'core')} busy on average during the run, so timings may be noisy"
        )
    load = env.get("load_average")
    if load and usable and load[0] >= usable:
        return (
            f"the machine was busy (load average {load[0]:.1f} on "
            f"{plural(usable, 'usable core')}): timings may be noisy"
        )
    return None
