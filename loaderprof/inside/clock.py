"""Process start times on the monotonic clock."""

from __future__ import annotations

import os
import time

# Nanoseconds in a second: every event and sample is stamped with time.monotonic_ns().
NS = 1_000_000_000


def process_start_ns(pid: int) -> int | None:
    """When `pid` started, as a `time.monotonic_ns()` value (Linux; else None).

    /proc/PID/stat field 22 counts clock ticks (usually 10 ms) since boot, on
    CLOCK_BOOTTIME; converting through the current BOOTTIME-MONOTONIC offset
    puts it on the clock all events use. psutil's create_time() goes through
    the wall clock and /proc/stat's whole-second boot time, so it can be off by
    up to a second.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat.rsplit(b")", 1)[1].split()[19])
        hz = os.sysconf("SC_CLK_TCK")
        boot_minus_mono = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - time.monotonic_ns()
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return ticks * NS // hz - boot_minus_mono
