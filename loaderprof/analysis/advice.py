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
# More trials per arm than this is no plan a user would run: past it the verdict says
# how close the ratio sits to the line instead of asking for them. Steady epochs of one
# trial are cheaper, but a run of thousands is no plan either.
PRACTICAL_UNITS = 100
PRACTICAL_EPOCHS = 1000


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


def counted(a: Assessment) -> str:
    """'3 trials', or '4 steady epochs' where one trial per arm stood in for trials."""
    return plural(a.n, "trial" if a.unit == "trial" else "steady epoch")


def more_trials(plan: PlanMode, cap: int | None) -> str:
    """How to get a second trial per arm: a fixed plan of one asks for more; an
    adaptive plan (`cap`: its --max-trials) looks first at 2, so with one it was cut
    short, or capped at one."""
    if plan == "fixed":
        return "run --trials auto or --trials 2"
    if cap is not None and cap < 2:
        return "raise --max-trials to 2"
    return "let --trials auto run to its end (this run was cut short)"


def advice(a: Assessment, plan: PlanMode, cap: int | None, total: int) -> str:
    """The option that acts on the plan that ran, to reach `total` units per arm."""
    if a.unit != "trial":
        # One trial per arm: its steady epochs are the units, so --epochs adds them.
        return (
            f"run --epochs {total + 1} (or {more_trials(plan, cap)}: one trial per arm "
            "cannot show how trials differ)"
        )
    if plan == "adaptive":
        return f"raise --max-trials (to about {total})"
    return f"run --trials {total}"


def what_decides(a: Assessment, plan: PlanMode, cap: int | None) -> str:
    """What would put the interval on one side of its line: about how many more units,
    none practical, or the option that adds them (`cap`: an adaptive plan's
    --max-trials)."""
    units = "trials" if a.unit == "trial" else "steady epochs"
    if a.at_line:
        return (
            f"the ratio sits so close to {a.target:.2f} for this spread that no practical "
            f"number of {units} would decide it"
        )
    if a.more is None:
        return advice(a, plan, cap, a.n + 1)
    more = plural(a.more, "more trial" if a.unit == "trial" else "more steady epoch")
    if a.n + a.more > (PRACTICAL_UNITS if a.unit == "trial" else PRACTICAL_EPOCHS):
        return (
            f"about {more} per arm (n={a.n} now) would decide it, more than is practical: "
            f"for this spread, the ratio sits close to {a.target:.2f}"
        )
    return f"about {more} per arm (n={a.n} now) would decide it: " + advice(
        a, plan, cap, a.n + a.more
    )
