"""Pure: what `watch --pid` can say of a running job's pools, with what it could not see.

The findings `watch` makes where the evidence is the same from outside (NOTE [pools
from outside]): a pool idle while another works, memory that grows every inferred
epoch (`compare`'s rules: `growth_trend`, `new_memory`, `memory_growth`), workers
started again every epoch, workers left behind by the job. Each names, in its
evidence's `not_seen`, what a reading from outside could not tell, and the epochs
it counts are said to be inferred.
"""

from __future__ import annotations

import dataclasses
import itertools
import shlex
import statistics
from collections.abc import Sequence

from loaderprof.checks.growth import memory_growth
from loaderprof.checks.series import GROWTH_EPOCHS_TO_TELL, idle_growth
from loaderprof.model.attached import AttachedPool
from loaderprof.model.results import Finding
from loaderprof.units import fmt_bytes, fmt_seconds, listing, plural

_WHICH_LOADER = "which DataLoader the pool belongs to and its settings"


def _confirm(command: Sequence[str]) -> str:
    """What a restart of the job would tell, with its own command line where known."""
    cmd = shlex.join(command) if command else "COMMAND"
    return (
        f"`loaderprof watch -- {cmd}` (the job restarted under watch) sees every loader; "
        f"`loaderprof compare -- {cmd}` runs it with persistence on and off and measures "
        "the saving"
    )


def _workers(pool: AttachedPool) -> str:
    return plural(pool.workers, "worker")


def check_idle(pools: Sequence[AttachedPool], beside: dict[str, list[str]]) -> list[Finding]:
    """A pool that lived on, idle while another pool of its parent worked (a train
    pool during validation). `beside`: the pools each was idle beside."""
    out = []
    for pool in pools:
        others = beside.get(pool.id, [])
        if pool.rebuilt or not others:
            continue
        held = pool.idle_uss_bytes or pool.peak_uss_bytes
        memory = f", holding {fmt_bytes(held)} USS" if held else ""
        out.append(
            Finding(
                id="idle-pools",
                severity="info",
                title=f"pool {pool.id}'s {_workers(pool)} "
                f"{'stays' if pool.workers == 1 else 'stay'} alive and idle while pool "
                f"{listing(others)} {'works' if len(others) == 1 else 'work'}{memory}",
                evidence={
                    "pool": pool.id,
                    "workers": pool.workers,
                    "while": others,
                    "idle_workers_uss_bytes": held,
                    "not_seen": f"{_WHICH_LOADER}: that its workers persist is inferred "
                    "from their living on",
                },
                fix=f"expected where loaders take turns (train and validation); if memory "
                f"is tight, give pool {pool.id}'s loader fewer workers or "
                "persistent_workers=False",
            )
        )
    return out


def check_growth(pools: Sequence[AttachedPool]) -> list[Finding]:
    """A pool that lived on whose memory in the pauses between its inferred epochs grows
    every epoch, with new memory behind it (`compare`'s and `watch`'s rules)."""
    out = []
    for pool in pools:
        uss, rss, after = pool.idle_uss_by_epoch, pool.idle_rss_by_epoch, pool.idle_after_epochs
        if pool.rebuilt or (trend := idle_growth(uss, rss, after)) is None:
            continue
        found = memory_growth(
            {f"pool {pool.id}": (list(uss), trend)},
            {
                "pool": pool.id,
                "uss_by_epoch": list(uss),
                "rss_by_epoch": list(rss),
                "after_epochs": list(after),
                "epochs_inferred_from": pool.epochs_from,
                "not_seen": f"{_WHICH_LOADER}; epochs are pauses in the pool's CPU "
                "use, inferred, not seen",
            },
            after={f"pool {pool.id}": after},
            read=pool.idle_pauses_read,
        )
        if found.severity != "warning":
            # A running job's epochs are not ours to set: the way to tell is to watch on.
            found = dataclasses.replace(
                found,
                fix=f"watch longer (--duration): {GROWTH_EPOCHS_TO_TELL} inferred epochs tell "
                "growth that continues from memory that settles (a cache that fills once)",
            )
        out.append(found)
    return out


def check_rebuilt(pools: Sequence[AttachedPool], command: Sequence[str] = ()) -> list[Finding]:
    """A lineage whose workers were replaced while watched: its loader's workers start
    again every epoch (inferred from the births)."""
    out = []
    for pool in pools:
        if not pool.rebuilt:
            continue
        births = [g.born_s for g in pool.generations]
        gaps = [b - a for a, b in itertools.pairwise(births)]
        every = (
            f" ({fmt_seconds(gaps[0])} after the first)"
            if len(gaps) == 1
            else f" (every {fmt_seconds(statistics.median(gaps))})"
            if gaps
            else ""
        )
        out.append(
            Finding(
                id="pool-rebuilt",
                severity="info",
                title=f"pool {pool.id}'s {_workers(pool)} were started again "
                f"{'once' if pool.rebuilt == 1 else plural(pool.rebuilt, 'time')}{every}: "
                "its loader's workers do not persist between epochs",
                evidence={
                    "pool": pool.id,
                    "workers": pool.workers,
                    "generations": len(pool.generations),
                    "born_s": [round(b, 3) for b in births],
                    "not_seen": f"{_WHICH_LOADER}: whether the loader is rebuilt or iterated "
                    "without persistent_workers, and what start-up costs an epoch",
                },
                fix="iterate one DataLoader built once with persistent_workers=True, if its "
                f"start-up is worth it: {_confirm(command)}",
            )
        )
    return out


def check_left(pools: Sequence[AttachedPool], left: Sequence[int]) -> list[Finding]:
    """Workers still alive once the job's main process had exited."""
    if not left:
        return []
    owner = {w.pid: p.id for p in pools for g in p.generations for w in g.workers}
    named = sorted({owner[p] for p in left if p in owner})
    where = f" of pool {listing(named)}" if named else ""
    workers = plural(len(left), "worker process", "worker processes")
    title = f"{workers}{where} still alive after the job's main process exited"
    return [
        Finding(
            id="workers-leaked",
            severity="warning",
            title=title,
            evidence={
                "pids": list(left),
                "pools": named,
                "not_seen": f"{_WHICH_LOADER}, and why the workers stayed (nothing is "
                "signalled: they are left as found)",
            },
            fix="let every DataLoader iterator finish or delete it (and the loader) before "
            "the program exits; do not keep workers alive from a global or a daemon thread",
        )
    ]


def find(
    pools: Sequence[AttachedPool],
    beside: dict[str, list[str]],
    left: Sequence[int],
    command: Sequence[str] = (),
) -> tuple[Finding, ...]:
    """Every check a job seen from outside allows; `command`: the job's command line,
    which a fix can name."""
    return (
        *check_rebuilt(pools, command),
        *check_idle(pools, beside),
        *check_growth(pools),
        *check_left(pools, left),
    )
