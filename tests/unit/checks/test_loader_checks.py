"""The worker-level checks' arithmetic and option checks, without processes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from loaderprof.checks.loader import (
    check_large_pickle,
    check_serial_startup,
    check_shutdown,
    check_threads,
    startup_breakdown,
)
from loaderprof.checks.straggler import check_straggler, in_order_wait
from loaderprof.comparing.session import build_report
from loaderprof.config.run import LoaderOptions, RunConfig
from loaderprof.errors import UsageError
from loaderprof.measure.assemble import assemble_trial
from loaderprof.model.results import Report
from loaderprof.units import MiB


def test_in_order_waits_for_the_slowest_worker() -> None:
    # 2 workers, 8 batches: in order, worker 0's 4 batches of 80 ms set the pace.
    ordered, unordered = in_order_wait({0: 0.08, 1: 0.001}, 8, prefetch=2, step_s=0.0)
    assert ordered == pytest.approx(0.32)
    # Out of order, worker 1 takes the rest; worker 0 still owes its 2 prefetched.
    assert unordered == pytest.approx(0.16)


def test_equal_workers_lose_nothing_to_order() -> None:
    ordered, unordered = in_order_wait({0: 0.01, 1: 0.01, 2: 0.01}, 30, prefetch=2, step_s=0.0)
    assert ordered == pytest.approx(unordered)


def test_a_slow_main_loop_bounds_both() -> None:
    ordered, unordered = in_order_wait({0: 0.02, 1: 0.01}, 10, prefetch=2, step_s=0.05)
    assert ordered == unordered == pytest.approx(0.5)


def test_in_order_on_a_torch_without_it_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only an older torch lacks the argument; stand one in for the check.
    import torch.utils.data

    from loaderprof.inside import loader

    class OldLoader:
        def __init__(self, dataset: object, batch_size: int = 1) -> None: ...

    monkeypatch.setattr(torch.utils.data, "DataLoader", OldLoader)
    with pytest.raises(UsageError, match=r"--no-in-order needs torch ≥ 2.6"):
        loader.check_in_order(LoaderOptions(in_order=False))


# Assembled from synthetic events: the start-up breakdown, threads and shutdown.

S = 1_000_000_000


def _ev(ev: str, t: float, pid: int = 100, **kw: object) -> dict[str, object]:
    return {"ev": ev, "t": int(t * S), "pid": pid, **kw}


def _spawned_events(stagger: float, size: int, alive: int = 0) -> list[dict[str, object]]:
    """One persistent trial of 2 spawned workers: worker 1 starts `stagger` s after
    worker 0; each receives a `size`-byte pickle."""
    events = [_ev("imported", 0.5), _ev("loader_built", 1.0), _ev("epoch_start", 1.0, epoch=1)]
    for wid, pid in ((0, 201), (1, 202)):
        start = 1.01 + wid * stagger
        events += [
            _ev("worker_pickled", start - 0.01, worker_id=wid, bytes=size, seconds=0.02),
            _ev(
                "worker_init",
                start + 1.2,
                pid=pid,
                worker_id=wid,
                proc_start=int(start * S),
                unpickle_start=int((start + 1.0) * S),
                unpickle_end=int((start + 1.1) * S),
            ),
            _ev("worker_ready", start + 1.21, pid=pid, worker_id=wid),
            _ev(
                "worker_threads",
                start + 1.5,
                pid=pid,
                worker_id=wid,
                threads=3,
                compute=1,
                torch_threads=1,
            ),
        ]
    last = 1.01 + stagger + 1.3
    for k in range(4):
        t = last + 0.1 * k
        events.append(
            _ev(
                "batch",
                t + 0.05,
                pid=201 + k % 2,
                worker_id=k % 2,
                start=int(t * S),
                fetch=int(t * S),
                n=4,
            )
        )
    events += [
        _ev("first_batch", last + 0.06, epoch=1),
        _ev("epoch_end", last + 0.5, epoch=1, batches=4),
        _ev("epoch_start", last + 0.6, epoch=2),
        _ev("first_batch", last + 0.61, epoch=2),
        _ev("epoch_end", last + 0.9, epoch=2, batches=4),
        _ev("loader_closing", last + 1.0),
        _ev("loader_closed", last + 1.1, workers_alive=alive),
        _ev("trial_end", last + 1.2),
    ]
    return events


def _report(events: list[dict[str, object]]) -> Report:
    trial = assemble_trial(
        arm="persistent",
        index=0,
        t0_ns=0,
        t_end_ns=int(10 * S),
        main_pid=100,
        returncode=0,
        events=events,
        samples=[],
    )
    cfg = RunConfig(dataset="a:B", epochs=2, loader=LoaderOptions(mp_context="spawn"))
    return build_report(cfg, [trial], imported={"torch": "x", "start_method": "spawn"})


def test_the_start_up_breakdown_is_assembled_per_worker() -> None:
    report = _report(_spawned_events(stagger=1.5, size=2 * MiB))
    w0, w1 = report.arms["persistent"].trials[0].workers
    assert (w0.pickled_bytes, w0.pickle_s) == (2 * MiB, 0.02)
    assert w0.unpickle_s == pytest.approx(0.1)
    assert w1.started_s - w0.started_s == pytest.approx(1.5)
    assert (w0.peak_threads, w0.compute_threads, w0.torch_threads) == (3, 1, 1)
    phases = startup_breakdown([w0, w1])
    assert phases["unpickling"] == pytest.approx(0.1)
    assert phases["process_start_to_unpickling"] == pytest.approx(1.0)


def test_serial_start_is_found_and_a_parallel_one_is_not() -> None:
    serial = _report(_spawned_events(stagger=1.5, size=2 * MiB))
    assert [f.id for f in check_serial_startup(serial)] == ["serial-startup"]
    parallel = _report(_spawned_events(stagger=0.005, size=2 * MiB))
    assert check_serial_startup(parallel) == []
    # 2 MiB pickled and unpickled in 0.12 s of a 2.8 s wait: not worth a warning.
    assert check_large_pickle(serial) == []
    big = _report(_spawned_events(stagger=1.5, size=64 * MiB))
    assert [f.id for f in check_large_pickle(big)] == ["large-pickle"]


def test_workers_alive_at_close_are_a_finding_and_none_alive_is_not() -> None:
    assert check_shutdown(_report(_spawned_events(0.0, MiB, alive=0))) == []
    (f,) = check_shutdown(_report(_spawned_events(0.0, MiB, alive=2)))
    assert f.evidence["most_workers_alive"] == 2
    # One computing thread per worker on any machine: no oversubscription.
    assert check_threads(_report(_spawned_events(0.0, MiB))) == []


def _with_threads(events: list[dict[str, object]], **fields: object) -> list[dict[str, object]]:
    return [{**e, **fields} if e["ev"] == "worker_threads" else e for e in events]


def _on_two_cpus(others: float = 0.0, workers: int = 2, **threads: object) -> Report:
    """A report whose workers' threads read `threads`, on a 2-core machine where other
    processes kept `others` cores busy."""
    report = _report(_with_threads(_spawned_events(0.0, MiB), **threads))
    env = {**report.environment, "cpus_usable": 2, "other_cpu_cores": others}
    loader = dataclasses.replace(report.config.loader, num_workers=workers)
    config = dataclasses.replace(report.config, loader=loader)
    return dataclasses.replace(report, environment=env, config=config)


def test_oversubscription_is_cpu_demand_not_a_thread_count() -> None:
    """See NOTE [worker threads]. A polling thread counts as computing but wants a sliver of
    a core; a pool outside the GIL wants several, and the fix names what started it."""
    polling = _on_two_cpus(
        compute=2,
        main_demand=0.35,
        thread_demand=0.01,
        main_wait=0.0,
        thread_wait=0.0,
        origins={"python:streaming.base.dataset": 1},
    )
    assert check_threads(polling) == []
    pool = _on_two_cpus(
        compute=5,
        main_demand=0.9,
        thread_demand=2.6,
        main_wait=0.1,
        thread_wait=1.6,
        origins={"python:concurrent.futures.thread": 4},
    )
    (f,) = check_threads(pool)
    assert f.evidence["cpu_demand_total"] == pytest.approx(7.0)
    assert "concurrent.futures.thread" in f.fix and "OMP_NUM_THREADS" not in f.fix
    assert "3.5 cores" in f.title


# Workers whose threads ran 0.5 of a core each and waited 0.55 of one to run.
_WAITED: dict[str, Any] = {
    "compute": 2,
    "main_demand": 0.6,
    "thread_demand": 0.45,
    "main_wait": 0.3,
    "thread_wait": 0.25,
    "origins": {"native:decoder": 1},
}


def test_the_wait_another_process_caused_is_not_the_workers_demand() -> None:
    """See NOTE [worker threads]. 2 workers whose threads ran 0.5 of a core each and waited
    0.55 in the run queue: on a 2-core machine that the run alone used, they wanted 2.1
    cores; beside a CPU hog that kept one core busy, the pool caused half of the wait."""
    (alone,) = check_threads(_on_two_cpus(0.0, **_WAITED))
    assert alone.evidence["cpu_demand_total"] == pytest.approx(2.1)
    assert alone.evidence["own_share_of_wait"] == 1.0
    assert "less other processes" not in alone.title
    # The pool ran 2 × 0.5 cores beside the hog's 1.0: its share of the wait is a half,
    # so each worker wants 0.5 + 0.55 / 2 cores, 1.55 in all.
    assert check_threads(_on_two_cpus(1.0, **_WAITED)) == []
    # 3 such workers ran 1.5 cores: 0.6 of the wait was theirs, and they want 2.5.
    (heavier,) = check_threads(_on_two_cpus(1.0, workers=3, **_WAITED))
    assert heavier.evidence["own_share_of_wait"] == pytest.approx(0.6)
    assert heavier.evidence["cpu_demand_per_worker"] == pytest.approx(0.5 + 0.55 * 0.6)
    assert "less other processes' share of the wait" in heavier.title


def test_a_worker_that_makes_no_batch_in_any_epoch_is_idle() -> None:
    from loaderprof.checks.loader import check_idle_workers

    # Both workers make batches in both epochs.
    assert check_idle_workers(_report(_spawned_events(0.0, MiB))) == []
    # Worker 1 makes none: every batch comes from worker 0.
    events = [
        {**e, "pid": 201, "worker_id": 0} if e["ev"] == "batch" else e
        for e in _spawned_events(0.0, MiB)
    ]
    (f,) = check_idle_workers(_report(events))
    assert f.evidence["idle_workers_by_epoch"] == {"persistent": [1]}
    assert "1 of 2 workers made no batch" in f.title


def _straggling(role: str) -> Report:
    """Worker 1's batches take 20× worker 0's, in 1 s epochs of 40 batches; the trial
    is `role` ("timing", or "memory": its sampling stalled the workers)."""
    return _timed_pools(role, [(0.01, 0.2), (0.01, 0.2)])


def _timed_pools(
    role: str, pools: list[tuple[float, float]], waited: tuple[float, float] = (0.0, 0.0)
) -> Report:
    """The trial above, once per pool, each pool's workers 0 and 1 taking these median
    batch times, their main threads waiting for a CPU these shares of their lives."""
    report = _report(_spawned_events(stagger=0.005, size=MiB))
    arm = report.arms["persistent"]
    (trial,) = arm.trials
    w0, w1 = trial.workers
    trials = tuple(
        dataclasses.replace(
            trial,
            index=i,
            role=role,
            workers=(
                # Each ran or waited to run all along (CPU-bound).
                dataclasses.replace(
                    w0, median_batch_s=d0, batches=20, cpu_demand=1.0, cpu_wait=waited[0]
                ),
                dataclasses.replace(
                    w1, median_batch_s=d1, batches=20, cpu_demand=1.0, cpu_wait=waited[1]
                ),
            ),
            epochs=tuple(dataclasses.replace(e, batches=40, wall_s=1.0) for e in trial.epochs),
        )
        for i, (d0, d1) in enumerate(pools)
    )
    arms = {**report.arms, "persistent": dataclasses.replace(arm, trials=trials)}
    return dataclasses.replace(report, arms=arms)


def test_a_straggler_is_judged_on_timed_trials_within_the_epochs_measured() -> None:
    (f,) = check_straggler(_straggling("timing"))
    # In order the model asks 20 × 0.2 s, but the epochs measured took 1 s: the estimate
    # is never more than what was measured.
    assert f.evidence["estimated_in_order_s"] == f.evidence["median_epoch_s"] == 1.0
    # ... and the out-of-order estimate (0.4 s) shrinks with it, by a quarter.
    assert f.evidence["estimated_out_of_order_s"] == pytest.approx(0.1)
    assert f.evidence["estimated_saving_s_per_epoch"] == pytest.approx(0.9)
    assert f.evidence["pools"] == 2
    assert check_straggler(_straggling("memory")) == []


def test_a_worker_slow_in_one_pool_and_fast_in_the_next_is_no_straggler() -> None:
    """Another process's load slows one worker in one pool and the other in the next:
    the medians over pools still differ 15×, but no worker is the slow one."""
    swinging = _timed_pools("timing", [(0.01, 0.2), (0.16, 0.012), (0.01, 0.15)])
    assert check_straggler(swinging) == []
    # One pool alone cannot tell a straggler from a busy machine.
    assert check_straggler(_timed_pools("timing", [(0.01, 0.2)])) == []


def test_a_worker_slow_only_by_its_wait_for_a_cpu_is_no_straggler() -> None:
    """Worker 1's batches take 2.4× worker 0's, in every pool, but it waited for a CPU
    70 % of the time it could run (another process's load): its own time is 0.72×
    worker 0's."""
    busy = _timed_pools("timing", [(0.05, 0.12), (0.05, 0.12)], waited=(0.0, 0.7))
    assert check_straggler(busy) == []
    # Measured in each batch (its waits fell elsewhere in its life), the worker's own
    # time is taken as it is, the share unused: 0.12 s of its own, a straggler.
    arm = busy.arms["persistent"]
    own = tuple(
        dataclasses.replace(
            t,
            workers=tuple(
                dataclasses.replace(w, median_own_batch_s=w.median_batch_s) for w in t.workers
            ),
        )
        for t in arm.trials
    )
    measured = {**busy.arms, "persistent": dataclasses.replace(arm, trials=own)}
    (f,) = check_straggler(dataclasses.replace(busy, arms=measured))
    assert f.evidence["median_batch_s_by_worker"] == {"0": 0.05, "1": 0.12}
    # The same batch times with no such wait: a straggler, its waits in the evidence.
    (f,) = check_straggler(_timed_pools("timing", [(0.05, 0.12), (0.05, 0.12)]))
    assert f.evidence["cpu_wait_share_by_worker"] == {"0": 0.0, "1": 0.0}
    assert "less waits for a CPU" in f.title
