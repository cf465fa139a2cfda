"""The leaked-handle finding, as `compare`'s check and `watch` both report it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loaderprof.procfs import HANDLE_LABELS
from loaderprof.results import Finding


def leaked_handles(
    key: str,
    who: str,
    series: Sequence[int],
    evidence: Mapping[str, Any],
    arm: str | None = None,
) -> Finding:
    """`who` (a persistent worker) holds more of `key` after every epoch: `series`."""
    label = HANDLE_LABELS[key]
    return Finding(
        id=f"leaked-{key}",
        severity="warning",
        title=f"{who} holds more {label} after every epoch ({' → '.join(map(str, series))})",
        evidence={**evidence, f"{key}_by_epoch": list(series)},
        fix=f"close what each epoch opens ({label}): use a context manager or open once per "
        "worker and reuse it; a persistent worker never gets a fresh start",
        arm=arm,
    )
