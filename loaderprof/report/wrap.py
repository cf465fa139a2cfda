"""Where the screen may break a line: never between a figure and its unit, between
"CI" and its interval, or after a "·" separator.

rich wraps prose (the verdict, the data-wait lines, warnings) at any space, so at 80
columns "26.1 ms" could end one line with "26.1" and start the next with "ms". Its
line breaker is given the text with those spaces masked (same length, so the break
offsets it returns still hold); what is printed keeps its spaces. The plain-text
screens (`compare -- COMMAND`'s) wrap through `wrap_text`, by the same rule."""

from __future__ import annotations

import re
import textwrap
from typing import Any

# The spaces no line may break at: between a digit and a unit of the screen, in
# "95 % CI 0.52–0.75" and "trials per arm" (a unit too), and after a "·" (so a
# separator starts a line, never ends one).
_KEPT = re.compile(
    r"(?<=\d)[ \u00a0](?=(?:ms|µs|ns|s|KiB|MiB|GiB|TiB|B|%|k/s)(?![\w/]))"
    r"|(?<=%) (?=CI\b)|(?<=\bCI) (?=\d)"
    r"|(?<=\btrial) (?=per arm\b)|(?<=\btrials) (?=per arm\b)|(?<=\bper) (?=arm\b)"
    r"|(?<=·) "
)
_NBSP = "\u00a0"


def wrap_text(text: str, width: int, **options: Any) -> list[str]:
    """`textwrap.wrap` that keeps the spaces above (textwrap breaks at ASCII
    whitespace only, so a no-break space holds them)."""
    lines = textwrap.wrap(_KEPT.sub(_NBSP, text), width, break_on_hyphens=False, **options)
    return [line.replace(_NBSP, " ") for line in lines]


def keep_figures_whole() -> None:
    """Make rich's wrapping keep the spaces above (idempotent)."""
    import rich.text

    original: Any = rich.text.divide_line
    if getattr(original, "keeps_figures", False):
        return

    def divide_line(text: str, width: int, fold: bool = True) -> list[int]:
        result: list[int] = original(_KEPT.sub("_", text), width, fold=fold)
        return result

    divide_line.keeps_figures = True  # type: ignore[attr-defined]
    rich.text.divide_line = divide_line
