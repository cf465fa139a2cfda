"""The environment a report was measured in, and what differs between two.

Timing figures transfer between reports only when these match closely: a
baseline from another machine, Python or torch build is flagged, never trusted.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loaderprof.version import __version__

# Every report kind's version (compare, sweep, compare -- COMMAND, watch, watch --pid):
# one reader, report/json_report.read_report, refuses a newer one.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ReportHead:
    """What a saved report begins with: `kind` and `schema_version` say which model
    and version reads it back (`loaderprof report` dispatches on them), `tool` and
    `environment` what measured it and where, so a baseline from elsewhere is flagged."""

    kind: str
    schema_version: int
    tool: Mapping[str, Any]
    environment: Mapping[str, Any]


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _cgroup_memory_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="utf-8") as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdecimal() and int(raw) < 1 << 60:
            return int(raw)
        return None
    return None


def open_files_limit() -> int | None:
    """The soft limit on open files this process has, which the processes it starts
    (a trial, a watched script, their workers) inherit; None where unlimited."""
    import resource

    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _cgroup_cpu_limit() -> float | None:
    """CPUs allowed by cgroup v2 cpu.max ("max 100000" means no limit)."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="utf-8") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def usable_cpus() -> int | None:
    """The CPUs this process may run on: its affinity mask, capped by the cgroup's
    cpu.max quota (a container's `--cpus`), which os.cpu_count() ignores."""
    try:
        cpus: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count()
        if count is None:
            return None
        cpus = count
    quota = _cgroup_cpu_limit()
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, math.ceil(cpus))


def tool() -> dict[str, str]:
    """What measured a report: every kind names it the same way."""
    return {"name": "loaderprof", "version": __version__}


def created_now() -> str:
    """When a run ended (UTC, ISO 8601, to the second): a saved report names itself
    by it as a baseline."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def environment(imported: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    import psutil

    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "cgroup_memory_limit_bytes": _cgroup_memory_limit(),
        "cgroup_cpu_limit": _cgroup_cpu_limit(),
        "cpus_usable": usable_cpus(),
        "open_files_limit": open_files_limit(),
        "load_average": load,
        "torch": (imported or {}).get("torch"),
        "start_method": (imported or {}).get("start_method"),
        "accelerator": (imported or {}).get("accelerator"),
        "executable": sys.executable,
        # The step /proc counts memory in (see NOTE [reading resolution]).
        "page_bytes": os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None,
    }


# What a report's figures depend on: a baseline that differs in one is flagged, and its
# timing gates may not transfer (a Dataset's "fingerprint" is inside/fingerprint.py's).
TIMING_KEYS = (
    "python",
    "torch",
    "machine",
    "cpu_model",
    "cpu_count",
    "cgroup_memory_limit_bytes",
    "cgroup_cpu_limit",
    "start_method",
)


def environment_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two environments in ways that change timings."""
    diffs = []
    for key in TIMING_KEYS:
        if a.get(key) != b.get(key):
            diffs.append(f"{key}: {a.get(key)!r} → {b.get(key)!r}")
    return diffs
