"""How often does each interval method's 95 % interval hold the true ratio?

NOTE [trial is the unit] in loaderprof/stats.py: epochs of one trial are not
independent draws. This benchmark makes synthetic trials with a known
persistent ÷ non-persistent ratio, where each trial carries its own level
(between-trial spread, log-normal) on top of epoch-to-epoch noise, and counts
how often each method's interval covers the truth:

* pooled: a percentile bootstrap of the median over all epochs (the old way);
* hierarchical: a percentile bootstrap resampling trials, then epochs in them;
* welch: a Welch t on the logs of the trial medians alone (loaderprof before);
* loaderprof: the same t, each arm's spread pooled with two memory trials' (the
  same arm, its level shifted by sampling) and floored by the epochs inside each
  trial (NOTE [spread of an arm] in loaderprof/stats.py).

Scenarios include arms that spread unalike (a fast persistent arm usually spreads
more), memory trials that spread 30 % less than the timing trials, outside
the rule's assumption, to show what that would cost, and memory trials that
spread 2× and 5× as much, as their own sampling makes them on a busy machine
(their trials and epochs alike, or their epochs alone).

    python benchmarks/interval_coverage.py --runs 2000 \
        --out benchmarks/results/interval_coverage.json

Pure computation, no processes: its figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from loaderprof.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    arm_spread,
    bootstrap_ratio,
    estimate_ratio,
    log_ratio_test,
    unit_figures,
)

TRUE_RATIO = 0.8


def hierarchical_ratio(
    a: list[list[float]], b: list[list[float]], rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile interval of median(a) / median(b), resampling trials, then epochs."""

    def resample(groups: list[list[float]]) -> np.ndarray:
        x = np.asarray(groups, dtype=float)  # trials × epochs (equal lengths here)
        t, e = x.shape
        pick_t = rng.integers(0, t, size=(BOOTSTRAP_RESAMPLES, t))
        pick_e = rng.integers(0, e, size=(BOOTSTRAP_RESAMPLES, t, e))
        drawn = x[pick_t[:, :, None], pick_e]
        return np.median(drawn.reshape(BOOTSTRAP_RESAMPLES, -1), axis=1)

    r = resample(a) / resample(b)
    lo, hi = np.percentile(r, [2.5, 97.5])
    return float(lo), float(hi)


def arm(
    rng: np.random.Generator, scale: float, trials: int, steady: int, between: float, within: float
) -> list[list[float]]:
    return [
        list(scale * np.exp(rng.normal(0, between)) * np.exp(rng.normal(0, within, size=steady)))
        for _ in range(trials)
    ]


MEMORY_TRIALS = 2
# Memory trials are sampled deeply, which shifts their level (never used for it).
MEMORY_SHIFT = 1.2


def coverage(
    trials: int,
    spread_a: tuple[float, float],
    spread_b: tuple[float, float],
    runs: int,
    seed: int,
    memory_factor: float = 1.0,
    memory_within: float | None = None,
) -> dict[str, float]:
    """Share of runs whose 95 % interval holds TRUE_RATIO; spreads are (between, within)
    as sd of log, per arm; memory trials spread `memory_factor` times as much, their
    epochs `memory_within` times (default: the same factor)."""
    scale = (memory_factor, memory_factor if memory_within is None else memory_within)
    rng = np.random.default_rng(seed)
    hits = {"pooled": 0, "hierarchical": 0, "welch": 0, "loaderprof": 0}
    narrower: list[float] = []
    for i in range(runs):
        a = arm(rng, TRUE_RATIO, trials, 4, *spread_a)
        b = arm(rng, 1.0, trials, 4, *spread_b)
        ma = arm(
            rng,
            TRUE_RATIO * MEMORY_SHIFT,
            MEMORY_TRIALS,
            4,
            *(x * f for x, f in zip(spread_a, scale, strict=True)),
        )
        mb = arm(
            rng,
            MEMORY_SHIFT,
            MEMORY_TRIALS,
            4,
            *(x * f for x, f in zip(spread_b, scale, strict=True)),
        )
        pooled = bootstrap_ratio([v for g in a for v in g], [v for g in b for v in g], seed=i)
        assert pooled is not None
        hits["pooled"] += pooled.ci_low <= TRUE_RATIO <= pooled.ci_high
        lo, hi = hierarchical_ratio(a, b, rng)
        hits["hierarchical"] += lo <= TRUE_RATIO <= hi
        fa, fb = unit_figures(a), unit_figures(b)
        sa, sb = arm_spread(fa), arm_spread(fb)
        assert sa is not None and sb is not None
        welch, _ = log_ratio_test(fa, fb, sa, sb)
        hits["welch"] += welch.ci_low <= TRUE_RATIO <= welch.ci_high
        est = estimate_ratio(a, b, seed=i, extra_a=ma, extra_b=mb)
        assert est is not None and est.unit == "trial"
        hits["loaderprof"] += est.ratio.ci_low <= TRUE_RATIO <= est.ratio.ci_high
        narrower.append(
            float(
                np.log(est.ratio.ci_high / est.ratio.ci_low) / np.log(welch.ci_high / welch.ci_low)
            )
        )
    out: dict[str, float] = {k: v / runs for k, v in hits.items()}
    # loaderprof's interval width over Welch's alone (log scale), the median run.
    out["width_vs_welch"] = float(np.median(narrower))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    settings: list[tuple[tuple[float, float], tuple[float, float], float, float | None]] = [
        # ((between, within) persistent, (between, within) non-persistent, memory
        # trials' factor, their epochs' factor where it differs)
        ((0.0, 0.03), (0.0, 0.03), 1.0, None),
        ((0.03, 0.03), (0.03, 0.03), 1.0, None),
        ((0.08, 0.01), (0.08, 0.01), 1.0, None),
        # Unalike arms: the lazy example's fast persistent arm, a noisy one, a quiet one.
        ((0.12, 0.14), (0.02, 0.03), 1.0, None),
        ((0.2, 0.05), (0.02, 0.02), 1.0, None),
        ((0.05, 0.15), (0.01, 0.02), 1.0, None),
        # Outside the assumption: memory trials that spread 30 % less.
        ((0.12, 0.14), (0.02, 0.03), 0.7, None),
        ((0.2, 0.05), (0.02, 0.02), 0.7, None),
        # Memory trials disturbed by their own sampling on a busy machine: their trials
        # and epochs spread 2× and 5× the timing trials' (4× and 25× the variance).
        ((0.05, 0.05), (0.05, 0.05), 2.0, None),
        ((0.12, 0.14), (0.02, 0.03), 2.0, None),
        ((0.05, 0.05), (0.05, 0.05), 5.0, None),
        ((0.12, 0.14), (0.02, 0.03), 5.0, None),
        # Only their epochs disturbed, their trials spread as the timing trials': where
        # choosing the narrower interval after seeing both lost coverage.
        ((0.2, 0.05), (0.02, 0.02), 1.0, 5.0),
        ((0.05, 0.05), (0.05, 0.05), 1.0, 5.0),
    ]
    rows: list[dict[str, Any]] = []
    print(
        f"{'trials':>6} {'persistent':>12} {'non-pers.':>12} {'mem':>4} {'ep.':>4} {'pooled':>7} "
        f"{'hier.':>6} {'welch':>6} {'loaderprof':>10}"
    )
    for trials in (2, 3, 5):
        for k, (sa, sb, mf, mw) in enumerate(settings):
            cov = coverage(
                trials, sa, sb, a.runs, seed=trials * 100 + k, memory_factor=mf, memory_within=mw
            )
            rows.append(
                {
                    "trials": trials,
                    "persistent": sa,
                    "non_persistent": sb,
                    "memory_factor": mf,
                    "memory_within": mf if mw is None else mw,
                }
                | cov
            )
            print(
                f"{trials:>6} {sa!s:>12} {sb!s:>12} {mf:>4} {mw or mf:>4} {cov['pooled']:>7.3f} "
                f"{cov['hierarchical']:>6.3f} {cov['welch']:>6.3f} {cov['loaderprof']:>10.3f} "
                f"{cov['width_vs_welch']:>6.2f}",
                flush=True,
            )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps({"runs": a.runs, "true_ratio": TRUE_RATIO, "rows": rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
