"""See NOTE [data wait]. The sentences, computed from the figures they print."""

from __future__ import annotations

import dataclasses

from builders import make_pair, watch_report
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.results import Report
from loaderprof.model.trials import TrialResult
from loaderprof.report.datawait import arm_wait_rows, compare_wait_rows, watch_wait_line
from loaderprof.report.markdown import to_markdown, watch_markdown
from loaderprof.units import fmt_seconds


def _waited(trial: TrialResult, first: list[float], steady: float) -> TrialResult:
    epochs = tuple(
        dataclasses.replace(e, wait=WaitSplit(e.wall_s, f, steady, e.batches))
        for e, f in zip(trial.epochs, first, strict=True)
    )
    return dataclasses.replace(trial, epochs=epochs)


def _report(p_first: list[float], n_first: list[float]) -> Report:
    p, n = make_pair([2.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0])
    cfg = RunConfig(dataset="a:B", epochs=4, trials=1)
    trials = [_waited(p, p_first, 0.25), _waited(n, n_first, 0.5)]
    return build_report(cfg, trials, imported={})


def test_compare_gives_each_arms_steady_epoch_and_what_persistence_cut() -> None:
    # Equal walls a side: the median epoch is the middle one of the steady three.
    report = _report([1.0, 0.1, 0.1, 0.1], [1.0, 0.9, 1.0, 1.1])
    assert report.arms["persistent"].summary.steady_wait == WaitSplit(1.0, 0.1, 0.25, 4)
    assert report.arms["persistent"].summary.cold_wait == WaitSplit(2.0, 1.0, 0.25, 4)
    rows = dict(compare_wait_rows(report))
    assert (
        rows["persistent"]
        == "350.0 ms of 1.00 s (35 %): 100.0 ms for the 1st batch, 250.0 ms after"
    )
    assert rows["non-persistent"].startswith("1.50 s of 2.00 s (75 %): 1.00 s for the 1st")
    assert rows[""].startswith(
        "persistence cuts the wait to the 1st batch by 900.0 ms an epoch (1.00 s → 100.0 ms)"
    )
    # The waits after it were cut too (500 → 250 ms): a fresh pool still starting.
    assert rows[""].endswith(
        ", and the waits after it by 250.0 ms (500.0 ms → 250.0 ms: a fresh pool may still "
        "be starting after the 1st batch); the 250.0 ms left are what more workers or "
        "prefetch would shorten"
    )
    assert "persistent, cold" not in rows
    assert "persistent, cold" in dict(compare_wait_rows(report, cold=True))
    assert "- **non-persistent**: 1.50 s of 2.00 s" in to_markdown(report)


def test_a_first_batch_persistence_does_not_shorten_is_said_so() -> None:
    report = _report([1.0, 0.5, 0.5, 0.5], [1.0, 0.5, 0.5, 0.5])
    rows = dict(compare_wait_rows(report))
    assert rows[""].startswith("persistence does not cut the wait to the 1st batch")


def test_waits_after_the_first_batch_a_side_alike_stay_the_pools_pace() -> None:
    # 10 % less after the first batch, one median epoch a side: not told from noise.
    on, off = WaitSplit(1.0, 0.1, 0.45, 12), WaitSplit(2.0, 1.0, 0.5, 12)
    rows = dict(arm_wait_rows({"persistent": on, "non_persistent": off}))
    assert rows[""].endswith(
        "; the waits after it (450.0 ms persistent, 500.0 ms not) are what more workers "
        "or prefetch would shorten"
    )


def test_an_epoch_with_a_validation_pass_names_both_first_batches() -> None:
    """`first_s` of an epoch with a validation pass holds two first batches' waits (NOTE
    [data wait]): the sentence says so instead of calling them one batch's."""
    on, off = WaitSplit(1.0, 0.2, 0.25, 12, passes=2), WaitSplit(2.0, 1.4, 0.5, 12, passes=2)
    rows = dict(arm_wait_rows({"persistent": on, "non_persistent": off}))
    assert rows["persistent"] == (
        "450.0 ms of 1.00 s (45 %): 200.0 ms for the 1st batches of 2 passes, 250.0 ms after"
    )
    assert rows[""].startswith(
        "persistence cuts the wait to the 1st batches of 2 passes by 1.20 s an epoch"
    )


def test_a_report_without_waits_says_nothing_of_them() -> None:
    p, n = make_pair([2.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    report = build_report(RunConfig(dataset="a:B", epochs=3, trials=1), [p, n], imported={})
    assert compare_wait_rows(report) == []
    assert "data wait" not in to_markdown(report)


def test_watch_says_what_the_first_batch_waited_for_by_the_loaders_settings() -> None:
    report = watch_report(long_names=False)
    kept, fresh, main = (watch_wait_line(ld) for ld in report.loaders)
    assert kept == (
        "L1: each steady epoch waits 97.5 ms of 776.0 ms (13 %) for data: 37.5 ms before its "
        "first batch (workers kept), 60.0 ms after it; the step takes 678.5 ms"
    )
    # Persistence skips more than the start-up (the fresh workers' first-item work, in
    # the first batch), bounded by the wait before the first batch: 451.0 ms here.
    assert fresh is not None and "persistent_workers=True skips the start-up and the " in fresh
    assert "the fresh workers' first-item work: it saves up to 451.0 ms less a kept " in fresh
    assert "pool's own first-batch wait)" in fresh
    assert "skips the start-up)" not in fresh
    # The start-up is named with its own figure: the first batch is in the wait too.
    startup = report.loaders[1].worker_startup_s
    assert startup is not None
    assert f"(worker start-up of {fmt_seconds(startup.median)} a worker, then the first" in fresh
    assert main is not None and "(num_workers=0: loaded in the main process)" in main
    once = dataclasses.replace(report.loaders[0], wait_epochs="first")
    assert "L1: its first epoch waits" in (watch_wait_line(once) or "")
    assert "worker start-up, once: workers kept" in (watch_wait_line(once) or "")
    assert watch_wait_line(dataclasses.replace(once, wait=None)) is None
    built_once = dataclasses.replace(report.loaders[1], wait_epochs="first")
    assert ", then the first batch), 60.0 ms after it" in (watch_wait_line(built_once) or "")
    assert f"- {kept}" in watch_markdown(report)


def test_the_markdown_counts_a_loaders_epochs_as_the_screen_does() -> None:
    """See NOTE [epochs left early]. A cut epoch is counted apart from the whole ones in
    both: '3 (+1 cut)', not 4."""
    from loaderprof.report.rows import epoch_count

    report = watch_report(long_names=False)
    ld = report.loaders[0]
    cut = dataclasses.replace(ld.epochs[-1], index=len(ld.epochs) + 1, end_s=None, ended=None)
    ld = dataclasses.replace(ld, epochs=(*ld.epochs, cut))
    report = dataclasses.replace(report, loaders=(ld, *report.loaders[1:]))
    shown = epoch_count(ld)
    assert shown == f"{len(ld.epochs) - 1} (+1 cut)"
    assert f"| {shown} |" in watch_markdown(report)
