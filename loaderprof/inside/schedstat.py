"""A thread's CPU as /proc counts it, read inside a DataLoader worker by its probes
(inside/probe.py): what each thread ran and waited in the run queue (see NOTE [worker
threads]), and the run-queue wait the straggler check leaves out of a batch."""

from __future__ import annotations

import os

from loaderprof.inside.clock import NS


def task_ids(pid: int) -> list[str]:
    """This process's threads, as /proc names them (none if it cannot be read)."""
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def thread_cpu() -> dict[int, int]:
    """CPU ticks (user + system) each thread of this process has used."""
    pid = os.getpid()
    out: dict[int, int] = {}
    for tid in task_ids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                # After the command (which may hold spaces), utime and stime are the
                # 12th and 13th fields.
                rest = f.read().rsplit(b")", 1)[1].split()
            out[int(tid)] = int(rest[11]) + int(rest[12])
        except (OSError, IndexError, ValueError):
            continue
    return out


def thread_demand() -> dict[int, tuple[int, int, int]]:
    """Each thread of this process: nanoseconds run, nanoseconds waited in the run
    queue, and times scheduled (/proc/.../schedstat). Where the kernel keeps no
    schedstat, the CPU it used alone (no wait: a lower bound)."""
    pid = os.getpid()
    out: dict[int, tuple[int, int, int]] = {}
    for tid in task_ids(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                run_ns, wait_ns, slices = f.read().split()[:3]
            out[int(tid)] = (int(run_ns), int(wait_ns), int(slices))
        except (OSError, ValueError):
            continue
    if not out:
        tick_ns = NS // os.sysconf("SC_CLK_TCK")
        return {tid: (ticks * tick_ns, 0, 0) for tid, ticks in thread_cpu().items()}
    return out


# A thread that ran this long per time it was scheduled is computing (the scheduler
# takes the core from it, and its run-queue wait is demand it could not meet); one
# that runs a few µs per wake-up (a polling loop) waits for a core only because it
# woke, and wants what it ran.
CPU_BOUND_SLICE_NS = 250_000


def wanted(now: tuple[int, int, int], base: tuple[int, int, int]) -> tuple[int, int]:
    """What a thread wanted: the nanoseconds it ran, and those it waited in the run
    queue that count as demand."""
    run, wait, slices = (max(0, a - b) for a, b in zip(now, base, strict=True))
    if slices and run / slices >= CPU_BOUND_SLICE_NS:
        return run, wait
    return run, 0


def run_queue_ns() -> int | None:
    """Nanoseconds this thread has waited in the run queue (ready, not running), from
    /proc/thread-self/schedstat; None where the kernel keeps none."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
