"""Bad input and failures: exit code, one line on stderr, nothing left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DATA, TESTS, load, run_cli

pytestmark = pytest.mark.e2e
FAULTS = str(TESTS / "lp_faults.py")


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("loaderprof: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("no_such_module_xyz:Thing", "module 'no_such_module_xyz' not found in "),
        ("loaderprof.examples:LazyResourceDatset", "did you mean 'LazyResourceDataset'"),
        (f"{DATA}:NOT_A_DATASET", "is a int, not a Dataset"),
        (f"{DATA}:make_number", "returned a int, not a torch Dataset"),
        (f"{DATA}:RaisingConstructor", "raised RuntimeError: cannot open /data/train.lmdb"),
    ],
)
def test_dataset_usage_errors_exit_2(spec: str, expected: str) -> None:
    run = run_cli("compare", spec, "--epochs", "2")
    assert run.returncode == 2, run.stderr
    assert expected in _one_error_line(run.stderr)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--num-workers", "0"], "persistent_workers needs worker processes"),
        (["--arg", "novalue"], "bad --arg 'novalue': expected key=value"),
        (["--mp-context", "threads"], "unknown --mp-context 'threads'"),
        (["--epochs", "1"], "need at least 2"),
        (["--no-such-flag"], "No such option"),
        (["--json", "/no/such/dir/out.json"], "directory /no/such/dir does not exist"),
        (["--batch-size", "big"], "--batch-size must be an integer or 'none'"),
        (["--max-trials", "0"], "--max-trials must be ≥ 1"),
        (["--trials", "many"], "--trials must be an integer or 'auto'"),
        (["--max-batches", "0"], "--max-batches must be ≥ 2"),
        (["--epoch-samples", "100"], "it needs --max-batches"),
    ],
)
def test_flag_usage_errors_exit_2_before_any_trial(args: list[str], expected: str) -> None:
    run = run_cli("compare", "loaderprof.examples:CheapDataset", *args)
    assert run.returncode == 2, run.stderr
    assert expected in _one_error_line(run.stderr)
    assert run.stdout == ""


def test_num_workers_0_explains_debugging() -> None:
    run = run_cli("compare", "loaderprof.examples:CheapDataset", "--num-workers", "0")
    line = _one_error_line(run.stderr)
    assert "meant for debugging" in line


def test_bad_config_key_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("epoch = 3\n")
    run = run_cli("compare", "loaderprof.examples:CheapDataset", "--config", str(cfg))
    assert run.returncode == 2
    assert "unknown key 'epoch'" in _one_error_line(run.stderr)
    assert "did you mean 'epochs'" in run.stderr


def test_exception_in_worker_exit_3_keeps_nothing_running(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    counter = tmp_path / "reads"
    # Index 40 is read once per epoch: reads 1-2 are the first trial's two epochs,
    # read 3 the second trial's epoch 1, and read 4 (its epoch 2) raises.
    run = run_cli(
        "compare",
        f"{FAULTS}:FailsFromNthRead",
        "--arg",
        "at=40",
        "--arg",
        f"counter={counter}",
        "--arg",
        "fail_from=4",
        "--trials",
        "2",
        "--epochs",
        "2",
        "--batch-size",
        "8",
        "--json",
        str(out),
    )
    assert run.returncode == 3, run.stderr
    line = _one_error_line(run.stderr)
    # Index 40 is in batch 5 (batch size 8), which goes to worker 1 of 2.
    assert "DataLoader worker 1 raised ValueError: bad sample 40 at index 40" in line
    assert "(epoch 2)" in line
    # The run stopped at the failing trial: no third trial read index 40 again.
    assert counter.read_bytes() == b"rrrr"
    # The epochs measured before the failure are kept, marked incomplete.
    report = load(out)
    assert report["complete"] is False
    trials = [t for arm in report["arms"].values() for t in arm["trials"]]
    assert len(trials) == 2
    (done,) = [t for t in trials if t["complete"]]
    (failed,) = [t for t in trials if not t["complete"]]
    assert done["arm"] != failed["arm"]  # the first pair runs one trial of each arm
    assert done["error"] is None
    assert [e["epoch"] for e in done["epochs"]] == [1, 2]
    assert all(e["samples"] == 64 and e["batches"] == 8 for e in done["epochs"])
    assert [e["epoch"] for e in failed["epochs"]] == [1]
    assert failed["epochs"][0]["samples"] == 64
    assert failed["error"]["epoch"] == 2
    assert failed["error"]["worker_id"] == 1
    assert "bad sample 40" in failed["error"]["message"]


def test_debug_shows_the_traceback() -> None:
    run = run_cli("compare", f"{DATA}:RaisingConstructor", "--epochs", "2", "--debug")
    assert run.returncode == 2
    assert "Traceback" in run.stderr
    assert "RuntimeError: cannot open /data/train.lmdb" in run.stderr


def test_unpicklable_dataset_under_spawn_says_top_level() -> None:
    run = run_cli("compare", f"{DATA}:make_local", "--mp-context", "spawn", "--epochs", "2")
    assert run.returncode == 3, run.stderr
    line = _one_error_line(run.stderr)
    assert "Can't pickle local object" in line
    assert "defined at module top level" in line


def test_malformed_toml_and_baseline_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("epochs = [\n")
    run = run_cli("compare", "loaderprof.examples:CheapDataset", "--config", str(cfg))
    assert run.returncode == 2
    assert "is not valid TOML" in _one_error_line(run.stderr)
    base = tmp_path / "base.json"
    base.write_text('{"schema_version": 1, "arms": 3}')
    run = run_cli("compare", "loaderprof.examples:CheapDataset", "--baseline", str(base))
    assert run.returncode == 2
    assert "is not a valid loaderprof report" in _one_error_line(run.stderr)
    assert run.stdout == ""
