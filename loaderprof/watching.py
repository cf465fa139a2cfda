"""`loaderprof watch -- COMMAND`: run a user's own command, hooked and sampled.

NOTE [watch hook]: the command runs unchanged in its own session (so one killpg
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
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof import events, procfs
from loaderprof.errors import UsageError
from loaderprof.hook import ENV_EVENTS
from loaderprof.sampler import Sample, TreeSampler

# After a forwarded SIGINT/SIGTERM, how long the command's tree may take to exit
# before the rest of it is killed (the tree must be gone within 2 s).
_GRACE_S = 1.5


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
    package = Path(__file__).resolve().parent
    hook_dir = Path(tmp) / "hook"
    hook_dir.mkdir()
    shutil.copyfile(package / "_instrument" / "sitecustomize.py", hook_dir / "sitecustomize.py")
    (hook_dir / "loaderprof").symlink_to(package, target_is_directory=True)
    env["PYTHONPATH"] = os.pathsep.join([str(hook_dir), *[p for p in [env.get("PYTHONPATH")] if p]])
    env[ENV_EVENTS] = events_path
    return env


# multiprocessing's helpers (the resource tracker, the forkserver) exit on their
# own once the command has: give them this long before counting what is left.
_SETTLE_S = 0.5


def _survivors(pgid: int) -> tuple[int, ...]:
    """The command's processes still alive once it has exited (and its helpers had
    a moment to follow)."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        alive = tuple(p for p in procfs.group_members(pgid) if p != pgid)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Forwarder:
    """SIGINT/SIGTERM to loaderprof go to the command's whole session instead."""

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self.signum: int | None = None
        self.at: float | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Forwarder:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum, self.at = signum, time.monotonic()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)


def run_watch(
    command: Sequence[str],
    *,
    interval_s: float,
    uss_interval_s: float,
    on_tick: Callable[[float], None] | None = None,
) -> WatchRun:
    """Run `command` to its end (or until a forwarded signal ends it) and collect."""
    if not command:
        raise UsageError("no command given: loaderprof watch [OPTIONS] -- COMMAND [ARGS...]")
    with tempfile.TemporaryDirectory(prefix="loaderprof-watch-") as tmp:
        path = os.path.join(tmp, "events.jsonl")
        t0 = time.monotonic_ns()
        try:
            proc = subprocess.Popen(
                list(command), env=_environment(path, tmp), start_new_session=True
            )
        except FileNotFoundError:
            raise UsageError(f"command not found: {command[0]}") from None
        except PermissionError:
            raise UsageError(f"command is not executable: {command[0]}") from None
        sampler = TreeSampler(
            proc.pid,
            interval_s,
            uss_interval_s,
            ignore_files=frozenset({path}),
            handles_always=True,
        )
        # Walks only when due or when a process appears: the command's own epochs
        # are never paused for the sampler, so it keeps to the deep interval.
        sampler.epoch_started()
        sampler.start()
        with _Forwarder(proc.pid) as fwd:
            returncode = _wait(proc, fwd, on_tick)
        t_end = time.monotonic_ns()
        leaked = _survivors(proc.pid)
        _kill_group(proc.pid)
        sampler.stop()
        evs = events.EventReader(path).read_new()
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


def _wait(
    proc: subprocess.Popen[bytes], fwd: _Forwarder, on_tick: Callable[[float], None] | None
) -> int | None:
    start = time.monotonic()
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        if on_tick is not None:
            on_tick(time.monotonic() - start)
        if fwd.at is not None and time.monotonic() - fwd.at > _GRACE_S:
            _kill_group(proc.pid)
            return proc.wait()
