"""The growth findings (leaked handles, memory that grows every epoch), worded and
weighed once for `compare`'s checks and `watch` alike (NOTE [growth to tell])."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from loaderprof.checks.series import GROWTH_EPOCHS_TO_TELL, epochs_spanned
from loaderprof.inside.procfs import HANDLE_LABELS
from loaderprof.model.results import Finding
from loaderprof.units import fmt_bytes, listing, noun, plural

# Shown in a title: a longer series keeps its first and last readings.
SHOWN_READINGS = 6

# How to see the epochs that tell (NOTE [growth to tell]): compare sets them by its flag
# (and `compare -- COMMAND` stops the script after them); `watch` follows the script's
# own loop, which has no flag of loaderprof's.
MORE_EPOCHS = f"run more epochs (--epochs {GROWTH_EPOCHS_TO_TELL})"
MORE_SCRIPT_EPOCHS = f"let the script run {GROWTH_EPOCHS_TO_TELL} or more epochs"


def _series(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    shown = [fmt(v) for v in values]
    if len(shown) > SHOWN_READINGS:
        shown = [*shown[:3], "…", *shown[-2:]]
    return " → ".join(shown)


def _trend(
    trends: Mapping[str, str], epochs: int, read: int | None = None
) -> tuple[Literal["warning", "info"], str, dict[str, Any]]:
    """Severity, the clause that says what the epochs seen tell, and its evidence: a
    warning only for growth still rising over enough epochs to tell. `read`: how many
    of their pauses were read, where some were not (NOTE [pauses not read]): the
    rule counts readings."""
    grows = "grows" in trends.values()
    if read is None or read == epochs:
        said = (
            f"still rising after {plural(epochs, 'epoch')}"
            if grows
            else f"too few epochs to tell whether it levels off ({GROWTH_EPOCHS_TO_TELL} "
            "would tell)"
        )
    else:
        said = (
            f"still rising after {plural(epochs, 'epoch')} ({read} of their pauses read)"
            if grows
            else f"too few pauses read to tell whether it levels off ({read} of "
            f"{epochs}; {GROWTH_EPOCHS_TO_TELL} would tell)"
        )
    evidence: dict[str, Any] = {
        "epochs_seen": epochs,
        "epochs_to_tell": GROWTH_EPOCHS_TO_TELL,
        "trend": "grows" if grows else "too-few",
    }
    if read is not None and read != epochs:
        evidence["pauses_read"] = read
    return ("warning" if grows else "info"), said, evidence


def leaked_handles(
    key: str,
    grown: Mapping[str, tuple[Sequence[int], str]],
    evidence: Mapping[str, Any],
    arm: str | None = None,
    more: str = MORE_EPOCHS,
    limit: int | None = None,
    owner: str = "",
) -> Finding:
    """Every persistent worker (by name) that holds more of `key` after every epoch:
    its series and trend (`growth_trend`). `more`: how to see the epochs that tell.
    `limit`: the open-file limit the workers started with, which a leak of files
    reaches (`model.environment.open_files_limit`). `owner`: whose workers they are,
    said once before their names."""
    label = noun(2, HANDLE_LABELS[key])
    names = list(grown)
    epochs = max(len(s) for s, _ in grown.values())
    severity, said, trend = _trend({n: t for n, (_, t) in grown.items()}, epochs)
    reach = _limit_reached(grown, limit) if severity == "warning" and key == "files" else None
    if reach is not None:
        said += f"; {reach[0]}"
        trend = {**trend, **reach[1]}
    readings = "; ".join(f"{n}: {_series(s, str)}" for n, (s, _) in grown.items())
    return Finding(
        id=f"leaked-{key}",
        severity=severity,
        title=f"{owner}{listing(names)} hold{'s' if len(names) == 1 else ''} more {label} after "
        f"every epoch ({readings}): {said}",
        evidence={
            **evidence,
            f"{key}_by_epoch": list(next(iter(grown.values()))[0]),
            f"{key}_by_epoch_by_worker": {n: list(s) for n, (s, _) in grown.items()},
            "workers_affected": len(names),
            **trend,
        },
        fix=f"close what each epoch opens ({label}): use a context manager or open once per "
        "worker and reuse it; a persistent worker never gets a fresh start"
        if severity == "warning"
        else f"{more} to tell a leak from {label} "
        "held once per shard or chunk, which stop growing once every one is open",
        arm=arm,
    )


def _limit_reached(
    grown: Mapping[str, tuple[Sequence[int], str]], limit: int | None
) -> tuple[str, dict[str, Any]] | None:
    """When the worker that opens the most files an epoch (over its readings) reaches
    `limit`, at that rate: the clause and its evidence."""
    rate = {n: (s[-1] - s[0]) / (len(s) - 1) for n, (s, _) in grown.items() if len(s) > 1}
    rate = {n: r for n, r in rate.items() if r > 0}
    if not limit or not rate:
        return None
    worst = max(rate, key=lambda n: rate[n])
    held = grown[worst][0][-1]
    left = max(0, math.ceil((limit - held) / rate[worst]))
    clause = (
        f"at {rate[worst]:.3g} more per epoch, {worst} reaches the open-file limit ({limit}) in "
        f"about {plural(left, 'more epoch')}"
    )
    return clause, {"open_files_limit": limit, "epochs_to_limit": left}


def _after(epochs: Sequence[int]) -> str:
    """Where pauses went unread (NOTE [pauses not read]), the epochs the readings follow."""
    if not epochs or epochs_spanned(epochs) == len(epochs) - 1:
        return ""
    shown = [str(e) for e in epochs]
    if len(shown) > SHOWN_READINGS:
        shown = [*shown[:3], "…", *shown[-2:]]
    return f" after epochs {', '.join(shown)}"


def memory_growth(
    grown: Mapping[str, tuple[Sequence[float], str]],
    evidence: Mapping[str, Any],
    arm: str | None = None,
    after: Mapping[str, Sequence[int]] | None = None,
    read: int | None = None,
    more: str = MORE_EPOCHS,
) -> Finding:
    """Every persistent worker or pool (by name) whose memory between epochs grows
    after every epoch, with new memory (RSS) behind it (`new_memory`). `after`: the
    epoch each reading followed, by name, where a pause may have gone unread. `read`:
    the pauses read, where a long watch merged them (NOTE [bounded series]). `more`: how
    to see the epochs that tell."""
    after = after or {}
    names = list(grown)
    read = read or max(len(s) for s, _ in grown.values())
    # The epochs the readings reach (the last read after), where they are known.
    epochs = max((a[-1] for a in after.values() if a), default=read)
    severity, said, trend = _trend({n: t for n, (_, t) in grown.items()}, epochs, read)
    per_epoch = {
        n: (s[-1] - s[0]) / (epochs_spanned(after.get(n, ())) or len(s) - 1)
        for n, (s, _) in grown.items()
    }
    most = max(per_epoch, key=lambda n: per_epoch[n])
    readings = "; ".join(
        f"{n}{_after(after.get(n, ()))}: {_series(s, fmt_bytes)}" for n, (s, _) in grown.items()
    )
    return Finding(
        id="memory-grows-every-epoch",
        severity=severity,
        title=f"{listing(names)} hold{'s' if len(names) == 1 else ''} up to "
        f"{fmt_bytes(per_epoch[most])} more private memory after every epoch "
        f"({readings}): {said}",
        evidence={
            **evidence,
            "growth_bytes_per_epoch": int(per_epoch[most]),
            "uss_by_epoch_by_worker": {n: [int(v) for v in s] for n, (s, _) in grown.items()},
            "workers_affected": len(names),
            **trend,
        },
        fix="find what each worker keeps from one epoch to the next (a cache without a "
        "bound, objects appended per item): with persistent_workers it lives, and grows, "
        "for the whole training"
        if severity == "warning"
        else f"{more} to tell growth that "
        "continues from memory that settles (a cache that fills once, the allocator)",
        arm=arm,
    )
