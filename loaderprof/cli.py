"""The command-line entry point: signals first, then the Typer app (`commands/app.py`).

Each verb lives in `loaderprof/commands/`. Heavy modules (torch, pandas, numpy)
are imported inside the commands, never at module level, so `loaderprof
--help` and `--version` start instantly. `main` takes SIGINT/SIGTERM/SIGHUP
before anything else is imported (typer included), so a signal in the first
millisecond ends the run with its own exit code and one line, as a later one does.
"""

from __future__ import annotations

import signal
import sys
import warnings

from loaderprof.errors import INTERRUPTS, Interrupted


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
    sys.exit(code)


def interrupted(signum: int) -> int:
    """The one line a run that a signal ended before it had a report prints."""
    sys.stderr.write(f"loaderprof: interrupted by {signal.Signals(signum).name}\n")
    return 128 + signum


def _run(args: list[str], *, debug: bool) -> int:
    from loaderprof.commands.app import run

    return run(args, debug=debug)
