"""`watch --pid`: a running job's process tree, read from outside every interval.

See NOTE [pools from outside]. Nothing is loaded into the job and nothing is ever
signalled: every reading is a read of /proc (`inside.procfs`, the sampler's own
readers) or psutil's. Each interval reads the tree, every process's state and CPU
time; each `deep_interval_s` also the USS/PSS, handles and /dev/shm (a page-table
walk under the process's mmap lock: reading it every 50 ms would slow the job's
loader, `measure.sampler`'s note). Memory stays bounded whatever the watch's length
(NOTE [bounded series]).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from loaderprof.errors import UsageError
from loaderprof.inside import procfs
from loaderprof.watching.pools import (
    BUSY_CPU_SHARE,
    NAMED_WITHIN_S,
    NAMES_WORKERS_FROM,
    WORKER_COMM,
    Crowd,
    Pool,
    Pools,
    classify,
    most,
    most_each,
)

# After the job's main process exits, how long its workers have to follow before
# those still alive are named as left behind (a worker's own shutdown takes a moment).
LEFT_GRACE_S = 1.0
# Most seconds between two reads of a worker's handles: counting its network
# connections reads the machine's socket tables, dearer than its memory.
HANDLES_EVERY_S = 2.0


@dataclass
class Proc:
    """A child of the job as it is followed."""

    pid: int
    ppid: int
    born_s: float
    role: str
    start_method: str
    command: str
    # Dropped once it exited: a long watch keeps only what each process left.
    handle: psutil.Process | None
    ticks: int | None
    exe: str = ""
    exited_s: float | None = None
    cpu_first: float | None = None
    cpu_last: float | None = None
    # The most seen: USS, PSS, RSS; regular files open, threads.
    peaks: tuple[int | None, ...] = (None, None, None)
    held: tuple[int | None, ...] = (None, None)
    handles_s: float | None = None

    @property
    def cpu_s(self) -> float | None:
        if self.cpu_first is None or self.cpu_last is None:
            return None
        return self.cpu_last - self.cpu_first


def _gone(pid: int, ticks: int | None) -> bool:
    """Exited (a zombie holds nothing), or its pid now names another process."""
    state = procfs.state(pid)
    return state is None or state == "Z" or procfs.start_ticks(pid) != ticks


def open_job(pid: int) -> psutil.Process:
    """The job's main process, or a one-line usage error: none, or not ours to read."""
    if pid <= 0:
        raise UsageError(f"--pid {pid}: not a process id")
    if pid == os.getpid():
        raise UsageError(f"--pid {pid}: that is loaderprof itself")
    try:
        proc = psutil.Process(pid)
        proc.cmdline()
        if procfs.state(pid) == "Z":
            raise UsageError(f"--pid {pid}: the process has exited (a zombie)")
    except psutil.NoSuchProcess:
        raise UsageError(f"--pid {pid}: no such process") from None
    except psutil.AccessDenied:
        raise UsageError(f"--pid {pid}: not ours to read (another user's process)") from None
    if procfs.memory(pid) is None:
        raise UsageError(f"--pid {pid}: its memory is not ours to read (/proc/{pid}/smaps_rollup)")
    return proc


class Observer:
    """The readings of one watch, kept bounded; `watch` runs it."""

    def __init__(self, pid: int, interval_s: float, deep_interval_s: float) -> None:
        self.job = open_job(pid)
        self.pid = pid
        self.command = tuple(self.job.cmdline())
        self._ticks = procfs.start_ticks(pid)
        self.interval_s = interval_s
        self.deep_interval_s = max(deep_interval_s, interval_s)
        self.t0 = time.monotonic()
        self.boot0 = _since_boot()
        self.procs: dict[int, Proc] = {}
        self.pools = Pools(interval_s=interval_s)
        self.main_peak: tuple[int | None, ...] = (None, None)
        self.shm_size: int | None = None
        self.shm_peak: int | None = None
        # A worker is placed up to FORK_EXEC_S (NAMED_WITHIN_S, NOTE [workers by name])
        # and a tick or two after its birth.
        late = max(FORK_EXEC_S, NAMED_WITHIN_S) + 4 * interval_s
        self.crowd = Crowd(keep_s=max(CROWD_KEEP_S, late))
        self.busy_s = 0.0
        self.job_exited_s: float | None = None
        self.left_behind: tuple[int, ...] = ()
        self.ended_by = "interrupt"
        self.end_s = 0.0
        self.warnings: list[str] = []
        self._last_deep = -1e9
        self._last_tick: float | None = None
        # Each worker's latest deep reading (USS, PSS, RSS), until its pool sums it.
        self._latest: dict[int, tuple[int, int | None, int]] = {}
        # The children not seen gone yet.
        self._live: set[int] = set()
        # Children with their parent's command line, younger than FORK_EXEC_S, and forks
        # not yet named (NOTE [workers by name]): met again at later ticks, until they
        # exec, name themselves, or are old enough to be told.
        self._young: dict[int, Proc] = {}
        # (major, minor) of the torch each parent of forks has loaded, once it has one.
        self._torch: dict[int, tuple[int, int]] = {}

    @property
    def peak_workers(self) -> int:
        """The most worker processes alive at once (`Crowd`)."""
        return self.crowd.peak

    def now(self) -> float:
        return time.monotonic() - self.t0

    def watch(self, duration_s: float | None) -> None:
        """Read until `duration_s` has passed or the job's main process exited (then
        once more after LEFT_GRACE_S, to name the workers it left behind). An
        `Interrupted` (Ctrl-C) ends it too: what was read is kept."""
        try:
            while True:
                began = time.monotonic()
                self.tick()
                self.busy_s += time.monotonic() - began
                now = self.now()
                if self.job_exited_s is not None:
                    self._last_look(duration_s)
                    return
                if duration_s is not None and now >= duration_s:
                    self.ended_by = "duration"
                    return
                wait = self.interval_s - (time.monotonic() - began)
                if duration_s is not None:
                    wait = min(wait, duration_s - now)
                time.sleep(max(0.0, wait))
        finally:
            self.end_s = self.now()
            for pool in self.pools.pools:
                pool.activity.close(self.end_s)

    def _last_look(self, duration_s: float | None) -> None:
        self.ended_by = "job exit"
        grace = LEFT_GRACE_S
        if duration_s is not None:
            grace = max(0.0, min(grace, duration_s - self.now()))
        time.sleep(grace)
        self.tick()
        self.left_behind = tuple(
            p.pid for p in self.procs.values() if p.role == "worker" and p.exited_s is None
        )

    def tick(self) -> None:
        now = self.now()
        dt = now - self._last_tick if self._last_tick is not None else None
        self._last_tick = now
        deep = now - self._last_deep >= self.deep_interval_s
        if deep:
            self._last_deep = now
        if self.job_exited_s is None:
            if _gone(self.pid, self._ticks):
                self.job_exited_s = now
            else:
                # Exits before births: a worker born in this tick after another pool's
                # workers exited is not theirs (Pools.place).
                self._reap(now)
                self._meet(now)
                if deep:
                    self._read_main()
        cpu_used = self._follow(now, deep)
        self.pools.split(now)
        live = [p for p in self.pools.worker_pools() if p.alive()]
        self.crowd.tick(now, {w: p.births.get(w, p.born_s) for p in live for w in p.alive()})
        busy = {pool.id: self._pool_tick(pool, now, dt, deep, cpu_used) for pool in live}
        for pool in live:
            # See check `idle-pools`: idle while another pool of its parent works.
            others = [
                o.id for o in live if o.parent == pool.parent and o is not pool and busy[o.id]
            ]
            if others and not busy[pool.id]:
                pool.idle_beside.update(others)
        if deep:
            self._read_shm()

    def _meet(self, now: float) -> None:
        """Every child not seen yet, placed in birth order (a pool's workers may be
        met over two ticks: they are placed by birth, not by when they were met)."""
        alive = procfs.tree(self.pid)[1:]
        met = []
        for pid in alive:
            if pid in self.procs:
                continue
            held = self._young.pop(pid, None)
            proc = self._read_new(pid) if held is None else _read_again(held)
            if proc is not None:
                met.append(proc)
        # A young fork gone before it was old enough never exec'd: a worker that lived
        # less than FORK_EXEC_S (a short validation pass's), met as it was.
        gone = {pid: self._young.pop(pid) for pid in list(self._young) if pid not in alive}
        # Parents first (a forkserver met in the tick its workers were), each told by
        # its parent's command line.
        for proc in sorted([*met, *gone.values()], key=lambda p: p.born_s):
            parent = self.procs.get(proc.ppid)
            parent_cmd = parent.command if parent is not None else ""
            if proc.ppid == self.pid:
                parent_cmd = "\0".join(self.command)
            # Forked to run another program, a child has its parent's command line until
            # its exec: a young one is met again at a later tick (placed by its birth).
            young = proc.command == parent_cmd and now - proc.born_s < FORK_EXEC_S
            if young and proc.pid not in gone:
                self._young[proc.pid] = proc
                continue
            proc.role, proc.start_method = classify(
                proc.command.split("\0"), proc.exe, parent_cmd.split("\0")
            )
            if proc.role == "worker" and proc.start_method == "fork" and self._names(proc.ppid):
                named = _named(proc, now, gone=proc.pid in gone)
                if named is None:
                    self._young[proc.pid] = proc
                    continue
                if not named:
                    proc.role, proc.start_method = "multiprocessing child", ""
            self.procs[proc.pid] = proc
            self._live.add(proc.pid)
            if proc.role == "worker":
                self.pools.place(proc.pid, proc.ppid, proc.born_s, proc.start_method)
        # Those gone are seen gone now (`_reap`), after their places.
        if gone:
            self._reap(now)

    def _names(self, parent: int) -> bool:
        """The torch that `parent` has loaded names its workers (NOTE [workers by
        name]); read until it has one loaded."""
        if parent not in self._torch:
            version = procfs.torch_version(parent)
            if version is None:
                return False
            self._torch[parent] = version
        return self._torch[parent] >= NAMES_WORKERS_FROM

    def _read_new(self, pid: int) -> Proc | None:
        ticks = procfs.start_ticks(pid)
        try:
            handle = psutil.Process(pid)
            with handle.oneshot():
                ppid = handle.ppid()
                cmdline = handle.cmdline()
                exe = _exe(handle)
        except psutil.Error:
            return None  # gone already, or not ours: nothing to follow
        if ticks is None:
            return None
        born = ticks / _CLK_TCK - self.boot0
        return Proc(pid, ppid, born, "", "", "\0".join(cmdline), handle, ticks, exe)

    def _read_main(self) -> None:
        mem = procfs.memory(self.pid)
        if mem is not None:
            self.main_peak = most_each(self.main_peak, (mem.uss, mem.pss))

    def _reap(self, now: float) -> None:
        for proc in [self.procs[pid] for pid in self._live]:
            if _gone(proc.pid, proc.ticks):
                proc.exited_s, proc.handle = now, None
                self._live.discard(proc.pid)
                self.pools.exited(proc.pid, now)

    def _follow(self, now: float, deep: bool) -> dict[int, float]:
        """Exits, CPU time, and (deep) memory and handles of every live child; the CPU
        seconds each worker used since the last tick."""
        used: dict[int, float] = {}
        self._reap(now)
        for proc in [self.procs[pid] for pid in self._live]:
            if proc.role != "worker" or proc.handle is None:
                continue
            try:
                times = proc.handle.cpu_times()
            except psutil.Error:
                continue
            cpu = times.user + times.system
            if proc.cpu_last is not None:
                used[proc.pid] = cpu - proc.cpu_last
            if proc.cpu_first is None:
                proc.cpu_first = cpu
            proc.cpu_last = cpu
            if deep:
                self._read_worker(proc, now)
        return used

    def _read_worker(self, proc: Proc, now: float) -> None:
        mem = procfs.memory(proc.pid)
        if mem is not None:
            proc.peaks = most_each(proc.peaks, (mem.uss, mem.pss, mem.rss))
            self._latest[proc.pid] = (mem.uss, mem.pss, mem.rss)
        if proc.handles_s is not None and now - proc.handles_s < HANDLES_EVERY_S:
            return
        proc.handles_s = now
        held = procfs.handles(proc.pid)
        if held is not None:
            proc.held = most_each(proc.held, (held.files, held.threads))

    def _pool_tick(
        self, pool: Pool, now: float, dt: float | None, deep: bool, used: dict[int, float]
    ) -> bool:
        """Whether the pool was busy over the last tick; (deep) its workers' memory
        together, from readings of all of them only."""
        alive = pool.alive()
        busy = (
            dt is not None
            and dt > 0
            and sum(used.get(p, 0.0) for p in alive) >= BUSY_CPU_SHARE * dt
        )
        totals = None
        # A pause (idle for PAUSE_MIN_S) not read yet: read its workers now, inside it,
        # so that each pause has its reading rather than only those a deep tick falls
        # in (NOTE [pauses not read]); an idle pool's walk slows no batch, and an idle
        # dip inside an epoch is too short to be read.
        unread_pause = not busy and pool.activity.take_pause_reading(now)
        if unread_pause and not deep:
            for pid in alive:
                proc = self.procs.get(pid)
                if proc is not None and proc.handle is not None:
                    self._read_worker(proc, now)
        if deep or unread_pause:
            readings = [self._latest.pop(p, None) for p in alive]
            # A pool some of whose workers exited is shutting down (or broken): its sum
            # is no pool's memory, and read in a pause it would look like a fall.
            if len(alive) == len(pool.pids) and all(r is not None for r in readings):
                got = [r for r in readings if r is not None]
                pss = [r[1] for r in got]
                totals = (
                    sum(r[0] for r in got),
                    None if None in pss else sum(p for p in pss if p is not None),
                    sum(r[2] for r in got),
                )
                pool.record(now, totals)
        pool.activity.feed(now, busy, None if totals is None else (totals[0], totals[2]))
        return busy

    def _read_shm(self) -> None:
        shm = procfs.shm_usage()
        if shm is not None:
            self.shm_size = shm[0]
            self.shm_peak = most(self.shm_peak, shm[1])


_CLK_TCK = os.sysconf("SC_CLK_TCK")
# How old a child with its parent's command line must be to be taken for a fork that
# stays (a worker), not one about to exec (`subprocess`): a service started beside the
# loader was met before its exec under a full suite's load and read as a third worker.
FORK_EXEC_S = 0.2
# Least seconds each tick's alive workers are kept for workers placed after it (Crowd).
CROWD_KEEP_S = 1.0


def _since_boot() -> float:
    """Seconds since boot on the clock /proc/PID/stat stamps a process's start with
    (psutil's create_time adds a boot time rounded to the second: births read that
    way are up to a second off the exits this loop sees)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _named(proc: Proc, now: float, gone: bool) -> bool | None:
    """See NOTE [workers by name]. True: a DataLoader worker (named, or gone before
    it was old enough to tell: as it was met); False: another fork of the job; None:
    not told yet."""
    name = None if gone else procfs.comm(proc.pid)
    if name is None or name == WORKER_COMM:  # gone (as it was met), or named
        return True
    return None if now - proc.born_s < NAMED_WITHIN_S else False


def _read_again(proc: Proc) -> Proc:
    """A young child's command line and executable again (an exec changes both); as it
    was met where it is gone."""
    if proc.handle is not None:
        try:
            with proc.handle.oneshot():
                proc.command = "\0".join(proc.handle.cmdline())
                proc.exe = _exe(proc.handle)
        except psutil.Error:
            pass
    return proc


def _exe(handle: psutil.Process) -> str:
    try:
        return handle.exe()
    except psutil.Error:
        return ""
