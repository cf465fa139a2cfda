"""A real 2-rank job under torchrun (gloo on the CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import leftover_processes

pytestmark = pytest.mark.e2e


def test_two_ranks_under_torchrun(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    proc = subprocess.run(
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
            "loaderprof.examples:CheapDataset",
            "--arg",
            "n=64",
            "--epochs",
            "3",
            "--trials",
            "1",
            "--num-workers",
            "2",
            "--batch-size",
            "8",
            "--fail-on",
            "node_worker_processes:<=4",
            "--fail-on",
            "node_pss_total:<=64GiB",
            "--json",
            str(out),
            "--markdown",
            str(md),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "160"},
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not leftover_processes()
    # Only rank 0 prints and writes.
    assert proc.stdout.count("Ranks (2)") == 1
    assert proc.stdout.count("steady epoch (2..N)") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]
    report = json.loads(out.read_text())
    d = report["distributed"]
    assert d["world_size"] == 2
    ranks = {r["rank"]: r for r in d["ranks"]}
    assert set(ranks) == {0, 1}
    pids = [set(ranks[r]["arms"]["persistent"]["worker_pids"]) for r in (0, 1)]
    assert all(len(p) == 2 for p in pids) and not pids[0] & pids[1]
    (node,) = d["nodes"]
    assert node["ranks"] == [0, 1]
    for arm in ("persistent", "non_persistent"):
        total = node["arms"][arm]["pss_total_bytes"]
        assert total == int(sum(ranks[r]["arms"][arm]["peak_total_pss_bytes"] for r in (0, 1)))
        # Measured: the workers alive at once, 2 per rank (not the 3 × 2 distinct
        # PIDs a non-persistent rank starts over its epochs).
        assert node["arms"][arm]["worker_processes"] == 4
    assert all(len(ranks[r]["arms"]["non_persistent"]["worker_pids"]) == 6 for r in (0, 1))
    idle = node["arms"]["persistent"]["idle_workers_uss_bytes"]
    assert idle == int(
        sum(ranks[r]["arms"]["persistent"]["idle_workers_uss_bytes"] for r in (0, 1))
    )
    assert {s["arm"] for s in d["slowest"]} == {"persistent", "non_persistent"}
    assert report["gate_status"] == "pass"
    assert {g["metric"] for g in report["gates"]} == {
        "persistent.node_worker_processes",
        "persistent.node_pss_total",
    }
    # Each rank loaded its own shard: 64 samples over 2 ranks.
    assert all(
        e["samples"] == 32 for t in report["arms"]["persistent"]["trials"] for e in t["epochs"]
    )
    assert any(
        "on node" in r and "2 of 2 ranks completed; they ran 4 worker processes" in r
        for r in report["verdict"]["reasons"]
    )
