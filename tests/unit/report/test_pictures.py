"""Trace and plot exports, the terminal lifeline, and the probes' transparency."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data._utils.collate import default_collate

from conftest import Run, run_cli
from loaderprof.errors import UsageError
from loaderprof.inside.probe import CollateProbe, IndexProbe, index_probe
from loaderprof.model.codec import from_dict
from loaderprof.model.results import Report
from loaderprof.report import plot as plot_mod
from loaderprof.report.console import lifeline_rows
from loaderprof.report.trace import to_trace


# Tests of the real report from `lazy_report` (a CLI run) are e2e; the rest are pure.
@pytest.fixture(scope="module")
def report(lazy_report: tuple[Run, dict[str, Any]]) -> Report:
    return from_dict(Report, lazy_report[1])


@pytest.mark.e2e
def test_trace_events_are_valid(report: Report) -> None:
    trace = json.loads(json.dumps(to_trace(report)))
    events = trace["traceEvents"]
    assert events
    for ev in events:
        assert {"ph", "ts", "pid"} <= set(ev), ev
        assert ev["ph"] in {"X", "M", "C"}
    # Each epoch's span lasts the epoch's measured wall, on its trial's own track: the
    # exporter clamps a negative duration to 0, so a sign check could not fail.
    walls = {
        (t.main_pid, f"epoch {e.epoch}"): e.wall_s
        for a in report.arms.values()
        for t in a.trials
        for e in t.epochs
    }
    spans = {
        (ev["pid"], ev["name"]): ev["dur"]
        for ev in events
        if ev["ph"] == "X" and ev["name"].startswith("epoch ")
    }
    assert walls and spans.keys() == walls.keys()
    for key, wall in walls.items():
        assert spans[key] == pytest.approx(wall * 1e6, abs=1.0), key
    # Spans on one track nest and close: each either contains the next or ends first.
    tracks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev["ph"] == "X":
            tracks[ev["pid"]].append(ev)
    for spans in tracks.values():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[float] = []
        for ev in spans:
            end = ev["ts"] + ev["dur"]
            while stack and ev["ts"] >= stack[-1] - 1e-6:
                stack.pop()
            if stack:
                assert end <= stack[-1] + 1e-3, f"{ev['name']} overlaps its parent"
            stack.append(end)
    # One process track per worker PID of the report, and one per main process.
    names = defaultdict(list)
    for ev in events:
        if ev["ph"] == "M" and ev["name"] == "process_name":
            names[ev["pid"]].append(ev["args"]["name"])
    pids = {w.pid for a in report.arms.values() for t in a.trials for w in t.workers}
    mains = {t.main_pid for a in report.arms.values() for t in a.trials}
    assert set(names) == pids | mains
    assert all(len(v) == 1 for v in names.values())
    assert {ev["name"] for ev in events if ev["ph"] == "X"} >= {
        "epoch 1",
        "start-up",
        "batch",
        "time to first batch",
    }
    counters = [ev for ev in events if ev["ph"] == "C"]
    assert counters and all("RSS MiB" in ev["args"] for ev in counters)
    assert any("USS MiB" in ev["args"] for ev in counters)
    # Both arms, as separate process groups.
    groups = {n[0].split(" · ")[0] for n in names.values()}
    assert groups == {"persistent trial 1", "non-persistent trial 1"}


def _png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.e2e
def test_plot_renders_full_failed_and_unsampled(report: Report, tmp_path: Path) -> None:
    plot_mod.render(report, tmp_path / "full.png")
    assert _png(tmp_path / "full.png")
    plot_mod.render(report, tmp_path / "full.svg")
    assert b"<svg" in (tmp_path / "full.svg").read_bytes()[:500]

    p = report.arms["persistent"]
    broken = dataclasses.replace(p.trials[0], complete=False, epochs=p.trials[0].epochs[:1])
    failed = dataclasses.replace(
        report,
        complete=False,
        arms={**report.arms, "persistent": dataclasses.replace(p, trials=(broken,))},
    )
    plot_mod.render(failed, tmp_path / "failed.png")
    assert _png(tmp_path / "failed.png")

    unsampled = dataclasses.replace(
        report,
        arms={
            name: dataclasses.replace(
                arm, trials=tuple(dataclasses.replace(t, timeline=()) for t in arm.trials)
            )
            for name, arm in report.arms.items()
        },
    )
    plot_mod.render(unsampled, tmp_path / "nosample.png")
    assert _png(tmp_path / "nosample.png")


def test_plot_without_matplotlib_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # The one thing not made real here: an environment without matplotlib.
    monkeypatch.setattr(plot_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"pip install 'loaderprof\[plot\]'"):
        plot_mod.require_matplotlib()


@pytest.mark.e2e
def test_terminal_lifelines(report: Report) -> None:
    rows = lifeline_rows(report)
    persistent = [r for r in rows if r[0] == "persistent"]
    fresh = [r for r in rows if r[0] == "non-persistent"]
    assert [r[2] for r in persistent] == ["●━━━━"] * 2
    assert [r[2] for r in fresh] == ["●●●●●"] * 2


def test_probes_return_the_users_results_untouched(tmp_path: Path) -> None:
    events = str(tmp_path / "ev.jsonl")
    samples = [torch.arange(3), torch.arange(3) + 1]
    sentinel = object()
    assert CollateProbe(events, lambda batch: sentinel, True)(samples) is sentinel
    for digests in (False, True):
        out = CollateProbe(events, default_collate, True, digests=digests)(samples)
        assert torch.equal(out, default_collate(samples))
    lines = (tmp_path / "ev.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(ln)["n"] == 2 for ln in lines)

    class DS:
        def __init__(self) -> None:
            self.handle: str | None = None

        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int) -> int:
            return i * 10

    inner = DS()
    wrapped = index_probe(inner, events)
    assert isinstance(wrapped, IndexProbe) and not hasattr(wrapped, "__getitems__")
    assert wrapped[1] == 10 and len(wrapped) == 2
    wrapped.handle = "opened in worker_init_fn"  # reaches the user's dataset
    assert inner.handle == "opened in worker_init_fn"


@pytest.mark.e2e
def test_cli_plot_and_trace(lazy_report: tuple[Run, dict[str, Any]], tmp_path: Path) -> None:
    src = tmp_path / "r.json"
    src.write_text(json.dumps(lazy_report[1]))
    run = run_cli(
        "report",
        str(src),
        "--plot",
        str(tmp_path / "r.png"),
        "--trace",
        str(tmp_path / "r.trace.json"),
    )
    assert run.returncode == 0, run.stderr
    assert _png(tmp_path / "r.png")
    assert json.loads((tmp_path / "r.trace.json").read_text())["traceEvents"]
    run = run_cli("report", str(src), "--plot", str(tmp_path / "r.gif"))
    assert run.returncode == 2 and "use a .png or .svg" in run.stderr
