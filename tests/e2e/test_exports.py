"""The exports of a real compare, through the CLI: --html, --plot, --trace, and the
terminal lifeline, read from the report a real run wrote."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from html_page import check_self_contained

from conftest import Run, run_cli
from loaderprof.model.codec import from_dict
from loaderprof.model.results import Report
from loaderprof.report import plot as plot_mod
from loaderprof.report.console import lifeline_rows
from loaderprof.report.trace import to_trace

DATASET = "loaderprof.examples:CheapDataset"


@pytest.mark.e2e
def test_compare_writes_a_page_with_its_figure(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    run = run_cli(
        "compare",
        DATASET,
        "--epochs",
        "2",
        "--trials",
        "1",
        "--num-workers",
        "1",
        "--html",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    page = out.read_text()
    parsed = check_self_contained(page)
    assert len(parsed.named("svg")) == 1
    # The --plot figure where matplotlib is installed, else the page's own bars.
    drawn = "figure_1" if importlib.util.find_spec("matplotlib") else "matplotlib is not"
    assert drawn in page
    assert "Verdict" in parsed.words and "Per-epoch detail" in parsed.words


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


@pytest.mark.e2e
def test_terminal_lifelines(report: Report) -> None:
    rows = lifeline_rows(report)
    persistent = [r for r in rows if r[0] == "persistent"]
    fresh = [r for r in rows if r[0] == "non-persistent"]
    assert [r[2] for r in persistent] == ["●━━━━"] * 2
    assert [r[2] for r in fresh] == ["●●●●●"] * 2


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
