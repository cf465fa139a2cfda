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
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loaderprof.config.options import WatchStopOptions
from loaderprof.errors import INTERRUPTS, UsageError
from loaderprof.inside import events
from loaderprof.inside.events import Ev
from loaderprof.measure import contention
from loaderprof.measure.hooked import ProcessTree as _Tree
from loaderprof.measure.hooked import hooked_env as _environment
from loaderprof.measure.hooked import launch
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
    # Cores other processes kept busy meanwhile (measure/contention.py).
    other_cores: float | None = None


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
        t0, cpu = time.monotonic_ns(), contention.mark()
        proc = launch(command, _environment(path, tmp))
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
            pauses = _Pauses(path, sampler)
            returncode = _wait(proc, fwd, tree, on_tick, kill_after_s, pauses.poll)
            tree.reaped = True
            t_end = time.monotonic_ns()
            contention.count_unreaped(contention.unreaped_cpu_s(events.read_events(path)))
            others = contention.other_cores(cpu, contention.mark())
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
        other_cores=others,
    )


class _Pauses:
    """Tells the sampler when the command's passes have all ended, from the hook's
    events as they come (NOTE [pauses not read]): the pause begins with a fresh walk.
    A walk under load takes a few hundred ms (3 processes beside a CPU hog); one begun
    late in the epoch overran a 0.4 s pause, and the next then began too late to end
    inside it: 1 of 3 pauses read, where 3 were read on an idle machine."""

    def __init__(self, path: str, sampler: TreeSampler) -> None:
        self._reader = events.EventReader(path)
        self._sampler = sampler
        self._open: set[str] = set()

    def poll(self) -> None:
        ended = False
        for ev in self._reader.read_new():
            if ev.get("ev") == Ev.ITER_START:
                self._open.add(str(ev.get("loader")))
            elif ev.get("ev") == Ev.ITER_END:
                ended = True
                self._open.discard(str(ev.get("loader")))
        if ended and not self._open:
            self._sampler.pause_began()


# How often the hook's events are read while the command runs: a pause is read from
# at most this long after it began.
_POLL_S = 0.05
# How often the caller's `on_tick` (a progress line) hears the time.
_TICK_S = 0.2


def _wait(
    proc: subprocess.Popen[bytes],
    fwd: _Forwarder,
    tree: _Tree,
    on_tick: Callable[[float], None] | None,
    kill_after_s: float,
    poll: Callable[[], None] = lambda: None,
) -> int | None:
    """The command's own status when it stops by itself within the grace period."""
    start = ticked = time.monotonic()
    termed_at: float | None = None
    while True:
        try:
            return proc.wait(timeout=_POLL_S)
        except subprocess.TimeoutExpired:
            pass
        poll()
        now = time.monotonic()
        if on_tick is not None and now - ticked >= _TICK_S:
            ticked = now
            on_tick(now - start)
        if fwd.at is None:
            continue
        if termed_at is None and (fwd.escalated or now - fwd.at > kill_after_s):
            termed_at = now
            if fwd.signum != signal.SIGTERM or fwd.escalated:
                tree.signal(signal.SIGTERM)
        if termed_at is not None and now - termed_at > _KILL_AFTER_TERM_S:
            tree.signal(signal.SIGKILL)
            return proc.wait()
