"""What reaches a pipe: lines without the spaces rich pads tables with."""

from __future__ import annotations

import io

from loaderprof.commands.common import _Trimmed


def test_piped_lines_lose_their_trailing_spaces_and_nothing_else() -> None:
    out = io.StringIO()
    trimmed = _Trimmed(out)
    trimmed.write("a table row   \n  indented  ")
    # A line is passed on whole: its end is known only at its newline (or a flush).
    assert out.getvalue() == "a table row\n"
    trimmed.write("  still the same line   \nlast")
    trimmed.flush()
    assert out.getvalue() == "a table row\n  indented    still the same line\nlast"
