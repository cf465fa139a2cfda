"""The straggler check: one worker whose batches take much longer than the others'
holds back in-order delivery. A pure function of a Report, like the other checks
(`loaderprof.checks.registry`)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence

from loaderprof.checks.loader import timed_trials, train_workers
from loaderprof.model.results import Finding, Report
from loaderprof.model.trials import TrialResult, WorkerResult

# A worker is a straggler when its median batch takes this many times the other
# workers' median, and the in-order wait it causes is at least this share of an epoch.
STRAGGLER_RATIO = 1.5
STRAGGLER_MIN_SHARE = 0.10
# ... and at least this long: on a tiny epoch a few ms are noise, not a straggler.
STRAGGLER_MIN_S = 0.05
# Batches a worker must have produced for its median to count.
MIN_BATCHES = 3
# torch's default prefetch_factor.
DEFAULT_PREFETCH = 2


def _cpu_wait_share(w: WorkerResult) -> float:
    """The share of its main thread's runnable time it waited for a CPU: run-queue wait
    over run + wait (see NOTE [worker threads]; both over its wall since init, so the
    time it idled between batches, neither running nor waiting, does not dilute it)."""
    if w.cpu_wait is None or w.cpu_demand is None:
        return 0.0
    wait = w.cpu_wait - (w.thread_cpu_wait or 0.0)
    demand = w.cpu_demand - (w.thread_cpu_demand or 0.0)
    return min(0.95, max(0.0, wait / demand)) if demand > 0 else 0.0


def _own_batch_s(w: WorkerResult) -> float | None:
    """The worker's median batch less its waits for a CPU: its own work and its own
    waits (I/O, a sleep), not another process's load. Measured in each batch where the
    report has it (`median_own_batch_s`); else estimated from the share of its runnable
    time it waited. On a busy machine one worker of a uniform Dataset waited for a CPU
    78 % of the time it could run, and its 73 ms batches were 16 ms of its own."""
    if w.median_own_batch_s is not None:
        return w.median_own_batch_s
    if w.median_batch_s is None:
        return None
    return w.median_batch_s * (1.0 - _cpu_wait_share(w))


def _pools(trials: Sequence[TrialResult]) -> list[dict[int, float]]:
    """Each pool's own batch time by worker id (a trial's workers begun in one epoch: a
    persistent trial's one pool, a non-persistent one's each epoch), where two or more
    workers made enough batches to have one."""
    out: list[dict[int, float]] = []
    for t in trials:
        by_pool: dict[int | None, dict[int, float]] = defaultdict(dict)
        for w in train_workers(t.workers):
            own = _own_batch_s(w)
            if own is not None and w.batches >= MIN_BATCHES:
                by_pool[w.first_epoch][w.worker_id] = own
        out += [p for p in by_pool.values() if len(p) >= 2]
    return out


def _batch_times(pools: Sequence[dict[int, float]]) -> dict[int, float]:
    """Each worker id's batch time: the median over pools of its own."""
    by_id: dict[int, list[float]] = defaultdict(list)
    for pool in pools:
        for wid, d in pool.items():
            by_id[wid].append(d)
    return {wid: statistics.median(v) for wid, v in by_id.items()}


def _slowest_in_every_pool(pools: Sequence[dict[int, float]], wid: int) -> bool:
    """What makes a worker a straggler (its shard, its items, its worker_init_fn) slows
    it in every pool; another process's load on a busy machine slows one worker in one
    pool and another in the next (seen: `check` on a uniform ImageFolder beside a CPU
    hog warned in 3 of 3 runs, its "slow" worker 30-100 ms in one pool, 36-261 ms in the
    next, where every batch cost 9 ms alone). One pool cannot tell the two apart."""
    return len(pools) >= 2 and all(wid in p and max(p, key=lambda k: p[k]) == wid for p in pools)


def in_order_wait(
    times: dict[int, float], batches: int, prefetch: int, step_s: float
) -> tuple[float, float]:
    """An epoch's batch production time with in-order delivery, and without it.

    In order, batch i comes from worker i mod W, so every worker's share of the
    epoch waits for the slowest: ceil(N/W) × its batch time. Without it (torch's
    `in_order=False`), free workers take the next indices, so the epoch takes about
    N ÷ the workers' summed rate, but never less than the slow worker's first
    `prefetch` batches, which are handed to it before any batch is done. Neither is
    faster than the main loop's own step per batch.
    """
    slow = max(times.values())
    share = math.ceil(batches / len(times))
    ordered = share * slow
    unordered = max(
        batches / sum(1 / max(d, 1e-9) for d in times.values()), min(prefetch, share) * slow
    )
    floor = batches * step_s
    return max(ordered, floor), max(unordered, floor)


def check_straggler(report: Report) -> list[Finding]:
    """One worker whose batches take much longer than the others' holds back in-order
    delivery; say what that costs per epoch and what to try."""
    lo = report.config.loader
    if lo.in_order is False:
        return []
    trials = timed_trials(report)
    pools = _pools(trials)
    times = _batch_times(pools)
    if len(times) < 2:
        return []
    slow_id = max(times, key=lambda k: times[k])
    others = statistics.median(d for k, d in times.items() if k != slow_id)
    ratio = times[slow_id] / others if others > 0 else math.inf
    epochs = [e for t in trials for e in t.epochs[1:]] or [e for t in trials for e in t.epochs]
    if ratio < STRAGGLER_RATIO or not epochs or not _slowest_in_every_pool(pools, slow_id):
        return []
    batches = int(statistics.median(e.batches for e in epochs))
    wall = statistics.median(e.wall_s for e in epochs)
    prefetch = lo.prefetch_factor or DEFAULT_PREFETCH
    step_s = report.config.step_ms / 1000
    ordered, unordered = in_order_wait(times, batches, prefetch, step_s)
    if ordered > wall > 0:
        # The model's in-order epoch is longer than the epochs measured: both its
        # estimates shrink to them, so what it saves comes out of what was measured.
        unordered *= wall / ordered
        ordered = wall
    saving = ordered - unordered
    if wall <= 0 or saving < max(STRAGGLER_MIN_SHARE * wall, STRAGGLER_MIN_S):
        return []
    workers = [w for t in trials for w in train_workers(t.workers)]
    pid = next(w.pid for w in workers if w.worker_id == slow_id)
    waited = {
        str(k): round(statistics.median(_cpu_wait_share(w) for w in workers if w.worker_id == k), 3)
        for k in times
    }
    return [
        Finding(
            id="straggler",
            severity="warning",
            title=f"worker {slow_id}'s batches take {ratio:.1f}× the other workers' "
            f"({times[slow_id] * 1e3:.1f} ms vs {others * 1e3:.1f} ms, less waits for a "
            f"CPU): in-order delivery waits for it, an estimated {saving:.2f} s of each "
            f"{wall:.2f} s epoch",
            evidence={
                "worker_id": slow_id,
                "pid": pid,
                # Each less the share of its life it waited for a CPU (`cpu_wait_share`).
                "median_batch_s_by_worker": {str(k): round(v, 6) for k, v in times.items()},
                "cpu_wait_share_by_worker": waited,
                # The pools it was the slowest in: every pool that timed its workers.
                "pools": len(pools),
                "batch_time_ratio": round(ratio, 2),
                "batches_per_epoch": batches,
                "estimated_in_order_s": round(ordered, 4),
                "estimated_out_of_order_s": round(unordered, 4),
                "estimated_saving_s_per_epoch": round(saving, 4),
                "median_epoch_s": round(wall, 4),
            },
            fix="let other workers' batches overtake it: DataLoader(..., in_order=False) "
            "(torch ≥ 2.6; measure it with --no-in-order; the batch order then varies from "
            "run to run), or find what makes that worker's items slow (a slow shard, a "
            "cold cache, an item much larger than the rest)",
        )
    ]
