"""End to end, on a busy machine: a small plan (--trials 2) under a CPU hog prints
only intervals it earned, p and interval from one test, words that follow them,
and memory figures with a spread of their own (NOTE [earned intervals])."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import load, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def cpu_hog() -> Iterator[int]:
    """One busy loop beside the run, as on a shared CI runner; its PID, which run_cli's
    check for leftovers is told to spare."""
    hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        yield hog.pid
    finally:
        hog.kill()
        hog.wait()


def test_two_trials_under_load_print_only_earned_intervals(cpu_hog: int, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    run = run_cli(
        "compare",
        "loaderprof.examples:LazyResourceDataset",
        "--epochs",
        "4",
        "--num-workers",
        "2",
        "--trials",
        "2",
        "--json",
        str(out),
        spare=(cpu_hog,),
    )
    assert run.returncode == 0, run.stderr
    report = load(out)
    c = report["comparison"]
    level = c["confidence"]
    for name in ("steady_epoch_ratio", "cold_epoch_ratio", "first_batch_ratio"):
        r, p = c[name], c[name.replace("_ratio", "_p")]
        if not r["has_interval"]:
            continue
        assert r["ci_low"] <= r["value"] <= r["ci_high"]
        if name == "steady_epoch_ratio":
            # p and the interval come from one t statistic at one level.
            assert (r["ci_high"] < 1 or r["ci_low"] > 1) == (p < 1 - level)
        shown = f"[{r['ci_low']:.2g}"
        if not r["informative"]:
            # Too wide to mean anything: never printed as an interval.
            assert r["ci_high"] / r["ci_low"] > 100 or r["ci_high"] / r["value"] > 10
            assert "too wide" in run.stdout, (name, r, run.stdout)
    # No printed interval, in the tables or the verdict, spans more than 100× (it would
    # have been "too wide").
    for lo, hi in re.findall(r"(?:\[|CI )([0-9.e+-]+)–([0-9.e+-]+)", run.stdout):
        assert float(hi) / float(lo) <= 100 + 1e-9, (lo, hi, shown)
    reasons = " ".join(report["verdict"]["reasons"])
    assert "at the line" not in reasons and "--max-trials" not in reasons
    # Two memory trials per arm: memory figures carry a spread of their own.
    for arm in ("persistent", "non_persistent"):
        roles = [t["role"] for t in report["arms"][arm]["trials"]]
        assert roles.count("memory") == 2 and roles.count("timing") == 2
        assert report["arms"][arm]["summary"]["peak_total_pss_bytes"]["n"] == 2
    pss = c["peak_total_pss_ratio"]
    assert pss["has_interval"] and pss["ci_low"] < pss["ci_high"]
    assert math.isfinite(c["steady_epoch_spread"]["df"][0])
