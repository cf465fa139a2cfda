"""Each lifecycle check on a dataset built to trigger exactly it, and a clean one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import TESTS, run_cli
from loaderprof.report.json_report import load_schema

pytestmark = pytest.mark.e2e
FINDINGS = str(TESTS / "lp_findings.py")


@pytest.mark.parametrize(
    ("dataset", "expected", "severity", "epochs"),
    [
        # See NOTE [growth to tell]. A warning needs growth still rising over 10 epochs.
        ("LeakyFiles", "leaked-files", "warning", 10),
        ("GrowingCache", "memory-grows-every-epoch", "warning", 10),
        ("PythonObjects", "copy-on-read", "warning", 5),
        ("UnshardedStream", "iterable-duplicates", "error", 5),
        ("ModuleGenerator", "repeated-randomness", "warning", 5),
        ("SelfShuffling", "stream-order-repeats", "warning", 4),
    ],
)
def test_check_finds_exactly_one(
    tmp_path: Path, dataset: str, expected: str, severity: str, epochs: int
) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "check",
        f"{FINDINGS}:{dataset}",
        "--epochs",
        str(epochs),
        "--batch-size",
        "4",
        "--mp-context",
        "fork",
        # See NOTE [sampled pauses]. A pause lasts until the sampler has read it whole, however
        # slow a walk is on a busy machine; 200 ms leaves room for a few ticks besides.
        "--idle-ms",
        "200",
        "--json",
        str(out),
    )
    assert run.returncode == 1, run.stderr
    assert f"check found: {expected}" in run.stderr
    report = json.loads(out.read_text())
    ids = [f["id"] for f in report["findings"]]
    assert ids == [expected], report["findings"]
    finding = report["findings"][0]
    assert finding["severity"] == severity
    assert finding["evidence"] and finding["fix"]
    if expected in ("leaked-files", "memory-grows-every-epoch"):
        # Both workers grew, and both are named.
        assert finding["evidence"]["worker_ids"] == [0, 1], finding
        assert "worker 0 and worker 1" in finding["title"]
    if expected == "leaked-files":
        # One more file an epoch: the limit the workers inherited, less what they hold.
        ev, limit = finding["evidence"], report["environment"]["open_files_limit"]
        held = max(s[-1] for s in ev["files_by_epoch_by_worker"].values())
        assert ev["open_files_limit"] == limit and ev["epochs_to_limit"] == limit - held, ev
        assert f"reaches the open-file limit ({limit}) in about" in finding["title"]
    if expected == "copy-on-read":
        # It grows with what is read, past the worker's one-time start-up copy.
        ev = finding["evidence"]
        assert ev["samples_read"] > 0 and ev["uss_bytes_per_1000_samples"] >= 1 << 20
    if expected == "stream-order-repeats":
        # A fresh pool restarts the workers' count: the non-persistent arm repeats.
        assert finding["arm"] == "non_persistent"
        orders = finding["evidence"]["distinct_orders_by_arm"]
        assert orders == {"persistent": epochs, "non_persistent": 1}, finding
    assert expected in run.stdout  # shown in the tables too
    jsonschema.validate(report, load_schema(), cls=jsonschema.Draft202012Validator)


def _check_json(tmp_path: Path, dataset: str, *extra: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "r.json"
    run = run_cli(
        "check", f"{FINDINGS}:{dataset}", "-b", "4", "--idle-ms", "200", *extra, "--json", str(out)
    )
    return run.returncode, json.loads(out.read_text())


def test_growth_over_too_few_epochs_is_info_that_says_how_many_would_tell(
    tmp_path: Path,
) -> None:
    code, report = _check_json(tmp_path, "LeakyFiles", "--epochs", "5")
    assert code == 0
    (finding,) = report["findings"]
    assert (finding["id"], finding["severity"]) == ("leaked-files", "info")
    ev = finding["evidence"]
    assert (ev["trend"], ev["epochs_to_tell"], ev["worker_ids"]) == ("too-few", 10, [0, 1])
    assert "--epochs 10" in finding["fix"]


def test_a_file_opened_lazily_is_state_carried_in_every_run(tmp_path: Path) -> None:
    """See NOTE [held at init]. Counted from what the worker held before its first item, not
    from wherever the sampler's first reading landed (before or after the lazy open)."""
    for _ in range(2):
        code, report = _check_json(tmp_path, "LazyFile", "--epochs", "3")
        assert code == 0
        assert [(f["id"], f["evidence"]) for f in report["findings"]] == [
            ("state-carried", {"extra_files": 1})
        ]
    title = report["findings"][0]["title"]
    assert title == "each persistent worker holds 1 open file from one epoch to the next"
    workers = report["arms"]["persistent"]["trials"][0]["workers"]
    assert all(w["held_at_init"]["files"] + 1 == w["states"][-1]["files"] for w in workers)


def test_files_opened_once_per_chunk_level_off_and_are_no_leak(tmp_path: Path) -> None:
    """litdata's pattern: 2 more chunk files each epoch until all 8 are open, then flat."""
    code, report = _check_json(tmp_path, "ChunkFiles", "--epochs", "10")
    assert code == 0, report["findings"]
    assert [f["id"] for f in report["findings"]] == ["state-carried"]
    assert report["findings"][0]["evidence"]["extra_files"] >= 1
    # The files did grow, then stopped at every chunk.
    workers = report["arms"]["persistent"]["trials"][0]["workers"]
    files = [s["files"] for s in workers[0]["states"] if s["after_epoch"] >= 1]
    assert files[-1] - files[0] >= 4 and len(set(files[-5:])) == 1


@pytest.mark.parametrize("dataset", ["RandomAugment", "TorchvisionStyle"])
def test_draws_torch_reseeds_are_not_a_warning(tmp_path: Path, dataset: str) -> None:
    """See NOTE [random draws]. Both arms draw fresh values every epoch; they differ only as
    two seeds differ, which is at most info and never fails `check`."""
    out = tmp_path / "r.json"
    run = run_cli("check", f"{FINDINGS}:{dataset}", "--epochs", "4", "-b", "4", "--json", str(out))
    assert run.returncode == 0, run.stderr
    (finding,) = json.loads(out.read_text())["findings"]
    assert (finding["id"], finding["severity"]) == ("rng-carried-in-workers", "info")
    ev = finding["evidence"]
    assert ev["from_epoch"] == 2 and ev["epochs_differing"] == [2, 3, 4]
    # No epoch of either arm repeats another's samples.
    assert (
        ev["distinct_epochs_by_arm"]
        == ev["epochs_by_arm"]
        == {
            "persistent": 4,
            "non_persistent": 4,
        }
    )
    assert "not their quality" in finding["title"]


def test_a_module_level_generator_repeats_every_epoch_without_persistence(
    tmp_path: Path,
) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "check", f"{FINDINGS}:ModuleGenerator", "--epochs", "3", "-b", "4", "--json", str(out)
    )
    assert run.returncode == 1, run.stderr
    (finding,) = json.loads(out.read_text())["findings"]
    assert (finding["id"], finding["arm"]) == ("repeated-randomness", "non_persistent")
    ev = finding["evidence"]
    assert ev["epochs_repeating_the_first"] == [2, 3]
    assert ev["distinct_epochs_by_arm"] == {"persistent": 3, "non_persistent": 1}


def test_a_one_time_start_up_copy_is_not_copy_on_read(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "check",
        f"{FINDINGS}:StartupCopy",
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--mp-context",
        "fork",
        "--json",
        str(out),
        "-v",
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["findings"] == []
    # -v names the checks that ran.
    assert "no findings" in run.stdout and "copy-on-read" in run.stdout
    # The copy is there, and shown as what starting cost each worker.
    workers = [w for t in report["arms"]["persistent"]["trials"] for w in t["workers"]]
    assert all(w["first_batch_uss_bytes"] >= 64 * 1024 * 1024 for w in workers)


def test_unsharded_stream_names_the_repeats(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "check",
        f"{FINDINGS}:UnshardedStream",
        "--epochs",
        "2",
        "--num-workers",
        "3",
        "--batch-size",
        "8",
        "--json",
        str(out),
    )
    assert run.returncode == 1
    (finding,) = json.loads(out.read_text())["findings"]
    assert finding["evidence"]["max_repeats"] == 3
    assert "get_worker_info()" in finding["fix"]


def test_clean_dataset_has_no_findings(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "check",
        f"{FINDINGS}:Clean",
        "--epochs",
        "5",
        "--batch-size",
        "4",
        "--json",
        str(out),
        "--markdown",
        str(tmp_path / "r.md"),
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["findings"] == []
    assert "Lifecycle findings" not in (tmp_path / "r.md").read_text()


def test_compare_runs_the_cheap_checks(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    run = run_cli(
        "compare",
        "--trials",
        "1",
        f"{FINDINGS}:LeakyFiles",
        "--epochs",
        "5",
        "--batch-size",
        "4",
        "--json",
        str(out),
        "--markdown",
        str(md),
    )
    # compare reports findings but only gates decide its exit code.
    assert run.returncode == 0, run.stderr
    assert [f["id"] for f in json.loads(out.read_text())["findings"]] == ["leaked-files"]
    assert "leaked-files" in md.read_text()
