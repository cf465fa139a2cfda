"""Issue 29, rest: an output path that names no file, or sits under a regular file,
is refused before any trial with a line that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes import FakeRunner
from loaderprof.cli import _run
from loaderprof.errors import ExitCode

DATASET = "loaderprof.examples:CheapDataset"


def _refused(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    runner = FakeRunner()
    monkeypatch.setattr("loaderprof.comparing.scheduler.TemplateRunner", lambda: runner)
    code = _run(["compare", DATASET, "--trials", "1", *argv], debug=False)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == ExitCode.USAGE and len(err) == 1, err
    assert not runner.calls, "a trial ran before the output was refused"
    return err[0]


@pytest.mark.parametrize("flag", ["--json", "--markdown", "--html", "--trace", "--csv"])
def test_an_empty_output_path_is_refused_not_ignored(
    flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused([f"{flag}="], capsys, monkeypatch)
    assert line == f"loaderprof: error: {flag}: empty path"


def test_a_path_under_a_regular_file_says_it_is_not_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = tmp_path / "ds.py"
    ds.write_text("")
    for target in (ds / "x.json", ds / "deeper" / "x.json"):
        line = _refused(["--json", str(target)], capsys, monkeypatch)
        assert line.endswith(f"{ds} is not a directory"), line
