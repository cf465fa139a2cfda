"""How the loader's workers share the work: checks on threads, start-up and shutdown
(the straggler check is checks/straggler.py, on these helpers).

Pure functions of a Report, like `loaderprof.checks.registry`. Each estimate is built
from what the trials measured (per-worker batch times, thread counts, start-up
stamps) and says so; none is a figure the user cannot check in the JSON.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from loaderprof.model.results import ARM_LABEL, Finding, Report
from loaderprof.model.trials import TrialResult, WorkerResult
from loaderprof.units import MiB, fmt_bytes, fmt_pct, plural


def _complete(report: Report) -> list[TrialResult]:
    return [t for arm in report.arms.values() for t in arm.trials if t.epochs]


def timed_trials(report: Report) -> list[TrialResult]:
    """The trials whose times count (NOTE [timing and memory trials]): a memory
    trial's page-table walks stall one worker at a time, which reads as a slow worker
    or a late start."""
    return [t for t in _complete(report) if t.times_epochs]


def train_workers(workers: Sequence[WorkerResult]) -> list[WorkerResult]:
    """The train loader's workers (see NOTE [validation pass]; a --val pool's have their
    own batch size and worker ids, and are not compared with them)."""
    return [w for w in workers if w.loader == "train"]


# What keeps a worker alive past its loader's shutdown, and how to let it go.
_SHUTDOWN_FIX = (
    "a worker must return from its loop when the loader shuts it down: do not ignore "
    "SIGTERM or block in an atexit/finalizer handler in worker_init_fn or the Dataset; "
    "close threads, pools and connections the worker opened (a daemon=False thread "
    "keeps the process alive)"
)


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
            title=f"{plural(most, 'worker process')} still alive after the "
            f"loader shut down ({plural(len(hit), 'trial')}, {where})",
            evidence={
                "trials_affected": len(hit),
                "most_workers_alive": most,
                "worker_processes_seen": total,
                "arms": arms,
            },
            fix=_SHUTDOWN_FIX,
        )
    ]


def check_idle_workers(report: Report) -> list[Finding]:
    """NOTE [idle workers]: workers that make no batch in an epoch: an IterableDataset
    with fewer shards than workers (a worker given no shard yields nothing), or fewer
    batches than workers. Each idle worker holds its memory, and a persistent one for
    the whole training, for nothing. Reported when it happens in every epoch of an arm
    (a cause in the Dataset's shape, so in every run); epochs cut short by
    --max-batches do not count."""
    n = report.config.loader.num_workers
    cut = report.config.max_batches
    idle: dict[str, list[int]] = {}
    for arm in report.arms.values():
        for t in arm.trials[:1]:
            # An epoch with no worker's batch recorded says nothing about any worker.
            epochs = [e for e in t.epochs if e.worker_pids and (not cut or e.batches < cut)]
            if epochs:
                idle[arm.name] = [n - len(e.worker_pids) for e in epochs]
    if n < 2 or not idle or not all(min(v) > 0 for v in idle.values()):
        return []
    least = min(min(v) for v in idle.values())
    seen = max(len(v) for v in idle.values())
    shards = report.extras.get("dataset_shards")
    shard_attr = report.extras.get("dataset_shards_attribute")
    trials = _complete(report)
    batches = int(statistics.median(e.batches for t in trials for e in t.epochs))
    iterable = report.extras.get("dataset_kind") == "iterable"
    if shards is not None:
        why = (
            f": the Dataset has {plural(shards, 'shard')} ({shard_attr}) for {plural(n, 'worker')}"
        )
    elif iterable:
        why = " (an IterableDataset gives a worker without a share of the stream nothing to yield)"
    else:
        why = f": an epoch has {plural(batches, 'batch')} for {plural(n, 'worker')}"
    fix = (
        f"use num_workers ≤ {shards} (the shards), or split the data into at least as many "
        "shards as workers (more files; HF datasets: to_iterable_dataset(num_shards=N))"
        if shards is not None
        else "shard the stream so every worker gets a share (by get_worker_info()), or "
        "use fewer workers"
        if iterable
        else "use fewer workers than batches per epoch, or smaller batches"
    )
    return [
        Finding(
            id="idle-workers",
            severity="warning",
            title=f"{least} of {plural(n, 'worker')} made no batch in any of the "
            f"{plural(seen, 'epoch')}{why}; "
            "each holds its memory for nothing",
            evidence={
                "num_workers": n,
                "idle_workers_by_epoch": idle,
                "batches_per_epoch": batches,
                "dataset_shards": shards,
                "dataset_shards_attribute": shard_attr,
            },
            fix=fix + "; an idle worker costs its memory and start-up and makes no batch",
        )
    ]


# See NOTE [worker threads]. The share of a core a worker's other threads must want, on
# the median worker, for the oversubscription to be theirs (not too many workers).
THREAD_MIN_DEMAND = 0.25
_LESS_OTHERS = ", less other processes' share of the wait"


@dataclass(frozen=True)
class ThreadDemand:
    per_worker: float  # cores, the median worker's
    threads: float  # the part of it beyond the main thread
    # The share of their run-queue wait the pool's own load caused (1: all of it).
    own_share: float


def own_demand(workers: list[WorkerResult], n: int, others: float) -> ThreadDemand:
    """See NOTE [worker threads]. A computing thread's run-queue wait is lengthened by
    every runnable thread ahead of it, the pool's and other processes' alike: the wait
    counts in proportion to the cores the pool ran on (n × the median worker's CPU
    time) against those other processes kept busy (`other_cpu_cores`), so a CPU hog
    beside the run does not make the workers' threads oversubscribed."""
    share = 1.0
    if others > 0 and all(w.cpu_wait is not None for w in workers):
        ran = n * statistics.median((w.cpu_demand or 0.0) - (w.cpu_wait or 0.0) for w in workers)
        share = ran / (ran + others) if ran > 0 else 1.0
    cut = 1.0 - share
    return ThreadDemand(
        per_worker=statistics.median(
            (w.cpu_demand or 0.0) - cut * (w.cpu_wait or 0.0) for w in workers
        ),
        threads=statistics.median(
            (w.thread_cpu_demand or 0.0) - cut * (w.thread_cpu_wait or 0.0) for w in workers
        ),
        own_share=share,
    )


def check_threads(report: Report) -> list[Finding]:
    """See NOTE [worker threads]. Oversubscription is CPU demand above the CPUs the process
    may use: the cores the workers' threads wanted (run + run-queue wait, measured in
    each worker, less other processes' share of the wait), summed over the pool, above
    `cpus_usable`, with the workers' own extra threads wanting a share of it (12
    workers × 16 OpenCV threads, PyTorch issue #82219). A thread that woke now and then
    (a library's polling thread) wants almost nothing and is not oversubscription,
    however many there are."""
    cpus = report.environment.get("cpus_usable") or report.environment.get("cpu_count")
    others = float(report.environment.get("other_cpu_cores") or 0.0)
    n = report.config.loader.num_workers
    arms = []
    for arm in report.arms.values():
        workers = [
            w
            for t in arm.trials
            if t.epochs
            for w in train_workers(t.workers)
            if w.cpu_demand is not None
        ]
        if workers:
            arms.append((arm.name, workers, own_demand(workers, n, others)))
    if not arms or not cpus:
        return []
    name, workers, demand = max(arms, key=lambda a: a[2].per_worker)
    per_worker, extra = demand.per_worker, demand.threads
    if n * per_worker <= cpus or extra < THREAD_MIN_DEMAND:
        return []
    torch_threads = max(w.torch_threads or 1 for w in workers)
    compute = int(statistics.median(w.compute_threads or 1 for w in workers))
    origins: dict[str, int] = {}
    for w in workers:
        for k, v in w.thread_origins.items():
            origins[k] = max(origins.get(k, 0), v)
    return [
        Finding(
            id="thread-oversubscription",
            severity="warning",
            title=f"{plural(n, 'worker')} each want {per_worker:.1f} cores (their threads' CPU "
            f"time and run-queue wait{_LESS_OTHERS if demand.own_share < 1 else ''}; "
            f"{extra:.1f} of it beyond the main thread): "
            f"{n * per_worker:.1f} cores wanted on {plural(cpus, 'usable CPU')}, so they take "
            "turns",
            evidence={
                "num_workers": n,
                "arm": name,
                "cpu_demand_per_worker": round(per_worker, 3),
                "thread_cpu_demand_per_worker": round(extra, 3),
                "cpu_demand_total": round(n * per_worker, 3),
                "compute_threads_per_worker": compute,
                "peak_os_threads_per_worker": max(w.peak_threads or 0 for w in workers),
                "torch_threads_in_workers": torch_threads,
                "thread_origins": origins,
                "cpus_usable": cpus,
                "other_cpu_cores": others,
                "own_share_of_wait": round(demand.own_share, 3),
            },
            fix=_threads_fix(origins, torch_threads),
        )
    ]


def _threads_fix(origins: dict[str, int], torch_threads: int) -> str:
    """What to do about the threads that were seen busy, by what started them."""
    parts = []
    if torch_threads > 1:
        parts.append(
            f"call torch.set_num_threads(1) in worker_init_fn (torch runs {torch_threads} "
            "intra-op threads in each worker)"
        )
    python = sorted(k.removeprefix("python:") for k in origins if k.startswith("python:"))
    if python:
        parts.append(
            f"give the thread pools started by {', '.join(python)} fewer threads in each "
            "worker (their threads were busy)"
        )
    native = sorted(k.removeprefix("native:") for k in origins if k.startswith("native:"))
    if native or not parts:
        named = f" (busy native threads: {', '.join(native)})" if native else ""
        parts.append(
            f"cap the native thread pools in each worker{named}: in worker_init_fn, "
            "cv2.setNumThreads(1) for OpenCV and threadpoolctl.threadpool_limits(1) for "
            "BLAS/OpenMP, or OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 "
            "in the environment"
        )
    return "; ".join(parts) + "; or fewer workers"


# See NOTE [start-up breakdown]. A worker pickle this large is reported whatever its time
# costs, because a spawned worker unpickles its own private copy (N workers, N copies).
LARGE_PICKLE_BYTES = 16 * MiB
# ... or one whose pickling and unpickling take this share of the first batch's wait.
LARGE_PICKLE_SHARE = 0.25
# Workers start serially when the stagger between the first and last start is this
# share of the first batch's wait (started together, it is a few ms; one after
# another, (N-1)/N of it: indices go out only once the last worker has started), and
# at least this long.
SERIAL_SHARE = 0.3
SERIAL_MIN_S = 0.1


def _phases(w: WorkerResult) -> dict[str, float | None]:
    """One worker's start-up, phase by phase (seconds; None where not measured)."""
    start = w.started_s

    def gap(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else max(0.0, b - a)

    imports = w.unpickle_import_s
    return {
        "process_start_to_unpickling": gap(start, w.unpickle_start_s),
        # Importing what the pickle names, then the rest of the unpickling.
        "unpickling_imports": imports,
        "unpickling": w.unpickle_s if imports is None else gap(imports, w.unpickle_s),
        "to_worker_loop": gap(
            w.unpickled_s if w.unpickled_s is not None else start, w.init_start_s
        ),
        "worker_init_fn": gap(w.init_start_s, w.ready_s),
        "ready_to_first_fetch": gap(w.ready_s, w.first_fetch_s),
        "first_batch": gap(w.first_fetch_s, w.first_batch_s),
    }


def startup_breakdown(workers: Sequence[WorkerResult]) -> dict[str, float]:
    """Median seconds of each start-up phase over the workers that measured it."""
    by_phase: dict[str, list[float]] = defaultdict(list)
    for w in workers:
        for name, value in _phases(w).items():
            if value is not None:
                by_phase[name].append(value)
    return {k: round(statistics.median(v), 4) for k, v in by_phase.items()}


def _cold_waits(trials: Sequence[TrialResult]) -> list[float]:
    """First-batch waits of the epochs that started workers."""
    return [
        e.first_batch_s
        for t in trials
        for e in t.epochs
        if e.new_worker_pids and e.first_batch_s is not None
    ]


def check_large_pickle(report: Report) -> list[Finding]:
    trials = timed_trials(report)
    workers = [w for t in trials for w in train_workers(t.workers) if w.pickled_bytes is not None]
    waits = _cold_waits(trials)
    if not workers or not waits:
        return []
    size = int(statistics.median(w.pickled_bytes or 0 for w in workers))
    pickle_s = statistics.median(w.pickle_s or 0.0 for w in workers)
    # The data's unpickling: the modules the pickle names are imported by any spawned
    # worker, whatever the Dataset holds (torchvision's import is not a large pickle).
    unpickles = [
        w.unpickle_s - (w.unpickle_import_s or 0.0) for w in workers if w.unpickle_s is not None
    ]
    unpickle_s = max(0.0, statistics.median(unpickles)) if unpickles else 0.0
    imported = [w.unpickle_import_s for w in workers if w.unpickle_import_s is not None]
    import_s = statistics.median(imported) if imported else None
    wait = statistics.median(waits)
    share = (pickle_s + unpickle_s) / wait if wait > 0 else 0.0
    if size < LARGE_PICKLE_BYTES and share < LARGE_PICKLE_SHARE:
        return []
    attrs = next((t.dataset_attribute_bytes for t in trials if t.dataset_attribute_bytes), {})
    biggest = max(attrs.items(), key=lambda kv: kv[1]) if attrs else None
    phases = startup_breakdown(workers)
    slowest = max(phases, key=lambda k: phases[k]) if phases else None
    named = f"; biggest attribute: {biggest[0]} ({fmt_bytes(biggest[1])})" if biggest else ""
    return [
        Finding(
            id="large-pickle",
            severity="warning",
            title=f"every worker receives a {fmt_bytes(size)} pickle of the Dataset and "
            f"unpickles its own private copy: {pickle_s:.2f} s to pickle and "
            f"{unpickle_s:.2f} s to unpickle per worker"
            f"{'' if import_s is None else f' (and {import_s:.2f} s importing modules)'}{named}",
            evidence={
                "pickled_bytes": size,
                "pickle_s": round(pickle_s, 4),
                "unpickle_s": round(unpickle_s, 4),
                "unpickle_import_s": None if import_s is None else round(import_s, 4),
                "cold_first_batch_s": round(wait, 4),
                "share_of_first_batch": round(share, 3),
                "biggest_attributes_bytes": dict(attrs),
                "startup_breakdown_s": phases,
                "slowest_startup_phase": slowest,
            },
            fix="keep bulk data off the Dataset object: open or memory-map it in the worker "
            "(lazily in __getitem__, or in worker_init_fn), or hold it in a torch tensor, "
            "which workers share through shared memory instead of unpickling a copy; or use "
            "fork; persistent_workers=True pays the transfer once instead of every epoch",
        )
    ]


def check_serial_startup(report: Report) -> list[Finding]:
    """Workers that start one after another: under spawn/forkserver the main process
    writes each worker's pickle into its pipe, and a pickle larger than the pipe
    holds waits until that worker has started and reads it (PyTorch #139792)."""
    staggers: list[tuple[float, float, int]] = []
    for t in timed_trials(report):
        for e in t.epochs:
            new = set(e.new_worker_pids)
            # Spawned workers only: what the fix speaks of (a pickle through a pipe).
            starts = [
                w.started_s
                for w in train_workers(t.workers)
                if w.pid in new and w.started_s is not None and w.pickled_bytes is not None
            ]
            if len(starts) >= 2 and e.first_batch_s:
                staggers.append((max(starts) - min(starts), e.first_batch_s, len(starts)))
    if not staggers:
        return []
    stagger = statistics.median(s for s, _, _ in staggers)
    wait = statistics.median(w for _, w, _ in staggers)
    share = stagger / wait if wait > 0 else 0.0
    if stagger < SERIAL_MIN_S or share < SERIAL_SHARE:
        return []
    n = max(k for _, _, k in staggers)
    return [
        Finding(
            id="serial-startup",
            severity="warning",
            title=f"workers start one after another: the last of {n} starts {stagger:.2f} s "
            f"after the first, {fmt_pct(share)} of the {wait:.2f} s wait for an epoch's first "
            "batch",
            evidence={
                "stagger_s": round(stagger, 4),
                "first_batch_s": round(wait, 4),
                "share_of_first_batch": round(share, 3),
                "workers": n,
                "cold_epochs": len(staggers),
            },
            fix="under spawn/forkserver each worker's pickled Dataset goes through its pipe "
            "before the next worker starts: make the pickle small, use fork, or "
            "persistent_workers=True so it happens once, not every epoch "
            "(PyTorch issues #139792, #131931)",
        )
    ]


def copy_on_read_finding(
    *,
    growth: int,
    samples_read: int,
    rss_growth: int,
    start_uss: int,
    affected: int,
    where: dict[str, object],
    spawn_hint: str,
) -> Finding:
    """The copy-on-read finding for compare's trials and watch's loaders alike: the
    worker that grew most, and how many were affected."""
    per_1000 = growth / samples_read * 1000 if samples_read else 0.0
    # A watched epoch cut short has no batch count to set the growth against.
    rate = f"{fmt_bytes(per_1000)} per 1,000 samples, " if samples_read else ""
    over = f" over {plural(samples_read, 'sample')}" if samples_read else " while reading"
    return Finding(
        id="copy-on-read",
        severity="warning",
        arm=None,
        title=f"forked workers turn shared memory private as they read: "
        f"{rate}{fmt_bytes(growth)}{over} (RSS rose only {fmt_bytes(rss_growth)})",
        evidence={
            "workers_affected": affected,
            "uss_growth_bytes": int(growth),
            "samples_read": samples_read,
            "uss_bytes_per_1000_samples": int(per_1000),
            "rss_growth_bytes": int(rss_growth),
            "uss_at_first_batch_bytes": int(start_uss),
            **where,
        },
        fix="keep the dataset's data in numpy arrays or tensors instead of lists/dicts of "
        f"Python objects (whose refcount writes copy every page), or use {spawn_hint} "
        "(PyTorch issue #13246)",
    )
