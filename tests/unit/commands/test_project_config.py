"""The project's own settings: the CLI finds `[tool.loaderprof]` in the nearest
pyproject.toml as the pytest plugin does. Precedence: flags > --config FILE > the
project's table > defaults, --config replacing the table rather than merging with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loaderprof import api
from loaderprof.cli import _run
from loaderprof.config.build import find_project_config
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError

DATASET = "loaderprof.examples:CheapDataset"
TABLE = f'[project]\nname = "p"\n[tool.loaderprof]\ndataset = "{DATASET}"\nepochs = 3\nseed = 7\n'


def _pyproject(folder: Path, text: str = TABLE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(text)
    return path


def test_the_nearest_pyproject_is_found_from_a_subfolder(tmp_path: Path) -> None:
    path = _pyproject(tmp_path / "proj")
    deep = tmp_path / "proj" / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_project_config(deep) == path
    assert find_project_config(tmp_path / "proj") == path


def test_the_nearest_pyproject_is_the_projects_even_without_a_table(tmp_path: Path) -> None:
    # A sub-project's pyproject.toml marks its own project: the parent's table is not its.
    _pyproject(tmp_path)
    _pyproject(tmp_path / "sub", '[project]\nname = "sub"\n')
    assert find_project_config(tmp_path / "sub") is None
    assert find_project_config(tmp_path) == tmp_path / "pyproject.toml"


def test_the_walk_stops_at_the_top_of_the_repository(tmp_path: Path) -> None:
    _pyproject(tmp_path)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    assert find_project_config(repo / "pkg") is None
    # A worktree's .git is a file: the same top.
    (repo / ".git").rmdir()
    (repo / ".git").write_text("gitdir: elsewhere\n")
    assert find_project_config(repo / "pkg") is None
    # Without the repository the walk reaches the outer project.
    (repo / ".git").unlink()
    assert find_project_config(repo / "pkg") == tmp_path / "pyproject.toml"


def test_a_broken_pyproject_is_returned_so_reading_it_says_why(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, "[tool.loaderprof\nepochs = 2\n")
    assert find_project_config(tmp_path) == path


class _Stop(UsageError):
    pass


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """The RunConfig the CLI built, caught before any trial runs (exit 2)."""
    seen: list[RunConfig] = []

    def execute(prep: Any, **kwargs: Any) -> Any:
        seen.append(prep.cfg)
        raise _Stop("stopped before any trial")

    monkeypatch.setattr(api, "execute", execute)
    return seen


def _compare(*args: str) -> int:
    return _run(["compare", "-q", *args], debug=False)


def test_the_cli_uses_the_projects_table_and_names_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    built: list[RunConfig],
) -> None:
    path = _pyproject(tmp_path)
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    assert _compare() == 2
    (cfg,) = built
    assert (cfg.dataset, cfg.epochs, cfg.seed) == (DATASET, 3, 7)
    assert cfg.config_file == str(path)
    assert cfg.max_trials == RunConfig(dataset="x:y").max_trials  # defaults below the table
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "loaderprof: settings from ../pyproject.toml [tool.loaderprof] " + (
        "(--config replaces them)"
    )


def test_flags_win_over_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: list[RunConfig]
) -> None:
    _pyproject(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _compare("--epochs", "4") == 2
    assert (built[0].epochs, built[0].seed) == (4, 7)


def test_config_replaces_the_table_not_merged(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    built: list[RunConfig],
) -> None:
    _pyproject(tmp_path)
    other = tmp_path / "lp.toml"
    other.write_text(f'dataset = "{DATASET}"\nepochs = 6\n')
    monkeypatch.chdir(tmp_path)
    assert _compare("--config", str(other), "--max-trials", "3") == 2
    (cfg,) = built
    # The file's epochs, the flag's max_trials, and the default seed: the table's 7 unused.
    assert (cfg.epochs, cfg.max_trials, cfg.seed) == (6, 3, 0)
    assert cfg.config_file == str(other)
    assert "[tool.loaderprof]" not in capsys.readouterr().err


def test_no_project_table_leaves_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: list[RunConfig]
) -> None:
    _pyproject(tmp_path, '[project]\nname = "p"\n')
    monkeypatch.chdir(tmp_path)
    assert _compare(DATASET) == 2
    assert built[0].epochs == RunConfig(dataset="x:y").epochs and built[0].config_file is None


def test_a_bad_key_in_the_table_is_the_config_files_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _pyproject(tmp_path, "[tool.loaderprof]\nepoch = 2\n")
    monkeypatch.chdir(tmp_path)
    assert _compare(DATASET) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert errors == [
        "loaderprof: error: unknown key 'epoch' in config file "
        f"{tmp_path / 'pyproject.toml'} (did you mean 'epochs'?)"
    ]
    # As the same table named by --config.
    assert _compare(DATASET, "--config", "pyproject.toml") == 2
    assert "unknown key 'epoch' in config file pyproject.toml" in capsys.readouterr().err


def test_sweep_reads_the_table_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _pyproject(tmp_path, "[tool.loaderprof]\nepochs = 1\n")
    monkeypatch.chdir(tmp_path)
    assert _run(["sweep", DATASET, "-q"], debug=False) == 2
    err = capsys.readouterr().err
    assert "settings from pyproject.toml" in err and "--epochs 1: need at least 2" in err


def test_the_pytest_plugin_finds_the_table_the_cli_would(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from loaderprof.pytest_plugin import project_config

    path = _pyproject(tmp_path)
    (tmp_path / "tests").mkdir()
    # pytest's inifile is the pyproject.toml: its folder; else the rootdir, and upward.
    by_ini = SimpleNamespace(inipath=path, rootpath=tmp_path / "tests")
    by_root = SimpleNamespace(
        inipath=tmp_path / "tests" / "pytest.ini", rootpath=tmp_path / "tests"
    )
    assert project_config(by_ini) == path  # type: ignore[arg-type]
    assert project_config(by_root) == path == find_project_config(tmp_path / "tests")  # type: ignore[arg-type]
