"""Synthetic trials with known answers, shared by the unit tests."""

from __future__ import annotations

from loaderprof.model.trials import EpochResult, Setup, TrialMemory, TrialResult
from loaderprof.model.units import MiB

__all__ = ["MiB", "make_pair", "make_trial"]


def make_trial(
    arm: str, walls: list[float], *, idle: int | None, reused: bool, index: int = 0
) -> TrialResult:
    epochs = []
    t = 0.0
    for i, w in enumerate(walls, start=1):
        if reused:
            new = (1, 2) if i == 1 else ()
            pids = (1, 2)
        else:
            pids = (10 * i + 1, 10 * i + 2)
            new = pids
        epochs.append(EpochResult(i, t, w, w / 2, 4, 128, 128 / w, pids, new))
        t += w
    mem = TrialMemory(
        200 * MiB, 20 * MiB, 10 * MiB, idle, idle, 150 * MiB, 160 * MiB, 170 * MiB, 50
    )
    return TrialResult(
        arm, index, True, t, 0, Setup(1.0, 1.1, 1.2), tuple(epochs), (), mem, (), 999
    )


def make_pair(
    p_walls: list[float],
    n_walls: list[float],
    idle_p: int | None = 20 * MiB,
    idle_n: int | None = 0,
) -> tuple[TrialResult, TrialResult]:
    return (
        make_trial("persistent", p_walls, idle=idle_p, reused=True),
        make_trial("non_persistent", n_walls, idle=idle_n, reused=False),
    )
