"""The command-line entry point: signals first, then the Typer app (`commands/app.py`).

Each verb lives in `loaderprof/commands/`. Heavy modules (torch, pandas, numpy)
are imported inside the commands, never at module level, so `loaderprof
--help` and `--version` start instantly.

Signals: the first statements below take SIGINT/SIGTERM/SIGHUP, with nothing
imported but builtins (`_signal`, `atexit`), when this module is the program's
entry point; `main` then hands them to `INTERRUPTS`. So a signal in the first
milliseconds ends the run with its own exit code and one line, as a later one does.
What comes before Python runs this module (the interpreter's own start-up) cannot
be handled (README, "Interrupts and failed writes").
"""

import _signal  # type: ignore[import-not-found]  # the C module: `signal` pulls enum
import atexit
import os
import sys

_NAMES = {_signal.SIGHUP: "SIGHUP", _signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM"}
# The console script (…/bin/loaderprof) or `python -m loaderprof`; a test or a
# program that imports this module keeps its own handlers.
_ENTRY = sys.argv[0].endswith((os.sep + "loaderprof", os.path.join("loaderprof", "__main__.py")))


def _early(signum: int, frame: object) -> None:
    # Before `main` took over nothing has started and nothing was measured: the line
    # and 128 + N, at once (no traceback from an import it cut short).
    os.write(2, f"loaderprof: interrupted by {_NAMES[signum]}\n".encode())
    os._exit(128 + signum)


def _quiet() -> None:
    # Registered first, so it runs last of the exit handlers: the interpreter's own
    # teardown would die of a signal silently (128 + N, no line) after the run's
    # last line; the run is over, so a signal there changes nothing.
    for sig in _NAMES:
        _signal.signal(sig, _signal.SIG_IGN)


if _ENTRY:
    for _sig in _NAMES:
        _signal.signal(_sig, _early)
    atexit.register(_quiet)

import signal  # noqa: E402
import warnings  # noqa: E402

from loaderprof.errors import INTERRUPTS, Interrupted  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    try:
        INTERRUPTS.install()
        args = list(sys.argv[1:] if argv is None else argv)
        debug = "--debug" in args
        if not debug and not sys.warnoptions:
            # A library's warning (matplotlib, torch) is not the user's to read: what
            # matters reaches them as loaderprof's own lines. --debug or -W/PYTHONWARNINGS
            # show them.
            warnings.simplefilter("ignore")
        code = _run(args, debug=debug)
    except Interrupted as exc:
        code = interrupted(exc.signum)
    if argv is None:
        # Everything written and printed, the last line included: a signal from here
        # on ends the process with the run's own code (README, "Interrupts and failed
        # writes").
        INTERRUPTS.settle(code)
    sys.exit(code)


def interrupted(signum: int) -> int:
    """The one line a run that a signal ended before it had a report prints."""
    sys.stderr.write(f"loaderprof: interrupted by {signal.Signals(signum).name}\n")
    return 128 + signum


def _run(args: list[str], *, debug: bool) -> int:
    from loaderprof.commands.app import run

    return run(args, debug=debug)
