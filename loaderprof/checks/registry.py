"""Lifecycle checks: what persistent workers carry from one epoch to the next.

Pure functions of a Report. Each check looks for one thing, reports it with
its evidence in figures and a one-line fix, and stays quiet otherwise: a false
alarm costs as much trust as a miss. Thresholds are deliberately above what a
clean DataLoader shows (a fresh worker's start-up, torch's own file and thread
use).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loaderprof.checks.catalogue import checked
from loaderprof.checks.growth import leaked_handles, memory_growth
from loaderprof.checks.loader import (
    check_idle_workers,
    check_large_pickle,
    check_serial_startup,
    check_shutdown,
    check_straggler,
    check_threads,
    copy_on_read_finding,
)
from loaderprof.checks.series import copies_on_read, growth_trend, idle_growth
from loaderprof.checks.state import check_state
from loaderprof.inside.procfs import HANDLE_LABELS
from loaderprof.measure.readings import copy_window
from loaderprof.model.results import ARM_LABEL, ArmResult, Finding, Report
from loaderprof.model.trials import TrialResult, WorkerResult
from loaderprof.model.units import fmt_bytes, plural

NEAR_LIMIT = 0.8


def _persistent_workers(arm: ArmResult) -> list[tuple[TrialResult, WorkerResult]]:
    """In the order the findings name them: by trial, then worker id."""
    return sorted(
        ((t, w) for t in arm.trials for w in t.workers if len(w.states) >= 3),
        key=lambda tw: (tw[0].index, tw[1].worker_id),
    )


def check_memory_growth(report: Report) -> list[Finding]:
    """Persistent workers whose idle USS grows after every epoch, told apart from a
    one-off warm-up in epoch 1, from copy-on-read (`new_memory`), and from growth that
    levels off (NOTE [growth to tell]). Every worker that grew is named."""
    grown: dict[str, tuple[list[float], str]] = {}
    where: dict[str, Any] = {}
    for t, w in _persistent_workers(report.arms["persistent"]):
        idle = [s for s in w.states if s.after_epoch >= 1 and s.uss_bytes is not None]
        if len(idle) < 3:
            continue
        if f"worker {w.worker_id}" in grown:
            continue  # the first trial that shows it is the evidence
        series = [float(s.uss_bytes or 0) for s in idle]
        trend = idle_growth(series, [float(s.rss_bytes) for s in idle])
        if trend is None:
            continue
        grown[f"worker {w.worker_id}"] = (series, trend)
        start = w.states[0].uss_bytes
        where.setdefault("trial", t.index)
        where.setdefault("pids", []).append(w.pid)
        where.setdefault("worker_ids", []).append(w.worker_id)
        # What epoch 1 added once (warm-up), apart from the growth.
        where.setdefault("warmup_bytes_by_worker", {})[str(w.worker_id)] = (
            int(series[0] - start) if start is not None else None
        )
    return [memory_growth(grown, where, arm="persistent")] if grown else []


@dataclass(frozen=True)
class _Reading:
    """What a worker's private memory did while it read, from its first batch on."""

    growth_bytes: int
    samples_read: int
    rss_growth_bytes: int
    start_uss_bytes: int


def _reading(t: TrialResult, w: WorkerResult) -> _Reading | None:
    """USS growth from the first deep sample after the worker's first batch (its start-up
    copy already paid) to its peak, against the samples it read in between."""
    line = next((p for p in t.timeline if p.pid == w.pid), None)
    spans = sorted((b.end_s, b.samples) for b in t.batches if b.pid == w.pid)
    if line is None or not spans:
        return None
    inside = line.in_window or (True,) * len(line.t_s)
    window = copy_window(
        [
            (ts, u, r)
            for ts, u, r, ok in zip(line.t_s, line.uss_bytes, line.rss_bytes, inside, strict=False)
            if u is not None and ok and ts >= spans[0][0]
        ]
    )
    if window is None:
        return None
    (t0, u0, r0), (t1, u1, r1) = window
    read = sum(n for end, n in spans if t0 < end <= t1)
    if read <= 0:
        return None
    return _Reading(u1 - u0, read, r1 - r0, u0)


def check_copy_on_read(report: Report) -> list[Finding]:
    """Forked workers whose private memory grows with what they read while RSS stays
    flat: reading Python objects inherited from the parent writes their refcounts and
    turns shared pages private (PyTorch issue #13246). What a worker copied once while
    starting (imports, module objects) is its start-up cost, not this finding."""
    if (report.environment.get("start_method") or report.config["loader"]["mp_context"]) != "fork":
        return []
    hits = []
    for arm in report.arms.values():
        for t in arm.trials:
            for w in t.workers:
                r = _reading(t, w)
                if r is not None and copies_on_read(
                    r.growth_bytes, r.rss_growth_bytes, r.start_uss_bytes
                ):
                    hits.append((arm.name, w, r))
    if not hits:
        return []
    arm_name, w, r = max(hits, key=lambda h: h[2].growth_bytes)
    return [
        copy_on_read_finding(
            growth=r.growth_bytes,
            samples_read=r.samples_read,
            rss_growth=r.rss_growth_bytes,
            start_uss=r.start_uss_bytes,
            affected=len(hits),
            where={"pid": w.pid, "arm": arm_name},
            spawn_hint="--mp-context spawn/forkserver",
        )
    ]


def check_handles(report: Report) -> list[Finding]:
    """Handles that grow across epochs (leaks; NOTE [growth to tell]) and those held
    constantly (state carried)."""
    grown: dict[str, dict[str, tuple[list[int], str]]] = {}
    where: dict[str, dict[str, Any]] = {}
    carried: dict[str, list[int]] = {}
    for t, w in _persistent_workers(report.arms["persistent"]):
        idle = [s for s in w.states if s.after_epoch >= 1]
        for key in HANDLE_LABELS:
            get = operator.attrgetter(key)
            series = [int(get(s)) for s in idle]
            trend = growth_trend([float(v) for v in series], 1.0)
            # The first trial that shows a worker's growth is its evidence.
            if trend is not None and f"worker {w.worker_id}" not in grown.get(key, {}):
                grown.setdefault(key, {})[f"worker {w.worker_id}"] = (series, trend)
                ev = where.setdefault(key, {"trial": t.index, "pids": [], "worker_ids": []})
                ev["pids"].append(w.pid)
                ev["worker_ids"].append(w.worker_id)
            # torch starts its own threads on the first tensor op, so only files,
            # connections and children count as state the Dataset carries.
            extra = min(series) - _at_start(w, key) if series else 0
            if extra > 0 and key != "threads":
                carried.setdefault(key, []).append(extra)
    out = [
        leaked_handles(key, grown[key], where[key], arm="persistent")
        for key in HANDLE_LABELS
        if key in grown
    ]
    held = {k: max(v) for k, v in carried.items() if k not in grown}
    if held:
        text = ", ".join(plural(n, HANDLE_LABELS[k]) for k, n in held.items())
        out.append(
            Finding(
                id="state-carried",
                severity="info",
                arm="persistent",
                title=f"each persistent worker holds {text} from one epoch to the next",
                evidence={f"extra_{k}": n for k, n in held.items()},
                fix="expected for lazily opened resources; make sure they survive reuse "
                "(file positions, cursors, connections that time out, per-epoch state)",
            )
        )
    return out


def _at_start(w: WorkerResult, key: str) -> int:
    """What the worker held before any of the user's code ran in it (NOTE [held at
    init]); from an older report, when the sampler first saw it."""
    if key in w.held_at_init:
        return int(w.held_at_init[key])
    return int(getattr(w.states[0], key))


def check_order(report: Report) -> list[Finding]:
    out = []
    shuffle = bool(report.config["loader"].get("shuffle"))
    orders = {
        name: [e.order_digest for e in arm.trials[0].epochs] if arm.trials else []
        for name, arm in report.arms.items()
    }
    p = orders.get("persistent", [])
    if shuffle and len(p) >= 2 and all(o is not None for o in p) and len(set(p)) < len(p):
        out.append(
            Finding(
                id="order-repeats",
                severity="error",
                arm="persistent",
                title="with shuffle=True the persistent arm repeats the same sample order",
                evidence={"order_digests": p},
                fix="seed shuffling from the epoch (sampler.set_epoch) or the loader's "
                "generator, not from state fixed when the worker started",
            )
        )
    n = orders.get("non_persistent", [])
    if shuffle and p and n and p[0] == n[0] and p[1:] != n[1:]:
        out.append(
            Finding(
                id="order-differs-between-arms",
                severity="info",
                arm=None,
                title="from epoch 2 the shuffled order differs between the arms",
                evidence={
                    "first_differing_epoch": next(
                        (i + 1 for i, (a, b) in enumerate(zip(p, n, strict=False)) if a != b), None
                    )
                },
                fix="expected: DataLoader draws each new iterator's worker seed from the same "
                "generator as the sampler, and persistent workers skip that draw",
            )
        )
    return out


def content_differs_from(report: Report) -> tuple[int | None, list[int], bool]:
    """With digests, the first trial of each arm epoch by epoch: (the first epoch the
    arms see different samples, every such epoch, whether epoch 1 agreed)."""
    p, n = report.arms["persistent"], report.arms["non_persistent"]
    if not p.trials or not n.trials:
        return None, [], False
    pairs = [
        (a, b)
        for a, b in zip(p.trials[0].epochs, n.trials[0].epochs, strict=False)
        if a.content_digest is not None and b.content_digest is not None
    ]
    differs = [a.epoch for a, b in pairs if a.content_digest != b.content_digest]
    if not differs:
        return None, [], False
    return differs[0], differs, pairs[0][0].content_digest == pairs[0][1].content_digest


def _digests(arm: ArmResult) -> list[tuple[int, str]]:
    """(epoch, content digest) of the arm's first trial, where digested."""
    if not arm.trials:
        return []
    return [(e.epoch, e.content_digest) for e in arm.trials[0].epochs if e.content_digest]


def check_content_repeats(report: Report) -> list[Finding]:
    """NOTE [random draws]: an arm whose every epoch sees exactly the samples of its
    first, while the other arm's epochs differ from each other: the data is random, and
    that arm draws the same values every epoch (a generator that restarts from one
    state). Only the whole run repeating counts: a deterministic Dataset repeats in both
    arms, and one epoch matching another by chance (a sample dropped the same way) is
    not a pattern."""
    by_arm = {name: _digests(arm) for name, arm in report.arms.items()}
    out = []
    for name, digests in by_arm.items():
        others = [d for other, ds in by_arm.items() if other != name for _, d in ds]
        if len(digests) < 2 or len({d for _, d in digests}) > 1 or len(set(others)) < 2:
            continue
        epochs = [e for e, _ in digests]
        label = ARM_LABEL[name]
        out.append(
            Finding(
                id="repeated-randomness",
                severity="warning",
                arm=name,
                title=f"the {label} arm repeats its random draws: epochs "
                f"{', '.join(map(str, epochs[1:]))} see exactly epoch {epochs[0]}'s samples, "
                f"while the other arm's {plural(len(others), 'epoch')} see "
                f"{plural(len(set(others)), 'different set')}",
                evidence={
                    "attribute": None,
                    "source": "content digests",
                    "arm": name,
                    "epochs_repeating_the_first": epochs[1:],
                    "distinct_epochs_by_arm": {
                        k: len({d for _, d in v}) for k, v in by_arm.items()
                    },
                    "epochs_by_arm": {k: len(v) for k, v in by_arm.items()},
                },
                fix="the random source restarts from the same state each epoch (a generator "
                "seeded once, at import or in __init__, and copied into fresh workers): draw "
                "from torch's RNG, which the DataLoader reseeds for every iterator, or seed "
                "the generator in worker_init_fn from torch.utils.data.get_worker_info().seed",
            )
        )
    return out


def check_content(report: Report, explained: Sequence[Finding] = ()) -> list[Finding]:
    """With digests: do the arms see the same samples in each epoch? See NOTE [random
    draws]; torch reseeds `random`, numpy's and torch's global RNG in every worker of
    every new iterator, and persistent workers continue the stream they were seeded
    with; so with random augmentations the arms agree in epoch 1 and then draw
    differently. Both draw fresh values every epoch: persistence changes which draws
    the model sees, not their quality (info). Repetition is the hazard, told by
    `check_content_repeats` and the state checks; a difference they explain is told
    there, not twice."""
    first, differs, agreed_first = content_differs_from(report)
    if first is None or explained:
        return []
    if agreed_first:
        by_arm = {name: _digests(arm) for name, arm in report.arms.items()}
        fresh = {k: len({d for _, d in v}) for k, v in by_arm.items()}
        epochs = {k: len(v) for k, v in by_arm.items()}
        # Said only where no epoch of either arm saw another's samples again.
        quality = ", not their quality" if fresh == epochs else ""
        return [
            Finding(
                id="rng-carried-in-workers",
                severity="info",
                arm=None,
                title=f"persistence changes which random draws the model sees from epoch "
                f"{first}{quality}: the arms agree in epoch 1 and draw differently "
                f"in epochs {', '.join(map(str, differs))}; "
                + "; ".join(
                    f"the {ARM_LABEL[k]} arm saw {plural(fresh[k], 'different set')} in "
                    f"{plural(epochs[k], 'epoch')}"
                    for k in by_arm
                ),
                evidence={
                    "epochs_differing": differs,
                    "from_epoch": first,
                    "distinct_epochs_by_arm": fresh,
                    "epochs_by_arm": epochs,
                },
                fix="nothing to fix: torch reseeds the workers' random, numpy and torch RNGs for "
                "every iterator, and persistent workers continue their seeded stream instead; "
                "if results must match across the setting, derive augmentations from the "
                "index and the epoch",
            )
        ]
    return [
        Finding(
            id="content-not-reproducible",
            severity="info",
            arm=None,
            title="samples differ between the arms already in epoch 1, with the same seed",
            evidence={"epochs_differing": differs},
            fix="the dataset draws randomness from a source loaderprof cannot seed (time, "
            "os.urandom, an unseeded generator created at import)",
        )
    ]


def check_iterable(report: Report) -> list[Finding]:
    ds_len = report.extras.get("dataset_length")
    if report.extras.get("dataset_kind") != "iterable":
        return []
    workers = int(report.config["loader"]["num_workers"])
    out = []
    for arm in report.arms.values():
        for t in arm.trials[:1]:
            for e in t.epochs[:1]:
                repeats = e.max_sample_repeats
                unsharded: tuple[str, dict[str, Any]] | None = None
                if e.duplicate_samples:
                    unsharded = (
                        f"{plural(e.duplicate_samples, 'duplicate sample')} in epoch 1, each "
                        f"sample seen up to {plural(repeats, 'time')} with "
                        f"{plural(workers, 'worker')}",
                        {
                            "samples": e.samples,
                            "distinct": e.distinct_samples,
                            "max_repeats": repeats,
                            "len": ds_len,
                        },
                    )
                elif ds_len and e.samples == workers * ds_len and workers > 1:
                    unsharded = (
                        f"epoch 1 yielded {plural(e.samples, 'sample')} = "
                        f"{plural(workers, 'worker')} × len {ds_len}",
                        {"samples": e.samples, "len": ds_len, "workers": workers},
                    )
                if unsharded is not None:
                    out.append(
                        Finding(
                            id="iterable-duplicates",
                            severity="error",
                            arm=arm.name,
                            title=f"IterableDataset not sharded: {unsharded[0]}",
                            evidence=unsharded[1],
                            fix="shard the stream in __iter__ with "
                            "torch.utils.data.get_worker_info() (id, num_workers)",
                        )
                    )
                elif ds_len and e.samples != ds_len and not report.config["loader"]["drop_last"]:
                    out.append(
                        Finding(
                            id="iterable-length",
                            severity="warning",
                            arm=arm.name,
                            title=f"IterableDataset yielded {plural(e.samples, 'sample')} in "
                            "epoch 1 but "
                            f"len() says {ds_len}",
                            evidence={"samples": e.samples, "len": ds_len},
                            fix="make __len__ match what __iter__ yields across all workers "
                            "(DataLoader warns when they disagree)",
                        )
                    )
        if out:
            break
    return out


def check_environment(report: Report) -> list[Finding]:
    out = []
    trials = [t for a in report.arms.values() for t in a.trials]
    sizes = [t.shm_size_bytes for t in trials if t.shm_size_bytes]
    if sizes:
        size = max(sizes)
        peak = max((t.shm_peak_used_bytes or 0) for t in trials)
        batch = max(((e.max_batch_bytes or 0) for t in trials for e in t.epochs), default=0)
        lo = report.config["loader"]
        prefetch = lo.get("prefetch_factor") or 2
        need = int(lo["num_workers"]) * int(prefetch) * batch
        if peak >= NEAR_LIMIT * size or need >= NEAR_LIMIT * size:
            out.append(
                Finding(
                    id="shm-near-limit",
                    severity="warning",
                    arm=None,
                    title=f"/dev/shm ({fmt_bytes(size)}) is nearly full: peak use "
                    f"{fmt_bytes(peak)}, batches in flight need about {fmt_bytes(need)}",
                    evidence={
                        "shm_size_bytes": size,
                        "shm_peak_used_bytes": peak,
                        "batches_in_flight_bytes": need,
                        "max_batch_bytes": batch,
                    },
                    fix="enlarge /dev/shm (docker --shm-size), or lower num_workers, "
                    "prefetch_factor or the batch size",
                )
            )
    limit = report.environment.get("cgroup_memory_limit_bytes")
    p = report.arms["persistent"].summary.peak_total_pss_bytes
    if limit and p is not None and p.median >= NEAR_LIMIT * limit:
        out.append(
            Finding(
                id="cgroup-memory-near-limit",
                severity="warning",
                arm="persistent",
                title=f"the run peaks at {fmt_bytes(p.median)} PSS, "
                f"{p.median / limit * 100:.0f} % of the cgroup memory limit {fmt_bytes(limit)}",
                evidence={"peak_total_pss_bytes": int(p.median), "cgroup_limit_bytes": limit},
                fix="fewer workers, a smaller per-worker Dataset copy, or a larger memory limit",
            )
        )
    return out


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
    fork = report.environment.get("start_method") or report.config["loader"]["mp_context"]
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
        "stragglers": report.config["loader"].get("in_order") is not False
        and any(w.median_batch_s is not None for t in trials for w in t.workers),
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
    repeats = [] if state else check_content_repeats(report)
    out.extend(repeats)
    out.extend(check_content(report, explained=[*state, *repeats]))
    return tuple(out)
