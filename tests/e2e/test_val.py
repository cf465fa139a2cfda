"""See NOTE [validation pass]. A train pass and a validation pass every epoch, two pools."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import DATA, TESTS, run_cli
from loaderprof.report.json_report import load_schema
from loaderprof.units import MiB

pytestmark = pytest.mark.e2e


def test_train_and_validation_pools_are_counted_from_pids(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "compare",
        f"{DATA}:AllocDataset",
        "--arg",
        "alloc_mib=32",
        "--arg",
        "n=16",
        # Validation items take 80 ms, so a pass (about 0.6 s) holds a whole walk: a 0.24 s
        # pass held none, at times, on the CUDA build under a full suite's load.
        "--val",
        f"{DATA}:AllocDataset",
        "--val-arg",
        "alloc_mib=16",
        "--val-arg",
        "n=16",
        "--val-arg",
        "item_sleep_s=0.08",
        "--trials",
        "1",
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema(), cls=jsonschema.Draft202012Validator)
    p, n = report["arms"]["persistent"], report["arms"]["non_persistent"]
    # 2 train + 2 validation workers alive at once with persistence; without it the
    # train pool is gone before validation starts.
    assert p["summary"]["peak_worker_processes"] == 4
    assert n["summary"]["peak_worker_processes"] == 2
    # The idle train pool holds its two 32 MiB blocks through every validation pass.
    assert p["trials"][0]["memory"]["val_train_pool_uss_bytes"] >= 64 * MiB
    assert n["trials"][0]["memory"]["val_train_pool_uss_bytes"] == 0
    for arm, per_loader in ((p, 2), (n, 6)):
        (trial,) = arm["trials"]
        loaders = [w["loader"] for w in trial["workers"]]
        assert loaders.count("train") == loaders.count("val") == per_loader
        for e in trial["epochs"]:
            # The epoch covers both passes; samples and batches are the train loader's.
            assert e["val_batches"] == 4 and e["batches"] == 4 and e["samples"] == 16
            assert 0 < e["val_s"] < e["wall_s"]
            # Its wait to the first batch holds both passes' (NOTE [data wait]).
            assert e["wait"]["passes"] == 2
    assert "1st batches of 2 passes" in run.stdout
    assert "validation pass" in run.stdout and "train pool USS during val" in run.stdout


def test_a_val_that_is_not_a_dataset_is_one_line_and_exit_2() -> None:
    run = run_cli(
        "compare",
        f"{DATA}:make_tiny",
        "--val",
        f"{DATA}:make_number",
        "--trials",
        "1",
        "--epochs",
        "2",
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.error_lines()
    assert len(lines) == 1 and "make_number" in lines[0] and "not a torch Dataset" in lines[0]


def test_sweep_takes_a_validation_dataset_and_a_loader_class(tmp_path: Path) -> None:
    out, built = tmp_path / "s.json", tmp_path / "built.txt"
    run = run_cli(
        "sweep",
        f"{DATA}:AllocDataset",
        "--arg",
        "alloc_mib=8",
        "--arg",
        "n=8",
        "--val",
        f"{DATA}:AllocDataset",
        "--val-arg",
        "n=8",
        "--val-arg",
        "item_sleep_s=0.08",
        "--num-workers",
        "1",
        "--persistent",
        "on,off",
        "--trials",
        "1",
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--json",
        str(out),
        *("--loader", f"{TESTS / 'lp_loaders.py'}:TaggedLoader"),
        *("--loader-arg", "tag=t", "--loader-arg", f"out={built}"),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    # Both loaders of both points were built with the class: 2 points × (train, val).
    assert len(built.read_text().splitlines()) == 4
    assert report["config"]["val"] == f"{DATA}:AllocDataset"
    most = {p["persistent"]: p["summary"]["peak_worker_processes"] for p in report["points"]}
    # One train and one validation worker: both alive at once only with persistence.
    assert most == {True: 2, False: 1}
