"""Tidy CSV: one row per trial × epoch (pandas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loaderprof.results import Report, SweepReport

if TYPE_CHECKING:
    import pandas as pd


def to_frame(report: Report | SweepReport) -> pd.DataFrame:
    """A pandas DataFrame, as `--csv` writes: one row per trial × epoch of a compare
    report, one row per configuration of a sweep report."""
    if isinstance(report, SweepReport):
        return sweep_frame(report)
    return compare_frame(report)


def compare_frame(report: Report) -> pd.DataFrame:
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for arm in report.arms.values():
        for trial in (*arm.warmup_trials, *arm.trials):
            m = trial.memory
            for e in trial.epochs:
                rows.append(
                    {
                        "arm": arm.name,
                        "persistent": arm.persistent,
                        "trial": trial.index,
                        "warmup": trial.warmup,
                        "trial_complete": trial.complete,
                        "epoch": e.epoch,
                        "phase": "cold" if e.epoch == 1 else "steady",
                        "start_s": e.start_s,
                        "wall_s": e.wall_s,
                        "first_batch_s": e.first_batch_s,
                        "batches": e.batches,
                        "samples": e.samples,
                        "samples_per_s": e.samples_per_s,
                        "workers": len(e.worker_pids),
                        "new_workers": len(e.new_worker_pids),
                        "worker_pids": " ".join(map(str, e.worker_pids)),
                        "trial_peak_total_pss_bytes": m.peak_total_pss_bytes,
                        "trial_peak_worker_uss_bytes": m.peak_worker_uss_bytes,
                        "trial_idle_workers_uss_bytes": m.idle_workers_uss_bytes,
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
        for trial in p.trials:
            m = trial.memory
            for e in trial.epochs:
                rows.append(
                    {
                        "config": p.label,
                        "num_workers": p.num_workers,
                        "prefetch_factor": p.prefetch_factor,
                        "mp_context": p.mp_context,
                        "persistent": p.persistent,
                        "frontier": p.frontier,
                        "trial": trial.index,
                        "epoch": e.epoch,
                        "phase": "cold" if e.epoch == 1 else "steady",
                        "wall_s": e.wall_s,
                        "first_batch_s": e.first_batch_s,
                        "samples_per_s": e.samples_per_s,
                        "trial_peak_total_pss_bytes": m.peak_total_pss_bytes,
                        "trial_peak_worker_uss_bytes": m.peak_worker_uss_bytes,
                    }
                )
    return pd.DataFrame(rows)


def sweep_csv(report: SweepReport) -> str:
    text: str = sweep_frame(report).to_csv(index=False)
    return text
