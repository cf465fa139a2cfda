"""The shared significance test, per-metric n of the ratios, and the measured node
worker count: synthetic results, no processes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from builders import MiB, make_pair, make_trial
from loaderprof.analysis.comparison import compare, ratio_sample_count, report_metrics
from loaderprof.analysis.stats import ALPHA, significant_direction
from loaderprof.analysis.summary import peak_worker_processes, summarize_arm
from loaderprof.analysis.verdict import VerdictInputs, decide
from loaderprof.comparing import ranks as distributed
from loaderprof.comparing.session import build_report
from loaderprof.config.run import LoaderOptions, RunConfig
from loaderprof.model.metrics import Ratio
from loaderprof.model.results import Comparison, Report, error_line
from loaderprof.model.trials import TrialError, TrialResult

IMPORTED = {"torch": "2.x", "start_method": "fork"}


@pytest.mark.parametrize(
    ("ratio", "p", "expected"),
    [
        (Ratio(0.5, 0.4, 0.6), 0.01, "saving"),
        (Ratio(1.5, 1.4, 1.6), 0.01, "loss"),
        # Both parts are needed: the interval on one side of 1 and p < ALPHA.
        (Ratio(0.5, 0.4, 0.6), ALPHA, None),
        (Ratio(0.5, 0.4, 0.6), 0.2, None),
        (Ratio(0.5, 0.4, 0.6), None, None),
        (Ratio(0.5, 0.4, 0.6), float("nan"), None),
        (Ratio(0.99, 0.9, 1.1), 0.01, None),
        (Ratio(1.0, 0.9, 1.0), 0.01, None),
        (None, 0.01, None),
    ],
)
def test_significant_direction(ratio: Ratio | None, p: float | None, expected: str | None) -> None:
    assert significant_direction(ratio, p) == expected


def _compare(p_walls: list[float], n_walls: list[float]) -> tuple[Comparison, str]:
    p, n = make_pair(p_walls, n_walls)
    ps, ns = summarize_arm([p]), summarize_arm([n])
    c = compare([p], [n], ps, ns, seed=0, train_epochs=10)
    return c, decide(VerdictInputs(c, ps, ns, min_gain=0.05)).recommendation


def test_compare_and_verdict_share_one_significance() -> None:
    # A clear, significant saving: compare counts it (break-even), verdict enables.
    c, rec = _compare([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0])
    assert significant_direction(c.steady_epoch_ratio, c.steady_epoch_p) == "saving"
    assert c.break_even_epochs is not None and rec == "enable"
    # Two identical steady epochs per arm: no spread seen, so no interval and no test
    # (NOTE [earned intervals]): neither compare (no break-even) nor verdict (no
    # enable) treats it as a saving.
    c, rec = _compare([3.0, 1.0, 1.0], [3.0, 2.0, 2.0])
    assert c.steady_epoch_p is None and c.steady_epoch_ratio is not None
    assert not c.steady_epoch_ratio.has_interval
    assert significant_direction(c.steady_epoch_ratio, c.steady_epoch_p) is None
    assert c.break_even_epochs is None and rec == "neutral"
    # A significant loss.
    c, rec = _compare([3.0, 2.0, 2.02, 1.98, 2.0], [3.0, 1.0, 1.01, 0.99, 1.0])
    assert significant_direction(c.steady_epoch_ratio, c.steady_epoch_p) == "loss"
    assert c.break_even_epochs is None and rec == "keep_off"


def _comparison(ratio: Ratio | None, p: float | None, **kw: Any) -> Comparison:
    values: dict[str, Any] = {
        "steady_epoch_ratio": ratio,
        "cold_epoch_ratio": None,
        "first_batch_ratio": None,
        "saved_s_per_epoch": 0.5,
        "extra_idle_memory_bytes": 20 * MiB,
        "extra_peak_pss_bytes": None,
        "break_even_epochs": 2,
        "train_epochs": 10,
        "saved_s_total": 4.5,
        "steady_epoch_p": p,
        **kw,
    }
    return Comparison(**values)


@pytest.mark.parametrize(
    ("comparison", "recommendation", "headline"),
    [
        (_comparison(Ratio(0.5, 0.45, 0.55), 0.001), "enable", "Enable persistent_workers"),
        (
            _comparison(Ratio(1.5, 1.4, 1.6), 0.001),
            "keep_off",
            "Keep persistent_workers off: it makes steady epochs slower.",
        ),
        (_comparison(Ratio(0.98, 0.97, 0.99), 0.001), "neutral", "Either way: persistence saves"),
        (_comparison(Ratio(0.5, 0.45, 0.55), 0.3), "neutral", "Not decided"),
        (
            _comparison(Ratio(1.0, 0.97, 1.03), 0.5),
            "keep_off",
            "Keep persistent_workers off: it holds",
        ),
        (
            _comparison(Ratio(1.0, 0.97, 1.03), 0.5, extra_idle_memory_bytes=0),
            "neutral",
            "Either way: persistence changes neither",
        ),
        # No gain shown, but a saving worth enabling for is not ruled out either.
        (_comparison(Ratio(1.0, 0.9, 1.1), 0.5), "neutral", "Not decided: no significant"),
        (
            _comparison(
                Ratio(0.5, 0.45, 0.55),
                0.001,
                over_budget=True,
                non_persistent_over_budget=False,
                peak_total_pss_ratio=Ratio(1.5, 1.4, 1.6),
                memory_budget_bytes=100 * MiB,
            ),
            "keep_off",
            "Keep persistent_workers off: the run does not fit the memory budget",
        ),
        (_comparison(None, None), "neutral", "Not enough steady epochs"),
    ],
)
def test_verdict_branches(comparison: Comparison, recommendation: str, headline: str) -> None:
    p, n = make_pair([3.0, 1.0, 1.0], [3.0, 2.0, 2.0])
    v = decide(VerdictInputs(comparison, summarize_arm([p]), summarize_arm([n]), min_gain=0.05))
    assert v.recommendation == recommendation
    assert v.headline.startswith(headline)
    if comparison.steady_epoch_ratio is not None:
        assert v.reasons[-1].startswith("persistent workers hold")


def test_over_budget_mentions_the_saving_only_when_significant() -> None:
    p, n = make_pair([3.0, 1.0, 1.0], [3.0, 2.0, 2.0])
    ps, ns = summarize_arm([p]), summarize_arm([n])
    # Persistence alone breaks it, beyond noise (NOTE [earned intervals]).
    budget = {
        "over_budget": True,
        "non_persistent_over_budget": False,
        "peak_total_pss_ratio": Ratio(1.5, 1.4, 1.6),
        "memory_budget_bytes": 100 * MiB,
    }
    sig = decide(VerdictInputs(_comparison(Ratio(0.5, 0.4, 0.6), 0.001, **budget), ps, ns, 0.05))
    assert any(r.startswith("it would save") for r in sig.reasons)
    unsure = decide(VerdictInputs(_comparison(Ratio(0.5, 0.4, 0.6), 0.2, **budget), ps, ns, 0.05))
    assert not any(r.startswith("it would save") for r in unsure.reasons)


def _without_first_batch(t: TrialResult, epochs: set[int]) -> TrialResult:
    return dataclasses.replace(
        t,
        epochs=tuple(
            dataclasses.replace(e, first_batch_s=None) if e.epoch in epochs else e for e in t.epochs
        ),
    )


def test_each_ratio_reports_the_n_behind_it() -> None:
    walls = [3.0, 1.0, 1.02, 0.98, 1.01]
    n_walls = [3.0, 2.0, 2.02, 1.98, 2.01]
    p0 = make_trial("persistent", walls, idle=20 * MiB, reused=True, index=0)
    # Steady first batches missing in two epochs, and no PSS figure in the second trial.
    p1 = _without_first_batch(
        make_trial("persistent", walls, idle=20 * MiB, reused=True, index=1), {2, 3}
    )
    p1 = dataclasses.replace(p1, memory=dataclasses.replace(p1.memory, peak_total_pss_bytes=None))
    n0 = make_trial("non_persistent", n_walls, idle=0, reused=False, index=0)
    n1 = make_trial("non_persistent", n_walls, idle=0, reused=False, index=1)
    cfg = RunConfig(dataset="a:B", epochs=len(walls), trials=2)
    metrics = report_metrics(build_report(cfg, [p0, n0, p1, n1], imported=IMPORTED))
    # See NOTE [trial is the unit]. Two trials per arm, so the units are trials.
    assert metrics["steady_epoch_ratio"].n == 2
    assert metrics["cold_epoch_ratio"].n == 2
    assert metrics["first_batch_ratio"].n == 2  # the second trial still has two
    # One persistent trial has the figure: its values stand in (one).
    assert metrics["peak_total_pss_ratio"].n == 1
    assert metrics["persistent.steady_epoch_s"].n == 2
    assert metrics["persistent.first_batch_s"].n == 2


def test_ratio_sample_count_matches_the_units_compare_uses() -> None:
    p, n = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 2.0, 2.0, 2.0])
    p2 = _without_first_batch(p, {4})
    # Two trials per arm: trials are the units.
    assert ratio_sample_count("steady_epoch_ratio", [p, p2], [n, n]) == 2
    assert ratio_sample_count("peak_total_pss_ratio", [p, p2], [n, n]) == 2
    # One trial in an arm: its values stand in, as in compare's fallback.
    assert ratio_sample_count("steady_epoch_ratio", [p, p2], [n]) == 6
    assert ratio_sample_count("first_batch_ratio", [p, p2], [n]) == 5
    assert ratio_sample_count("cold_epoch_ratio", [p, p2], [n]) == 2


# -- measured node worker count ------------------------------------------------------


def test_measured_workers_are_those_alive_at_once_not_the_sum_over_epochs() -> None:
    p, n = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 1.0])
    # Persistent: the same 2 PIDs every epoch. Non-persistent: 2 new PIDs per epoch
    # (8 distinct over the trial), but only 2 at once.
    assert peak_worker_processes([p]) == 2
    assert len({pid for e in n.epochs for pid in e.worker_pids}) == 8
    assert peak_worker_processes([n]) == 2


def test_measured_workers_use_the_sampler_count_when_larger() -> None:
    p, _ = make_pair([3.0, 1.0, 1.0], [3.0, 1.0, 1.0])
    # A third worker that never served a batch is still a process the sampler saw.
    seen = dataclasses.replace(p, memory=dataclasses.replace(p.memory, peak_worker_processes=3))
    assert peak_worker_processes([p, seen]) == 3
    # Nothing measured: no epochs, so no count.
    empty = dataclasses.replace(p, epochs=(), memory=seen.memory)
    assert peak_worker_processes([empty]) is None
    assert peak_worker_processes([]) is None


def _rank_cfg(num_workers: int) -> RunConfig:
    return RunConfig(
        dataset="a:B", epochs=5, trials=1, loader=LoaderOptions(num_workers=num_workers)
    )


def _rank_report(num_workers: int) -> Report:
    p, n = make_pair([3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0])
    return build_report(_rank_cfg(num_workers), [p, n], imported=IMPORTED)


def test_node_worker_processes_are_measured_not_configured() -> None:
    # The config claims 8 workers per rank; each rank's trials show 2.
    reports = [(0, "node-a", _rank_report(8)), (1, "node-a", _rank_report(8))]
    summary = distributed.summarize(reports)
    (node,) = summary.nodes
    assert node.ranks == (0, 1)
    assert node.arms["persistent"].worker_processes == 4
    assert node.arms["non_persistent"].worker_processes == 4
    adjusted = distributed.adjust_verdict(reports[0][2], summary, _rank_cfg(8))
    assert adjusted.verdict is not None
    assert any(
        "2 of 2 ranks completed; they ran 4 worker processes" in r for r in adjusted.verdict.reasons
    )
    report = dataclasses.replace(adjusted, distributed=summary)
    metric = report_metrics(report)["persistent.node_worker_processes"]
    assert metric.value == 4


def test_nodes_are_counted_apart() -> None:
    reports = [
        (0, "node-a", _rank_report(2)),
        (1, "node-b", _rank_report(2)),
        (2, "node-a", _rank_report(2)),
    ]
    summary = distributed.summarize(reports)
    by_host = {n.host: n for n in summary.nodes}
    assert by_host["node-a"].ranks == (0, 2)
    assert by_host["node-a"].arms["persistent"].worker_processes == 4
    assert by_host["node-b"].arms["persistent"].worker_processes == 2
    assert [r.rank for r in summary.ranks] == [0, 1, 2]


def test_detect_reads_torchrun_environment() -> None:
    assert distributed.detect({}) is None
    assert distributed.detect({"WORLD_SIZE": "1", "RANK": "0"}) is None
    ctx = distributed.detect({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"})
    assert ctx is not None and (ctx.rank, ctx.world_size) == (3, 4)


def test_a_failed_rank_makes_the_job_incomplete_and_is_named() -> None:
    bad = _rank_report(2)
    err = TrialError("usage", "usage", "a:B() raised FileNotFoundError: shard-1.bin is missing")
    bad = dataclasses.replace(bad, errors=(err,), complete=False)
    reports = [(0, "node-a", _rank_report(2)), (1, "node-a", bad)]
    summary = distributed.summarize(reports)
    ok, failed = summary.ranks
    assert not ok.failed and failed.failed and failed.error_category == "usage"
    marked = distributed.mark_failed_ranks(reports[0][2], summary)
    assert not marked.complete
    assert marked.errors[-1].message == (
        "rank 1 (host node-a): a:B() raised FileNotFoundError: shard-1.bin is missing"
    )
    adjusted = distributed.adjust_verdict(marked, summary, _rank_cfg(2))
    assert adjusted.verdict is not None
    assert any("1 of 2 ranks completed" in r for r in adjusted.verdict.reasons)
    # Nothing failed: nothing changes.
    fine = distributed.summarize([(0, "h", _rank_report(2)), (1, "h", _rank_report(2))])
    assert distributed.mark_failed_ranks(reports[0][2], fine) is reports[0][2]


@pytest.mark.parametrize(
    ("total", "words"),
    [
        # 9 steady epochs × 0.5 s, nothing taken off.
        (4.5, "over 10 epochs that saves about 4.50 s (9 steady epochs × 500.0 ms)"),
        # A first epoch 1.2 s slower with persistence is taken off the sum.
        (3.3, "about 3.30 s (9 steady epochs × 500.0 ms, less a first epoch 1.20 s slower"),
    ],
)
def test_the_total_saving_shows_its_sum(total: float, words: str) -> None:
    p, n = make_pair([3.0, 1.0, 1.0], [3.0, 2.0, 2.0])
    c = _comparison(Ratio(0.5, 0.45, 0.55), 0.001, saved_s_total=total)
    v = decide(VerdictInputs(c, summarize_arm([p]), summarize_arm([n]), min_gain=0.05))
    assert any(words in r for r in v.reasons), v.reasons


@pytest.mark.parametrize(("role", "named"), [("timing", "trial 2"), ("memory", "memory trial 2")])
def test_the_error_line_names_the_trial_as_the_tables_do(role: str, named: str) -> None:
    p, n = make_pair([3.0, 1.0, 1.0], [3.0, 2.0, 2.0])
    err = TrialError("run", "worker_exception", "DataLoader worker 1 raised ValueError: bad")
    failed = dataclasses.replace(p, index=1, role=role, error=err, complete=False)
    report = build_report(_rank_cfg(2), [p, n, failed], imported=IMPORTED)
    assert error_line(report) == f"persistent arm, {named}: {err.message}"
