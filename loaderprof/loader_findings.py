"""How the loader's workers share the work: checks on stragglers, threads, start-up
and shutdown.

Pure functions of a Report, like `loaderprof.findings`. Each estimate is built
from what the trials measured (per-worker batch times, thread counts, start-up
stamps) and says so; none is a figure the user cannot check in the JSON.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence

from loaderprof.results import ARM_LABEL, Finding, Report, TrialResult

# A worker is a straggler when its median batch takes this many times the other
# workers' median, and the in-order wait it causes is at least this share of an epoch.
STRAGGLER_RATIO = 1.5
STRAGGLER_MIN_SHARE = 0.10
# Batches a worker must have produced for its median to count.
MIN_BATCHES = 3
# torch's default prefetch_factor.
DEFAULT_PREFETCH = 2


def _complete(report: Report) -> list[TrialResult]:
    return [t for arm in report.arms.values() for t in arm.trials if t.epochs]


def _batch_times(trials: Sequence[TrialResult]) -> dict[int, float]:
    """Each worker id's median batch time: the median over trials of its own median."""
    by_id: dict[int, list[float]] = defaultdict(list)
    for t in trials:
        for w in t.workers:
            if w.median_batch_s is not None and w.batches >= MIN_BATCHES:
                by_id[w.worker_id].append(w.median_batch_s)
    return {wid: statistics.median(v) for wid, v in by_id.items()}


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
    lo = report.config["loader"]
    if lo.get("in_order") is False:
        return []
    trials = _complete(report)
    times = _batch_times(trials)
    if len(times) < 2:
        return []
    slow_id = max(times, key=lambda k: times[k])
    others = statistics.median(d for k, d in times.items() if k != slow_id)
    ratio = times[slow_id] / others if others > 0 else math.inf
    epochs = [e for t in trials for e in t.epochs[1:]] or [e for t in trials for e in t.epochs]
    if ratio < STRAGGLER_RATIO or not epochs:
        return []
    batches = int(statistics.median(e.batches for e in epochs))
    wall = statistics.median(e.wall_s for e in epochs)
    prefetch = lo.get("prefetch_factor") or DEFAULT_PREFETCH
    step_s = float(report.config.get("step_ms") or 0) / 1000
    ordered, unordered = in_order_wait(times, batches, prefetch, step_s)
    saving = ordered - unordered
    if wall <= 0 or saving < STRAGGLER_MIN_SHARE * wall:
        return []
    pid = next(w.pid for t in trials for w in t.workers if w.worker_id == slow_id)
    return [
        Finding(
            id="straggler",
            severity="warning",
            title=f"worker {slow_id}'s batches take {ratio:.1f}× the other workers' "
            f"({times[slow_id] * 1e3:.1f} ms vs {others * 1e3:.1f} ms): in-order delivery "
            f"waits for it, an estimated {saving:.2f} s of each {wall:.2f} s epoch",
            evidence={
                "worker_id": slow_id,
                "pid": pid,
                "median_batch_s_by_worker": {str(k): round(v, 6) for k, v in times.items()},
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


def check_shutdown(report: Report) -> list[Finding]:
    """Workers that outlive their loader: torch joins each for 5 s, then sends SIGTERM;
    one still alive after that holds its memory until the training process exits (or
    longer: a worker that ignores SIGTERM is orphaned if the parent is killed)."""
    hit = [
        (t, t.workers_alive_at_close)
        for t in _complete(report)
        if t.workers_alive_at_close  # None (no close) and 0 are both fine
    ]
    if not hit:
        return []
    arms = sorted({t.arm for t, _ in hit})
    where = "both arms" if len(arms) > 1 else f"the {ARM_LABEL[arms[0]]} arm"
    most = max(n for _, n in hit)
    total = sum(len(t.workers) for arm in report.arms.values() for t in arm.trials)
    return [
        Finding(
            id="workers-outlive-loader",
            severity="warning",
            title=f"{most} worker process{'es' if most > 1 else ''} still alive after the "
            f"loader shut down ({len(hit)} trial{'s' if len(hit) > 1 else ''}, {where})",
            evidence={
                "trials_affected": len(hit),
                "most_workers_alive": most,
                "worker_processes_seen": total,
                "arms": arms,
            },
            fix="a worker must return from its loop when the loader shuts it down: do not "
            "ignore SIGTERM or block in an atexit/finalizer handler in worker_init_fn or "
            "the Dataset; close threads, pools and connections the worker opened (a "
            "daemon=False thread keeps the process alive)",
        )
    ]


def check_threads(report: Report) -> list[Finding]:
    """NOTE [worker threads]: workers × the threads computing in each, against the
    CPUs the process may use; more means they take turns on the cores, each context
    switch evicting the others' caches (12 workers × 16 OpenCV threads, PyTorch
    issue #82219)."""
    workers = [w for t in _complete(report) for w in t.workers if w.compute_threads is not None]
    cpus = report.environment.get("cpus_usable") or report.environment.get("cpu_count")
    if not workers or not cpus:
        return []
    per_worker = int(statistics.median(w.compute_threads or 1 for w in workers))
    n = int(report.config["loader"]["num_workers"])
    if per_worker < 2 or n * per_worker <= cpus:
        return []
    torch_threads = max(w.torch_threads or 1 for w in workers)
    peak = max(w.peak_threads or 0 for w in workers)
    fix = (
        "call torch.set_num_threads(1) in worker_init_fn (a worker_init_fn raised it to "
        f"{torch_threads}); "
        if torch_threads > 1
        else ""
    ) + (
        "cap the libraries' thread pools in each worker: in worker_init_fn, "
        "cv2.setNumThreads(1) for OpenCV and threadpoolctl.threadpool_limits(1) for BLAS/"
        "OpenMP, or OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 in the "
        "environment; or fewer workers"
    )
    return [
        Finding(
            id="thread-oversubscription",
            severity="warning",
            title=f"{n} workers × {per_worker} computing threads each = {n * per_worker} "
            f"threads on {cpus} usable CPUs: they take turns on the cores",
            evidence={
                "num_workers": n,
                "compute_threads_per_worker": per_worker,
                "peak_os_threads_per_worker": peak,
                "torch_threads_in_workers": torch_threads,
                "cpus_usable": cpus,
            },
            fix=fix,
        )
    ]
