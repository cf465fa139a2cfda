"""Cheap reads of /proc for the sampler (Linux), with psutil as the fallback.

One sample of one process is one read of /proc/PID/smaps_rollup, which gives
RSS, PSS and the private (USS) pages together; psutil's memory_full_info()
reads the same file plus statm and parses more. Children are found through
/proc/PID/task/TID/children instead of scanning every process on the machine.

Without smaps_rollup, memory() asks psutil, which on some platforms measures no
PSS: there `Mem.pss` is None (not measured), never a stand-in such as the USS.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import BinaryIO

import psutil

_HAS_CHILDREN_FILE = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
_HAS_ROLLUP = os.path.exists(f"/proc/{os.getpid()}/smaps_rollup")


@dataclass(frozen=True)
class Mem:
    rss: int
    uss: int
    # None where the platform gives no PSS (see memory_psutil).
    pss: int | None
    # Clean pages only this process maps (mostly file pages: code, mapped files).
    private_clean: int = 0
    # Clean pages other processes map too.
    shared_clean: int = 0


def children(pid: int) -> list[int]:
    """Direct children of `pid` (all threads' children)."""
    if not _HAS_CHILDREN_FILE:
        try:
            return [c.pid for c in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return out


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (zombies hold no memory: left out)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdecimal():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # State, ppid, pgrp.
        if len(rest) > 2 and int(rest[2]) == pgid and rest[0] != b"Z":
            out.append(int(entry))
    return out


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/PID/stat field 22): with
    the pid, what tells one process from a later one that reuses its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def state(pid: int) -> str | None:
    """The process's state letter (R, S, Z...); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def forkserver_cpu_s(pid: int) -> float:
    """CPU seconds `pid`'s forkservers and the workers they forked have run, each with
    its reaped children's (/proc/PID/stat utime, stime, cutime, cstime): orphaned, not
    joined, when `pid` exits, no process of loaderprof's reaps them, so their time
    never reaches its `os.times()`. (Fork and spawn workers are `pid`'s own children,
    which it joins: their time reaches it through `pid`.)"""
    total = 0
    for member in [p for server in forkservers(pid) for p in tree(server)]:
        try:
            with open(f"/proc/{member}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
            total += sum(int(v) for v in rest[11:15])
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def forkservers(pid: int) -> list[int]:
    """`pid`'s children that are multiprocessing's forkserver."""
    out = []
    for child in children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"multiprocessing.forkserver" in f.read():
                    out.append(child)
        except OSError:
            continue
    return out


def tree(root: int) -> list[int]:
    """`root` and all its descendants, breadth first."""
    seen = [root]
    i = 0
    while i < len(seen):
        for c in children(seen[i]):
            if c not in seen:
                seen.append(c)
        i += 1
    return seen


def memory_psutil(pid: int) -> Mem | None:
    """The fallback without /proc/PID/smaps_rollup: psutil's figures, with PSS
    None where psutil does not measure it (macOS, Windows, ...). Reporting the
    USS in its place would understate the shared pages a process holds."""
    try:
        m = psutil.Process(pid).memory_full_info()
    except psutil.Error:
        return None
    pss = getattr(m, "pss", None)
    return Mem(int(m.rss), int(m.uss), None if pss is None else int(pss))


def memory(pid: int) -> Mem | None:
    """RSS, USS and PSS of `pid` in bytes; None if it is gone or a zombie.
    PSS may be None when psutil is the fallback (see memory_psutil)."""
    if not _HAS_ROLLUP:
        return memory_psutil(pid)
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rss = pss = private = clean = shared_clean = 0
    for line in data.splitlines():
        key, _, rest = line.partition(b":")
        if key == b"Rss":
            rss = int(rest.split()[0]) * 1024
        elif key == b"Pss":
            pss = int(rest.split()[0]) * 1024
        elif key in (b"Private_Clean", b"Private_Dirty", b"Private_Hugetlb"):
            private += int(rest.split()[0]) * 1024
            if key == b"Private_Clean":
                clean = int(rest.split()[0]) * 1024
        elif key == b"Shared_Clean":
            shared_clean = int(rest.split()[0]) * 1024
    if rss == 0 and not data:
        return None  # a zombie has no address space left
    return Mem(rss, private, pss, clean, shared_clean)


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss(pid: int) -> int | None:
    """Resident set size from /proc/PID/statm: kernel counters, no page walk, no lock."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
        return int(fields[1]) * PAGE
    except (OSError, ValueError, IndexError):
        try:
            return int(psutil.Process(pid).memory_info().rss)
        except psutil.Error:
            return None


# The top byte of a /proc/PID/pagemap entry holds bit 63 (present in RAM) and bit 61
# (a file page, or shared anonymous memory). Tops with bit 63 are deleted to count
# the pages that are not present; tops with both set are the resident file pages.
_PRESENT_BYTES = bytes(range(0x80, 0x100))
_PRESENT_FILE = re.compile(rb"[\xa0-\xbf\xe0-\xff]+")


def resident_file_pages(pid: int) -> list[tuple[int, int]] | None:
    """Runs (first page number, pages) of the file pages present in `pid`'s page
    tables, over its file mappings; None where its pagemap cannot be read."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            maps = f.read().splitlines()
        runs: list[tuple[int, int]] = []
        with open(f"/proc/{pid}/pagemap", "rb", buffering=0) as f:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) < 6 or not fields[5].startswith(b"/"):
                    continue
                lo, hi = (int(x, 16) // PAGE for x in fields[0].split(b"-"))
                top = _top_bytes(f, lo, hi - lo)
                runs += [(lo + m.start(), m.end() - m.start()) for m in _PRESENT_FILE.finditer(top)]
    except (OSError, ValueError):
        return None
    return runs


def absent_pages(pid: int, runs: list[tuple[int, int]]) -> int | None:
    """How many of the pages `runs` names (see resident_file_pages) are not present in
    `pid`'s page tables; None where its pagemap cannot be read."""
    missing = 0
    try:
        with open(f"/proc/{pid}/pagemap", "rb", buffering=0) as f:
            for first, count in runs:
                top = _top_bytes(f, first, count)
                missing += count - len(top) + len(top.translate(None, _PRESENT_BYTES))
    except OSError:
        return None
    return missing


def _top_bytes(f: BinaryIO, first: int, count: int) -> bytes:
    """The top byte of each of `count` pagemap entries from page `first` on."""
    f.seek(first * 8)
    data = f.read(count * 8)
    return data[7::8]


# Each kind of handle a worker can leak, as the findings name one of it (counts
# agree through `loaderprof.units.plural`).
HANDLE_LABELS = {
    "files": "open file",
    "inet": "network connection",
    "threads": "thread",
    "children": "child process",
}


@dataclass(frozen=True)
class Handles:
    """What a process holds that can outlive an epoch (fields named as HANDLE_LABELS)."""

    # Regular files (not /dev, not shared-memory segments the loader passes).
    files: int
    # TCP/UDP sockets (network connections); unix sockets are loader plumbing.
    inet: int
    threads: int
    children: int


def handles(pid: int, ignore: frozenset[str] = frozenset()) -> Handles | None:
    """Counts for `pid`; files in `ignore` (loaderprof's own event file) are left out."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    files = 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith("/dev/") and target not in ignore:
            files += 1
    try:
        proc = psutil.Process(pid)
        inet = len(proc.net_connections(kind="inet"))
        threads = proc.num_threads()
    except psutil.Error:
        return None
    return Handles(files, inet, threads, len(children(pid)))


def shm_usage(path: str = "/dev/shm") -> tuple[int, int] | None:
    """(size, used) bytes of the shared-memory filesystem batches travel through."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    size = st.f_blocks * st.f_frsize
    return size, size - st.f_bfree * st.f_frsize


def ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat.rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def comm(pid: int) -> str | None:
    """The process's name (/proc/PID/comm): torch 2.5 and later names each DataLoader
    worker `pt_data_worker` as its loop begins."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().decode(errors="replace").strip()
    except OSError:
        return None


def torch_version(pid: int) -> tuple[int, int] | None:
    """(major, minor) of the torch the process has loaded: its libraries' install, from
    /proc/PID/maps, and the version.py beside them; None where it has none loaded."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            lib = next((ln for ln in f if b"/torch/lib/" in ln), None)
        if lib is None:
            return None
        root = os.fsdecode(lib.split(maxsplit=5)[-1].strip())
        if root.endswith(" (deleted)"):
            return None  # replaced on disk: what lies there now is not what it loaded
        root = root[: root.rindex("/torch/lib/")]
        with open(os.path.join(root, "torch", "version.py")) as f:
            text = f.read()
    except (OSError, ValueError, IndexError):
        return None
    found = re.search(r"__version__\s*=\s*['\"](\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else None
