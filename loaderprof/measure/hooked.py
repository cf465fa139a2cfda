"""A user's command run through the watch hook (NOTE [watch hook]): its environment
and its process tree. `watch -- COMMAND` and `compare -- COMMAND` both run commands
this way; they live here, below both, so neither imports the other."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.errors import UsageError
from loaderprof.inside import procfs
from loaderprof.inside.hook import ENV_EVENTS
from loaderprof.measure.sampler import Sample, TreeSampler


def hooked_env(
    events_path: str, tmp: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The command's environment: a directory holding only the hook's sitecustomize
    and a link to the loaderprof package, first on PYTHONPATH. Not loaderprof's own
    site-packages: that would put its torch and numpy before the command's. `extra`:
    more of the hook's variables (`compare -- COMMAND`'s arm)."""
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
    env.update(extra or {})
    return env


def check_command(command: Sequence[str]) -> None:
    """The command can be started: one line before anything is printed or run."""
    if not command:
        return
    exe = command[0]
    found = shutil.which(exe) if os.sep not in exe else exe
    if found is None or not os.path.exists(found):
        raise UsageError(f"command not found: {exe}")
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise UsageError(f"command is not executable: {exe}")


def launch(command: Sequence[str], env: dict[str, str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start the command in its own session: one killpg reaches it and what it forks."""
    try:
        return subprocess.Popen(list(command), env=env, start_new_session=True, **popen)
    except FileNotFoundError:
        raise UsageError(f"command not found: {command[0]}") from None
    except PermissionError:
        raise UsageError(f"command is not executable: {command[0]}") from None


@dataclass(frozen=True)
class HookedRun:
    """What one hooked run of a command left for watch's checks: its events, its
    process tree's samples, when each process went, and what outlived the command
    (`compare -- COMMAND`'s trials: NOTE [command findings])."""

    events: Sequence[Mapping[str, Any]]
    samples: Sequence[Sample]
    gone_ns: Mapping[int, int]
    t0_ns: int
    t_end_ns: int
    leaked_pids: tuple[int, ...]


# The most walks of a tree being stopped before it is killed: each walk stops what it
# found, and a process forked while one ran is found by the next (two suffice unless
# something forks faster than the walks).
_FREEZE_WALKS = 5

# multiprocessing's helpers (the resource tracker, the forkserver) exit on their
# own once the command has: give them this long before counting what is left.
SETTLE_S = 0.5


class ProcessTree:
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

    def kill_all(self) -> None:
        """SIGKILL to every process of the command. Each is stopped first and the tree
        walked again from every process known, until a walk finds none new: a rank
        that forks its next epoch's workers between a walk and the kill would leave
        them orphaned, unseen (workers notice a dead parent only seconds later)."""
        stopped: set[int] = set()
        for _ in range(_FREEZE_WALKS):
            seen = set(self.alive())
            for pid in list(seen):
                seen.update(procfs.tree(pid))
            for pid in seen - self._known.keys():
                self._known[pid] = procfs.start_ticks(pid)
            new = {p for p in seen if p != os.getpid() and self._ours(p)} - stopped
            if not new:
                break
            for pid in new:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            stopped |= new
        self.signal(signal.SIGKILL)

    def survivors(self) -> tuple[int, ...]:
        """Still alive once the command has exited (and its helpers had a moment)."""
        deadline = time.monotonic() + SETTLE_S
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
