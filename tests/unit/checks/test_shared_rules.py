"""One rule each: compare's checks and watch's findings give the same answer to the same
readings (memory growth with new memory behind it, copy-on-read), and compare --
COMMAND's trace and watch's assembly the same epochs to the same hook events."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

import loaderprof
from fakes import FakeRunner
from loaderprof.checks import memory
from loaderprof.checks.growth import MORE_EPOCHS
from loaderprof.comparing.command_events import CommandTrace
from loaderprof.measure import readings
from loaderprof.measure.readings import iter_spans
from loaderprof.measure.sampler import Sample
from loaderprof.model.results import Report
from loaderprof.model.trials import BatchSpan, ProcessTimeline, WorkerState
from loaderprof.model.watch import WatchedLoader
from loaderprof.watching import findings
from loaderprof.watching.assemble import by_kind, loaders

MiB = 1024 * 1024
S = 1_000_000_000
PID = 201


@pytest.fixture(scope="module")
def report() -> Report:
    return loaderprof.compare(
        "loaderprof.examples:CheapDataset", epochs=3, trials=1, runner=FakeRunner()
    )


def _watched(samples: Sequence[Sample] = ()) -> WatchedLoader:
    """A persistent forked loader whose one worker (PID) served epochs at 0.5 s and 4 s."""
    evs: list[dict[str, object]] = [
        {"ev": "loader_created", "t": S // 10, "pid": 100, "loader": "100.1",
         "site": "train.py:9", "num_workers": 1, "persistent_workers": True,
         "batch_size": 10, "start_method": "fork"},
        {"ev": "worker_init", "t": int(0.6 * S), "pid": PID, "worker_id": 0, "loader": "100.1"},
    ]  # fmt: skip
    for start in (0.5, 4.0):
        evs += [
            {"ev": "iter_start", "t": int(start * S), "pid": 100, "loader": "100.1"},
            {"ev": "iter_first_batch", "t": int((start + 0.4) * S), "pid": 100, "loader": "100.1"},
            {"ev": "iter_end", "t": int((start + 3) * S), "pid": 100, "loader": "100.1",
             "batches": 20},
        ]  # fmt: skip
    (ld,) = loaders(by_kind(evs), samples, {}, 0, 8 * S)
    return ld


def _compare_grows(report: Report, uss: Sequence[int], rss: Sequence[int]) -> bool:
    """The persistent arm's first worker holding `uss`/`rss` in the pause after each epoch."""
    arm = report.arms["persistent"]
    t = arm.trials[0]
    states = [WorkerState(0, 0.1, uss[0], rss[0], 1, 0, 1, 0)]
    states += [
        WorkerState(i, i * 1.0, u, r, 1, 0, 1, 0)
        for i, (u, r) in enumerate(zip(uss, rss, strict=True), 1)
    ]
    workers = tuple(
        dataclasses.replace(w, states=tuple(states) if k == 0 else ())
        for k, w in enumerate(t.workers)
    )
    others = [
        dataclasses.replace(o, workers=tuple(dataclasses.replace(w, states=()) for w in o.workers))
        for o in arm.trials[1:]
    ]
    trials = (dataclasses.replace(t, workers=workers), *others)
    arms = {**report.arms, "persistent": dataclasses.replace(arm, trials=trials)}
    found = memory.check_memory_growth(dataclasses.replace(report, arms=arms))
    return [f.id for f in found] == ["memory-grows-every-epoch"]


def _watch_grows(uss: Sequence[int], rss: Sequence[int]) -> bool:
    ld = dataclasses.replace(_watched(), idle_uss_by_epoch=tuple(uss), idle_rss_by_epoch=tuple(rss))
    return [f.id for f in findings.check_growth([ld])] == ["memory-grows-every-epoch"]


@pytest.mark.parametrize(
    ("rss_growth_mib", "grows"),
    [
        (30, True),  # new memory: RSS grew with USS
        (9, True),  # above a quarter of the 32 MiB USS grew
        (7, False),  # below it: pages copied on a write, already in RSS
        (0, False),
    ],
)
def test_memory_growth_is_one_rule(report: Report, rss_growth_mib: int, grows: bool) -> None:
    uss = [50 * MiB, 66 * MiB, 82 * MiB]
    rss = [200 * MiB, 200 * MiB + rss_growth_mib * MiB // 2, 200 * MiB + rss_growth_mib * MiB]
    assert _compare_grows(report, uss, rss) is grows
    assert _watch_grows(uss, rss) is grows


def test_a_growth_fix_asks_for_epochs_the_way_each_pipeline_sets_them() -> None:
    # Three readings: too few to tell, so the fix says how to see more epochs.
    uss = (50 * MiB, 66 * MiB, 82 * MiB)
    ld = dataclasses.replace(_watched(), idle_uss_by_epoch=uss, idle_rss_by_epoch=uss)
    (watched,) = findings.check_growth([ld])
    assert watched.severity == "info"
    # watch follows the script's own loop: it has no --epochs.
    assert "let the script run 10 or more epochs" in watched.fix
    assert "--epochs" not in watched.fix
    # compare -- COMMAND stops the script after --epochs: that flag sets them.
    (stopped,) = findings.check_growth([ld], MORE_EPOCHS)
    assert "run more epochs (--epochs 10)" in stopped.fix


def _compare_copies(report: Report, uss: Sequence[int], rss: Sequence[int]) -> bool:
    """The persistent arm's first trial: its first worker read at 1, 2, 3 s after its first
    batch, a batch made between the first two readings."""
    arm = report.arms["persistent"]
    pid = arm.trials[0].workers[0].pid
    line = ProcessTimeline(
        pid, "worker", 0, (1.0, 2.0, 3.0), tuple(rss), tuple(uss), (None,) * 3, (True,) * 3
    )
    batches = (BatchSpan(pid, 0.5, 0.9, 100), BatchSpan(pid, 1.2, 1.8, 100))
    t = dataclasses.replace(arm.trials[0], timeline=(line,), batches=batches)
    quiet = [dataclasses.replace(o, timeline=()) for o in arm.trials[1:]]
    arms = {
        name: dataclasses.replace(
            a,
            trials=(t, *quiet)
            if name == "persistent"
            else tuple(dataclasses.replace(o, timeline=()) for o in a.trials),
        )
        for name, a in report.arms.items()
    }
    environment = {**report.environment, "start_method": "fork"}
    forked = dataclasses.replace(report, arms=arms, environment=environment)
    return [f.id for f in memory.check_copy_on_read(forked)] == ["copy-on-read"]


def _watch_copies(uss: Sequence[int], rss: Sequence[int]) -> bool:
    samples = [
        Sample(k, int(ts * S), PID, 100, r, u, None, read_ns=int(ts * S))
        for k, (ts, u, r) in enumerate(zip((1.0, 2.0, 3.0), uss, rss, strict=True))
    ]
    return [f.id for f in findings.check_copy_on_read([_watched(samples)])] == ["copy-on-read"]


@pytest.mark.parametrize(
    ("uss_growth_mib", "rss_growth_mib", "copies"),
    [
        (64, 0, True),  # USS rose with reading, RSS flat
        (64, 30, True),  # RSS below half as much
        (64, 34, False),  # above half: new memory, not copies
        (12, 0, False),  # under 16 MiB
    ],
)
def test_copy_on_read_is_one_rule(
    report: Report, uss_growth_mib: int, rss_growth_mib: int, copies: bool
) -> None:
    # Rising over both steps, as reading copies page after page.
    uss = [100 * MiB, 100 * MiB + uss_growth_mib * MiB // 2, 100 * MiB + uss_growth_mib * MiB]
    rss = [300 * MiB, 300 * MiB + rss_growth_mib * MiB // 2, 300 * MiB + rss_growth_mib * MiB]
    assert _compare_copies(report, uss, rss) is copies
    assert _watch_copies(uss, rss) is copies


@pytest.mark.parametrize(
    ("uss_mib", "copies"),
    [
        # Seen under load on a trivial dataset: 17.2 MiB in one step between two readings
        # with RSS flat, then nothing more (a one-off, not a cost per sample read).
        ((3.1, 20.3, 20.3), False),
        ((3.1, 3.1, 20.3), False),
        # Most of it in one step, a little either side: still a one-off.
        ((3.1, 4.0, 20.3), False),
        # The same growth spread over the readings: reading.
        ((3.1, 11.7, 20.3), True),
    ],
)
def test_a_one_step_rise_is_not_copy_on_read(
    report: Report, uss_mib: Sequence[float], copies: bool
) -> None:
    uss = [int(u * MiB) for u in uss_mib]
    rss = [158 * MiB] * 3
    assert _compare_copies(report, uss, rss) is copies
    assert _watch_copies(uss, rss) is copies


def _iter_events() -> list[dict[str, object]]:
    """One loader's three epochs: the second left before its end, the first with a
    stray second end; another loader's epoch in between."""
    lid, other = "100.1", "100.2"
    return [
        {"ev": "loader_created", "t": S // 10, "pid": 100, "loader": lid, "site": "t.py:9"},
        {"ev": "loader_created", "t": S // 5, "pid": 100, "loader": other, "site": "v.py:3"},
        {"ev": "iter_start", "t": 1 * S, "pid": 100, "loader": lid, "planned": 4},
        {"ev": "iter_first_batch", "t": int(1.2 * S), "pid": 100, "loader": lid},
        {"ev": "iter_start", "t": int(1.5 * S), "pid": 100, "loader": other, "planned": 1},
        {"ev": "iter_end", "t": int(1.6 * S), "pid": 100, "loader": other, "batches": 1},
        {"ev": "iter_end", "t": 2 * S, "pid": 100, "loader": lid, "batches": 4},
        {"ev": "iter_end", "t": int(2.5 * S), "pid": 100, "loader": lid, "batches": 9},
        {"ev": "iter_start", "t": 3 * S, "pid": 100, "loader": lid, "planned": 4},
        {"ev": "iter_first_batch", "t": int(3.1 * S), "pid": 100, "loader": lid},
        {"ev": "iter_start", "t": 5 * S, "pid": 100, "loader": lid, "planned": None},
        {"ev": "iter_first_batch", "t": int(5.3 * S), "pid": 100, "loader": lid},
        {"ev": "iter_end", "t": 6 * S, "pid": 100, "loader": lid, "batches": 3},
    ]


def test_iter_spans_split_a_loaders_epochs() -> None:
    spans = iter_spans(reversed(_iter_events()), "100.1")
    assert [(s.start_ns, s.first_ns, s.planned) for s in spans] == [
        (1 * S, int(1.2 * S), 4),
        (3 * S, int(3.1 * S), 4),
        (5 * S, int(5.3 * S), None),
    ]
    assert [None if s.end is None else s.end["batches"] for s in spans] == [4, None, 3]


def test_hooked_epochs_are_one_rule() -> None:
    """compare -- COMMAND's live trace and watch's assembly see the same epochs."""
    trace = CommandTrace(0)
    trace.feed(_iter_events())
    trace.ended = True
    (watched, _) = loaders(by_kind(_iter_events()), (), {}, 0, 7 * S)
    ended = [e for e in watched.epochs if e.end_s is not None]
    assert [(e.wall_s, e.first_batch_s, e.batches) for e in trace.epochs(9)] == [
        (e.wall_s, e.first_batch_s, e.batches) for e in ended
    ]
    assert [e.batches for e in ended] == [4, 3]
    assert [e.end_s is None for e in watched.epochs] == [False, True, False]


def test_an_end_and_the_next_start_at_one_stamp_keep_their_epochs() -> None:
    """watch hands the events grouped by kind; one stamp may end an epoch and start the
    next: the end is the earlier epoch's."""
    lid = "100.1"
    starts = [{"ev": "iter_start", "t": t, "loader": lid} for t in (1 * S, 2 * S)]
    ends = [{"ev": "iter_end", "t": t, "loader": lid, "batches": 4} for t in (2 * S, 3 * S)]
    spans = iter_spans([*starts, *ends], lid)
    assert [(s.start_ns, s.end and s.end["t"]) for s in spans] == [(S, 2 * S), (2 * S, 3 * S)]


def test_a_rise_read_in_its_middle_is_still_a_one_off() -> None:
    # An HF IterableDataset's worker (fork): flat for 5.5 s, then a gc pass over what it
    # inherited, read half-way, then flat (seconds, USS MiB, RSS MiB).
    seen = [(1.8, 16.8), (2.4, 19.0), (4.7, 19.9), (7.3, 19.3), (7.8, 46.5), (8.3, 76.3)]
    points = [(t, int(u * MiB), 250 * MiB) for t, u in seen]
    assert readings.copy_window(points) is None
    # The same growth spread over the readings: reading copies, a window to judge.
    spread = [(t, int((16.8 + 59.5 * (t - 1.8) / 6.5) * MiB), 250 * MiB) for t, _ in seen]
    assert readings.copy_window(spread) == (spread[0], spread[-1])
