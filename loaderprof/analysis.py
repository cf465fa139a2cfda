"""Summaries, comparison and verdict: pure functions of measured trials.

Epoch 1 (cold: every worker starts) and epochs 2..N (steady) are different
quantities and are never averaged together; persistence changes the steady
epochs. Steady epochs are pooled over trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from loaderprof.results import (
    ArmSummary,
    Comparison,
    MetricValue,
    Ratio,
    Report,
    Stat,
    TrialResult,
    Verdict,
)
from loaderprof.units import fmt_bytes, fmt_ratio, fmt_seconds

BOOTSTRAP_RESAMPLES = 4000
NOISY_REL_IQR = 0.10
ALPHA = 0.05


def _measured(trials: Sequence[TrialResult]) -> list[TrialResult]:
    return [t for t in trials if t.epochs]


def cold_walls(trials: Sequence[TrialResult]) -> list[float]:
    return [t.epochs[0].wall_s for t in _measured(trials) if t.epochs[0].epoch == 1]


def steady_walls(trials: Sequence[TrialResult]) -> list[float]:
    return [e.wall_s for t in _measured(trials) for e in t.epochs if e.epoch >= 2]


def steady_first_batches(trials: Sequence[TrialResult]) -> list[float]:
    return [
        e.first_batch_s
        for t in _measured(trials)
        for e in t.epochs
        if e.epoch >= 2 and e.first_batch_s is not None
    ]


def summarize_arm(trials: Sequence[TrialResult]) -> ArmSummary:
    measured = _measured(trials)
    cold_fb = [
        t.epochs[0].first_batch_s
        for t in measured
        if t.epochs[0].epoch == 1 and t.epochs[0].first_batch_s is not None
    ]
    sps = [
        e.samples_per_s
        for t in measured
        for e in t.epochs
        if e.epoch >= 2 and e.samples_per_s is not None
    ]
    startup = [w.startup_s for t in measured for w in t.workers if w.startup_s is not None]

    def mem(attr: str) -> Stat | None:
        vals = [getattr(t.memory, attr) for t in measured]
        return Stat.of([v for v in vals if v is not None])

    return ArmSummary(
        trials=len(measured),
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
                for t in measured
                if t.wall_parts is not None and t.wall_parts.shutdown_s is not None
            ]
        ),
        setup_main_pss_bytes=mem("setup_main_pss_bytes"),
        peak_worker_processes=max(
            (
                t.memory.peak_worker_processes
                for t in measured
                if t.memory.peak_worker_processes is not None
            ),
            default=None,
        ),
    )


def workers_reused(trials: Sequence[TrialResult]) -> bool | None:
    """True: epochs 2..N ran on the workers of epoch 1. False: every epoch started
    its own workers. None: neither (or nothing to tell from)."""
    reused = fresh = True
    seen_steady = False
    for t in trials:
        started_so_far: set[int] = set()
        for e in t.epochs:
            new, served = set(e.new_worker_pids), set(e.worker_pids)
            if e.epoch >= 2:
                seen_steady = True
                if new or not served <= started_so_far:
                    reused = False
                if not new or not served <= new:
                    fresh = False
            started_so_far |= new
    if not seen_steady:
        return None
    if reused and not fresh:
        return True
    if fresh and not reused:
        return False
    return None


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], seed: int) -> Ratio | None:
    """median(a) / median(b) with a percentile bootstrap 95 % interval."""
    if not a or not b:
        return None
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    mb = float(np.median(xb))
    if mb <= 0:
        return None
    value = float(np.median(xa)) / mb
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(xa, size=(BOOTSTRAP_RESAMPLES, xa.size)), axis=1)
    rb = np.median(rng.choice(xb, size=(BOOTSTRAP_RESAMPLES, xb.size)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = ra / rb
    ratios = ratios[np.isfinite(ratios)]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return Ratio(value, float(lo), float(hi))


def bootstrap_median(values: Sequence[float], seed: int) -> tuple[float, float, float] | None:
    """(median, low, high): the median with a percentile bootstrap 95 % interval."""
    if not values:
        return None
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    if x.size == 1:
        return med, med, med
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(x, size=(BOOTSTRAP_RESAMPLES, x.size)), axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return med, float(lo), float(hi)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value; None when either side is empty."""
    if not a or not b:
        return None
    from scipy.stats import mannwhitneyu

    if len(set(a) | set(b)) == 1:
        return 1.0
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def trial_values(trials: Sequence[TrialResult], attr: str) -> list[float]:
    vals = [getattr(t.memory, attr) for t in _measured(trials)]
    return [float(v) for v in vals if v is not None]


def break_even_epochs(cold_extra_s: float, saved_per_epoch_s: float) -> int | None:
    """Smallest epoch count N ≥ 2 at which cold_p + (N-1)·steady_p ≤ cold_np + (N-1)·steady_np."""
    if saved_per_epoch_s <= 0:
        return None
    if cold_extra_s <= 0:
        return 2
    return 1 + max(1, math.ceil(cold_extra_s / saved_per_epoch_s))


def compare(
    persistent: Sequence[TrialResult],
    non_persistent: Sequence[TrialResult],
    p_sum: ArmSummary,
    np_sum: ArmSummary,
    *,
    seed: int,
    train_epochs: int,
    memory_budget_bytes: int | None = None,
) -> Comparison:
    saved = None
    if p_sum.steady_epoch_s and np_sum.steady_epoch_s:
        saved = np_sum.steady_epoch_s.median - p_sum.steady_epoch_s.median
    cold_extra = 0.0
    if p_sum.cold_epoch_s and np_sum.cold_epoch_s:
        cold_extra = p_sum.cold_epoch_s.median - np_sum.cold_epoch_s.median

    def diff(a: Stat | None, b: Stat | None) -> int | None:
        return None if a is None or b is None else int(a.median - b.median)

    steady_p, steady_np = steady_walls(persistent), steady_walls(non_persistent)
    steady_ratio = bootstrap_ratio(steady_p, steady_np, seed)
    steady_pval = mann_whitney_p(steady_p, steady_np)
    # Break-even and totals only count a saving the statistics support.
    significant = significant_direction(steady_ratio, steady_pval) == "saving"
    be = break_even_epochs(cold_extra, saved) if saved is not None and significant else None
    pss_p = trial_values(persistent, "peak_total_pss_bytes")
    pss_np = trial_values(non_persistent, "peak_total_pss_bytes")
    over = None
    if memory_budget_bytes is not None and p_sum.peak_total_pss_bytes is not None:
        over = p_sum.peak_total_pss_bytes.median > memory_budget_bytes
    total = None
    if saved is not None:
        total = saved * (train_epochs - 1) - max(0.0, cold_extra)
    return Comparison(
        steady_epoch_ratio=steady_ratio,
        cold_epoch_ratio=bootstrap_ratio(
            cold_walls(persistent), cold_walls(non_persistent), seed + 1
        ),
        first_batch_ratio=bootstrap_ratio(
            steady_first_batches(persistent), steady_first_batches(non_persistent), seed + 2
        ),
        saved_s_per_epoch=saved,
        extra_idle_memory_bytes=diff(p_sum.idle_workers_uss_bytes, np_sum.idle_workers_uss_bytes),
        extra_peak_pss_bytes=diff(p_sum.peak_total_pss_bytes, np_sum.peak_total_pss_bytes),
        break_even_epochs=be,
        train_epochs=train_epochs,
        saved_s_total=total,
        steady_epoch_p=steady_pval,
        cold_epoch_p=mann_whitney_p(cold_walls(persistent), cold_walls(non_persistent)),
        first_batch_p=mann_whitney_p(
            steady_first_batches(persistent), steady_first_batches(non_persistent)
        ),
        peak_total_pss_ratio=bootstrap_ratio(pss_p, pss_np, seed + 3),
        peak_total_pss_p=mann_whitney_p(pss_p, pss_np),
        memory_budget_bytes=memory_budget_bytes,
        over_budget=over,
    )


def _pct(ratio: float) -> str:
    """How much faster or slower, in words that stay readable for tiny ratios:
    "93 %", or "330×" where a percentage would read "100 %"."""
    if 0 < ratio < 0.05:
        return f"{1 / ratio:.0f}×"
    return f"{abs(1 - ratio) * 100:.0f} %"


Direction = Literal["saving", "loss"]


def significant_direction(ratio: Ratio | None, p: float | None) -> Direction | None:
    """The one test of a significant difference in a persistent ÷ non-persistent ratio:
    its 95 % interval lies on one side of 1 and the Mann-Whitney p is below ALPHA.
    "saving": significantly below 1; "loss": significantly above 1; None: neither."""
    if ratio is None or p is None or not p < ALPHA:
        return None
    if ratio.ci_high < 1.0:
        return "saving"
    if ratio.ci_low > 1.0:
        return "loss"
    return None


@dataclass(frozen=True)
class _Evidence:
    """What the verdict weighs: the steady-epoch ratio, its test, and both in words."""

    ratio: Ratio
    saved_s: float
    direction: Direction | None
    # "ratio 0.50, 95 % CI 0.48–0.52, Mann-Whitney p=0.01"
    interval: str
    # What the persistent workers hold between epochs.
    memory: str


def _evidence(comparison: Comparison, p_sum: ArmSummary, r: Ratio, saved: float) -> _Evidence:
    idle = p_sum.idle_workers_uss_bytes.median if p_sum.idle_workers_uss_bytes else None
    memory = (
        f"persistent workers hold {fmt_bytes(idle)} of private memory (USS) between epochs"
        if idle is not None
        else "memory between epochs was not sampled (--sample-interval 0 or --idle-ms 0), "
        "so its cost is unknown"
    )
    p = comparison.steady_epoch_p
    p_text = f", Mann-Whitney p={p:.3g}" if p is not None else ""
    return _Evidence(
        ratio=r,
        saved_s=saved,
        direction=significant_direction(r, p),
        interval=f"ratio {fmt_ratio(r.value)}, 95 % CI {fmt_ratio(r.ci_low)}–"
        f"{fmt_ratio(r.ci_high)}{p_text}",
        memory=memory,
    )


def verdict(comparison: Comparison, p_sum: ArmSummary, *, min_gain: float) -> Verdict:
    """enable: a significant saving of at least min_gain. keep_off: no significant
    gain (or a loss) while persistence holds memory. neutral: anything else."""
    r = comparison.steady_epoch_ratio
    saved = comparison.saved_s_per_epoch
    if r is None or saved is None:
        return Verdict(
            "neutral",
            "Not enough steady epochs were measured to decide.",
            ("need at least one steady epoch (epoch ≥ 2) in each arm",),
        )
    ev = _evidence(comparison, p_sum, r, saved)
    if comparison.over_budget and comparison.memory_budget_bytes is not None:
        return _over_budget_verdict(p_sum, ev, comparison.memory_budget_bytes)
    if ev.direction == "saving" and r.value <= 1.0 - min_gain:
        return _enable_verdict(comparison, ev)
    if ev.direction == "loss":
        return Verdict(
            "keep_off",
            "Keep persistent_workers off: it makes steady epochs slower.",
            (
                f"steady epochs are {_pct(r.value)} slower with persistent workers ({ev.interval})",
                ev.memory,
            ),
        )
    if ev.direction == "saving":
        return Verdict(
            "neutral",
            f"Either way: persistence saves a little time ({fmt_seconds(saved)} per epoch).",
            (
                f"steady epochs are {_pct(r.value)} faster ({ev.interval}), a real but small "
                f"saving (below the {min_gain * 100:.0f} % worth enabling for)",
                ev.memory,
            ),
        )
    n = p_sum.steady_epoch_s.n if p_sum.steady_epoch_s else 0
    if r.ci_high < 1.0 or r.ci_low > 1.0:
        # The interval is on one side but the test has too few epochs to confirm it.
        faster = "faster" if r.ci_high < 1.0 else "slower"
        return Verdict(
            "neutral",
            "Not decided: the difference is not significant with this many epochs.",
            (
                f"steady epochs look {_pct(r.value)} {faster} with persistent workers "
                f"({ev.interval}), but too few steady epochs were measured for the rank test "
                f"to confirm it (n={n} per arm): run more --epochs or --trials",
                ev.memory,
            ),
            decided=False,
        )
    if r.ci_low <= 1.0 - min_gain:
        # NOTE [no gain needs evidence]: "no gain" is a claim of its own; the interval
        # must rule out a saving worth enabling for before it may say keep_off.
        return Verdict(
            "neutral",
            f"Not decided: no significant difference, but a saving of up to "
            f"{_pct(r.ci_low)} is still possible.",
            (
                f"no significant difference in steady epoch time ({ev.interval}), yet the "
                f"interval reaches below {1.0 - min_gain:.2f}: it cannot rule out a saving "
                f"worth enabling for (--min-gain {min_gain:g}); " + _what_decides(r, n, min_gain),
                ev.memory,
            ),
            decided=False,
        )
    return _no_difference_verdict(comparison, ev)


def epochs_to_decide(r: Ratio, n: int, min_gain: float) -> int | None:
    """About how many more steady epochs per arm would put the interval wholly on
    one side of 1 − min_gain (or of 1), from the measured spread: the interval
    narrows as 1/sqrt(n). None when the ratio sits on the line itself."""
    target = 1.0 - min_gain if r.value <= 1.0 - min_gain or r.ci_low <= 1.0 - min_gain else 1.0
    half = (r.ci_high - r.ci_low) / 2
    distance = abs(r.value - target)
    if n <= 0 or half <= 0 or distance < 0.1 * half:
        return None
    return max(1, math.ceil(n * (half / distance) ** 2) - n)


def _what_decides(r: Ratio, n: int, min_gain: float) -> str:
    more = epochs_to_decide(r, n, min_gain)
    if more is None:
        return (
            "the ratio sits at the line itself, so no practical number of epochs would "
            "decide it: the difference is too small to matter either way"
        )
    return (
        f"about {more} more steady epochs per arm (n={n} now) would decide it: "
        "run more --epochs or --trials"
    )


def _over_budget_verdict(p_sum: ArmSummary, ev: _Evidence, budget: int) -> Verdict:
    peak = p_sum.peak_total_pss_bytes.median if p_sum.peak_total_pss_bytes else None
    reasons = [
        f"over budget: with persistent workers the process tree peaks at "
        f"{fmt_bytes(peak)} PSS, above --memory-budget {fmt_bytes(budget)}"
    ]
    if ev.direction == "saving":
        reasons.append(f"it would save {fmt_seconds(ev.saved_s)} per epoch ({ev.interval})")
    reasons.append(ev.memory)
    return Verdict(
        "keep_off",
        "Keep persistent_workers off: the run does not fit the memory budget with it.",
        tuple(reasons),
    )


def _enable_verdict(comparison: Comparison, ev: _Evidence) -> Verdict:
    extra = comparison.extra_idle_memory_bytes
    reasons = [
        f"steady epochs are {_pct(ev.ratio.value)} faster with persistent workers "
        f"({ev.interval}), saving {fmt_seconds(ev.saved_s)} per epoch"
    ]
    if comparison.break_even_epochs is not None:
        reasons.append(f"it pays for itself from epoch {comparison.break_even_epochs} on")
    if comparison.saved_s_total is not None:
        reasons.append(
            f"over {comparison.train_epochs} epochs that saves about "
            f"{fmt_seconds(comparison.saved_s_total)}"
        )
    reasons.append(ev.memory)
    return Verdict(
        "enable",
        f"Enable persistent_workers: it saves {fmt_seconds(ev.saved_s)} per epoch "
        f"for {fmt_bytes(extra) if extra is not None else 'an unmeasured amount of'} memory "
        "held between epochs.",
        tuple(reasons),
    )


def _no_difference_verdict(comparison: Comparison, ev: _Evidence) -> Verdict:
    extra = comparison.extra_idle_memory_bytes
    reasons = [f"no significant difference in steady epoch time ({ev.interval})"]
    if comparison.memory_budget_bytes is not None:
        reasons.append(f"within --memory-budget {fmt_bytes(comparison.memory_budget_bytes)}")
    reasons.append(ev.memory)
    if extra is not None and extra > 1024**2:
        return Verdict(
            "keep_off",
            f"Keep persistent_workers off: it holds {fmt_bytes(extra)} between epochs "
            "for no measurable gain.",
            tuple(reasons),
        )
    return Verdict(
        "neutral",
        "Either way: persistence changes neither time nor memory measurably.",
        tuple(reasons),
    )


def noise_warnings(name: str, s: ArmSummary) -> list[str]:
    out = []
    for label, stat in (("steady epoch", s.steady_epoch_s), ("cold epoch", s.cold_epoch_s)):
        if stat is not None and stat.n >= 3 and stat.rel_iqr > NOISY_REL_IQR:
            out.append(
                f"{name}: {label} times are noisy (IQR {stat.rel_iqr * 100:.0f} % of the median, "
                f"n={stat.n}); more --epochs or --trials would tighten the comparison"
            )
    return out


def arm_samples(trials: Sequence[TrialResult]) -> dict[str, list[float]]:
    """The raw values behind each gateable per-arm metric."""
    measured = _measured(trials)
    return {
        "steady_epoch_s": steady_walls(measured),
        "cold_epoch_s": cold_walls(measured),
        "first_batch_s": steady_first_batches(measured),
        "worker_startup_s": [
            w.startup_s for t in measured for w in t.workers if w.startup_s is not None
        ],
        "steady_samples_per_s": [
            e.samples_per_s
            for t in measured
            for e in t.epochs
            if e.epoch >= 2 and e.samples_per_s is not None
        ],
        "peak_worker_uss": trial_values(measured, "peak_worker_uss_bytes"),
        "peak_total_pss": trial_values(measured, "peak_total_pss_bytes"),
        "idle_workers_uss": trial_values(measured, "idle_workers_uss_bytes"),
        "peak_main_pss": trial_values(measured, "peak_main_pss_bytes"),
    }


def ratio_sample_count(name: str, persistent: Sequence[TrialResult]) -> int:
    """How many of the persistent arm's values stand behind a ratio metric (the
    numerator of its bootstrap, as `compare` draws it)."""
    values = {
        "steady_epoch_ratio": steady_walls,
        "cold_epoch_ratio": cold_walls,
        "first_batch_ratio": steady_first_batches,
        "peak_total_pss_ratio": lambda ts: trial_values(ts, "peak_total_pss_bytes"),
    }[name]
    return len(values(persistent))


def report_metrics(report: Report, seed: int = 0) -> dict[str, MetricValue]:
    """Every gateable metric of a report, each with a 95 % interval."""
    out: dict[str, MetricValue] = {}
    c = report.comparison
    if c is not None:
        for name, r in (
            ("steady_epoch_ratio", c.steady_epoch_ratio),
            ("cold_epoch_ratio", c.cold_epoch_ratio),
            ("first_batch_ratio", c.first_batch_ratio),
            ("peak_total_pss_ratio", c.peak_total_pss_ratio),
        ):
            if r is not None:
                n = ratio_sample_count(name, report.arms["persistent"].trials)
                out[name] = MetricValue(r.value, r.ci_low, r.ci_high, n)
    for arm_name, arm in report.arms.items():
        for metric, values in arm_samples(arm.trials).items():
            est = bootstrap_median(values, seed)
            if est is not None:
                out[f"{arm_name}.{metric}"] = MetricValue(*est, n=len(values))
    if report.distributed is not None and report.distributed.nodes:
        # Node totals are sums of per-rank medians: no interval, so gates on them
        # are decided by the value (the largest node).
        nodes = report.distributed.nodes
        for arm_name in ("persistent", "non_persistent"):
            for metric, attr in (
                ("node_pss_total", "pss_total_bytes"),
                ("node_idle_workers_uss", "idle_workers_uss_bytes"),
                ("node_worker_processes", "worker_processes"),
            ):
                vals = [getattr(n.arms[arm_name], attr) for n in nodes if arm_name in n.arms]
                vals = [v for v in vals if v is not None]
                if vals:
                    v = float(max(vals))
                    out[f"{arm_name}.{metric}"] = MetricValue(v, v, v, n=len(nodes))
    return out


def relative_metrics(new: Report, old: Report, seed: int = 0) -> dict[str, MetricValue]:
    """new ÷ baseline for every per-arm metric, with a bootstrap interval."""
    out: dict[str, MetricValue] = {}
    for arm_name in new.arms:
        if arm_name not in old.arms:
            continue
        a = arm_samples(new.arms[arm_name].trials)
        b = arm_samples(old.arms[arm_name].trials)
        for metric in a:
            r = bootstrap_ratio(a[metric], b.get(metric, []), seed)
            if r is not None:
                out[f"{arm_name}.{metric}"] = MetricValue(
                    r.value, r.ci_low, r.ci_high, len(a[metric])
                )
    # Ratios relative to the baseline's ratios (e.g. steady_epoch_ratio:+10%).
    nm, om = report_metrics(new, seed), report_metrics(old, seed)
    for name in (
        "steady_epoch_ratio",
        "cold_epoch_ratio",
        "first_batch_ratio",
        "peak_total_pss_ratio",
    ):
        if name in nm and name in om and om[name].value > 0:
            base = om[name].value
            v = nm[name]
            out[name] = MetricValue(v.value / base, v.ci_low / base, v.ci_high / base, v.n)
    return out


@dataclass(frozen=True)
class MetricDiff:
    metric: str
    baseline: float
    new: float
    ratio: Ratio
    p_value: float | None


def diff_reports(old: Report, new: Report, seed: int = 0) -> list[MetricDiff]:
    """Per-arm metrics of `new` against `old`: medians, ratio with CI, Mann-Whitney p."""
    out = []
    for arm_name in ("persistent", "non_persistent"):
        if arm_name not in old.arms or arm_name not in new.arms:
            continue
        a = arm_samples(new.arms[arm_name].trials)
        b = arm_samples(old.arms[arm_name].trials)
        for metric, values in a.items():
            base = b.get(metric, [])
            r = bootstrap_ratio(values, base, seed)
            if r is None:
                continue
            out.append(
                MetricDiff(
                    f"{arm_name}.{metric}",
                    float(np.median(base)),
                    float(np.median(values)),
                    r,
                    mann_whitney_p(values, base),
                )
            )
    return out
