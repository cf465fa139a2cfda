"""Analysis and assembly on synthetic results: no processes, known answers."""

from __future__ import annotations

import dataclasses
import json

import pytest

from builders import MiB, make_pair
from loaderprof.analysis.comparison import break_even_epochs, compare
from loaderprof.analysis.stats import bootstrap_ratio
from loaderprof.analysis.summary import summarize_arm, workers_reused
from loaderprof.analysis.verdict import VerdictInputs, decide
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.measure.assemble import assemble_trial
from loaderprof.measure.sampler import Sample
from loaderprof.model.codec import from_dict, to_dict
from loaderprof.model.metrics import Stat
from loaderprof.model.results import Report
from loaderprof.model.trials import TrialResult
from loaderprof.report.console import render
from loaderprof.report.json_report import to_json

S = 1_000_000_000


def _verdict(p_walls: list[float], n_walls: list[float], **kw: int | None) -> str:
    p, n = make_pair(p_walls, n_walls, **kw)
    ps, ns = summarize_arm([p]), summarize_arm([n])
    c = compare([p], [n], ps, ns, seed=0, train_epochs=10)
    return decide(VerdictInputs(c, ps, ns, min_gain=0.05)).recommendation


def test_stat_quartiles() -> None:
    s = Stat.of([1, 2, 3, 4, 5])
    assert s is not None
    assert (s.median, s.q1, s.q3, s.min, s.max, s.n) == (3, 2, 4, 1, 5, 5)
    assert s.iqr == 2
    assert Stat.of([]) is None
    one = Stat.of([7.0])
    assert one is not None and one.iqr == 0 and one.n == 1


def test_cold_and_steady_are_kept_apart() -> None:
    p, _ = make_pair([5.0, 1.0, 1.2, 0.8], [5.0, 5.0, 5.0, 5.0])
    s = summarize_arm([p])
    assert s.cold_epoch_s is not None and s.cold_epoch_s.median == 5.0
    assert s.steady_epoch_s is not None and s.steady_epoch_s.median == 1.0
    assert s.steady_epoch_s.n == 3


def test_workers_reused_detection() -> None:
    p, n = make_pair([1, 1, 1], [1, 1, 1])
    assert workers_reused([p]) is True
    assert workers_reused([n]) is False


def test_bootstrap_interval_is_seeded_and_brackets() -> None:
    a = [1.0, 1.1, 0.9, 1.05, 0.95]
    b = [2.0, 2.1, 1.9, 2.05, 1.95]
    r1 = bootstrap_ratio(a, b, seed=3)
    r2 = bootstrap_ratio(a, b, seed=3)
    assert r1 == r2
    assert r1 is not None and r1.ci_low <= r1.value <= r1.ci_high
    assert r1.value == pytest.approx(0.5)
    assert r1.ci_high < 0.6


@pytest.mark.parametrize(
    ("cold_extra", "saved", "expected"),
    [
        (0.0, 0.2, 2),
        (-1.0, 0.2, 2),
        (0.3, 0.2, 3),
        (0.4, 0.2, 3),
        (0.41, 0.2, 4),
        (1.0, 0.0, None),
        (0.0, -0.1, None),
    ],
)
def test_break_even(cold_extra: float, saved: float, expected: int | None) -> None:
    assert break_even_epochs(cold_extra, saved) == expected


def test_verdict_enable_when_clearly_faster() -> None:
    assert _verdict([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0]) == "enable"


def test_verdict_keep_off_when_no_gain_but_memory_held() -> None:
    # The interval is tight around 1: it rules out any saving worth enabling for.
    assert _verdict([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 1.005, 0.995, 1.0, 1.01]) == "keep_off"


def test_verdict_undecided_when_the_interval_still_allows_a_gain() -> None:
    # As noisy as the arms are, a 10 % saving is not ruled out: never keep_off.
    assert _verdict([3.0, 1.0, 1.2, 0.8, 1.1], [3.0, 1.05, 0.85, 1.15, 0.95]) == "neutral"


def test_verdict_keep_off_when_slower() -> None:
    assert _verdict([3.0, 2.0, 2.02, 1.98, 2.0], [3.0, 1.0, 1.01, 0.99, 1.0]) == "keep_off"


def test_verdict_neutral_when_no_gain_and_no_memory() -> None:
    assert (
        _verdict([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 1.005, 0.995, 1.0, 1.01], idle_p=0, idle_n=0)
        == "neutral"
    )


def test_verdict_neutral_when_gain_is_real_but_small() -> None:
    assert _verdict([3.0, 0.98, 0.981, 0.979, 0.98], [3.0, 1.0, 1.001, 0.999, 1.0]) == "neutral"


def test_comparison_figures() -> None:
    # Epochs that spread a little: with none at all there is no interval, and so no
    # significant saving to break even on (NOTE [earned intervals]).
    p, n = make_pair([3.0, 1.0, 1.01, 0.99], [3.0, 1.5, 1.51, 1.49])
    ps, ns = summarize_arm([p]), summarize_arm([n])
    c = compare([p], [n], ps, ns, seed=0, train_epochs=11)
    assert c.saved_s_per_epoch == pytest.approx(0.5)
    assert c.saved_s_total == pytest.approx(5.0)
    assert c.extra_idle_memory_bytes == 20 * MiB
    assert c.break_even_epochs == 2


def _arms(p_cold: list[float], n_cold: list[float]) -> tuple[float, float | None]:
    """Three trials an arm, steady epochs 1.0 s against 1.5 s; each trial's first epoch
    from the lists. The comparison's total saving over 11 epochs, and its cold ratio."""
    steady = [[1.0, 1.01, 0.99], [1.02, 1.0, 0.98], [0.99, 1.0, 1.01]]
    pairs = [
        make_pair([pc, *s], [nc, *(x + 0.5 for x in s)])
        for pc, nc, s in zip(p_cold, n_cold, steady, strict=True)
    ]
    p, n = [a for a, _ in pairs], [b for _, b in pairs]
    c = compare(p, n, summarize_arm(p), summarize_arm(n), seed=0, train_epochs=11)
    assert c.saved_s_total is not None and c.cold_epoch_ratio is not None
    return c.saved_s_total, c.cold_epoch_ratio.value


def test_a_first_epoch_slower_only_by_noise_is_not_taken_off_the_saving() -> None:
    # The persistent arm's median first epoch is 0.2 s slower, but its trials spread
    # across the other arm's: the first epoch starts workers in both settings.
    total, cold = _arms([3.2, 2.7, 3.6], [3.0, 3.3, 2.8])
    assert total == pytest.approx(0.5 * 10)
    assert 0.9 < cold < 1.2


def test_a_first_epoch_shown_slower_with_persistence_is_taken_off_the_saving() -> None:
    total, cold = _arms([4.0, 4.02, 3.98], [3.0, 3.01, 2.99])
    assert total == pytest.approx(0.5 * 10 - 1.0, abs=0.05)
    assert cold > 1.3


def test_a_first_epoch_read_once_a_side_counts_as_printed() -> None:
    # One trial an arm (`check`): the cold ratio has no interval, so the figures the
    # table prints are what the total and the break-even epoch use (464 against 253 ms
    # at 168 against 306 ms a steady epoch: it pays from epoch 3, not 2).
    p, n = make_pair([0.464, 0.170, 0.166, 0.168, 0.169], [0.253, 0.306, 0.300, 0.310, 0.306])
    c = compare([p], [n], summarize_arm([p]), summarize_arm([n]), seed=0, train_epochs=5)
    assert c.cold_epoch_ratio is not None and not c.cold_epoch_ratio.has_interval
    assert c.saved_s_per_epoch is not None and c.saved_s_total is not None
    assert c.saved_s_total == pytest.approx(4 * c.saved_s_per_epoch - (0.464 - 0.253))
    assert c.break_even_epochs == 3
    # A first epoch read once that was faster with persistence is never counted.
    q, m = make_pair([0.200, 0.170, 0.166, 0.168], [0.253, 0.306, 0.300, 0.310])
    d = compare([q], [m], summarize_arm([q]), summarize_arm([m]), seed=0, train_epochs=4)
    assert d.saved_s_per_epoch is not None
    assert d.saved_s_total == pytest.approx(3 * d.saved_s_per_epoch)


def test_report_roundtrip_and_render() -> None:
    p, n = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 1.5, 1.4, 1.6])
    cfg = RunConfig(dataset="a:B", epochs=4)
    report = build_report(cfg, [p, n], imported={"torch": "x", "start_method": "fork"})
    data = json.loads(to_json(report))
    back = from_dict(Report, data)
    assert to_dict(back) == data
    assert back.arms["persistent"].trials[0].epochs[1].worker_pids == (1, 2)
    # The typed config: the JSON as the trial child receives it (the pause resolved),
    # and back to the same RunConfig.
    assert data["config"] == cfg.to_dict() and data["config"]["idle_ms"] == 100.0
    assert back.config == cfg.recorded() and back.config.loader.num_workers == 2
    # Rendering is a pure function of the report and must not fail.
    from rich.console import Console

    console = Console(record=True, width=120)
    console.print(render(back, verbose=True))
    assert "idle worker USS held" in console.export_text()


def _ev(ev: str, t: float, pid: int = 100, **kw: object) -> dict[str, object]:
    return {"ev": ev, "t": int(t * S), "pid": pid, **kw}


def _persistent_trial(
    events: list[dict[str, object]], samples: list[Sample], *, t_end_ns: int
) -> TrialResult:
    """A persistent-arm trial of main process 100, assembled from synthetic events."""
    return assemble_trial(
        arm="persistent",
        index=0,
        t0_ns=0,
        t_end_ns=t_end_ns,
        main_pid=100,
        returncode=0,
        events=events,
        samples=samples,
    )


def test_assemble_assigns_batches_to_epoch_windows() -> None:
    events = [
        _ev("child_start", 0.1),
        _ev("imported", 1.0),
        _ev("dataset_built", 1.1),
        _ev("loader_built", 1.2),
        _ev("epoch_start", 2.0, epoch=1),
        _ev("worker_init", 2.05, pid=201, worker_id=0, proc_start=int(2.01 * S)),
        _ev("worker_ready", 2.06, pid=201, worker_id=0),
        _ev("batch", 2.10, pid=201, worker_id=0, start=int(2.09 * S), n=8),
        _ev("first_batch", 2.11, epoch=1),
        _ev("batch", 2.20, pid=201, worker_id=0, start=int(2.19 * S), n=5),
        _ev("epoch_end", 2.30, epoch=1, batches=2),
        _ev("idle_start", 2.31, epoch=1),
        _ev("idle_end", 2.50, epoch=1),
        _ev("collecting", 2.60),
        _ev("collected", 2.70),
        _ev("epoch_start", 3.0, epoch=2),
        _ev("batch", 3.10, pid=201, worker_id=0, start=int(3.09 * S), n=8),
        _ev("first_batch", 3.12, epoch=2),
        _ev("epoch_end", 3.40, epoch=2, batches=1),
        _ev("idle_start", 3.41, epoch=2),
        _ev("idle_end", 3.60, epoch=2),
        _ev("worker_exit", 3.70, pid=201, worker_id=0),
        _ev("trial_end", 3.80),
    ]
    samples = [
        Sample(0, int(2.15 * S), 100, 1, 300, 100, 200),
        Sample(0, int(2.15 * S), 201, 100, 90, 40, 60),
        Sample(1, int(2.40 * S), 100, 1, 300, 100, 200),
        Sample(1, int(2.40 * S), 201, 100, 95, 50, 70),
        Sample(2, int(3.50 * S), 201, 100, 99, 30, 65),
    ]
    r = _persistent_trial(events, samples, t_end_ns=int(4 * S))
    assert r.complete
    assert [e.samples for e in r.epochs] == [13, 8]
    assert r.epochs[0].wall_s == pytest.approx(0.3)
    assert r.epochs[0].first_batch_s == pytest.approx(0.11)
    assert r.epochs[0].new_worker_pids == (201,) and r.epochs[1].new_worker_pids == ()
    (w,) = r.workers
    assert w.started_s == pytest.approx(2.01) and w.ready_s == pytest.approx(2.06)
    assert w.first_batch_s == pytest.approx(2.10) and w.exited_s == pytest.approx(3.70)
    assert (w.peak_uss_bytes, w.peak_pss_bytes, w.peak_rss_bytes) == (50, 70, 99)
    assert r.memory.peak_total_pss_bytes == 270
    # Idle windows: epoch 1 pause sees 50, epoch 2 pause sees 30; median 40.
    assert r.memory.idle_workers_uss_bytes == 40
    assert r.memory.peak_main_pss_bytes == 200
    roles = {t.pid: t.role for t in r.timeline}
    assert roles == {100: "main", 201: "worker"}


def test_assemble_sums_only_deep_ticks() -> None:
    events = [
        _ev("epoch_start", 1.0, epoch=1),
        _ev("worker_init", 1.01, pid=201, worker_id=0),
        _ev("epoch_end", 2.0, epoch=1, batches=0),
        _ev("trial_end", 2.1),
    ]
    samples = [
        Sample(0, int(1.1 * S), 100, 1, 300, 100, 200),
        Sample(0, int(1.1 * S), 201, 100, 90, 40, 60),
        # A shallow tick: RSS only. It raises the RSS peak but cannot enter sums.
        Sample(1, int(1.2 * S), 100, 1, 900, None, None),
        Sample(1, int(1.2 * S), 201, 100, 95, None, None),
    ]
    r = _persistent_trial(events, samples, t_end_ns=3 * S)
    assert r.memory.peak_total_pss_bytes == 260
    assert r.memory.peak_main_rss_bytes == 900
    (w,) = r.workers
    assert (w.peak_rss_bytes, w.peak_uss_bytes, w.uss_samples) == (95, 40, 1)
    main = next(t for t in r.timeline if t.role == "main")
    assert main.uss_bytes == (100, None)


def test_a_walk_not_summable_counts_only_per_process() -> None:
    """A walk whose tree changed, or that runs past the window's end, is never summed;
    its readings still count for each process's own peak."""
    events = [
        _ev("loader_building", 0.9),
        _ev("epoch_start", 1.0, epoch=1),
        _ev("worker_init", 1.01, pid=201, worker_id=0),
        _ev("epoch_end", 2.0, epoch=1, batches=0),
        _ev("loader_closing", 2.2),
        _ev("trial_end", 2.4),
    ]
    samples = [
        Sample(0, int(1.1 * S), 100, 1, 300, 100, 200, read_ns=int(1.11 * S)),
        Sample(0, int(1.1 * S), 201, 100, 90, 40, 60, read_ns=int(1.12 * S)),
        # Processes came or went while it ran: the sampler marked it.
        Sample(1, int(1.5 * S), 100, 1, 300, 100, 500, read_ns=int(1.51 * S), whole=False),
        Sample(1, int(1.5 * S), 201, 100, 95, 70, 400, read_ns=int(1.52 * S), whole=False),
        # Begun inside the window, its second reading after the loader was dropped.
        Sample(2, int(2.1 * S), 100, 1, 300, 100, 700, read_ns=int(2.15 * S)),
        Sample(2, int(2.1 * S), 201, 100, 95, 50, 700, read_ns=int(2.25 * S)),
    ]
    r = _persistent_trial(events, samples, t_end_ns=int(2.5 * S))
    assert r.memory.peak_total_pss_bytes == 260
    (w,) = r.workers
    assert w.peak_uss_bytes == 70
    # With no loader_closed (a shutdown that never finished), up to the trial's end.
    assert r.memory.shutdown_peak_total_pss_bytes is None  # no whole walk in it
    assert r.memory.peak_main_pss_bytes == 700


def test_assemble_marks_failed_trial_incomplete() -> None:
    events = [
        _ev("epoch_start", 1.0, epoch=1),
        _ev("epoch_end", 2.0, epoch=1, batches=1),
        _ev("epoch_start", 2.5, epoch=2),
    ]
    r = assemble_trial(
        arm="persistent",
        index=0,
        t0_ns=0,
        t_end_ns=3 * S,
        main_pid=1,
        returncode=3,
        events=events,
        samples=[],
    )
    assert not r.complete
    assert len(r.epochs) == 1  # the unfinished epoch is not a measurement
    assert r.memory.peak_total_pss_bytes is None


def test_growth_rule_tells_warmup_from_growth() -> None:
    from loaderprof.checks.series import rises_steadily as _growing

    mib = float(MiB)
    # One-off warm-up, then flat: not growth.
    assert not _growing([50 * mib, 50 * mib, 50.2 * mib, 50.1 * mib], 4 * mib)
    # Grows every epoch.
    assert _growing([50 * mib, 66 * mib, 82 * mib, 98 * mib], 4 * mib)
    # Noise of a few KiB is not growth even when it rises.
    assert not _growing([50 * mib, 50.01 * mib, 50.02 * mib, 50.03 * mib], 4 * mib)
    # Too few pauses to tell.
    assert not _growing([1.0, 2.0], 0.5)


def test_assemble_memory_window_excludes_setup_and_teardown() -> None:
    """See NOTE [memory window]. Figures cover the loader's life only: not the set-up, not
    loaderprof's own collections, not the workers' shutdown after the last epoch
    (which has its own figure), not the process's exit."""
    events = [
        _ev("child_start", 0.1),
        _ev("imported", 1.0),
        _ev("dataset_built", 1.1),
        # See NOTE [sampled pauses]. The trial asks for its set-up to be read.
        _ev("setup_read", 1.11),
        _ev("loader_building", 1.15),
        _ev("loader_built", 1.2),
        _ev("epoch_start", 2.0, epoch=1),
        _ev("worker_init", 2.05, pid=201, worker_id=0),
        _ev("worker_init", 2.06, pid=202, worker_id=1),
        _ev("epoch_end", 2.30, epoch=1, batches=0),
        _ev("idle_start", 2.31, epoch=1),
        _ev("idle_end", 2.50, epoch=1),
        _ev("collecting", 2.60),
        _ev("collected", 2.70),
        _ev("epoch_start", 3.0, epoch=2),
        _ev("epoch_end", 3.40, epoch=2, batches=0),
        _ev("loader_closing", 3.45),
        _ev("loader_closed", 3.55, workers_alive=0),
        _ev("trial_end", 3.56),
    ]
    samples = [
        # Imports and the Dataset: before the window, the set-up baseline.
        Sample(0, int(0.5 * S), 100, 1, 150, 40, 60),
        Sample(1, int(1.12 * S), 100, 1, 300, 100, 200, read_ns=int(1.13 * S)),
        # Inside the window.
        Sample(2, int(2.10 * S), 100, 1, 310, 110, 210),
        Sample(2, int(2.10 * S), 201, 100, 90, 40, 60),
        Sample(2, int(2.10 * S), 202, 100, 90, 45, 65),
        # A tick of the ticker (RSS only): what counts the worker processes at once.
        Sample(6, int(2.20 * S), 100, 1, 310, None, None),
        Sample(6, int(2.20 * S), 201, 100, 90, None, None),
        Sample(6, int(2.20 * S), 202, 100, 90, None, None),
        # During loaderprof's own collection: a worker's USS jumps; no figure.
        Sample(5, int(2.65 * S), 201, 100, 90, 88, 89),
        # The workers shutting down: only the shutdown figure.
        Sample(3, int(3.50 * S), 100, 1, 320, 120, 220),
        Sample(3, int(3.50 * S), 201, 100, 80, 30, 50),
        # After the loader closed: the process exiting, huge, feeds no figure.
        Sample(4, int(3.60 * S), 100, 1, 9000, 8000, 8500),
        Sample(4, int(3.60 * S), 201, 100, 9000, 8000, 8500),
    ]
    r = _persistent_trial(events, samples, t_end_ns=int(3.58 * S))
    m = r.memory
    assert m.peak_total_pss_bytes == 210 + 60 + 65
    assert m.peak_main_pss_bytes == 210 and m.peak_main_rss_bytes == 310
    assert m.peak_worker_uss_bytes == 45
    assert (m.setup_main_rss_bytes, m.setup_main_uss_bytes, m.setup_main_pss_bytes) == (
        300,
        100,
        200,
    )
    assert m.window_start_s == pytest.approx(1.15) and m.window_end_s == pytest.approx(3.45)
    # A trial that never asked (a timing trial) has no set-up figure: its last walk
    # before the loader, here the one at 0.5 s, may predate its Dataset.
    unasked = _persistent_trial(
        [e for e in events if e["ev"] != "setup_read"], samples, t_end_ns=int(3.58 * S)
    )
    assert unasked.memory.setup_main_pss_bytes is None

    def setup_pss(**change: int) -> int | None:
        moved = [dataclasses.replace(s, **change) if s.tick == 1 else s for s in samples]
        return _persistent_trial(events, moved, t_end_ns=int(3.58 * S)).memory.setup_main_pss_bytes

    assert setup_pss(t_ns=int(1.05 * S)) is None
    # A reading that ran past the loader's building may have met its first workers.
    assert setup_pss(read_ns=int(1.16 * S)) is None
    assert m.shutdown_peak_total_pss_bytes == 220 + 50
    assert m.peak_worker_processes == 2
    main = next(t for t in r.timeline if t.role == "main")
    assert main.in_window == (False, False, True, True, False, False)
    w = next(w for w in r.workers if w.pid == 201)
    assert w.peak_rss_bytes == 90
    parts = r.wall_parts
    assert parts is not None
    # The 40 ms wait for the set-up reading (1.11 to 1.15 s) counts as a pause.
    assert parts.imports_s == pytest.approx(0.9) and parts.setup_s == pytest.approx(0.16)
    assert parts.epochs_s == pytest.approx(0.7) and parts.pauses_s == pytest.approx(0.23)
    assert parts.shutdown_s == pytest.approx(0.1) and parts.exit_s == pytest.approx(0.03)
    summed = (
        parts.interpreter_s
        + parts.imports_s
        + parts.setup_s
        + parts.epochs_s
        + parts.pauses_s
        + parts.shutdown_s
        + parts.exit_s
        + parts.other_s
    )
    assert summed == pytest.approx(r.wall_s)


def test_assemble_window_of_a_failed_trial_ends_at_its_error() -> None:
    events = [
        _ev("loader_building", 1.0),
        _ev("epoch_start", 1.1, epoch=1),
        _ev("epoch_end", 1.5, epoch=1, batches=1),
        _ev("epoch_start", 1.6, epoch=2),
        _ev("error", 1.8, category="run", kind="worker_exception", message="boom"),
    ]
    samples = [
        Sample(0, int(1.2 * S), 100, 1, 300, 100, 200),
        # The trial process unwinding after the error.
        Sample(1, int(2.5 * S), 100, 1, 9000, 8000, 8500),
    ]
    r = assemble_trial(
        arm="persistent",
        index=0,
        t0_ns=0,
        t_end_ns=3 * S,
        main_pid=100,
        returncode=3,
        events=events,
        samples=samples,
    )
    assert r.memory.peak_main_pss_bytes == 200
    assert r.memory.window_end_s == pytest.approx(1.8)


def test_a_trial_stopped_or_failed_is_in_no_figure() -> None:
    # Figures cover the trials that finished, as an incomplete report says: a stopped
    # trial's peak (read before it reached the whole trial's) would lend a spread.
    whole, _ = make_pair([0.5, 0.1, 0.1], [0.5, 0.5, 0.5])
    stopped = dataclasses.replace(
        whole,
        index=1,
        complete=False,
        epochs=whole.epochs[:1],
        memory=dataclasses.replace(whole.memory, peak_worker_uss_bytes=5 * MiB),
    )
    s = summarize_arm([whole, stopped])
    assert s.peak_worker_uss_bytes is not None and s.peak_worker_uss_bytes.n == 1
    assert s.peak_worker_uss_bytes.median == whole.memory.peak_worker_uss_bytes
    assert s.cold_epoch_s is not None and s.cold_epoch_s.n == 1
    assert summarize_arm([stopped]).peak_worker_uss_bytes is None
