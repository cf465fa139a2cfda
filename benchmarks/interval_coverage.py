"""How often does each interval method's 95 % interval hold the true ratio?

NOTE [trial is the unit] in loaderprof/stats.py: epochs of one trial are not
independent draws. This benchmark makes synthetic trials with a known
persistent ÷ non-persistent ratio, where each trial carries its own level
(between-trial spread, log-normal) on top of epoch-to-epoch noise, and counts
how often each method's interval covers the truth:

* pooled: a percentile bootstrap of the median over all epochs (the old way);
* hierarchical: a percentile bootstrap resampling trials, then epochs in them;
* trial t: loaderprof's Welch t on the logs of the trial medians.

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

from loaderprof.stats import BOOTSTRAP_RESAMPLES, bootstrap_ratio, estimate_ratio

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


def coverage(trials: int, between: float, within: float, runs: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = {"pooled": 0, "hierarchical": 0, "trial_t": 0}
    for i in range(runs):
        a = arm(rng, TRUE_RATIO, trials, 4, between, within)
        b = arm(rng, 1.0, trials, 4, between, within)
        pooled = bootstrap_ratio([v for g in a for v in g], [v for g in b for v in g], seed=i)
        assert pooled is not None
        hits["pooled"] += pooled.ci_low <= TRUE_RATIO <= pooled.ci_high
        lo, hi = hierarchical_ratio(a, b, rng)
        hits["hierarchical"] += lo <= TRUE_RATIO <= hi
        est = estimate_ratio(a, b, seed=i)
        assert est is not None and est.unit == "trial"
        hits["trial_t"] += est.ratio.ci_low <= TRUE_RATIO <= est.ratio.ci_high
    return {k: v / runs for k, v in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    settings = [
        # (between-trial sd of log level, within-trial sd of log epoch)
        (0.0, 0.03),
        (0.03, 0.03),
        (0.08, 0.01),
    ]
    rows: list[dict[str, Any]] = []
    print(
        f"{'trials/arm':>10} {'between':>8} {'within':>7} {'pooled':>8} {'hier.':>8} {'trial t':>8}"
    )
    for trials in (2, 3, 5):
        for between, within in settings:
            cov = coverage(trials, between, within, a.runs, seed=trials * 100 + int(between * 1000))
            rows.append({"trials": trials, "between": between, "within": within, **cov})
            print(
                f"{trials:>10} {between:>8.2f} {within:>7.2f} {cov['pooled']:>8.3f} "
                f"{cov['hierarchical']:>8.3f} {cov['trial_t']:>8.3f}"
            )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(
            json.dumps({"runs": a.runs, "true_ratio": TRUE_RATIO, "rows": rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
