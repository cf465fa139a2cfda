"""NOTE [short epochs]: project epochs cut to N batches onto full-length epochs.

Persistence changes what happens at an epoch's start (worker start-up, the first
batch) and in the pause between epochs; that cost does not grow with the epoch's
length. So epochs may be cut to `--max-batches` batches and projected: a cut
epoch's wall plus the batches it did not run times the trial's per-batch time
once batches flow (from first to last batch, pooled over the trial's steady
epochs). `--min-gain` and the verdict then apply to the full epoch: 0.3 s saved
on a 20 s epoch is 1.5 %, not the 60 % a short epoch shows.

Why pooled over the trial: the per-batch time is multiplied by every batch the
cut left out (a thousand or more), so its noise dominates the projection. From
one cut epoch of 20 batches it varied by a few per cent between epochs; a
trial's steady epochs share its process and its steady rate, and pooling them
divides that noise by about the square root of their number, where the start-up
cost, the thing persistence changes, stays each epoch's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loaderprof.model.metrics import Stat
from loaderprof.model.results import Projection
from loaderprof.model.trials import EpochResult, TrialResult


def batch_interval(e: EpochResult) -> float | None:
    """Seconds per batch once batches flow: first to last batch over the batches between."""
    if e.first_batch_s is None or e.last_batch_s is None or e.batches < 2:
        return None
    return (e.last_batch_s - e.first_batch_s) / (e.batches - 1)


def full_batches(
    trials: Sequence[TrialResult], epoch_samples: int | None, batch_size: int | None
) -> int | None:
    """Batches in a full epoch: from --epoch-samples, else the loader's own length."""
    if epoch_samples is not None:
        size = batch_size or 1
        return -(-epoch_samples // size)
    return next((t.full_batches for t in trials if t.full_batches), None)


def pooled_interval(spans: Iterable[tuple[float, int]]) -> float | None:
    """Seconds per batch over epochs' (first to last batch, batches between) spans."""
    pairs = list(spans)
    gaps = sum(g for _, g in pairs)
    return sum(s for s, _ in pairs) / gaps if gaps > 0 else None


def trial_batch_interval(t: TrialResult) -> float | None:
    """A trial's seconds per batch once batches flow, pooled over its steady epochs
    (over all of them when it ran one)."""
    flowing = [e for e in t.epochs if batch_interval(e) is not None]
    steady = [e for e in flowing if e.epoch >= 2] or flowing
    return pooled_interval(
        ((e.last_batch_s or 0.0) - (e.first_batch_s or 0.0), e.batches - 1) for e in steady
    )


def project_wall(wall_s: float, batches: int, full: int, cut_at: int, step: float | None) -> float:
    """A cut epoch's wall at `full` batches; a whole epoch (or one too short to tell)
    as it was measured."""
    if batches < cut_at or batches >= full or step is None:
        return wall_s
    return wall_s + (full - batches) * step


def _projected(e: EpochResult, full: int, cut_at: int, step: float | None) -> EpochResult:
    return dataclasses.replace(e, wall_s=project_wall(e.wall_s, e.batches, full, cut_at, step))


def project_trials(trials: Sequence[TrialResult], full: int, cut_at: int) -> list[TrialResult]:
    """The trials with every cut epoch's wall replaced by its projected full wall."""
    return [
        dataclasses.replace(
            t,
            epochs=tuple(_projected(e, full, cut_at, trial_batch_interval(t)) for e in t.epochs),
        )
        for t in trials
    ]


def describe(
    cut_at: int,
    full: int | None,
    arms: Mapping[str, Sequence[TrialResult]],
    projected: Mapping[str, Sequence[TrialResult]],
    unavailable: str | None = None,
) -> Projection:
    def steady(trials: Sequence[TrialResult], f: Any) -> Stat | None:
        return Stat.of([v for t in trials for e in t.epochs if e.epoch >= 2 if (v := f(e))])

    return Projection(
        max_batches=cut_at,
        full_batches=full,
        batch_interval_s={name: steady(ts, batch_interval) for name, ts in arms.items()},
        steady_epoch_s={name: steady(ts, lambda e: e.wall_s) for name, ts in projected.items()},
        unavailable=unavailable,
    )
