"""Where the screen may break a line (report/wrap.py)."""

from __future__ import annotations

import pytest

from loaderprof.report.wrap import wrap_text

HEADER = "myhf:make_hf · 2 workers · batch 32 · spawn · 5 epochs × 2 trials per arm"


@pytest.mark.parametrize("width", range(50, len(HEADER)))
def test_no_line_breaks_a_figure_from_its_unit_or_a_plans_words(width: int) -> None:
    lines = wrap_text(f"{HEADER} · steady 12.5 ms, 95 % CI 0.52–0.75", width)
    assert " ".join(lines).split() == f"{HEADER} · steady 12.5 ms, 95 % CI 0.52–0.75".split()
    for line in lines:
        assert not line.endswith(("12.5", "trials", "per", "2 trials per", "%", "·"))
        assert not line.startswith(("ms", "arm", "per", "CI"))
