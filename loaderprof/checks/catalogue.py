"""Every lifecycle check of `compare`, by id: the name the tables show and the
findings it can report. The one place a finding id is declared: gates
(`finding:ID`) are checked against it, and a report's `findings_checked` (the ids
whose check had the data to run) is read back through it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    # Without a comma: screens list the names that ran with commas between them.
    name: str
    findings: tuple[str, ...]


CATALOGUE: dict[str, Check] = {
    "state": Check(
        "stale worker state and repeated randomness", ("stale-worker-state", "repeated-randomness")
    ),
    "growth": Check(
        "leaked handles and memory growth",
        (
            "leaked-files",
            "leaked-inet",
            "leaked-threads",
            "leaked-children",
            "state-carried",
            "memory-grows-every-epoch",
        ),
    ),
    "copy-on-read": Check("copy-on-read", ("copy-on-read",)),
    "iterable": Check("iterable sharding", ("iterable-duplicates", "iterable-length")),
    "order": Check(
        "order", ("order-repeats", "order-differs-between-arms", "stream-order-repeats")
    ),
    "content": Check(
        "content digests",
        ("rng-carried-in-workers", "content-not-reproducible", "repeated-randomness"),
    ),
    "limits": Check("/dev/shm and cgroup limits", ("shm-near-limit", "cgroup-memory-near-limit")),
    "startup": Check("worker start-up", ("large-pickle", "serial-startup")),
    "threads": Check("threads", ("thread-oversubscription",)),
    "shutdown": Check("shutdown", ("workers-outlive-loader",)),
    "idle": Check("idle workers", ("idle-workers",)),
    "stragglers": Check("stragglers", ("straggler",)),
}

# Every finding id a check can report (gates may name one: `finding:ID`).
FINDING_IDS = tuple(dict.fromkeys(fid for c in CATALOGUE.values() for fid in c.findings))


# watch's checks (watching/findings.py), by the ids they can report; `compare -- COMMAND`
# runs them on each trial (NOTE [command findings]). `watch --pid` sees processes only
# (watching/attach_findings.py). watch's `--fail-on finding:ID` is checked against these.
WATCH_FINDING_IDS = (
    "loader-recreated",
    "persistence-candidate",
    "idle-pools",
    "memory-grows-every-epoch",
    "copy-on-read",
    "stale-worker-state",
    "leaked-files",
    "leaked-inet",
    "leaked-threads",
    "leaked-children",
    "workers-leaked",
)
ATTACH_FINDING_IDS = ("idle-pools", "pool-rebuilt", "workers-leaked")


def checked(check_ids: Collection[str]) -> tuple[str, ...]:
    """The finding ids the checks `check_ids` (that had their data) can report."""
    return tuple(dict.fromkeys(f for cid in check_ids for f in CATALOGUE[cid].findings))


def ran(findings_checked: Collection[str]) -> list[str]:
    """The names of the checks that ran, read back from a report's `findings_checked`
    (a finding two checks report says neither ran alone: each needs all of its own)."""
    return [c.name for c in CATALOGUE.values() if all(f in findings_checked for f in c.findings)]
