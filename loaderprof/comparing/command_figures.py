"""A `compare -- COMMAND` arm's figures beyond its epoch walls: where its epochs wait
for data (NOTE [data wait]) and, with --max-batches, its steady epoch projected to the
loader's len() (NOTE [cut epochs])."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from loaderprof.analysis.projection import pooled_interval, project_wall
from loaderprof.model.command import CommandEpoch, CommandTrial
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.metrics import Stat


def arm_waits(trials: Sequence[CommandTrial]) -> tuple[WaitSplit | None, WaitSplit | None]:
    """(cold, steady): the median first epoch, and the median steady epoch of all the
    arm's trials, each an epoch that ran, whole (NOTE [data wait]): of 2 trials, the
    median trial's median epoch would be the faster trial's, half their gap from the
    table's median of trials."""
    cold = WaitSplit.of(t.epochs[0].wait for t in trials if t.epochs)
    steady = WaitSplit.of(e.wait for t in trials for e in t.epochs[1:])
    return cold, steady


def _interval(e: CommandEpoch) -> tuple[float, int] | None:
    """(first to last batch, batches between) of an epoch whose stamps say it."""
    if e.first_batch_s is None or e.last_batch_s is None or e.batches < 2:
        return None
    return e.last_batch_s - e.first_batch_s, e.batches - 1


def projected_steady(trial: CommandTrial, cut_at: int) -> float | None:
    """The trial's median steady epoch (see NOTE [cut epochs]), each cut epoch projected
    to the loader's len() by compare's rule (analysis/projection.py): its wall plus
    the batches it left out at the trial's pooled per-batch time."""
    stat = Stat.of([e.wall_s for e in _projected_epochs(trial, cut_at)[1:]])
    return None if stat is None else stat.median


def _projected_epochs(trial: CommandTrial, cut_at: int) -> tuple[CommandEpoch, ...]:
    spans = [s for e in trial.epochs[1:] if (s := _interval(e)) is not None]
    step = pooled_interval(spans)
    return tuple(_projected(e, cut_at, step) for e in trial.epochs)


def _projected(e: CommandEpoch, cut_at: int, step: float | None) -> CommandEpoch:
    """The main loader's cut pass at its len() by the trial's pooled per-batch time, the
    other loaders' passes at theirs (see NOTE [epoch of the training])."""
    wall = e.wall_s
    if e.cut and e.planned_batches:
        wall = project_wall(wall, e.batches, e.planned_batches, cut_at, step)
    if e.others_full_s is not None:
        wall += e.others_full_s - e.others_s
    return e if wall == e.wall_s else dataclasses.replace(e, wall_s=wall)


def project_trials(trials: Sequence[CommandTrial], cut_at: int | None) -> list[CommandTrial]:
    """The trials with each cut epoch's wall projected to the loader's len() (NOTE [cut
    epochs]); as they are without --max-batches."""
    if cut_at is None:
        return list(trials)
    return [dataclasses.replace(t, epochs=_projected_epochs(t, cut_at)) for t in trials]


def arm_projected(trials: Sequence[CommandTrial], cut_at: int | None) -> Stat | None:
    if cut_at is None:
        return None
    return Stat.of([v for t in trials if (v := projected_steady(t, cut_at)) is not None])
