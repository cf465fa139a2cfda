"""Error types and exit codes.

Every error the user can cause or meet carries its exit code, so the CLI maps
errors to exit codes in exactly one place.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    GATE_FAILED = 1
    USAGE = 2
    RUN_FAILED = 3
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


class RunFailed(LoaderprofError):
    """The dataset or the loader failed while a trial ran."""

    exit_code = ExitCode.RUN_FAILED


class Interrupted(LoaderprofError):
    """The run was stopped by SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        import signal

        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name}")
        self.signum = signum
        self.exit_code = ExitCode.TERMINATED if signum == signal.SIGTERM else ExitCode.INTERRUPTED
