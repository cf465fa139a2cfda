"""Sweeps, capacity planning and the Python API."""

from __future__ import annotations

import dataclasses

import pytest

from builders import MiB, make_pair
from loaderprof.analysis.capacity import project
from loaderprof.comparing.session import build_report
from loaderprof.comparing.sweep import SweepGrid, expand, pareto, recommend
from loaderprof.errors import UsageError
from loaderprof.model.metrics import Stat
from loaderprof.model.results import SweepPointResult

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
    p, _ = make_pair([1.0, steady, steady], [1.0, 1.0, 1.0])
    summary = dataclasses.replace(
        build_report(loaderprof_cfg(), [p], imported={}).arms["persistent"].summary,
        peak_total_pss_bytes=Stat.of([pss_mib * MiB]),
    )
    return SweepPointResult(label, 2, None, None, persistent, (p,), summary)


def loaderprof_cfg():  # type: ignore[no-untyped-def]
    from loaderprof.config.run import RunConfig

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
    p, n = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 2.0, 2.0, 2.0])
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
