"""Typer parameters built from the option tables in `loaderprof.config.options`.

A command's signature is assembled here from the option groups it takes, so a
flag, its type, help text and help panel are written once, in `options.py`,
whatever number of commands accept it. How --help shows them is settled here too
(`Command`, `Group`): no type placeholders, prose paragraphs reflowed to the terminal.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import typing
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

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
        tp = cli_type(cls, f.name)
        info = typer.Option(
            *meta["flags"],
            help=meta["help"],
            rich_help_panel=meta["panel"],
            hidden=meta["hidden"],
            show_default=False,
            metavar=meta["metavar"] if meta["metavar"] is not None else _metavar(tp),
        )
        out.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=f.default,
                annotation=Annotated[tp, info],
            )
        )
    return out


def _metavar(tp: Any) -> str:
    """The value's name in --help when its option names none; a flag takes no value,
    so it shows none."""
    kinds = set(typing.get_args(tp) or (tp,)) - {type(None)}
    if kinds <= {bool}:
        return ""
    if Path in kinds:
        return "PATH"
    return "N" if kinds <= {int} else "NUM" if kinds <= {int, float} else "TEXT"


def argument(name: str, tp: Any, help: str, default: Any = inspect.Parameter.empty) -> Any:
    info = typer.Argument(help=help, show_default=False, metavar=name.upper())
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Parameter(name, kind, default=default, annotation=Annotated[tp, info])


def _bare(option: TyperOption | None) -> TyperOption | None:
    if option is not None:
        option.metavar = ""
    return option


class _NamedArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class Command(TyperCommand):
    """A command whose --help shows no type placeholders (`--verbose <bool>`).

    Typer's rich help prints one from the parameter's type beside every parameter that
    has no metavar, flags included (its plain help skips them), and beside every
    argument whatever its metavar. `options` gives each option a metavar (empty for a
    flag); here an option built elsewhere gets one too, --help an empty one, and
    arguments show their name alone. The app gives every command this class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.__class__ = _NamedArgument
                param.metavar = param.metavar or (param.name or "").upper()
            elif isinstance(param, TyperOption) and param.metavar is None:
                param.metavar = "" if param.is_flag else (param.name or "").upper()

    def get_help_option(self, ctx: Any) -> Any:
        return _bare(super().get_help_option(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """`compare [OPTIONS] -- COMMAND ...`: what follows the first `--` is the user's
        command, never compare's DATASET or options (kept in ctx.meta for `register`)."""
        if self.name in TRAILING and "--" in args:
            cut = args.index("--")
            ctx.meta[TRAILING_KEY] = args[cut + 1 :]
            args = args[:cut]
        return super().parse_args(ctx, args)


# Commands that take a trailing command after `--` (as `values["command"]`: None
# without `--`, a list, maybe empty, with it). watch takes it as its argument instead.
TRAILING = frozenset({"compare"})
TRAILING_KEY = "loaderprof.trailing"


class Group(TyperGroup):
    """The top level's --help, as `Command`'s."""

    def get_help_option(self, ctx: Any) -> Any:
        return _bare(super().get_help_option(ctx))


def reflow(doc: str) -> str:
    """Each prose paragraph on one line, for the terminal to wrap: typer's rich help
    keeps a docstring's line breaks, which at another width cut a sentence mid-way. An
    indented paragraph (examples) keeps its lines."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(
        p if any(line.startswith(" ") for line in p.splitlines()) else " ".join(p.split())
        for p in paragraphs
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
        if name in TRAILING:
            from typer._click.globals import get_current_context

            values["command"] = get_current_context().meta.get(TRAILING_KEY)
            if values["command"] is not None:  # the command form reads no pyproject table
                return impl(values)
        if takes_config and values.get("config") is None:
            values["config"] = project_config()
        return impl(values)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = reflow(doc)
    command.__name__ = name
    app.command(name)(command)


def project_config() -> Path | None:
    """The nearest pyproject.toml with a [tool.loaderprof] table, from the current
    folder up (`loaderprof.config.build.find_project_config`). Settings nobody typed
    change the run, so one dim line on stderr names the file."""
    from loaderprof.config.build import find_project_config

    found = find_project_config(Path.cwd())
    if found is not None:
        from loaderprof.commands.common import say

        shown = os.path.relpath(found)
        say(f"loaderprof: settings from {shown} [tool.loaderprof] (--config replaces them)", "dim")
    return found
