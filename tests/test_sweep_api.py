"""Sweeps, capacity planning and the Python API."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import loaderprof
from conftest import DATA, run_cli
from loaderprof.errors import UsageError
from loaderprof.plan import project
from loaderprof.results import Stat
from loaderprof.session import build_report
from loaderprof.sweep import SweepGrid, SweepPointResult, expand, pareto, recommend
from test_analysis import MiB, _pair

GiB = 1024**3


def test_expand_skips_invalid_combinations() -> None:
    grid = SweepGrid(
        num_workers=(0, 2, 4), prefetch_factor=(2, 4), mp_context=(None,), persistent=(True, False)
    )
    points, skipped = expand(grid)
    labels = [p.label for p in points]
    assert labels.count("workers=0 (main process)") == 1
    assert len(points) == 1 + 2 * 2 * 2
    assert any("persistence needs workers" in s for s in skipped)
    assert any("ignores prefetch_factor" in s for s in skipped)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("0,x", None, None, None), "take integers"),
        (("0,2", None, None, "maybe"), "on, off"),
        (("-1", None, None, None), "≥ 0"),
        (("2", None, "threads", None), "unknown --mp-context"),
    ],
)
def test_grid_parse_errors(args: tuple[str | None, ...], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        SweepGrid.parse(*args)


def _point(label: str, steady: float, pss_mib: float, persistent: bool = True) -> SweepPointResult:
    p, _ = _pair([1.0, steady, steady], [1.0, 1.0, 1.0])
    summary = dataclasses.replace(
        build_report(loaderprof_cfg(), [p], imported={}).arms["persistent"].summary,
        peak_total_pss_bytes=Stat.of([pss_mib * MiB]),
    )
    return SweepPointResult(label, 2, None, None, persistent, (p,), summary)


def loaderprof_cfg():  # type: ignore[no-untyped-def]
    from loaderprof.config import RunConfig

    return RunConfig(dataset="a:B", epochs=3, trials=1)


def test_pareto_and_recommendation() -> None:
    pts = [
        _point("fast-big", 1.0, 900),
        _point("mid", 1.04, 500),
        _point("slow-small", 3.0, 200),
        _point("dominated", 3.5, 950),
    ]
    assert pareto(pts) == {"fast-big", "mid", "slow-small"}
    rec = recommend(pts, budget=2 * GiB)
    assert rec.fastest == "fast-big"
    assert rec.cheapest_near_fastest == "mid"  # within 5 % of the fastest, less memory
    tight = recommend(pts, budget=600 * MiB)
    assert tight.fastest == "mid"


def test_projection_arithmetic() -> None:
    p, n = _pair([3.0, 1.0, 1.0, 1.0], [3.0, 2.0, 2.0, 2.0])
    report = build_report(loaderprof_cfg(), [p, n], imported={})
    # Synthetic trials: peak PSS total 200 MiB with 2 workers, 10 MiB USS per worker.
    proj = project(report, ranks=8, num_workers=6, environment={"memory_total_bytes": 2 * GiB})
    assert proj.per_rank_bytes == 200 * MiB + (6 - 2) * 10 * MiB
    assert proj.node_bytes == 8 * proj.per_rank_bytes
    assert proj.over_limit is False
    assert project(
        report, ranks=16, num_workers=6, environment={"memory_total_bytes": 2 * GiB}
    ).over_limit
    assert len(proj.assumptions) >= 3


def test_sweep_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    csv = tmp_path / "s.csv"
    # Each worker allocates 32 MiB of its own: memory grows with workers by design.
    run = run_cli(
        "sweep",
        f"{DATA}:AllocDataset",
        "--arg",
        "alloc_mib=32",
        "--arg",
        "n=32",
        "--arg",
        "item_sleep_s=0.005",
        "--num-workers",
        "0,1,2",
        "--persistent",
        "on,off",
        "--epochs",
        "3",
        "--trials",
        "1",
        "--batch-size",
        "4",
        "--json",
        str(out),
        "--csv",
        str(csv),
    )
    assert run.returncode == 0, run.stderr
    assert "persistence needs workers" in run.stdout
    report = json.loads(out.read_text())
    assert report["kind"] == "sweep" and report["schema_version"] == 1
    points = {p["label"]: p for p in report["points"]}
    assert len(points) == 5  # 0; 1 and 2 workers × on/off
    steady = [p["summary"]["steady_epoch_s"]["median"] for p in report["points"]]
    assert steady == sorted(steady)
    pss = {
        p["num_workers"]: p["summary"]["peak_total_pss_bytes"]["median"]
        for p in report["points"]
        if not p["persistent"]
    }
    # workers=0 allocates its 32 MiB in the main process, so the first worker adds
    # only its own overhead; every further worker adds its private 32 MiB.
    assert pss[1] > pss[0]
    assert pss[2] - pss[1] >= 30 * MiB
    # The single-process reference uses the least memory: it is on the frontier.
    assert points["workers=0 (main process)"]["frontier"] is True
    assert any(p["frontier"] for p in report["points"])
    assert report["recommendation"]["fastest"] in points
    assert csv.read_text().count("\n") == 1 + 5 * 3
    run = run_cli("report", str(out))
    assert run.returncode == 0 and "Pareto frontier" in run.stdout


def test_api_returns_the_report_the_cli_writes(tmp_path: Path) -> None:
    from loaderprof.examples import CheapDataset

    args = {"n": 32}
    report = loaderprof.compare(
        CheapDataset,
        args=args,
        epochs=2,
        num_workers=1,
        trials=1,
        gates=["steady_epoch_ratio:<=100"],
    )
    out = tmp_path / "cli.json"
    run = run_cli(
        "compare",
        "loaderprof.examples:CheapDataset",
        "--arg",
        "n=32",
        "--epochs",
        "2",
        "--num-workers",
        "1",
        "--trials",
        "1",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    cli = json.loads(out.read_text())
    assert dict(report.config) == cli["config"]
    assert report.recommendation in ("enable", "keep_off", "neutral")
    assert set(report.summaries) == {"persistent", "non_persistent"}
    assert report.gate_status == "pass"
    frame = loaderprof.to_frame(report)
    assert len(frame) == 2 * 2 and set(frame["arm"]) == {"persistent", "non_persistent"}
    with pytest.raises(UsageError, match="by reference"):
        loaderprof.compare(CheapDataset(n=4))
