"""`watch --pid`'s findings (the rules `watch` and `compare` use), its screen at 80
columns and its outputs through the exporter registry."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from loaderprof.errors import UsageError
from loaderprof.model.attached import (
    KIND,
    AttachedGeneration,
    AttachedPool,
    AttachedWorker,
    AttachReport,
    Helper,
    PoolPoint,
)
from loaderprof.report.attach_console import attach_markdown, head, render, timeline
from loaderprof.report.attach_trace import to_attach_trace_json
from loaderprof.report.exporters import check_targets, export, kind_of
from loaderprof.report.json_report import load_schema, read_attach
from loaderprof.watching.attach_findings import find

MIB = 1024 * 1024


def _worker(pid: int, born: float, exited: float | None) -> AttachedWorker:
    return AttachedWorker(pid, born, exited, 1.0, 20 * MIB, 40 * MIB, 300 * MIB, 3, 4)


def _gen(pids: list[int], born: float, ended: float | None) -> AttachedGeneration:
    return AttachedGeneration(
        born, ended, tuple(_worker(p, born, ended) for p in pids), 1, 40 * MIB, 80 * MIB
    )


def _persistent(
    uss: tuple[int, ...] = (), rss: tuple[int, ...] = (), after: tuple[int, ...] = ()
) -> AttachedPool:
    return AttachedPool(
        id="P1",
        parent_pid=100,
        start_method="fork",
        workers=2,
        generations=(_gen([101, 102], 0.1, None),),
        persistent=True,
        epochs_inferred=len(uss) or 3,
        epochs_from="CPU activity",
        peak_uss_bytes=60 * MIB,
        peak_pss_bytes=120 * MIB,
        idle_uss_bytes=40 * MIB,
        idle_uss_by_epoch=uss,
        idle_rss_by_epoch=rss,
        idle_after_epochs=after,
    )


def _rebuilt(times: int = 3) -> AttachedPool:
    gens = tuple(_gen([200 + 2 * i, 201 + 2 * i], 1.0 + 2 * i, 1.8 + 2 * i) for i in range(times))
    return AttachedPool(
        "P2", 100, "fork", 2, gens, False, times, "pool births", 30 * MIB, 60 * MIB, None
    )


def _report(pools: tuple[AttachedPool, ...], left: tuple[int, ...] = ()) -> AttachReport:
    beside = {"P1": ["P2"]} if len(pools) > 1 else {}
    command = ("python", "train.py", "--config", "a-rather-long-configuration-name.yaml")
    return AttachReport(
        kind=KIND,
        schema_version=1,
        tool={"name": "loaderprof", "version": "0"},
        environment={},
        pid=100,
        command=command,
        wall_s=7.5,
        interval_s=0.05,
        ended_by="job exit",
        job_exited_s=7.0,
        pools=pools,
        helpers=(Helper(99, "resource tracker", "python -c from multiprocessing..."),),
        left_behind_pids=left,
        peak_worker_processes=4,
        main_peak_uss_bytes=200 * MIB,
        main_peak_pss_bytes=210 * MIB,
        shm_size_bytes=64 * 1024 * MIB,
        shm_peak_used_bytes=MIB,
        findings=find(pools, beside, left, command),
        duty_cycle=0.05,
    )


def _ids(report: AttachReport) -> list[str]:
    return [f.id for f in report.findings]


def test_a_pool_rebuilt_every_epoch_and_one_idle_beside_it() -> None:
    report = _report((_persistent(), _rebuilt()))
    assert _ids(report) == ["pool-rebuilt", "idle-pools"]
    rebuilt, idle = report.findings
    assert rebuilt.evidence["generations"] == 3
    assert "started again 2 times" in rebuilt.title
    # The fix names the job's own command line under watch and compare's command form.
    cmd = "python train.py --config a-rather-long-configuration-name.yaml"
    assert f"`loaderprof compare -- {cmd}`" in rebuilt.fix
    assert f"`loaderprof watch -- {cmd}`" in rebuilt.fix
    assert idle.evidence["while"] == ["P2"]
    assert f"give pool {idle.evidence['pool']}'s loader fewer workers" in idle.fix
    # Each says what it could not see from outside.
    assert all("not_seen" in f.evidence for f in report.findings)


def test_growth_every_inferred_epoch_by_the_shared_rule() -> None:
    rising = tuple(40 * MIB + i * 8 * MIB for i in range(4))
    report = _report((_persistent(rising, tuple(300 * MIB + v for v in rising)),))
    (growth,) = report.findings
    assert growth.id == "memory-grows-every-epoch"
    assert growth.evidence["epochs_inferred_from"] == "CPU activity"
    # Four epochs cannot tell a leak from a cache that fills (NOTE [growth to tell]);
    # a running job's epochs are not ours to set, so the fix is to watch longer.
    assert growth.severity == "info"
    assert "--duration" in growth.fix


def test_growth_is_per_epoch_where_a_pause_went_unread() -> None:
    """See NOTE [pauses not read]. Epoch 2's pause had no whole reading, so the step from
    epoch 1's to epoch 3's spans two epochs: 25 MiB an epoch, not 50."""
    uss = (45 * MIB, 95 * MIB, 120 * MIB)
    report = _report((_persistent(uss, tuple(300 * MIB + v for v in uss), (1, 3, 4)),))
    (growth,) = report.findings
    assert growth.evidence["growth_bytes_per_epoch"] == 25 * MIB
    assert growth.evidence["after_epochs"] == [1, 3, 4]
    assert "up to 25.0 MiB more private memory after every epoch" in growth.title
    assert "pool P1 after epochs 1, 3, 4: 45.0 MiB → 95.0 MiB → 120.0 MiB" in growth.title
    # The rule counts readings; the words say so beside the epochs they reach.
    assert "too few pauses read to tell whether it levels off (3 of 4; 10" in growth.title
    assert (growth.evidence["epochs_seen"], growth.evidence["pauses_read"]) == (4, 3)
    # The same readings one epoch apart are 37.5 MiB an epoch, and say no epochs.
    (apart,) = _report((_persistent(uss, tuple(300 * MIB + v for v in uss), (1, 2, 3)),)).findings
    assert apart.evidence["growth_bytes_per_epoch"] == int(37.5 * MIB)
    assert "after epochs" not in apart.title
    assert "too few epochs to tell" in apart.title and "pauses_read" not in apart.evidence


def test_a_long_watchs_merged_pauses_were_all_read() -> None:
    """See NOTE [bounded series]. 1100 pauses read, kept as 275 buckets of 4 (each named by
    its last epoch): 5 MiB an epoch, and no pause said to be unread."""
    after = tuple(range(4, 1101, 4))
    uss = tuple(5 * e * MIB for e in after)
    pool = dataclasses.replace(
        _persistent(uss, tuple(300 * MIB + v for v in uss), after), idle_pauses_read=1100
    )
    (growth,) = _report((pool,)).findings
    assert growth.evidence["growth_bytes_per_epoch"] == 5 * MIB
    assert "still rising after 1100 epochs" in growth.title and "read" not in growth.title
    assert "pauses_read" not in growth.evidence


def test_growth_below_the_minimum_per_epoch_once_unread_pauses_count() -> None:
    # 10 MiB a reading rises steadily (above the 4 MiB minimum); over 9 epochs it is
    # 20 / 9 = 2.2 MiB an epoch, below it.
    uss = (40 * MIB, 50 * MIB, 60 * MIB)
    rss = tuple(300 * MIB + v for v in uss)
    assert _ids(_report((_persistent(uss, rss, (1, 2, 3)),))) == ["memory-grows-every-epoch"]
    assert _ids(_report((_persistent(uss, rss, (1, 5, 10)),))) == []


@pytest.mark.parametrize(
    ("uss", "rss"),
    [
        # Growth below the shared minimum step.
        (tuple(40 * MIB + i * MIB for i in range(5)), tuple(300 * MIB + i * MIB for i in range(5))),
        # Copied pages, not new memory: RSS stays flat.
        (tuple(40 * MIB + i * 8 * MIB for i in range(5)), (300 * MIB,) * 5),
    ],
)
def test_no_growth_where_the_shared_rules_see_none(
    uss: tuple[int, ...], rss: tuple[int, ...]
) -> None:
    assert _ids(_report((_persistent(uss, rss),))) == []


def test_workers_left_behind_are_named_with_their_pool() -> None:
    report = _report((_persistent(),), left=(101, 555))
    (left,) = report.findings
    assert left.id == "workers-leaked"
    assert left.evidence["pids"] == [101, 555]
    assert left.evidence["pools"] == ["P1"]


def test_the_screen_fits_80_columns() -> None:
    report = _report((_persistent(), _rebuilt(5)), left=(101,))
    console = Console(width=80, record=True, color_system=None)
    console.print(render(report))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for shown in ("P1", "P2", "2 ×5", "births", "left behind after the job exited: 101"):
        assert shown in text
    assert "not seen from outside" in text


def test_the_timeline_spans_the_job_and_a_pool_that_ended_early_stops_short() -> None:
    # The job exited at 7.0 s (then the look for leftovers ran to 7.5 s); P2's last
    # generation ended at 5.8 s: its bar stops at 5.8 / 7.0 of the width.
    report = _report((_persistent(), _rebuilt()))
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(timeline(report))
    text = console.export_text()
    assert "Pools over the watch (0 … 7.00 s)" in text
    rows = [ln.split("│") for ln in text.splitlines() if ln.startswith("│")]
    bars = {cells[1].strip(): cells[2] for cells in rows}
    p1, p2 = bars["P1"], bars["P2"]
    assert len(p1) == len(p2) and p1.rstrip().endswith("━") and len(p1.rstrip()) == len(p1) - 1
    width = len(p1) - 2  # the cell's padding
    assert len(p2.rstrip()) - 1 == int(5.8 / 7.0 * width)


def test_the_head_times_the_job_not_the_look_for_workers_left_behind() -> None:
    # The watch ran 7.5 s; the job exited at 7.0 s, then LEFT_GRACE_S looked for leftovers.
    exited = head(_report((_persistent(),)))
    assert "watched 7.00 s from outside, ended when the job exited" in exited
    at_duration = dataclasses.replace(
        _report((_persistent(),)), ended_by="duration", job_exited_s=None
    )
    assert "watched 7.50 s from outside, ended at --duration" in head(at_duration)


def test_json_and_markdown_through_the_registry(tmp_path: Path) -> None:
    report = _report((_persistent(), _rebuilt()))
    assert kind_of(report) == "attach"
    targets = [
        ("json", tmp_path / "a.json"),
        ("markdown", tmp_path / "a.md"),
        ("trace", tmp_path / "a.trace.json"),
    ]
    check_targets("attach", targets)
    assert export(report, targets, strict=False) == []
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["kind"] == "attach"
    jsonschema.validate(data, load_schema("attach"), cls=jsonschema.Draft202012Validator)
    assert [p["id"] for p in data["pools"]] == ["P1", "P2"]
    assert (tmp_path / "a.md").read_text() == attach_markdown(report)
    assert "| P2 | 2 ×3 |" in attach_markdown(report)
    # Read back by `loaderprof report`, the same report.
    assert read_attach(tmp_path / "a.json") == report
    # What only a started command has is refused before the watch begins.
    with pytest.raises(UsageError, match="--html"):
        check_targets("attach", [("html", tmp_path / "t.html")])


def test_the_trace_shows_each_generation_and_worker_as_seen(tmp_path: Path) -> None:
    persistent = _persistent()
    gen = persistent.generations[0]
    # A worker born before the watch began, and the pool's memory over time.
    early = dataclasses.replace(gen.workers[0], born_s=-3.0)
    series = (PoolPoint(1.0, 30 * MIB, 50 * MIB, None), PoolPoint(2.0, 40 * MIB, None, None))
    gen = dataclasses.replace(gen, workers=(early, gen.workers[1]), series=series)
    pools = (dataclasses.replace(persistent, generations=(gen,)), _rebuilt(3))
    trace = json.loads(to_attach_trace_json(_report(pools)))["traceEvents"]
    names = {e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert "P1 (2 workers, fork, persists)" in names
    assert "P2 (2 workers, fork, rebuilt 2 times)" in names
    gens = [e for e in trace if e.get("cat") == "pool"]
    # One span per generation: P1's one (alive at the end), P2's three.
    assert [e["name"] for e in gens] == ["generation 1 (alive at the end)"] + [
        f"generation {k}" for k in (1, 2, 3)
    ]
    assert gens[1]["ts"] == 1.0e6 and gens[1]["dur"] == pytest.approx(0.8e6)
    # P1's generation runs to the watch's end (7.5 s).
    assert gens[0]["ts"] + gens[0]["dur"] == pytest.approx(7.5e6)
    alive = {e["pid"]: e for e in trace if e.get("cat") == "worker"}
    assert set(alive) == {101, 102} | {200 + k for k in range(6)}
    # Born before the watch: drawn from 0, its birth in its args.
    assert alive[101]["ts"] == 0.0 and alive[101]["args"]["born_s"] == -3.0
    counters = [e["args"] for e in trace if e["ph"] == "C"]
    assert counters == [{"USS MiB": 30.0, "PSS MiB": 50.0}, {"USS MiB": 40.0}]
    exited = [e for e in trace if e["ph"] == "i"]
    assert exited[0]["ts"] == 7.0e6


def test_a_report_with_no_pool_says_so() -> None:
    report = dataclasses.replace(_report(()), pools=())
    console = Console(width=80, record=True, color_system=None)
    console.print(render(report))
    assert "no worker pool was seen" in console.export_text()


def test_the_attach_schema_names_every_field() -> None:
    schema = load_schema("attach")
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(AttachReport)}
    for cls in (AttachedPool, AttachedGeneration, AttachedWorker, Helper):
        props = schema["$defs"][cls.__name__]["properties"]
        assert set(props) == {f.name for f in dataclasses.fields(cls)}, cls.__name__


def test_growth_still_rising_names_the_epochs_it_reaches_and_the_pauses_read() -> None:
    # Ten readings, every other epoch's pause: 5 MiB an epoch over 19 epochs.
    after = tuple(range(1, 20, 2))
    uss = tuple(100 * MIB + i * 10 * MIB for i in range(10))
    (growth,) = _report((_persistent(uss, tuple(300 * MIB + v for v in uss), after),)).findings
    assert growth.severity == "warning"
    assert "still rising after 19 epochs (10 of their pauses read)" in growth.title
    assert growth.evidence["growth_bytes_per_epoch"] == 5 * MIB
