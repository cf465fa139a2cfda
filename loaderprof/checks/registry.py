"""Lifecycle checks: what persistent workers carry from one epoch to the next, behind
one registry: `find` runs every family (memory, data, state, loader, environment)
over a report, and `checks_run` says which had what they need.

Each check is a pure function of a Report that looks for one thing, reports it with
its evidence in figures and a one-line fix, and stays quiet otherwise: a false alarm
costs as much trust as a miss. Thresholds are deliberately above what a clean
DataLoader shows (a fresh worker's start-up, torch's own file and thread use).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loaderprof.checks.catalogue import checked
from loaderprof.checks.data import (
    check_content,
    check_content_repeats,
    check_iterable,
    check_order,
    check_stream_order,
    content_differs_from,
)
from loaderprof.checks.environment import check_environment
from loaderprof.checks.loader import (
    check_idle_workers,
    check_large_pickle,
    check_serial_startup,
    check_shutdown,
    check_threads,
)
from loaderprof.checks.memory import check_copy_on_read, check_handles, check_memory_growth
from loaderprof.checks.state import check_state
from loaderprof.checks.straggler import check_straggler
from loaderprof.model.results import Finding, Report

CHECKS: tuple[Callable[[Report], list[Finding]], ...] = (
    check_iterable,
    check_handles,
    check_memory_growth,
    check_copy_on_read,
    check_order,
    check_environment,
    check_straggler,
    check_shutdown,
    check_threads,
    check_large_pickle,
    check_serial_startup,
    check_idle_workers,
)


def checks_run(report: Report) -> list[str]:
    """The ids (`catalogue.CATALOGUE`) of the checks that had what they need in this
    report (so "no findings" means something: a check without data cannot find
    anything)."""
    trials = [t for arm in report.arms.values() for t in arm.trials]
    sampled = any(w.states for t in trials for w in t.workers)
    fork = report.environment.get("start_method") or report.config.loader.mp_context
    ran = {
        "state": any(t.dataset_states for t in trials),
        "growth": sampled,
        "copy-on-read": sampled and fork == "fork",
        "iterable": report.extras.get("dataset_kind") == "iterable",
        "order": any(e.order_digest for t in trials for e in t.epochs),
        "content": any(e.content_digest for t in trials for e in t.epochs),
        "limits": any(t.shm_size_bytes for t in trials),
        "startup": any(w.started_s is not None for t in trials for w in t.workers),
        "threads": any(w.compute_threads is not None for t in trials for w in t.workers),
        "shutdown": any(t.workers_alive_at_close is not None for t in trials),
        "idle": any(e.worker_pids for t in trials for e in t.epochs),
        # Timed trials' batches only (NOTE [timing and memory trials]).
        "stragglers": report.config.loader.in_order is not False
        and any(w.median_batch_s is not None for t in trials if t.times_epochs for w in t.workers),
    }
    return [cid for cid, did in ran.items() if did]


def findings_checked(report: Report) -> tuple[str, ...]:
    """Every finding id whose check ran (a gate on any other cannot pass honestly)."""
    return checked(checks_run(report))


def find(report: Report) -> tuple[Finding, ...]:
    if not any(t.epochs for arm in report.arms.values() for t in arm.trials):
        return ()
    state = check_state(report)
    first, differs, _ = content_differs_from(report)
    if first is not None:
        # See NOTE [stale worker state]. The content digests are the evidence that the
        # state finding changed what the model sees.
        note = {"content_differs_from_epoch": first, "epochs_differing": differs}
        state = [dataclasses.replace(f, evidence={**f.evidence, **note}) for f in state]
    out: list[Finding] = [*state]
    for check in CHECKS:
        out.extend(check(report))
    # A state finding explains arms that differ (stale state repeats an epoch too).
    repeats = [] if state else [*check_content_repeats(report), *check_stream_order(report)]
    out.extend(repeats)
    out.extend(check_content(report, explained=[*state, *repeats]))
    return tuple(out)
