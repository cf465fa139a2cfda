"""Pure: the words that go with a verdict's numbers, and what would decide one that is
not decided, in the options of the plan that ran (NOTE [words follow numbers]).

The verdict's policy is `analysis/verdict.py` (NOTE [one verdict]); this module only
words an `Assessment`: the interval and its test, and the trials, epochs or nothing
practical that would settle it.
"""

from __future__ import annotations

from typing import Literal

from loaderprof.analysis.assessment import Assessment
from loaderprof.model.metrics import Ratio
from loaderprof.units import fmt_ratio, plural

PlanMode = Literal["adaptive", "fixed"]
# More trials (or steady epochs) per arm than this is no plan a user would run: past it
# the verdict says how close the ratio sits to the line instead of asking for them.
PRACTICAL_UNITS = 100


def interval_words(r: Ratio, p: float | None, confidence: float, unit: str | None, n: int) -> str:
    """ "ratio 0.50, 95 % CI 0.48–0.52, t on the logs of 3 trial medians per arm, p=0.01"."""
    if unit == "trial":
        test = f"t on the logs of {plural(n, 'trial median')} per arm"
    else:
        test = f"t on the logs of one trial's {plural(n, 'steady epoch')} per arm"
    p_text = f", {test}, p={p:.3g}" if p is not None else ""
    return (
        f"ratio {fmt_ratio(r.value)}, {confidence * 100:.3g} % CI {fmt_ratio(r.ci_low)}–"
        f"{fmt_ratio(r.ci_high)}{p_text}"
    )


def more_trials(plan: PlanMode) -> str:
    """How to get a second trial per arm: a fixed plan of one asks for more; an
    adaptive plan looks first at 2, so with one it was cut short."""
    if plan == "adaptive":
        return "let --trials auto run to its end (this run was cut short)"
    return "run --trials auto or --trials 2"


def advice(a: Assessment, plan: PlanMode, total: int) -> str:
    """The option that acts on the plan that ran, to reach `total` units per arm."""
    if a.unit != "trial":
        # One trial per arm: its steady epochs are the units, so --epochs adds them.
        return (
            f"run --epochs {total + 1} (or {more_trials(plan)}: one trial per arm "
            "cannot show how trials differ)"
        )
    if plan == "adaptive":
        return f"raise --max-trials (to about {total})"
    return f"run --trials {total}"


def what_decides(a: Assessment, plan: PlanMode) -> str:
    """What would put the interval on one side of its line: about how many more units,
    none practical, or the option that adds them."""
    units = "trials" if a.unit == "trial" else "steady epochs"
    if a.at_line:
        return (
            f"the ratio sits within a tenth of the interval's half-width of {a.target:.2f} "
            f"(on the log scale), so no practical number of {units} would decide it: the "
            "difference is too small to matter either way"
        )
    if a.more is None:
        return advice(a, plan, a.n + 1)
    more = plural(a.more, "more trial" if a.unit == "trial" else "more steady epoch")
    if a.n + a.more > PRACTICAL_UNITS:
        return (
            f"about {more} per arm (n={a.n} now) would decide it, more than is practical: "
            f"for this spread, the ratio sits close to {a.target:.2f}"
        )
    return f"about {more} per arm (n={a.n} now) would decide it: " + advice(a, plan, a.n + a.more)
