"""Per-arm summaries: pure functions of measured trials.

Epoch 1 (cold: every worker starts) and epochs 2..N (steady) are different
quantities and are never averaged together; persistence changes the steady
epochs. Steady epochs are pooled over trials; the grouped values (one group per
trial, NOTE [trial is the unit]) feed the comparison and the gates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loaderprof.inside.procfs import PAGE
from loaderprof.measure import readings
from loaderprof.model.datawait import WaitSplit
from loaderprof.model.results import ARM_LABEL, ArmSummary, Stat, TrialResult

NOISY_REL_IQR = 0.10


def _measured(trials: Sequence[TrialResult]) -> list[TrialResult]:
    """The trials that ran to their end: a failed or stopped one stays in the report
    (its epochs, its error) but in no figure, as the report says; its peaks stop
    short of what a whole trial reaches."""
    return [t for t in trials if t.epochs and t.complete]


def _timed(trials: Sequence[TrialResult]) -> list[TrialResult]:
    """See NOTE [timing and memory trials]. The trials whose epoch times count (the
    sampler held still in them), not the memory trials."""
    return [t for t in _measured(trials) if t.times_epochs]


def _memory_source(trials: Sequence[TrialResult], attr: str) -> list[TrialResult]:
    """The trials a memory figure comes from: peaks (reached inside epochs) and the
    set-up baseline from the trials sampled deeply throughout, where a reading of the
    set-up is waited for (NOTE [sampled pauses]); a timing trial's last walk before
    its loader may date from before its Dataset was built. What is read in the pauses
    (idle workers) from every trial that took pauses."""
    if attr.startswith(("peak_", "setup_")):
        return [t for t in _measured(trials) if t.role != "timing"]
    return _measured(trials)


Groups = list[list[float]]


def _flat(groups: Groups) -> list[float]:
    return [v for g in groups for v in g]


def _memory_trials(trials: Sequence[TrialResult]) -> list[TrialResult]:
    return [t for t in _measured(trials) if t.role == "memory"]


def _cold(trials: Sequence[TrialResult]) -> Groups:
    return [[t.epochs[0].wall_s] for t in trials if t.epochs and t.epochs[0].epoch == 1]


def _steady(trials: Sequence[TrialResult]) -> Groups:
    return [[e.wall_s for e in t.epochs if e.epoch >= 2] for t in trials]


def _first_batch(trials: Sequence[TrialResult]) -> Groups:
    return [
        [e.first_batch_s for e in t.epochs if e.epoch >= 2 and e.first_batch_s is not None]
        for t in trials
    ]


def cold_groups(trials: Sequence[TrialResult]) -> Groups:
    """Per trial: its cold epoch's wall (NOTE [trial is the unit])."""
    return _cold(_timed(trials))


def steady_groups(trials: Sequence[TrialResult]) -> Groups:
    """Per trial: the walls of its steady epochs."""
    return _steady(_timed(trials))


def first_batch_groups(trials: Sequence[TrialResult]) -> Groups:
    """Per trial: the first-batch waits of its steady epochs."""
    return _first_batch(_timed(trials))


# See NOTE [spread of an arm]. The memory trials' epochs inform each arm's spread (not
# its level, which their sampling shifts), metric by metric.
_SPREAD_OF: dict[str, Callable[[Sequence[TrialResult]], Groups]] = {
    "steady": _steady,
    "cold": _cold,
    "first_batch": _first_batch,
}


def spread_groups(trials: Sequence[TrialResult], metric: str) -> Groups:
    """The memory trials' values of a timing metric, per trial (NOTE [spread of an arm])."""
    of = _SPREAD_OF.get(metric)
    return of(_memory_trials(trials)) if of else []


def memory_groups(trials: Sequence[TrialResult], attr: str) -> Groups:
    """Per trial: its one figure of `attr` (a peak, an idle level), where measured."""
    values = (getattr(t.memory, attr) for t in _memory_source(trials, attr))
    return [[float(v)] for v in values if v is not None]


def cold_walls(trials: Sequence[TrialResult]) -> list[float]:
    return _flat(cold_groups(trials))


def steady_walls(trials: Sequence[TrialResult]) -> list[float]:
    return _flat(steady_groups(trials))


def steady_first_batches(trials: Sequence[TrialResult]) -> list[float]:
    return _flat(first_batch_groups(trials))


def summarize_arm(trials: Sequence[TrialResult]) -> ArmSummary:
    measured = _measured(trials)
    timed = _timed(trials)
    cold_fb = [
        t.epochs[0].first_batch_s
        for t in timed
        if t.epochs[0].epoch == 1 and t.epochs[0].first_batch_s is not None
    ]
    sps = [
        e.samples_per_s
        for t in timed
        for e in t.epochs
        if e.epoch >= 2 and e.samples_per_s is not None
    ]
    startup = [w.startup_s for t in timed for w in t.workers if w.startup_s is not None]

    def mem(attr: str) -> Stat | None:
        return Stat.of(_flat(memory_groups(trials, attr)))

    return ArmSummary(
        trials=len(timed),
        cold_epoch_s=Stat.of(cold_walls(measured)),
        steady_epoch_s=Stat.of(steady_walls(measured)),
        first_batch_s=Stat.of(steady_first_batches(measured)),
        cold_first_batch_s=Stat.of(cold_fb),
        worker_startup_s=Stat.of(startup),
        steady_samples_per_s=Stat.of(sps),
        peak_total_pss_bytes=mem("peak_total_pss_bytes"),
        peak_worker_uss_bytes=mem("peak_worker_uss_bytes"),
        peak_workers_uss_bytes=mem("peak_workers_uss_bytes"),
        idle_workers_uss_bytes=mem("idle_workers_uss_bytes"),
        idle_workers_pss_bytes=mem("idle_workers_pss_bytes"),
        workers_reused=workers_reused(measured),
        worker_processes=sum(len(t.workers) for t in measured),
        peak_main_pss_bytes=mem("peak_main_pss_bytes"),
        shutdown_s=Stat.of(
            [
                t.wall_parts.shutdown_s
                for t in timed
                if t.wall_parts is not None and t.wall_parts.shutdown_s is not None
            ]
        ),
        setup_main_pss_bytes=mem("setup_main_pss_bytes"),
        steady_val_s=Stat.of([e.val_s for t in timed for e in t.epochs[1:] if e.val_s is not None]),
        val_train_pool_uss_bytes=mem("val_train_pool_uss_bytes"),
        cold_wait=WaitSplit.of(t.epochs[0].wait for t in timed if t.epochs[0].epoch == 1),
        steady_wait=WaitSplit.of(e.wait for t in timed for e in t.epochs if e.epoch >= 2),
        peak_worker_processes=peak_worker_processes(trials),
    )


def peak_worker_processes(trials: Sequence[TrialResult]) -> int | None:
    """The most DataLoader worker processes one rank ran at once, as measured.

    Per trial, the larger of two counts of distinct worker PIDs: the most alive at
    one sampling tick (`TrialMemory.peak_worker_processes`; None when sampling was
    off), and the most seen in one epoch (those that served a batch or started in it).
    Persistent workers are the same PIDs every epoch and non-persistent ones are new
    each epoch, so neither is summed over epochs. The largest over trials; None when
    no trial measured an epoch.
    """
    return max(
        (
            max(
                t.memory.peak_worker_processes or 0,
                *(len(set(e.worker_pids) | set(e.new_worker_pids)) for e in t.epochs),
            )
            for t in trials
            if t.epochs
        ),
        default=None,
    )


def workers_reused(trials: Sequence[TrialResult]) -> bool | None:
    """True: epochs 2..N ran on the workers of epoch 1. False: every epoch started
    its own workers. None: neither (or nothing to tell from). One rule for compare
    and watch (`measure.readings.workers_reused`)."""
    return readings.workers_reused(
        [(e.epoch, e.new_worker_pids, e.worker_pids) for e in t.epochs] for t in trials
    )


def noise_warnings(name: str, s: ArmSummary, tightens: str = "the comparison") -> list[str]:
    """The arm named as every table names it ("non-persistent", not its key)."""
    name = ARM_LABEL.get(name, name)
    out = []
    for label, stat in (("steady epoch", s.steady_epoch_s), ("cold epoch", s.cold_epoch_s)):
        if stat is not None and stat.n >= 3 and stat.rel_iqr > NOISY_REL_IQR:
            out.append(
                f"{name}: {label} times are noisy (IQR {stat.rel_iqr * 100:.0f} % of the median, "
                f"n={stat.n}); more --epochs or --trials would tighten {tightens}"
            )
    return out


# The per-arm memory metrics of `arm_groups`: read from /proc, in pages.
MEMORY_METRICS = ("peak_worker_uss", "peak_total_pss", "idle_workers_uss", "peak_main_pss")


def reading_resolution(metric: str, environment: Mapping[str, Any] | None = None) -> float:
    """The step an `arm_groups` metric is read in, where it is coarse enough for trial
    figures to agree exactly (NOTE [reading resolution]): the measuring machine's page
    (this one's for a report that predates `page_bytes`); 0 where it is not."""
    if metric not in MEMORY_METRICS:
        return 0.0
    return float((environment or {}).get("page_bytes") or PAGE)


def arm_groups(trials: Sequence[TrialResult]) -> dict[str, Groups]:
    """The values behind each gateable per-arm metric, grouped by trial."""
    measured = _timed(trials)
    return {
        "steady_epoch_s": steady_groups(measured),
        "cold_epoch_s": cold_groups(measured),
        "first_batch_s": first_batch_groups(measured),
        "worker_startup_s": [
            [w.startup_s for w in t.workers if w.startup_s is not None] for t in measured
        ],
        "steady_samples_per_s": [
            [e.samples_per_s for e in t.epochs if e.epoch >= 2 and e.samples_per_s is not None]
            for t in measured
        ],
        "peak_worker_uss": memory_groups(trials, "peak_worker_uss_bytes"),
        "peak_total_pss": memory_groups(trials, "peak_total_pss_bytes"),
        "idle_workers_uss": memory_groups(trials, "idle_workers_uss_bytes"),
        "peak_main_pss": memory_groups(trials, "peak_main_pss_bytes"),
    }
