"""See NOTE [one screen]. Every command's tables at 80 and 120 columns, on data with
failures and long names: committed text (regenerate with LOADERPROF_UPDATE_GOLDEN=1
after checking it by eye), no line past the width and no cell cut short."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from golden_text import GOLDEN, check_golden
from rich.console import Console, RenderableType
from screens_data import screens

# rich's mark for a cell it cut, right after what it kept ("fir…"); a spaced "…" is
# the screen's own ("0 … 6.50 s", "…+3" more PIDs).
_CUT = re.compile(r"\S…")


def _text(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


@pytest.fixture(scope="module")
def rendered() -> Iterator[dict[str, RenderableType]]:
    """Built once; the layout is pinned, not this machine: its load average cannot
    add a 'machine was busy' warning."""
    from loaderprof.comparing import session
    from loaderprof.comparing import sweep as sweeps

    env = {"python": "3.11", "cpu_count": 2, "load_average": [0.0, 0.0, 0.0]}
    with pytest.MonkeyPatch.context() as mp:
        for module in (session, sweeps):
            mp.setattr(module, "environment", lambda imported=None: dict(env))
        yield dict(screens())


NAMES = ("compare", "compare_gates", "compare_distributed", "compare_verbose", "sweep")
NAMES += ("sweep_verbose",)
NAMES += ("diff", "plan", "watch")


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", NAMES)
def test_every_screen_fits_and_matches_its_golden_text(
    rendered: dict[str, RenderableType], name: str, width: int
) -> None:
    text = _text(rendered[name], width)
    assert max(len(line) for line in text.splitlines()) <= width
    cut = [line for line in text.splitlines() if _CUT.search(line)]
    assert not cut, f"cells cut short at {width} columns: {cut}"
    path = GOLDEN / f"screen_{name}_{width}.txt"
    check_golden(path, text)


def test_a_row_without_a_figure_shows_no_unit() -> None:
    from builders import make_pair
    from loaderprof.comparing.session import build_report
    from loaderprof.config.run import RunConfig
    from loaderprof.report.console import brief_summary_table

    trials = make_pair([3.0, 1.0, 1.0], [3.0, 3.0, 3.0], idle_p=None, idle_n=None)
    report = build_report(RunConfig(dataset="a:B", epochs=3, trials=1), list(trials), imported={})
    (row,) = [ln for ln in _text(brief_summary_table(report), 80).splitlines() if "idle" in ln]
    assert row.split()[4:] == ["–", "–"], row


def test_a_run_stopped_before_a_timed_trial_says_each_timed_row_was_not_measured(
    rendered: dict[str, RenderableType],
) -> None:
    # The compare screens' run stopped after its memory trials, before any timing
    # trial: the first item's extra is a timed figure too, not a row that vanishes.
    for name in ("compare", "compare_verbose"):
        lines = _text(rendered[name], 120).splitlines()
        (row,) = [ln for ln in lines if ln.lstrip(" │┃").startswith("1st item extra ")]
        assert row.count("not measured") == 2, row


def test_a_sweep_stopped_in_a_first_trial_says_plainly_what_ran() -> None:
    import loaderprof
    from fakes import FakeRunner
    from loaderprof.report.sweep_console import sweep_table

    runner = FakeRunner(
        fail={("workers=2 non-persistent", 0)}, interrupt={("workers=2 persistent", 1)}
    )
    sweep = loaderprof.sweep(
        "loaderprof.examples:CheapDataset", epochs=3, trials=2, num_workers="0,2", runner=runner
    )
    text = " ".join(_text(sweep_table(sweep), 80).split())
    assert "stopped by a failure: 2 configurations ran 1 of 2 planned trials, 1 ran none" in text
    assert "based on what ran (2 of 3 configurations measured)" in text
    assert "0–1" not in text and "◆ workers=0" in text
