"""`--loader`: the loader as training builds it, a project's DataLoader subclass or
torchdata's StatefulDataLoader, with its own keyword arguments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import TESTS, run_cli

pytestmark = pytest.mark.e2e
LOADERS = str(TESTS / "lp_loaders.py")
RUN = (
    "compare",
    "loaderprof.examples:CheapDataset",
    *("--arg", "n=64", "--epochs", "3", "--trials", "1", "--num-workers", "2", "-q"),
)


def _workers(report: dict[str, Any], arm: str) -> list[int]:
    (trial,) = report["arms"][arm]["trials"]
    return [w["pid"] for w in trial["workers"]]


def _compare(tmp_path: Path, *loader: str) -> dict[str, Any]:
    out = tmp_path / "r.json"
    run = run_cli(*RUN, *loader, "--json", str(out))
    assert run.returncode == 0, run.stderr
    return dict(json.loads(out.read_text()))


def test_a_dataloader_subclass_is_built_with_its_own_arguments(tmp_path: Path) -> None:
    built = tmp_path / "built.txt"
    report = _compare(
        tmp_path,
        *("--loader", f"{LOADERS}:TaggedLoader"),
        *("--loader-arg", "tag=mine", "--loader-arg", f"out={built}"),
    )
    # Built once in each arm's trial, with the argument given.
    lines = built.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("mine ") for line in lines)
    loader = report["config"]["loader"]
    assert loader["loader_class"] == f"{LOADERS}:TaggedLoader"
    assert loader["loader_args"] == {"tag": "mine", "out": str(built)}
    # The subclass's workers live through every epoch only with persistence.
    assert len(_workers(report, "persistent")) == 2
    assert len(_workers(report, "non_persistent")) == 2 * 3


def test_torchdata_stateful_dataloader(tmp_path: Path) -> None:
    pytest.importorskip("torchdata.stateful_dataloader", reason="torchdata is not installed")
    report = _compare(tmp_path, "--loader", "torchdata.stateful_dataloader:StatefulDataLoader")
    assert len(_workers(report, "persistent")) == 2
    assert len(_workers(report, "non_persistent")) == 2 * 3
    assert report["verdict"]["recommendation"] in ("enable", "neutral", "keep_off")


@pytest.mark.parametrize(
    ("loader", "expected"),
    [
        (["--loader", f"{LOADERS}:not_a_loader"], "is not a DataLoader class"),
        (["--loader", f"{LOADERS}:NoSuchLoader"], "has no attribute 'NoSuchLoader'"),
        # `out` is missing: the class's own error, named.
        (
            ["--loader", f"{LOADERS}:TaggedLoader", "--loader-arg", "tag=x"],
            "TaggedLoader rejected the options",
        ),
    ],
)
def test_a_bad_loader_is_one_line_and_exit_2(loader: list[str], expected: str) -> None:
    run = run_cli(*RUN, *loader)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.error_lines()
    assert len(lines) == 1 and expected in lines[0], run.stderr
