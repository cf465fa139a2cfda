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
    # A bug in loaderprof itself (EX_SOFTWARE).
    INTERNAL = 70
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
