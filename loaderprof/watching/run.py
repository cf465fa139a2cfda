"""`loaderprof watch -- COMMAND`: run a user's own command, hooked and sampled.

See NOTE [watch hook]. The command runs unchanged in its own session (so one killpg
reaches its whole tree), with loaderprof's `sitecustomize` first on PYTHONPATH; the
parent samples its process tree with the same sampler `compare` uses, walking
USS/PSS at most every `uss_interval` (a real run is never paused for it), and reads
the hook's events when the command ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.config.options import WatchStopOptions
from loaderprof.errors import INTERRUPTS, UsageError
from loaderprof.inside import events, procfs
from loaderprof.inside.hook import ENV_EVENTS
from loaderprof.measure.sampler import Sample, TreeSampler
from loaderprof.measure.scratch import scratch_dir

# After a forwarded signal the command has --kill-after seconds to stop by itself (a
# training script saves its checkpoint); then SIGTERM for what is left, and SIGKILL
# _KILL_AFTER_TERM_S later. A second signal skips the wait.
KILL_AFTER_S: float = WatchStopOptions().kill_after
_KILL_AFTER_TERM_S = 1.0
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class WatchRun:
    """What one watched run produced, before analysis."""

    command: tuple[str, ...]
    returncode: int | None
    t0_ns: int
    t_end_ns: int
    events: list[dict[str, Any]]
    samples: list[Sample]
    gone_ns: dict[int, int]
    leaked_pids: tuple[int, ...]
    busy_s: float
    interrupted_by: int | None


def _environment(events_path: str, tmp: str) -> dict[str, str]:
    """The command's environment: a directory holding only the hook's sitecustomize
    and a link to the loaderprof package, first on PYTHONPATH. Not loaderprof's own
    site-packages: that would put its torch and numpy before the command's."""
    env = dict(os.environ)
    package = Path(__file__).resolve().parent.parent
    hook_dir = Path(tmp) / "hook"
    hook_dir.mkdir()
    shutil.copyfile(
        package / "inside" / "_instrument" / "sitecustomize.py", hook_dir / "sitecustomize.py"
    )
    (hook_dir / "loaderprof").symlink_to(package, target_is_directory=True)
    env["PYTHONPATH"] = os.pathsep.join([str(hook_dir), *[p for p in [env.get("PYTHONPATH")] if p]])
    env[ENV_EVENTS] = events_path
    return env


# multiprocessing's helpers (the resource tracker, the forkserver) exit on their
# own once the command has: give them this long before counting what is left.
_SETTLE_S = 0.5


class _Tree:
    """The command's processes: its session's group, and every process the sampler
    saw in its tree (torchrun's ranks lead sessions of their own). Each is known by
    its pid and its start time from when it was first seen, so a later process that
    reuses a pid is never taken for it."""

    def __init__(self, root: int, sampler: TreeSampler | None = None) -> None:
        self.root, self.sampler = root, sampler
        self.reaped = False
        self._known: dict[int, int | None] = {}
        self._read = 0

    def alive(self) -> list[int]:
        found = set(procfs.group_members(self.root)) | set(procfs.tree(self.root))
        if self.sampler is not None:
            # Only the samples added since the last call: a long run has millions.
            samples = self.sampler.samples
            # A pid the sampler saw exit may since be anyone's: only the group and
            # the tree as they are now speak for it.
            gone = self.sampler.gone_ns
            found |= {s.pid for s in samples[self._read :] if s.pid not in gone}
            self._read = len(samples)
        for pid in found - self._known.keys():
            self._known[pid] = procfs.start_ticks(pid)
        return sorted(p for p in self._known if p != os.getpid() and self._ours(p))

    def _ours(self, pid: int) -> bool:
        start = self._known.get(pid)
        return (
            start is not None
            and procfs.start_ticks(pid) == start
            and procfs.state(pid) not in (None, "Z")
        )

    def signal(self, signum: int, *, detached_too: bool = True) -> None:
        """`signum` to the command's group, as a terminal's Ctrl-C reaches it, and to
        each of its processes outside the group (once: the group's members get it from
        the killpg). `detached_too` False spares sessions the command started on
        purpose and that still have their leader (a tracker, a TensorBoard)."""
        group = set(procfs.group_members(self.root))
        # Once the command is reaped and its group empty, its pid may be anyone's.
        if group or not self.reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.root, signum)
        for pid in self.alive():
            if pid in group or (not detached_too and _detached(pid, self.root)):
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def survivors(self) -> tuple[int, ...]:
        """Still alive once the command has exited (and its helpers had a moment)."""
        deadline = time.monotonic() + _SETTLE_S
        while True:
            alive = tuple(p for p in self.alive() if p != self.root)
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.05)


def _detached(pid: int, root: int) -> bool:
    """In a session of its own whose leader is alive: started apart on purpose. A
    leaked worker of a torchrun rank that is gone has no live leader."""
    try:
        sid = os.getsid(pid)
    except OSError:
        return False
    return sid != root and procfs.state(sid) not in (None, "Z")


class _Forwarder:
    """SIGINT/SIGTERM/SIGHUP to loaderprof go to the command's processes instead.
    Installed before the command starts: a signal that comes first is forwarded as
    soon as there is a command to forward it to."""

    def __init__(self) -> None:
        self.tree: _Tree | None = None
        self.signum: int | None = None
        self.at: float | None = None
        # A second signal: the user will not wait for the grace period.
        self.escalated = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Forwarder:
        # Off the main thread (the API from a worker thread) signals are not ours to
        # take, and signal.signal would raise: the caller's own handlers stay.
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in _FORWARDED:
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._old:
            return
        for sig, old in self._old.items():
            signal.signal(sig, old)
        # The command has ended: a signal from now on lets its report be written first.
        INTERRUPTS.finishing()

    def attach(self, tree: _Tree) -> None:
        self.tree = tree
        if self.signum is not None:
            tree.signal(self.signum)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum, self.at = signum, time.monotonic()
        else:
            self.escalated = True
        if self.tree is not None:
            self.tree.signal(signum)


def redeliver(signum: int, report: Any) -> None:
    """The signal the command was stopped for, given back to the caller's own handler
    now that the report is built (the API: a Ctrl-C is not swallowed). With Python's
    default SIGINT handler it raises KeyboardInterrupt, which carries the report as
    `.report`; a SIGTERM/SIGHUP does what the caller's process would have done."""
    try:
        signal.raise_signal(signum)
    except BaseException as exc:
        with contextlib.suppress(AttributeError):
            exc.report = report  # type: ignore[attr-defined]
        raise


def run_watch(
    command: Sequence[str],
    *,
    interval_s: float,
    uss_interval_s: float,
    on_tick: Callable[[float], None] | None = None,
    kill_after_s: float = KILL_AFTER_S,
) -> WatchRun:
    """Run `command` to its end (or until a forwarded signal ends it) and collect."""
    if not command:
        raise UsageError("no command given: loaderprof watch [OPTIONS] -- COMMAND [ARGS...]")
    with scratch_dir("loaderprof-watch-") as tmp, _Forwarder() as fwd:
        path = os.path.join(tmp, "events.jsonl")
        t0 = time.monotonic_ns()
        proc = _start(command, _environment(path, tmp))
        sampler = TreeSampler(
            proc.pid,
            interval_s,
            uss_interval_s,
            ignore_files=frozenset({path}),
            handles_always=True,
        )
        tree = _Tree(proc.pid, sampler)
        fwd.attach(tree)
        finished = False
        try:
            # Walks only when due or when a process appears: the command's own epochs
            # are never paused for the sampler, so it keeps to the deep interval.
            sampler.epoch_started()
            sampler.start()
            returncode = _wait(proc, fwd, tree, on_tick, kill_after_s)
            tree.reaped = True
            t_end = time.monotonic_ns()
            leaked = tree.survivors()
            finished = fwd.signum is None
        finally:
            # Nothing of the command outlives loaderprof, but for what a command that
            # ended by itself started apart on purpose (README: watch).
            tree.signal(signal.SIGKILL, detached_too=not finished)
            sampler.stop()
        evs = events.read_events(path)
    return WatchRun(
        command=tuple(command),
        returncode=returncode,
        t0_ns=t0,
        t_end_ns=t_end,
        events=evs,
        samples=list(sampler.samples),
        gone_ns=dict(sampler.gone_ns),
        leaked_pids=leaked,
        busy_s=sampler.busy_s,
        interrupted_by=fwd.signum,
    )


def _start(command: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    try:
        # Its own session: one killpg reaches the command and what it forks.
        return subprocess.Popen(list(command), env=env, start_new_session=True)
    except FileNotFoundError:
        raise UsageError(f"command not found: {command[0]}") from None
    except PermissionError:
        raise UsageError(f"command is not executable: {command[0]}") from None


def _wait(
    proc: subprocess.Popen[bytes],
    fwd: _Forwarder,
    tree: _Tree,
    on_tick: Callable[[float], None] | None,
    kill_after_s: float,
) -> int | None:
    """The command's own status when it stops by itself within the grace period."""
    start = time.monotonic()
    termed_at: float | None = None
    while True:
        try:
            return proc.wait(timeout=0.2 if fwd.at is None else 0.05)
        except subprocess.TimeoutExpired:
            pass
        if on_tick is not None:
            on_tick(time.monotonic() - start)
        if fwd.at is None:
            continue
        now = time.monotonic()
        if termed_at is None and (fwd.escalated or now - fwd.at > kill_after_s):
            termed_at = now
            if fwd.signum != signal.SIGTERM or fwd.escalated:
                tree.signal(signal.SIGTERM)
        if termed_at is not None and now - termed_at > _KILL_AFTER_TERM_S:
            tree.signal(signal.SIGKILL)
            return proc.wait()
