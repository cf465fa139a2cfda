"""Tidy CSV: one row per trial × epoch (pandas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loaderprof.model.results import Report, SweepReport
from loaderprof.model.trials import EpochResult, TrialResult

if TYPE_CHECKING:
    import pandas as pd


def to_frame(report: Report | SweepReport) -> pd.DataFrame:
    """A pandas DataFrame, as `--csv` writes: one row per trial × epoch of a compare
    report, one row per configuration of a sweep report."""
    if isinstance(report, SweepReport):
        return sweep_frame(report)
    return compare_frame(report)


def _epoch_row(trial: TrialResult, e: EpochResult) -> dict[str, Any]:
    """The columns every row of an epoch has, in a compare or a sweep report."""
    m = trial.memory
    return {
        "trial": trial.index,
        "epoch": e.epoch,
        "phase": "cold" if e.epoch == 1 else "steady",
        "wall_s": e.wall_s,
        "first_batch_s": e.first_batch_s,
        "samples_per_s": e.samples_per_s,
        "trial_peak_total_pss_bytes": m.peak_total_pss_bytes,
        "trial_peak_worker_uss_bytes": m.peak_worker_uss_bytes,
    }


def compare_frame(report: Report) -> pd.DataFrame:
    """One row per trial × epoch, warm-up trials included (and marked)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for arm in report.arms.values():
        for trial in (*arm.warmup_trials, *arm.trials):
            for e in trial.epochs:
                row = _epoch_row(trial, e)
                rows.append(
                    {
                        "arm": arm.name,
                        "persistent": arm.persistent,
                        "trial": trial.index,
                        "warmup": trial.warmup,
                        # See NOTE [timing and memory trials]. Memory trials' epoch
                        # times feed no statistic.
                        "role": trial.role,
                        "trial_complete": trial.complete,
                        "epoch": e.epoch,
                        "phase": row["phase"],
                        "start_s": e.start_s,
                        "wall_s": e.wall_s,
                        "first_batch_s": e.first_batch_s,
                        "batches": e.batches,
                        "samples": e.samples,
                        "samples_per_s": e.samples_per_s,
                        "workers": len(e.worker_pids),
                        "new_workers": len(e.new_worker_pids),
                        "worker_pids": " ".join(map(str, e.worker_pids)),
                        "trial_peak_total_pss_bytes": row["trial_peak_total_pss_bytes"],
                        "trial_peak_worker_uss_bytes": row["trial_peak_worker_uss_bytes"],
                        "trial_idle_workers_uss_bytes": trial.memory.idle_workers_uss_bytes,
                    }
                )
    return pd.DataFrame(rows)


def to_csv(report: Report) -> str:
    text: str = compare_frame(report).to_csv(index=False)
    return text


def sweep_frame(report: SweepReport) -> pd.DataFrame:
    """One row per configuration × trial × epoch."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for p in report.points:
        point = {
            "config": p.label,
            "num_workers": p.num_workers,
            "prefetch_factor": p.prefetch_factor,
            "mp_context": p.mp_context,
            "persistent": p.persistent,
            "frontier": p.frontier,
        }
        for trial in p.trials:
            rows += [point | _epoch_row(trial, e) for e in trial.epochs]
    return pd.DataFrame(rows)


def sweep_csv(report: SweepReport) -> str:
    text: str = sweep_frame(report).to_csv(index=False)
    return text
