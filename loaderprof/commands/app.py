"""The Typer app: every verb registered, and what escapes them mapped to exit codes.

`cli.main` imports this module only once its signal handlers are in place.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from typer._click import exceptions as click_exc

from loaderprof.commands import compare, diff, params, plan, report, sweep, watch
from loaderprof.errors import ExitCode, LoaderprofError
from loaderprof.version import __version__

app = typer.Typer(
    name="loaderprof",
    help="Profile the worker lifecycle of PyTorch DataLoaders: does persistent_workers "
    "pay for your dataset?",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=params.Group,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"loaderprof {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version.", metavar=""
        ),
    ] = False,
) -> None:
    """loaderprof measures DataLoader workers: start-up, epoch latency, memory."""


for _module in (compare, report, diff, sweep, plan, watch):
    _module.register(app)
# Every command's --help without type placeholders (see `params.Command`).
for _info in app.registered_commands:
    _info.cls = params.Command


def run(args: list[str], *, debug: bool) -> int:
    """Every error that escapes a command becomes one line and its exit code, here."""
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=args, prog_name="loaderprof", standalone_mode=False)
        return rv if isinstance(rv, int) else int(ExitCode.OK)
    except click_exc.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return int(ExitCode.OK)
    except click_exc.UsageError as exc:
        sub = f" {exc.ctx.info_name}" if exc.ctx and exc.ctx.parent else ""
        sys.stderr.write(
            f"loaderprof: error: {exc.format_message()} (see 'loaderprof{sub} --help')\n"
        )
        return int(ExitCode.USAGE)
    except click_exc.ClickException as exc:
        sys.stderr.write(f"loaderprof: error: {exc.format_message()}\n")
        return int(ExitCode.USAGE)
    except LoaderprofError as exc:
        if debug and exc.detail:
            sys.stderr.write(exc.detail.rstrip() + "\n")
        sys.stderr.write(f"loaderprof: error: {exc.message}\n")
        return int(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        # Ctrl-C where cli.main's handlers are not in place (a test calling `run`).
        sys.stderr.write("loaderprof: interrupted\n")
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`| head`); nothing more to say to it.
        return int(ExitCode.OK)
    except Exception:
        if debug:
            raise
        import traceback

        last = traceback.format_exc().strip().splitlines()[-1]
        sys.stderr.write(f"loaderprof: internal error: {last} (rerun with --debug)\n")
        return int(ExitCode.INTERNAL)
