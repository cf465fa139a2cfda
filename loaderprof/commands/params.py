"""Typer parameters built from the option tables in `loaderprof.config.options`.

A command's signature is assembled here from the option groups it takes, so a
flag, its type, help text and help panel are written once, in `options.py`,
whatever number of commands accept it.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any

import typer

from loaderprof.config.options import cli_type

DATASET_HELP = (
    "Dataset as 'pkg.module:attr' or 'path/file.py:attr': a Dataset class, a factory "
    "function, or an instance."
)


def options(
    cls: type, *, only: Collection[str] | None = None, exclude: Collection[str] = ()
) -> list[inspect.Parameter]:
    """One keyword parameter per field of an option group."""
    out = []
    for f in dataclasses.fields(cls):
        if (only is not None and f.name not in only) or f.name in exclude:
            continue
        meta = f.metadata
        info = typer.Option(
            *meta["flags"],
            help=meta["help"],
            rich_help_panel=meta["panel"],
            hidden=meta["hidden"],
            show_default=False,
        )
        out.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=f.default,
                annotation=Annotated[cli_type(cls, f.name), info],
            )
        )
    return out


def argument(name: str, tp: Any, help: str, default: Any = inspect.Parameter.empty) -> Any:
    return inspect.Parameter(
        name,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=default,
        annotation=Annotated[tp, typer.Argument(help=help, show_default=False)],
    )


def register(
    app: typer.Typer,
    name: str,
    doc: str,
    params: list[inspect.Parameter],
    impl: Callable[[dict[str, Any]], int],
) -> None:
    """Add a command whose parameters are `params`; `impl` gets them as one dict.

    A command with --config that is run without it takes the project's
    [tool.loaderprof] (`project_config`) in its place: one file or the other, never
    the two merged."""
    takes_config = any(p.name == "config" for p in params)

    def command(**values: Any) -> int:
        if takes_config and values.get("config") is None:
            values["config"] = project_config()
        return impl(values)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = doc
    command.__name__ = name
    app.command(name)(command)


def project_config() -> Path | None:
    """The nearest pyproject.toml with a [tool.loaderprof] table, from the current
    folder up (`loaderprof.config.run.find_project_config`). Settings nobody typed
    change the run, so one dim line on stderr names the file."""
    from loaderprof.config.run import find_project_config

    found = find_project_config(Path.cwd())
    if found is not None:
        from loaderprof.commands.common import stderr_console

        shown = os.path.relpath(found)
        stderr_console().print(
            f"loaderprof: settings from {shown} [tool.loaderprof] (--config replaces them)",
            style="dim",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return found
