"""NOTE [partial reports]: what a report that did not run as planned says it is.

A run that a signal or a failure stopped shows the trials that ran against those
planned ("interrupted after 2 of 6 planned trials per arm"), never the plan as if
it had run; a sweep says how many configurations and trials its recommendation
rests on; a figure nobody measured reads "not measured", not a unit and a dash.
One wording for the terminal, Markdown, HTML and the plot's title.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loaderprof.model.results import ARM_LABEL, Report, TrialResult
from loaderprof.units import plural

NOT_MEASURED = "not measured"


def _why(failed: bool) -> str:
    """Why the run ended early: a trial's failure, or else a signal."""
    return "stopped by a failure" if failed else "interrupted"


def counted(t: TrialResult) -> bool:
    """A trial that ran to its end and whose epoch times count (not a warm-up)."""
    return t.error is None and not t.warmup and t.times_epochs


def timed_trials(report: Report) -> dict[str, int]:
    """Per arm, the timed trials that ran to their end."""
    return {name: sum(counted(t) for t in arm.trials) for name, arm in report.arms.items()}


def plan_words(report: Report, planned: int | None = None) -> str | None:
    """'interrupted after 2 of 6 planned trials per arm'; None for a report that ran
    as planned. `planned` is the plan's trials per arm (its cap when adaptive), for a
    report whose `plan` is not decided yet; the plan outcome's `stopped` says the same."""
    if report.complete:
        return None
    each = timed_trials(report)
    if planned is None:
        planned = (
            report.plan.max_trials if report.plan is not None else report.config.schedule.per_arm
        )
    failed = any(e.category != "interrupted" for e in report.errors)
    words = cut_words(failed, each, planned)
    memory = {
        name: sum(t.role == "memory" and t.error is None for t in arm.trials)
        for name, arm in report.arms.items()
    }
    if not any(each.values()) and any(memory.values()):
        # The memory figures the screen shows are theirs: "after 0" alone reads as if
        # nothing had run.
        counts = set(memory.values())
        words += (
            f" ({plural(counts.pop(), 'memory trial')} per arm ran)"
            if len(counts) == 1
            else " (memory trials ran: "
            + ", ".join(f"{n} {ARM_LABEL[a]}" for a, n in memory.items())
            + ")"
        )
    return words


def cut_words(failed: bool, each: Mapping[str, int], planned: int) -> str:
    """'stopped by a failure after 2 of 6 planned trials per arm': a plan cut short,
    compare's and compare -- COMMAND's alike; where the arms ran different numbers,
    each one's ('after 1 persistent and 0 non-persistent of 6 planned trials per arm'):
    "after 0" alone reads as nothing ran beside a trial the screen shows."""
    counts = set(each.values())
    ran = (
        " and ".join(f"{n} {ARM_LABEL[arm]}" for arm, n in each.items())
        if len(counts) > 1
        else str(min(counts, default=0))
    )
    return f"{_why(failed)} after {ran} of {plural(planned, 'planned trial')} per arm"


def unmeasured_arms(report: Report) -> set[str]:
    """The arms without one timed trial: their timing figures are not measured."""
    return {name for name, n in timed_trials(report).items() if n == 0}


def sweep_counts(report: Any) -> tuple[int, int, int]:
    """(configurations measured, fewest and most finished trials per configuration)."""
    ran = [sum(counted(t) for t in p.trials) for p in report.points]
    return sum(n > 0 for n in ran), min(ran, default=0), max(ran, default=0)


def point_failed(point: Any) -> bool:
    """A configuration whose trial failed; not one a signal stopped."""
    errors = [t.error for t in point.trials if t.error is not None]
    return any(e.category != "interrupted" for e in errors)


def point_note(point: Any) -> str:
    """What the table adds to a configuration's label when it did not run to its end."""
    if not point.error:
        return ""
    return " (failed)" if point_failed(point) else " (interrupted)"


def sweep_plan_words(report: Any) -> str:
    """The sweep's plan as run: '3 trials per configuration', or what an interrupted
    one measured of it."""
    planned = report.config["trials"]
    if report.complete:
        return f"{plural(planned, 'trial')} per configuration"
    measured, low, high = sweep_counts(report)
    trials = f"{low}" if low == high else f"{low}–{high}"
    why = _why(any(point_failed(p) for p in report.points))
    return (
        f"{why} after {trials} of {plural(planned, 'planned trial')} per configuration, "
        f"{measured} of {plural(len(report.points), 'configuration')} measured"
    )


def sweep_basis(report: Any) -> str | None:
    """What an incomplete sweep's recommendation rests on; None for a complete one."""
    if report.complete:
        return None
    measured, low, high = sweep_counts(report)
    if not measured:
        return "nothing was measured: no recommendation"
    trials = f"{low}" if low == high else f"{low}–{high}"
    return (
        f"based on {trials} of {plural(report.config['trials'], 'planned trial')} per "
        f"configuration and {measured} of {plural(len(report.points), 'configuration')}: "
        "rerun for the full plan"
    )
