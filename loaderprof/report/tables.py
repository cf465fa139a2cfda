"""How every terminal table is drawn: the title on the left, a bold header, text
columns left and figures right. One place, so compare's, sweep's and watch's screens
look alike."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.table import Table


def titled(title: str, columns: Sequence[str] = (), *, text: Collection[str] = ()) -> Table:
    """A table titled `title` with `columns` (those named in `text` left-aligned,
    the rest figures, right-aligned); add more columns to it as usual."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col, justify="left" if col in text else "right")
    return t
