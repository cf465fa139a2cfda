"""See NOTE [short epochs]. --max-batches cuts real epochs and projects them to full ones."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from conftest import load, run_cli
from loaderprof.report.json_report import load_schema

pytestmark = pytest.mark.e2e


def test_cut_epochs_are_projected_to_the_loaders_length(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "compare",
        "loaderprof.examples:LazyResourceDataset",
        "--arg",
        "n=256",
        "--arg",
        "open_cost_s=0.1",
        "--batch-size",
        "8",
        "--max-batches",
        "4",
        "--epochs",
        "3",
        "--trials",
        "1",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    report = load(out)
    jsonschema.validate(report, load_schema(), cls=jsonschema.Draft202012Validator)
    proj = report["projection"]
    assert (proj["max_batches"], proj["full_batches"]) == (4, 32)
    assert "short epochs: measured 4 of 32 batches" in run.stdout
    for arm in ("persistent", "non_persistent"):
        trial = report["arms"][arm]["trials"][0]
        assert [e["batches"] for e in trial["epochs"]] == [4, 4, 4]
        measured = max(e["wall_s"] for e in trial["epochs"][1:])
        # The full epoch runs 28 more batches than the cut one measured.
        assert proj["steady_epoch_s"][arm]["median"] > measured
        assert proj["batch_interval_s"][arm]["median"] > 0
    # A cut non-persistent epoch still joins its workers inside the epoch.
    assert report["arms"]["non_persistent"]["summary"]["idle_workers_uss_bytes"]["median"] == 0
    # The 0.1 s open is saved either way; the verdict weighs it against full epochs.
    saved = report["comparison"]["saved_s_per_epoch"]
    assert saved >= 0.09
