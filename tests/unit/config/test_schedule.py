"""The one decision of how a run's trials are planned (NOTE [sequential looks]), and the
two rules every plan is read by: where it may end, and at what level."""

from __future__ import annotations

import pytest

from loaderprof.analysis.stats import CONFIDENCE, look_confidence, plan_confidence, plan_ends
from loaderprof.comparing.command import CommandPlan
from loaderprof.config.run import RunConfig, Schedule


def test_auto_adapts_except_under_torchrun_and_a_number_fixes_the_plan() -> None:
    auto = Schedule.of("auto", 6)
    assert (auto.adaptive, auto.per_arm, auto.cap) == (True, 6, 6)
    # Every torchrun rank runs one fixed plan of 3, and the report says why.
    ranks = Schedule.of("auto", 6, world_size=2)
    assert (ranks.adaptive, ranks.per_arm, ranks.cap) == (False, 3, None)
    assert ranks.fixed_why.startswith("torchrun")
    fixed = Schedule.of(4, 6)
    assert (fixed.adaptive, fixed.per_arm, fixed.cap, fixed.fixed_why) == (
        False,
        4,
        None,
        "--trials",
    )


def test_compare_and_compare_command_ask_the_same_rule() -> None:
    for trials in ("auto", 2):
        cfg = RunConfig(dataset="m:D", trials=trials, max_trials=5)
        plan = CommandPlan(command=("python", "t.py"), epochs=3, trials=trials, max_trials=5)
        assert cfg.schedule == plan.schedule
        assert (cfg.adaptive, cfg.planned_trials) == (plan.schedule.adaptive, plan.schedule.per_arm)


def test_a_plan_ends_at_its_looks_or_its_count_at_their_levels() -> None:
    auto, fixed = Schedule.of("auto", 6), Schedule.of(4, 6)
    assert plan_ends(auto) == {2, 3, 4, 6} and plan_ends(fixed) == {4}
    assert plan_confidence(fixed, 4) == CONFIDENCE
    # An adaptive plan spends its error over its looks: each stricter than 95 %.
    assert plan_confidence(auto, 3) == look_confidence(6, 3) > CONFIDENCE
    assert plan_confidence(auto, 6) == pytest.approx(look_confidence(6, 6))
