"""Error types and exit codes.

Every error the user can cause or meet carries its exit code, so the CLI maps
errors to exit codes in exactly one place.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from enum import IntEnum
from types import FrameType
from typing import Any


class ExitCode(IntEnum):
    OK = 0
    GATE_FAILED = 1
    USAGE = 2
    RUN_FAILED = 3
    # Measured everything and printed it, but an output file could not be written:
    # not a failed run, and not a success a CI job may take the files of.
    NOT_SAVED = 4
    # A bug in loaderprof itself (EX_SOFTWARE).
    INTERNAL = 70
    # 128 + the signal that ended the run, as a shell reports a process it killed.
    HANGUP = 129
    INTERRUPTED = 130
    TERMINATED = 143


class LoaderprofError(Exception):
    """An error with a one-line message meant for the user."""

    exit_code: ExitCode = ExitCode.RUN_FAILED

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        # The full traceback or log excerpt, shown only with --debug.
        self.detail = detail


class UsageError(LoaderprofError):
    """Bad flag, bad config, dataset that cannot be found or built."""

    exit_code = ExitCode.USAGE


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP ending the run, carrying which. A BaseException, as
    KeyboardInterrupt is, so no `except Exception` swallows it; not a KeyboardInterrupt,
    which click turns into an Abort that forgets the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Interrupts:
    """What a signal does to the run, one state per process (`INTERRUPTS`).

    `cli.main` installs it before anything heavy is imported, so a signal in the
    first millisecond ends the run as one in the middle does. A signal raises
    `Interrupted`, except: inside `held()` (a teardown that must not be cut short)
    it waits for the block's end; once `finishing()` (everything measured, only the
    analysis and the writing left) it is only remembered, so what was measured is
    still written; and a later one while the first unwinds changes nothing, but in
    the finishing part, where it ends the run at once.
    """

    HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._finishing = False
        self._held = 0
        self._pending: int | None = None
        # An Interrupted swallowed by a finalizer, being delivered again (`_unraisable`).
        self._lost = False
        self._next_hook = sys.unraisablehook

    def install(self) -> Interrupts:
        self.signum, self._finishing, self._held, self._pending = None, False, 0, None
        self._lost = False
        for sig in self.HANDLED:
            signal.signal(sig, self._handle)
        if sys.unraisablehook is not self._unraisable:
            self._next_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
        return self

    def _unraisable(self, unraisable: Any) -> None:
        """A signal that came while a finalizer ran (a weakref callback, a __del__)
        raised there, where Python ignores what is raised: the run would go on as if
        no signal had come. It is sent again until it is raised in the run's own code."""
        exc = unraisable.exc_value
        if not isinstance(exc, Interrupted):
            self._next_hook(unraisable)
            return
        if not self._lost:
            self._lost = True
            threading.Thread(target=self._resend, args=(exc.signum,), daemon=True).start()

    def _resend(self, signum: int) -> None:
        # From a thread: in the main thread os.kill runs the handler at once, inside
        # this hook, where a raise is swallowed again.
        while self._lost:
            os.kill(os.getpid(), signum)
            time.sleep(0.05)

    def _in_hook(self, frame: FrameType | None) -> bool:
        hook = Interrupts._unraisable.__code__
        while frame is not None:
            if frame.f_code is hook:
                return True
            frame = frame.f_back
        return False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._lost:
            if self._in_hook(frame):
                return
            self._lost = False
            if self._held:
                self._pending = signum
                return
            raise Interrupted(signum)
        first = self.signum is None
        if first:
            self.signum = signum
        if self._finishing:
            if first:
                return
        elif not first:
            return
        if self._held:
            self._pending = signum
            return
        raise Interrupted(signum)

    def finishing(self) -> None:
        self._finishing = True

    @contextmanager
    def held(self) -> Iterator[None]:
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held and self._pending is not None:
            signum, self._pending = self._pending, None
            raise Interrupted(signum)

    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum

    def settle(self, code: int) -> None:
        """The run is over, its last line printed: a signal from here on exits with the
        run's own `code` at once, silently; nothing is left to write or to say."""
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()

        def _exit(signum: int, frame: FrameType | None) -> None:
            os._exit(code)

        for sig in self.HANDLED:
            signal.signal(sig, _exit)


INTERRUPTS = Interrupts()


class Measuring:
    """NOTE [measuring]: the span in which trials run. An `Interrupted` that escapes
    it (between two trials, while the template starts) ends it, kept in
    `interrupted` with the trials measured so far; a trial's own interrupt comes as
    `TrialInterrupted`, with its partial result. Once it is left, a signal no longer
    cuts the run short: what was measured is analysed and written first
    (`Interrupts.finishing`)."""

    def __init__(self, interrupts: Interrupts | None = None) -> None:
        self._interrupts = interrupts or INTERRUPTS
        self.interrupted: Interrupted | None = None

    def __enter__(self) -> Measuring:
        return self

    def __exit__(self, tp: object, exc: BaseException | None, tb: object) -> bool:
        self._interrupts.finishing()
        if isinstance(exc, Interrupted):
            self.interrupted = exc
            return True
        return False
