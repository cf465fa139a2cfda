"""End to end: `loaderprof compare` run inside a project takes its [tool.loaderprof]."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from conftest import load, run_cli
from loaderprof.report.json_report import load_schema

pytestmark = pytest.mark.e2e


def test_compare_in_a_project_uses_its_pyproject_settings(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "proj"\n\n[tool.loaderprof]\n'
        'dataset = "loaderprof.examples:CheapDataset"\nepochs = 2\nnum-workers = 1\n'
        "trials = 1\n\n[tool.loaderprof.args]\nn = 32\n"
    )
    out = tmp_path / "report.json"
    # From a subfolder: the nearest pyproject.toml upward is the project's.
    run = run_cli("compare", "-q", "--json", str(out), cwd=project / "src")
    assert run.returncode == 0, run.stderr
    assert run.err_lines()[0] == (
        "loaderprof: settings from ../pyproject.toml [tool.loaderprof] (--config replaces them)"
    )
    report = load(out)
    jsonschema.validate(report, load_schema())
    assert report["config"]["epochs"] == 2
    assert report["config"]["loader"]["num_workers"] == 1
    assert report["config"]["dataset_args"] == {"n": 32}
    assert report["config"]["config_file"] == str(project / "pyproject.toml")
    assert all(len(t["epochs"]) == 2 for t in report["arms"]["persistent"]["trials"])
