"""The Python API: `loaderprof.compare` returns the very report the CLI writes for the
same run, and a sweep end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import loaderprof
from builders import MiB
from conftest import DATA, run_cli
from loaderprof.comparing.sweep import NEAR_FASTEST, pareto
from loaderprof.errors import UsageError
from loaderprof.model.codec import from_dict
from loaderprof.model.results import SweepReport

# Figures that legitimately differ between two runs of the same configuration:
# times, PIDs, memory, and what the sampler happened to catch. `_stable` keeps
# every key of them (the structure) but not their values.
_VOLATILE_SUFFIXES = ("_s", "_bytes", "_ratio", "_p")
_VOLATILE_KEYS = {
    "pid",
    "main_pid",
    "worker_pids",
    "new_worker_pids",
    "created",
    "load_average",
    "other_cpu_cores",
    "timeline",
    "states",
    "uss_samples",
    "deep_samples",
    "peak_worker_processes",
    "sampler",
    "saved_s_per_epoch",
    "saved_s_total",
    "break_even_epochs",
    # Text with figures in it, and what a gate or finding measured.
    "headline",
    "reasons",
    "message",
    "value",
    "ci_low",
    "ci_high",
    "title",
    "evidence",
    # Warnings depend on the machine's load and the noise of the run.
    "warnings",
    # What each process's Dataset held (a worker's own pid, a cache it filled).
    "dataset_states",
    # The cores a worker's threads wanted, and which of them were busy enough to name.
    "cpu_demand",
    "thread_cpu_demand",
    "cpu_wait",
    "thread_cpu_wait",
    "thread_origins",
}


def _volatile(path: tuple[str, ...]) -> bool:
    key = path[-1]
    if key in _VOLATILE_KEYS or key.endswith(_VOLATILE_SUFFIXES):
        return True
    return path[-2:] == ("memory", "samples")  # sampling ticks, not samples served


# A volatile figure the sampler did not catch in one run (a worker that lived
# shorter than a sampling interval) matches anything in the other.
_UNMEASURED = "<none>"


def _stable(data: Any, path: tuple[str, ...] = (), volatile: bool = False) -> Any:
    """`data` with the value of every volatile figure replaced by its kind; inside a
    Stat only the count `n` is kept, a volatile list keeps neither items nor length."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            sub = (*path, key)
            hidden = volatile and key != "n"
            out[key] = _stable(value, sub, hidden or _volatile(sub))
        return out
    if volatile:
        if data is None:
            return _UNMEASURED
        if isinstance(data, list):
            return "<list>"
        return "<number>" if isinstance(data, (int, float)) else f"<{type(data).__name__}>"
    if isinstance(data, list):
        return [_stable(v, path) for v in data]
    return data


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two `_stable` results differ, as readable paths."""
    if _UNMEASURED in (a, b):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_stable_strips_figures_and_keeps_structure() -> None:
    a = {
        "epochs": [{"epoch": 1, "samples": 32, "wall_s": 0.1, "worker_pids": [7]}],
        "memory": {"samples": 14, "peak_total_pss_bytes": 5},
        "summary": {"cold_epoch_s": {"median": 0.1, "n": 1}, "peak_worker_uss_bytes": None},
    }
    b = {
        "epochs": [{"epoch": 1, "samples": 32, "wall_s": 0.3, "worker_pids": [8, 9]}],
        "memory": {"samples": 20, "peak_total_pss_bytes": 7.0},
        "summary": {"cold_epoch_s": {"median": 0.3, "n": 1}, "peak_worker_uss_bytes": {"n": 1}},
    }
    assert _differences(_stable(a), _stable(b)) == []

    def differs(**changes: Any) -> bool:
        return bool(_differences(_stable(a), _stable({**b, **changes})))

    for key, value in (("samples", 33), ("epoch", 2)):
        assert differs(epochs=[{**b["epochs"][0], key: value}])
    assert differs(epochs=[])
    assert differs(summary={"cold_epoch_s": {"median": 0.3, "n": 2}})
    assert differs(memory={"samples": 20})  # a key missing, not a figure
    assert differs(memory={"samples": 20, "peak_total_pss_bytes": "7"})


# Each worker allocates and keeps 16 MiB: a persistent worker holds at least that
# between epochs, a non-persistent one is gone (0 B held).
ALLOC = {"n": 32, "alloc_mib": 16}
GATES = (
    "persistent.idle_workers_uss:>=12MiB",
    "non_persistent.idle_workers_uss:>=12MiB",
)


@pytest.mark.e2e
def test_api_returns_the_report_the_cli_writes(tmp_path: Path) -> None:
    from loaderprof.examples import CheapDataset
    from loaderprof.report.json_report import to_json

    spec = f"{DATA}:AllocDataset"
    report = loaderprof.compare(
        spec, args=ALLOC, epochs=2, num_workers=1, trials=1, gates=list(GATES)
    )
    out = tmp_path / "cli.json"
    run = run_cli(
        "compare",
        spec,
        *[a for k, v in ALLOC.items() for a in ("--arg", f"{k}={v}")],
        "--epochs",
        "2",
        "--num-workers",
        "1",
        "--trials",
        "1",
        *[a for g in GATES for a in ("--fail-on", g)],
        "--json",
        str(out),
    )
    # Exit 0: one trial per arm reads each memory figure once, so the second gate, past
    # its limit, is inconclusive (NOTE [earned intervals]), as it is for the API's report.
    assert run.returncode == 0, run.stderr
    cli = json.loads(out.read_text())
    api = json.loads(to_json(report))
    assert api["config"] == cli["config"]
    diff = _differences(_stable(api), _stable(cli))
    assert not diff, "\n".join(diff)
    # What the comparison above rests on, spelled out.
    for rep in (api, cli):
        assert set(rep["arms"]) == {"persistent", "non_persistent"}
        for arm in rep["arms"].values():
            (trial,) = arm["trials"]
            assert [e["epoch"] for e in trial["epochs"]] == [1, 2]
            assert [(e["batches"], e["samples"]) for e in trial["epochs"]] == [(1, 32)] * 2
        digests = {
            e["order_digest"] for a in rep["arms"].values() for e in a["trials"][0]["epochs"]
        }
        assert len(digests) == 1 and None not in digests  # no shuffle: one order everywhere

    # One steady epoch per arm: no interval and no test (NOTE [earned intervals]), so the
    # verdict is "not decided" and says the plan shows no spread to decide on.
    c = report.comparison
    assert c is not None and c.steady_epoch_p is None
    r = c.steady_epoch_ratio
    assert r is not None and not r.has_interval
    assert report.recommendation == "neutral"
    assert report.verdict is not None and not report.verdict.decided
    assert "no spread" in report.verdict.headline
    assert c.extra_idle_memory_bytes is not None and c.extra_idle_memory_bytes >= 16 * MiB

    # The gates judged the measured figures: the persistent worker's 16 MiB passes
    # >= 12 MiB; the non-persistent arm's 0 B, read once, is past it but cannot fail.
    held = report.arms["persistent"].summary.idle_workers_uss_bytes
    assert held is not None and held.median >= 16 * MiB
    passed, past = report.gates
    assert (passed.status, passed.value, passed.has_interval) == ("pass", held.median, False)
    assert (past.status, past.value, past.has_interval) == ("inconclusive", 0.0, False)
    assert "read once" in past.message
    assert report.gate_status == "pass"
    assert [(g["gate"], g["status"]) for g in cli["gates"]] == [
        (g.gate, g.status) for g in report.gates
    ]

    frame = loaderprof.to_frame(report)
    assert len(frame) == 2 * 2 and set(frame["arm"]) == {"persistent", "non_persistent"}
    with pytest.raises(UsageError, match="by reference"):
        loaderprof.compare(CheapDataset(n=4))


@pytest.mark.e2e
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
        # Workers live several sampling intervals, so both are seen at their peak.
        "--arg",
        "item_sleep_s=0.02",
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
    # Each worker holds its private 32 MiB: the workers' USS grows by it with each
    # worker. (Not PSS: it splits a shared library's pages among every process on the
    # machine that maps them, so another test's torch processes move it by tens of MiB.)
    uss = {
        p["num_workers"]: p["summary"]["peak_workers_uss_bytes"]["median"]
        for p in report["points"]
        if not p["persistent"] and p["num_workers"]
    }
    assert uss[1] >= 32 * MiB
    assert uss[2] - uss[1] >= 30 * MiB
    # The single-process reference uses the least memory: it is on the frontier.
    assert points["workers=0 (main process)"]["frontier"] is True
    # The frontier marks exactly the points no other point beats in time and memory.
    frontier = {p["label"] for p in report["points"] if p["frontier"]}
    assert frontier == pareto(from_dict(SweepReport, report).points)
    # The recommendation follows from the measured figures; the budget (the
    # machine's memory) fits every point.
    budget = report["recommendation"]["memory_budget_bytes"]
    assert budget is None or all(
        p["summary"]["peak_total_pss_bytes"]["median"] <= budget for p in report["points"]
    )
    fastest = report["points"][0]  # sorted by steady epoch
    assert report["recommendation"]["fastest"] == fastest["label"]
    limit = fastest["summary"]["steady_epoch_s"]["median"] * (1 + NEAR_FASTEST)
    near = [p for p in report["points"] if p["summary"]["steady_epoch_s"]["median"] <= limit]
    cheapest = min(near, key=lambda p: p["summary"]["peak_total_pss_bytes"]["median"])
    assert report["recommendation"]["cheapest_near_fastest"] == cheapest["label"]
    assert csv.read_text().count("\n") == 1 + 5 * 3
    run = run_cli("report", str(out))
    assert run.returncode == 0 and "Pareto frontier" in run.stdout
