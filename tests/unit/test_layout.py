"""The tests mirror the tree: `tests/unit/<subsystem>/` for each of the package's
folders, the pure code's tests there, and every test that starts a process in
`tests/e2e/`."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
# The plugin's one real compare runs beside its pytester fixtures, in the plugin's file.
E2E_BESIDE_ITS_FIXTURES = {"commands/test_pytest_plugin.py"}


def test_each_unit_folder_is_a_subsystem_and_each_subsystem_has_one() -> None:
    package = ROOT / "loaderprof"
    if not package.is_dir():
        pytest.skip("an installed package: the checkout is not here")
    subsystems = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == subsystems


def test_a_test_that_starts_processes_lives_in_e2e() -> None:
    marked = {
        str(p.relative_to(UNIT))
        for p in UNIT.rglob("test_*.py")
        if "mark.e2e" in p.read_text(encoding="utf-8") and p != Path(__file__)
    }
    assert marked <= E2E_BESIDE_ITS_FIXTURES, sorted(marked - E2E_BESIDE_ITS_FIXTURES)


def test_modules_stay_small_and_the_top_level_stays_thin() -> None:
    """No module over 600 lines; at most 12 modules directly in `loaderprof/` (the
    entry points and the leaves below every folder)."""
    package = ROOT / "loaderprof"
    if not package.is_dir():
        pytest.skip("an installed package: the checkout is not here")
    sizes = {
        str(p.relative_to(package)): len(p.read_text(encoding="utf-8").splitlines())
        for p in package.rglob("*.py")
    }
    assert not {m: n for m, n in sizes.items() if n > 600}
    assert len(list(package.glob("*.py"))) <= 12
