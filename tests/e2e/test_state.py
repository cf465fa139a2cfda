"""Does persistence change what the model sees? Stale worker state, repeated randomness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import TESTS, load, run_cli

pytestmark = pytest.mark.e2e
STATE = str(TESTS / "lp_state.py")


def _compare(tmp_path: Path, dataset: str, *extra: str, expect: int = 0) -> dict[str, Any]:
    out = tmp_path / "r.json"
    run = run_cli(
        "compare",
        f"{STATE}:{dataset}",
        "--trials",
        "1",
        "--epochs",
        "3",
        "--batch-size",
        "8",
        "--json",
        str(out),
        *extra,
    )
    assert run.returncode == expect, run.stderr
    return load(out)


def _ids(report: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(f["id"], f["arm"]) for f in report["findings"]]


@pytest.mark.parametrize(
    ("dataset", "extra", "attribute", "mp"),
    [
        ("SetEpochDataset", (), "epoch", "fork"),
        ("MosaicDataset", ("--epoch-hook", f"{STATE}:close_mosaic"), "mosaic", "fork"),
    ],
)
def test_state_changed_in_main_is_stale_in_persistent_workers(
    tmp_path: Path, dataset: str, extra: tuple[str, ...], attribute: str, mp: str
) -> None:
    gate = ("--fail-on", "finding:stale-worker-state")
    report = _compare(tmp_path, dataset, "--mp-context", mp, *extra, *gate, expect=1)
    assert _ids(report) == [("stale-worker-state", "persistent")]
    # The gate on the finding fails the run (exit 1).
    (g,) = report["gates"]
    assert (g["metric"], g["status"], g["value"]) == ("finding:stale-worker-state", "fail", 1.0)
    (f,) = report["findings"]
    ev = f["evidence"]
    # set_epoch(1) / the hook at epoch 1 (from 0) runs before the events' epoch 2.
    assert (ev["attribute"], ev["epoch"], ev["workers"]) == (attribute, 2, [0, 1])
    assert ev["main_value"] != ev["worker_value"]
    verdict = report["verdict"]
    assert verdict["depends_on"] == ["stale-worker-state"]
    assert f"`{attribute}`" in verdict["headline"]


def test_epoch_in_shared_memory_is_not_stale(tmp_path: Path) -> None:
    report = _compare(tmp_path, "SharedEpochDataset", "--mp-context", "fork")
    assert _ids(report) == []
    # The workers did follow it: their fingerprint of the shared tensor changes.
    states = report["arms"]["persistent"]["trials"][0]["dataset_states"]
    seen = {s["values"]["epoch_t"] for s in states if s["role"] == "worker"}
    assert len(seen) == 3


@pytest.mark.parametrize(
    ("dataset", "attribute", "mp"),
    [
        ("NumpyRngDataset", "rng", "fork"),
        # Under spawn torch itself cannot hand a torch.Generator to a worker (the
        # worker dies unpickling it: "unable to resize file"), with or without us.
        ("TorchRngDataset", "gen", "fork"),
    ],
)
def test_generator_on_the_dataset_repeats_randomness(
    tmp_path: Path, dataset: str, attribute: str, mp: str
) -> None:
    report = _compare(tmp_path, dataset, "--mp-context", mp)
    assert _ids(report) == [("repeated-randomness", None)]
    ev = report["findings"][0]["evidence"]
    assert ev["attribute"] == attribute
    assert ev["same_state_in_workers_epochs"]["persistent"][0] == 1
    assert ev["non_persistent_epochs_repeating_the_previous"] == [2, 3]


def test_under_spawn_each_kind_of_state_is_told_apart(tmp_path: Path) -> None:
    # One run under spawn (workers unpickle their Dataset and the shared counter):
    # the plain epoch is stale, the shared one is not, the generator repeats. One
    # worker: each spawned one imports torch, and one shows all three.
    report = _compare(tmp_path, "EveryStateDataset", "--mp-context", "spawn", "--num-workers", "1")
    assert _ids(report) == [("stale-worker-state", "persistent"), ("repeated-randomness", None)]
    stale, rng = report["findings"]
    assert stale["evidence"]["attributes"] == ["epoch"] and stale["evidence"]["epoch"] == 2
    assert rng["evidence"]["attribute"] == "rng"
    assert rng["evidence"]["non_persistent_epochs_repeating_the_previous"] == [2, 3]


def test_reseeding_per_worker_fixes_repeated_randomness(tmp_path: Path) -> None:
    fix = f"{STATE}:reseed_rng"
    report = _compare(tmp_path, "NumpyRngDataset", "--worker-init-fn", fix)
    assert _ids(report) == []


def test_check_folds_the_content_evidence_into_the_state_finding(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "check", f"{STATE}:SetEpochDataset", "--epochs", "3", "-b", "8", "--json", str(out)
    )
    assert run.returncode == 1, run.stderr
    assert run.err_lines()[-1] == "loaderprof: check found: stale-worker-state"
    (f,) = load(out)["findings"]
    assert f["evidence"]["content_differs_from_epoch"] == 2


def test_no_set_epoch_turns_the_protocol_off(tmp_path: Path) -> None:
    report = _compare(tmp_path, "SetEpochDataset", "--no-set-epoch")
    assert _ids(report) == []
    assert report["config"]["set_epoch"] is False


@pytest.mark.parametrize(
    ("hook", "message"),
    [
        ("lp_state_missing:hook", "lp_state_missing"),
        (f"{STATE}:NOT_CALLABLE", "is not callable"),
    ],
)
def test_bad_epoch_hook_is_a_usage_error(tmp_path: Path, hook: str, message: str) -> None:
    run = run_cli(
        "compare", f"{STATE}:MosaicDataset", "--trials", "1", "--epochs", "2", "--epoch-hook", hook
    )
    assert run.returncode == 2, run.stderr
    (line,) = run.err_lines()
    assert line.startswith("loaderprof: error:") and message in line


def test_a_raising_hook_names_its_epoch_and_keeps_what_was_measured(tmp_path: Path) -> None:
    hook = f"{STATE}:raising_hook"
    report = _compare(tmp_path, "MosaicDataset", "--epoch-hook", hook, expect=3)
    assert report["complete"] is False
    (error,) = report["errors"]
    assert error["kind"] == "epoch_hook" and error["epoch"] == 2
    assert "RuntimeError: curriculum file missing before epoch 2" in error["message"]
    trial = next(t for arm in report["arms"].values() for t in arm["trials"])
    assert [e["epoch"] for e in trial["epochs"]] == [1]
