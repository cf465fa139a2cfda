"""Where the screen may break a line: never between a figure and its unit.

rich wraps prose (the verdict, the data-wait lines, warnings) at any space, so at 80
columns "26.1 ms" could end one line with "26.1" and start the next with "ms". Its
line breaker is given the text with those spaces masked (same length, so the break
offsets it returns still hold); what is printed keeps its spaces."""

from __future__ import annotations

import re
from typing import Any

# A space (or a no-break space) between a digit and a unit of the screen.
_FIGURE_UNIT = re.compile(r"(?<=\d)[ \u00a0](?=(?:ms|µs|ns|s|KiB|MiB|GiB|TiB|B|%|k/s)(?![\w/]))")


def keep_figures_whole() -> None:
    """Make rich's wrapping keep each figure with its unit (idempotent)."""
    import rich.text

    original: Any = rich.text.divide_line
    if getattr(original, "keeps_figures", False):
        return

    def divide_line(text: str, width: int, fold: bool = True) -> list[int]:
        result: list[int] = original(_FIGURE_UNIT.sub("_", text), width, fold=fold)
        return result

    divide_line.keeps_figures = True  # type: ignore[attr-defined]
    rich.text.divide_line = divide_line
