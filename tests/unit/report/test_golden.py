"""See NOTE [one screen]. The terminal output rendered into fixed-width consoles (no
colour) and compared with committed text, as memray does. A change to the layout
shows up here as a diff; regenerate with LOADERPROF_UPDATE_GOLDEN=1 after checking
it by eye."""

from __future__ import annotations

import pytest
from golden_text import GOLDEN, check_golden
from rich.console import Console

import loaderprof
from fakes import FakeRunner
from loaderprof.model.results import Report
from loaderprof.report.console import render

DATASET = "loaderprof.examples:CheapDataset"


@pytest.fixture(autouse=True)
def _quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout is pinned, not this machine: a fixed environment, so its load
    average cannot add a 'machine was busy' warning to the text."""
    from loaderprof.comparing import session
    from loaderprof.comparing import sweep as sweeps

    env = {"python": "3.11", "cpu_count": 2, "load_average": [0.0, 0.0, 0.0]}
    for module in (session, sweeps):
        monkeypatch.setattr(module, "environment", lambda imported=None: dict(env))


def _report() -> Report:
    # A fixed plan on synthetic trials: every figure is known by construction and
    # repeats (FakeRunner's noise is seeded).
    return loaderprof.compare(DATASET, epochs=5, trials=3, runner=FakeRunner(0.2, 0.1))


def _text(report: Report, width: int, verbose: bool = False) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(render(report, verbose=verbose))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


@pytest.mark.parametrize("width", [80, 120])
def test_compare_output_matches_the_golden_text(width: int) -> None:
    text = _text(_report(), width)
    path = GOLDEN / f"compare_{width}.txt"
    check_golden(path, text)


def test_the_brief_output_fits_one_80_by_40_screen_without_wrapped_cells() -> None:
    report = _report()
    text = _text(report, 80)
    lines = text.splitlines()
    assert len(lines) <= 40 and max(len(line) for line in lines) <= 80
    # Each summary row is one line: its label, unit and both figures together.
    for label in ("steady epoch (2..N)", "peak USS / worker", "idle worker USS held"):
        (row,) = [line for line in lines if line.startswith(label)]
        assert len(row.split()) >= 5, row
    # The per-epoch table with PIDs and the full findings are for -v.
    assert "Epoch wall times" not in text and "Epoch wall times" in _text(report, 80, verbose=True)


def _golden(name: str, text: str) -> None:
    check_golden(GOLDEN / name, text)


def _print(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(renderable)
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    assert max(len(line) for line in text.splitlines()) <= width
    return text


# One golden file a test: the update run skips a test at its first file.
@pytest.mark.parametrize("width", [80, 120])
def test_sweep_output_matches_the_golden_text(width: int) -> None:
    from loaderprof.report.sweep_console import sweep_table

    sweep = loaderprof.sweep(DATASET, epochs=3, trials=2, num_workers="0,2,4", runner=FakeRunner())
    _golden(f"sweep_{width}.txt", _print(sweep_table(sweep), width))


@pytest.mark.parametrize("width", [80, 120])
def test_diff_output_matches_the_golden_text(width: int) -> None:
    from loaderprof.commands.diff import diff_rows
    from loaderprof.report.console import diff_table

    base = _report()
    slower = loaderprof.compare(DATASET, epochs=5, trials=3, runner=FakeRunner(0.3, 0.12))
    rows = diff_rows(base, slower, seed=0)
    _golden(f"diff_{width}.txt", _print(diff_table(rows, "new.json vs baseline base.json"), width))
