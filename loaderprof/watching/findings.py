"""Pure: what a watched training run's DataLoaders got wrong, with evidence and fix.

Each check reads only the watched loaders (NOTE [watch hook]) and says what it
measured; estimates say they are estimates and name `loaderprof compare` as the
way to confirm them.
"""

from __future__ import annotations

import itertools
import shlex
import statistics
from collections import defaultdict
from collections.abc import Sequence

from loaderprof.checks.growth import (
    MORE_SCRIPT_EPOCHS,
    leaked_handles,
    memory_growth,
)
from loaderprof.checks.loader import copy_on_read_finding
from loaderprof.checks.series import copies_on_read, growth_trend, idle_growth
from loaderprof.checks.state import stale_finding, stale_in
from loaderprof.inside.frameworks import KEPT_BY_SETTING
from loaderprof.inside.procfs import HANDLE_LABELS
from loaderprof.model.results import Finding
from loaderprof.model.watch import PoolSpan, WatchedEpoch, WatchedLoader, whole_epochs
from loaderprof.units import fmt_bytes, fmt_pct, listing, noun, plural

# A non-persistent loader is a persistence candidate when its epochs' first-batch
# wait (worker start-up included) is at least this share of an epoch.
CANDIDATE_SHARE = 0.05


def check_recreated(loaders: Sequence[WatchedLoader]) -> list[Finding]:
    """Several loaders built at one site, each iterated about once: the loader is
    rebuilt every epoch, so its workers (persistent or not) are never reused."""
    # Per process: each torchrun rank builds its loaders at the same site. The HF
    # Trainer builds its train and eval loaders at one site: apart by what for.
    by_site: dict[tuple[int, str, str | None], list[WatchedLoader]] = defaultdict(list)
    for ld in loaders:
        if ld.num_workers > 0:
            by_site[(ld.pid, ld.site, ld.built_for)].append(ld)
    out = []
    for (_, site, _), group in by_site.items():
        # Iterated once each, one after another: built to be used once (a helper that
        # builds train, val and test loaders at one line is not that).
        group = [ld for ld in group if ld.epochs]
        if len(group) < 2 or any(len(ld.epochs) > 1 for ld in group):
            continue
        if any(
            b.created_s < (a.epochs[-1].end_s or a.epochs[-1].start_s)
            for a, b in itertools.pairwise(group)
        ):
            continue
        out.append(_recreated(site, group))
    return out


def _recreated(site: str, group: Sequence[WatchedLoader]) -> Finding:
    waits = [e.first_batch_s for ld in group for e in ld.epochs if e.first_batch_s]
    wait = statistics.median(waits) if waits else None
    # A framework's eval (test) loader runs once an evaluation (prediction).
    built_for = group[0].built_for
    each = {"eval": "evaluation", "test": "prediction"}.get(str(built_for), "epoch")
    what = "DataLoader" if built_for is None else f"{built_for} DataLoader"
    cost = f", each {each} waiting {wait:.2f} s for its first batch" if wait else ""
    return Finding(
        id="loader-recreated",
        severity="warning",
        title=f"{plural(len(group), what)} built at {site}, each iterated once: their "
        f"workers start again every {each}{cost}",
        evidence={
            "site": site,
            "loaders": [ld.id for ld in group],
            "persistent_workers": any(ld.persistent_workers for ld in group),
            "median_first_batch_s": None if wait is None else round(wait, 4),
        },
        fix=_rebuild_fix(group[0]),
    )


def _rebuild_fix(ld: WatchedLoader) -> str:
    """What stops the rebuilds: the framework's setting where it keeps such a loader
    under it (the HF Trainer its eval loader), else building the loader once."""
    if ld.setting is not None and ld.built_for == KEPT_BY_SETTING:
        return (
            f"set {ld.setting}=True: the framework then builds its {ld.built_for} loader "
            "once and keeps it, and its workers, from one pass to the next"
        )
    if ld.setting is not None:
        return (
            "the framework builds this loader anew for each call that needs it: make "
            "fewer such calls, or build one DataLoader yourself and pass it in"
        )
    return (
        "build the DataLoader once, before the epoch loop, and iterate it each "
        "epoch (with persistent_workers=True its workers then start once)"
    )


def _confirm(ld: WatchedLoader, command: Sequence[str]) -> str:
    """How to confirm a candidate: the watched command itself under `compare --`."""
    if command:
        return (
            f"confirm with `loaderprof compare -- {shlex.join(command)}` (your command "
            "run with persistence on and off, side by side: the saving per epoch of the "
            f"training itself), then {_turn_on(ld)}"
        )
    return (
        f"confirm with `loaderprof compare DATASET --num-workers {ld.num_workers}` (it "
        f"measures both settings side by side, memory and state included), then {_turn_on(ld)}"
    )


def _turn_on(ld: WatchedLoader) -> str:
    """The user's own switch for this loader's persistence."""
    if ld.setting is not None:
        return f"set {ld.setting}=True (the framework builds this loader)"
    return "pass persistent_workers=True"


def check_candidates(
    loaders: Sequence[WatchedLoader], command: Sequence[str] = ()
) -> list[Finding]:
    out = []
    for ld in loaders:
        done = [e for e in whole_epochs(ld.epochs) if e.wall_s]
        if ld.num_workers == 0 or ld.persistent_workers or len(done) < 2:
            continue
        # The first epoch is cold for both settings (imports, page cache); what
        # persistence would save is the start-up every later epoch pays again.
        steady = [e for e in done if e.index > 1]
        waits = [e.first_batch_s for e in steady if e.first_batch_s is not None]
        walls = [e.wall_s for e in steady if e.wall_s]
        if not waits or not walls:
            continue
        wait, wall = statistics.median(waits), statistics.median(walls)
        median_epoch = ld.wait is not None and ld.wait_epochs == "steady"
        if median_epoch and ld.wait is not None:
            # The data-wait line's own epoch, the median one by wall as it ran (see NOTE
            # [data wait]): one figure for one saving on one screen, where the median
            # wait and the median wall apart read 0.19 s beside that line's 0.12 s.
            wait, wall = ld.wait.first_s, ld.wait.epoch_s
        share = wait / wall if wall > 0 else 0.0
        if share < CANDIDATE_SHARE:
            continue
        which = (
            f"its epoch after the first waited {wait:.2f} s"
            if len(waits) == 1
            else f"its median epoch after the first (of {len(waits)}) waited {wait:.2f} s"
            if median_epoch
            else f"its {len(waits)} epochs after the first waited a median {wait:.2f} s"
        )
        startup = ld.worker_startup_s.median if ld.worker_startup_s else None
        out.append(
            Finding(
                id="persistence-candidate",
                severity="info",
                title=f"loader {ld.id} ({ld.site}) starts {plural(ld.num_workers, 'worker')} "
                f"every epoch: {which} for the first batch, {fmt_pct(share)} of a {wall:.2f} s "
                "epoch; persistent_workers=True could save up to about that per epoch",
                evidence={
                    "loader": ld.id,
                    "site": ld.site,
                    "epochs": len(done),
                    "steady_epochs": len(waits),
                    "median_first_batch_s": round(wait, 4),
                    "median_epoch_s": round(wall, 4),
                    "share": round(share, 3),
                    "worker_startup_s": None if startup is None else round(startup, 4),
                },
                fix=_confirm(ld, command),
            )
        )
    return out


def check_idle_pools(loaders: Sequence[WatchedLoader], pools: Sequence[PoolSpan]) -> list[Finding]:
    """A pool alive and idle while another loader's epoch runs: a persistent one between
    its epochs, or a non-persistent one whose iterator the loop left without ending it
    (Lightning's validation pool, alive through the next training epoch)."""
    by_id = {ld.id: ld for ld in loaders}
    # Per loader, not per pool: a non-persistent loader starts a pool every epoch.
    found: dict[str, tuple[int, list[tuple[str, WatchedEpoch]]]] = {}
    for pool in pools:
        owner = by_id[pool.loader]
        overlaps = [
            (other.id, e)
            for other in loaders
            # Another rank's loader runs beside this one by design.
            if other.id != owner.id and other.pid == owner.pid
            for e in other.epochs
            if e.end_s is not None
            and pool.start_s < e.start_s
            and e.end_s < pool.end_s
            and not any(o.start_s <= e.start_s <= (o.end_s or o.start_s) for o in owner.epochs)
        ]
        if overlaps:
            workers, seen = found.get(owner.id, (0, []))
            found[owner.id] = (max(workers, pool.workers), seen + overlaps)
    out = []
    for lid, (workers, overlaps) in found.items():
        owner = by_id[lid]
        held = owner.idle_workers_uss_bytes
        others = sorted({i for i, _ in overlaps})
        memory = f", holding {fmt_bytes(held)} USS between its epochs" if held else ""
        kind = "persistent worker" if owner.persistent_workers else "non-persistent worker"
        out.append(
            Finding(
                id="idle-pools",
                severity="info",
                title=f"loader {owner.id}'s {plural(workers, kind)} "
                f"{'stays' if workers == 1 else 'stay'} "
                f"alive and idle while {noun(len(others), 'loader')} {listing(others)} "
                f"{'runs' if len(others) == 1 else 'run'} "
                f"({plural(len(overlaps), 'epoch')}){memory}",
                evidence={
                    "loader": owner.id,
                    "site": owner.site,
                    "workers": workers,
                    "while": others,
                    "epochs_overlapped": len(overlaps),
                    "idle_workers_uss_bytes": held,
                    "persistent_workers": owner.persistent_workers,
                },
                fix=f"expected where loaders take turns (train and validation); if memory "
                f"is tight, give loader {owner.id} fewer workers or persistent_workers=False"
                if owner.persistent_workers
                else "its iterator was left alive, not exhausted (a framework's loop, a "
                "`break`): its workers end only when the iterator is dropped; if memory is "
                "tight, give this loader fewer workers",
            )
        )
    return out


def check_copy_on_read(loaders: Sequence[WatchedLoader]) -> list[Finding]:
    """Forked workers whose USS grew with what they read while RSS stayed flat, by
    `compare`'s rule (NOTE [copy-on-read])."""
    hits = [
        (ld, w)
        for ld in loaders
        if ld.start_method == "fork"
        for w in ld.workers
        if w.read_uss_growth_bytes is not None
        and copies_on_read(
            w.read_uss_growth_bytes, w.read_rss_growth_bytes or 0, w.read_start_uss_bytes or 0
        )
    ]
    if not hits:
        return []
    ld, w = max(hits, key=lambda h: h[1].read_uss_growth_bytes or 0)
    return [
        copy_on_read_finding(
            growth=w.read_uss_growth_bytes or 0,
            samples_read=w.read_samples or 0,
            rss_growth=w.read_rss_growth_bytes or 0,
            start_uss=w.read_start_uss_bytes or 0,
            affected=len(hits),
            where={"pid": w.pid, "loader": ld.id, "site": ld.site},
            spawn_hint="multiprocessing_context='forkserver' (or 'spawn') on the DataLoader",
        )
    ]


def check_stale(loaders: Sequence[WatchedLoader]) -> list[Finding]:
    """A persistent loader's workers holding a Dataset attribute the main process has
    since changed, by `compare`'s rule (NOTE [stale worker state])."""
    return [
        stale_finding(stale, {"loader": ld.id, "site": ld.site}, arm=None)
        for ld in loaders
        if ld.persistent_workers and (stale := stale_in(ld.dataset_states))
    ]


def check_growth(loaders: Sequence[WatchedLoader], more: str = MORE_SCRIPT_EPOCHS) -> list[Finding]:
    """A persistent pool whose memory between epochs grows every epoch, with new memory
    behind it, by `compare`'s rules (`growth_trend`, `new_memory`)."""
    out = []
    for ld in loaders:
        uss, rss, after = ld.idle_uss_by_epoch, ld.idle_rss_by_epoch, ld.idle_after_epochs
        if not ld.persistent_workers or (trend := idle_growth(uss, rss, after)) is None:
            continue
        name = f"loader {ld.id}'s pool of persistent workers"
        out.append(
            memory_growth(
                {name: (list(uss), trend)},
                {
                    "loader": ld.id,
                    "site": ld.site,
                    "uss_by_epoch": list(uss),
                    "rss_by_epoch": list(rss),
                    "after_epochs": list(after),
                },
                after={name: after},
                more=more,
            )
        )
    return out


def check_handles(
    loaders: Sequence[WatchedLoader], more: str = MORE_SCRIPT_EPOCHS, limit: int | None = None
) -> list[Finding]:
    """Persistent workers holding more files, connections, threads or children after
    every epoch, by `compare`'s rule (`growth_trend`), each of them named."""
    out = []
    for key in HANDLE_LABELS:
        for ld in loaders:
            if not ld.persistent_workers:
                continue
            grown = {}
            pids = []
            for w in sorted(ld.workers, key=lambda w: w.worker_id):
                series = [h[key] for h in w.handles_by_pause]
                trend = growth_trend([float(v) for v in series], 1.0)
                if trend is not None:
                    grown[f"worker {w.worker_id}"] = (series, trend)
                    pids.append(w.pid)
            if grown:
                out.append(
                    leaked_handles(
                        key,
                        grown,
                        {"loader": ld.id, "site": ld.site, "pids": pids},
                        more=more,
                        limit=limit,
                        owner=f"loader {ld.id}'s persistent ",
                    )
                )
                break
    return out


def check_leaked(loaders: Sequence[WatchedLoader], leaked: Sequence[int]) -> list[Finding]:
    """DataLoader workers still alive after the command exited (a helper of its own,
    such as a Manager it never shut down, is in `leaked_pids` but is not a worker)."""
    owner = {w.pid: ld.id for ld in loaders for w in ld.workers}
    workers = [p for p in leaked if p in owner]
    if not workers:
        return []
    named = sorted({owner[p] for p in workers})
    return [
        Finding(
            id="workers-leaked",
            severity="warning",
            title=f"{len(workers)} DataLoader worker process{'es' if len(workers) > 1 else ''} "
            f"of loader {', '.join(named)} still alive after the command exited",
            evidence={
                "pids": workers,
                "loaders": named,
                "other_processes": len(leaked) - len(workers),
            },
            fix="let every DataLoader iterator finish or delete it (and the loader) before "
            "the program exits; do not keep workers alive from a global or a daemon thread",
        )
    ]


def find(
    loaders: Sequence[WatchedLoader],
    pools: Sequence[PoolSpan],
    leaked: Sequence[int],
    command: Sequence[str] = (),
    more: str = MORE_SCRIPT_EPOCHS,
    limit: int | None = None,
) -> tuple[Finding, ...]:
    """Every watch check; `command`: the watched command, which a fix can name; `more`:
    how a growth finding's fix asks for the epochs that tell; `limit`: the open-file
    limit the command started with."""
    return (
        *check_recreated(loaders),
        *check_candidates(loaders, command),
        *check_idle_pools(loaders, pools),
        *check_growth(loaders, more),
        *check_copy_on_read(loaders),
        *check_stale(loaders),
        *check_handles(loaders, more, limit),
        *check_leaked(loaders, leaked),
    )
