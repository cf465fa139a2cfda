"""Faults on one rank of a real 2-rank torchrun job (gloo on the CPU): the failed
rank is named on rank 0's stderr with the line a single process would print, the
job exits with its code, and the JSON keeps what every rank measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import TESTS, leftover_processes

pytestmark = pytest.mark.e2e


def _torchrun(tmp_path: Path, dataset: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "loaderprof",
            "compare",
            f"{TESTS / 'lp_ranks.py'}:{dataset}",
            "--epochs",
            "3",
            "--trials",
            "1",
            "--num-workers",
            "2",
            "--batch-size",
            "8",
            "--json",
            str(tmp_path / "r.json"),
            *extra,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "160"},
        stdin=subprocess.DEVNULL,
    )


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("loaderprof: error:")]


def _failed_rank_line(run: Any, rank: int, code: int) -> str:
    """The job failed with `code`, as torchrun reports it, and loaderprof named `rank`
    in its one error line, which is returned."""
    assert run.returncode != 0
    (line,) = _errors(run.stderr)
    assert line.startswith(f"loaderprof: error: rank {rank} (host ")
    assert f"exitcode  : {code}" in run.stderr
    return str(line)


def _ranks(tmp_path: Path) -> dict[int, dict[str, Any]]:
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["complete"] is False
    return {r["rank"]: r for r in report["distributed"]["ranks"]}


def test_a_rank_whose_dataset_raises_is_named_and_its_code_ends_the_job(tmp_path: Path) -> None:
    run = _torchrun(tmp_path, "MissingShard")
    # Rank 0 exited with rank 1's code, a usage error (2), as torchrun reports it;
    # rank 1, whose failure rank 0 reported, exited 0, so the code is rank 0's alone.
    line = _failed_rank_line(run, rank=1, code=2)
    assert "shard-1.bin is missing" in line
    assert "rank      : 0" in run.stderr
    ranks = _ranks(tmp_path)
    assert ranks[1]["failed"] and ranks[1]["error_category"] == "usage"
    assert not ranks[0]["failed"]
    # What rank 0 measured is kept.
    assert len(ranks[0]["arms"]["persistent"]["worker_pids"]) == 2
    assert ranks[1]["arms"]["persistent"]["worker_pids"] == []
    assert leftover_processes() == []


def test_a_killed_worker_on_one_rank_is_a_run_failure_named_by_rank(tmp_path: Path) -> None:
    run = _torchrun(tmp_path, "KilledWorker")
    line = _failed_rank_line(run, rank=1, code=3)
    assert "killed by SIGKILL" in line
    assert "rank      : 0" in run.stderr
    ranks = _ranks(tmp_path)
    assert ranks[1]["failed"] and ranks[1]["error_category"] == "run"
    assert not ranks[0]["failed"]
    report = json.loads((tmp_path / "r.json").read_text())
    # The node counts what was measured: rank 0's 2 workers and rank 1's (killed) 2.
    (node,) = report["distributed"]["nodes"]
    assert node["arms"]["persistent"]["worker_processes"] <= 4
    assert leftover_processes() == []


def test_a_hanging_rank_is_ended_by_its_trial_timeout_and_named(tmp_path: Path) -> None:
    run = _torchrun(tmp_path, "HangingRank", "--trial-timeout", "6")
    line = _failed_rank_line(run, rank=1, code=3)
    assert "--trial-timeout 6 s" in line
    ranks = _ranks(tmp_path)
    assert ranks[1]["failed"] and not ranks[0]["failed"]
    assert leftover_processes() == []


def test_rank_0_failing_is_named_too(tmp_path: Path) -> None:
    run = _torchrun(tmp_path, "MissingShard", "--arg", "bad_rank=0")
    line = _failed_rank_line(run, rank=0, code=2)
    assert "shard-0.bin is missing" in line
    ranks = _ranks(tmp_path)
    assert ranks[0]["failed"] and not ranks[1]["failed"]
    assert len(ranks[1]["arms"]["persistent"]["worker_pids"]) == 2
    assert leftover_processes() == []
