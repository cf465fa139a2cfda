"""The adaptive plan (--trials auto) through a fake TrialRunner: it stops at the first
look whose interval settles, and runs to its cap when it cannot. No processes."""

from __future__ import annotations

import pytest

import loaderprof
from fakes import FakeRunner
from loaderprof.analysis.stats import look_confidence
from loaderprof.comparing.scheduler import run_schedule
from loaderprof.comparing.session import build_report, settled_rule
from loaderprof.config.build import build_config
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError

DATASET = "loaderprof.examples:CheapDataset"


def _per_arm(runner: FakeRunner) -> dict[str, int]:
    """Timing trials per arm; each arm's two memory trials run first, A B B A, and are
    not counted."""
    memory = [plan for _, plan in runner.calls[:4]]
    assert {p.role for p in memory} == {"memory"}
    assert [p.arm for p in memory[:2]] == [p.arm for p in memory[2:]][::-1]
    arms = [plan.arm for _, plan in runner.calls if plan.role != "memory"]
    return {a: arms.count(a) for a in set(arms)}


def test_a_clear_saving_stops_at_the_first_look_with_the_fixed_plans_verdict() -> None:
    runner = FakeRunner(startup_s=0.2, work_s=0.1)
    report = loaderprof.compare(DATASET, epochs=4, runner=runner)
    assert _per_arm(runner) == {"persistent": 2, "non_persistent": 2}
    plan = report.plan
    assert plan is not None and plan.mode == "adaptive" and plan.settled
    assert (plan.trials_per_arm, plan.looks_taken, plan.looks_planned) == (2, 1, 4)
    assert "settled after 2 trials per arm" in plan.stopped
    assert report.complete and report.verdict is not None and report.verdict.decided
    fixed = loaderprof.compare(DATASET, epochs=4, trials=6, runner=FakeRunner(0.2, 0.1))
    assert report.recommendation == fixed.recommendation == "enable"
    # The steady interval is taken at the level the first of four looks spends.
    c = report.comparison
    assert c is not None and c.confidence == pytest.approx(look_confidence(6, 2))
    assert plan.confidence == c.confidence == pytest.approx(1 - 0.05 / 9)
    assert c.unit == "trial" and c.steady_epoch_n == 2
    assert fixed.comparison is not None and fixed.comparison.confidence == pytest.approx(0.95)


def test_a_saving_the_first_look_cannot_settle_stops_at_the_look_at_3() -> None:
    # A 9 % saving with 2 % epoch noise: two trials per arm leave the interval across
    # the line, a third settles it, mid-block (after A B B A A B).
    runner = FakeRunner(startup_s=0.01, work_s=0.1, jitter=0.02)
    report = loaderprof.compare(DATASET, epochs=4, runner=runner)
    assert _per_arm(runner) == {"persistent": 3, "non_persistent": 3}
    plan = report.plan
    assert plan is not None and plan.settled
    assert (plan.trials_per_arm, plan.looks_taken, plan.looks_planned) == (3, 2, 4)
    assert "settled after 3 trials per arm (look 2 of 4)" in plan.stopped
    assert report.complete and report.recommendation == "enable"
    assert plan.confidence == pytest.approx(look_confidence(6, 3))
    assert plan.confidence == pytest.approx(1 - 0.05 * 5 / 36)


def test_no_difference_settles_before_the_cap() -> None:
    # Ruling out a 5 % saving takes a narrower interval than finding a 67 % one.
    runner = FakeRunner(startup_s=0.0, work_s=0.1)
    report = loaderprof.compare(DATASET, epochs=4, runner=runner)
    assert _per_arm(runner)["persistent"] < 6
    assert report.plan is not None and report.plan.settled
    assert report.verdict is not None and report.verdict.decided
    assert report.recommendation != "enable"


def test_a_saving_on_the_min_gain_line_runs_to_the_cap_and_says_it_is_undecided() -> None:
    # Non-persistent steady epochs are 0.1 + 0.00526 s: persistence saves 5 %, the line.
    runner = FakeRunner(startup_s=0.00526, work_s=0.1)
    report = loaderprof.compare(DATASET, epochs=4, max_trials=4, runner=runner)
    assert _per_arm(runner) == {"persistent": 4, "non_persistent": 4}
    plan, verdict = report.plan, report.verdict
    assert plan is not None and not plan.settled and plan.looks_taken == 3
    assert "not settled at the cap, --max-trials 4" in plan.stopped
    assert verdict is not None and not verdict.decided and verdict.recommendation == "neutral"
    assert "--max-trials 4" in " ".join(verdict.reasons)
    assert report.complete
    # Looks at 2, 3 and 4: the last spends what the first two left, 1 − 0.05·(1 − 9/16).
    assert plan.confidence == pytest.approx(1 - 0.05 * 7 / 16)


def test_fixed_plan_and_torchrun_do_not_adapt() -> None:
    cfg = RunConfig(dataset=DATASET, trials=3, epochs=3)
    runner = FakeRunner()
    run_schedule(cfg, runner=runner, settled=settled_rule(cfg))
    assert len(runner.calls) == 4 + 6
    # Under torchrun (a barrier) every rank runs the same fixed plan of 3, and the
    # progress bar's total (planned trials and memory trials, per arm) is what ran.
    auto = RunConfig(dataset=DATASET, epochs=3, world_size=2)
    runner = FakeRunner()
    outcome = run_schedule(auto, runner=runner, settled=settled_rule(auto), sync=lambda: None)
    assert len(runner.calls) == 4 + 6
    assert 2 * (auto.planned_trials + auto.memory_pairs) == len(runner.calls)
    report = build_report(auto, outcome.trials, imported={})
    assert report.plan is not None and report.plan.mode == "fixed"
    assert report.plan.stopped.startswith("fixed plan (torchrun")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"max_trials": 0}, "--max-trials must be ≥ 1"),
        ({"trials": "some"}, "--trials must be an integer or 'auto'"),
        ({"trials": "0"}, "--trials must be ≥ 1"),
    ],
)
def test_bad_plan_options_are_usage_errors(flags: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_config({"dataset": DATASET, **flags})


def test_trials_accepts_auto_and_numbers_from_the_command_line_and_a_file() -> None:
    assert build_config({"dataset": DATASET, "trials": "auto"}).adaptive
    assert build_config({"dataset": DATASET, "trials": "4"}).trials == 4
    assert build_config({"dataset": DATASET}, {"trials": 2}).trials == 2
    assert build_config({"dataset": DATASET}, {"trials": "auto"}).adaptive


@pytest.mark.parametrize("world_size", [1, 2])
def test_the_progress_bar_counts_to_the_epochs_the_plan_runs(world_size: int) -> None:
    """Under torchrun a fixed plan runs, and the bar is sized for it, not for the
    adaptive plan --trials auto would run alone (which here runs to its cap)."""
    import io

    from rich.console import Console

    from loaderprof.commands.common import trial_progress
    from loaderprof.comparing.ranks import DistContext, for_rank

    auto = RunConfig(dataset=DATASET, epochs=3, max_trials=4)
    ctx = DistContext(rank=0, world_size=world_size, host="h") if world_size > 1 else None
    cfg = for_rank(auto, ctx)
    out = io.StringIO()
    runner = FakeRunner(startup_s=0.0, work_s=0.1, jitter=0.3)
    with trial_progress(cfg, Console(file=out, force_terminal=True, width=200), True) as bar:
        sync = (lambda: None) if ctx else None
        run_schedule(cfg, runner=runner, on_progress=bar, settled=settled_rule(cfg), sync=sync)
    epochs = len(runner.calls) * cfg.epochs
    assert len(runner.calls) == (2 * (4 + 2) if world_size == 1 else 2 * (3 + 2))
    assert f"{epochs}/{epochs}" in out.getvalue()


@pytest.mark.parametrize("trials", [3, "auto"])
def test_an_interrupted_plan_says_it_was_interrupted_after_k_of_n(trials: object) -> None:
    from loaderprof.report.partial import plan_words

    # Memory trials take indexes 0 and 1: whichever arm's third timed trial comes first
    # is stopped, two per arm ran. A saving on the min-gain line keeps auto from settling.
    runner = FakeRunner(startup_s=0.00526, interrupt={("persistent", 2), ("non_persistent", 2)})
    report = loaderprof.compare(DATASET, trials=trials, epochs=3, max_trials=4, runner=runner)
    plan = report.plan
    assert plan is not None and not report.complete
    planned = 3 if trials == 3 else 4
    # The JSON's plan and the tables' line are one wording, never "fixed plan (--trials)".
    assert plan.stopped == f"interrupted after 2 of {planned} planned trials per arm"
    assert plan.stopped == plan_words(report)


def test_a_plan_interrupted_before_its_first_timed_trial_says_its_memory_trials_ran() -> None:
    from loaderprof.report.partial import plan_words

    # The memory trials run first: the screen shows their figures, so "after 0" alone
    # would read as if nothing had run.
    for interrupt, words in (
        ({("persistent", 1), ("non_persistent", 1)}, "(1 memory trial per arm ran)"),
        ({("persistent", 1)}, "(memory trials ran: 1 persistent, 2 non-persistent)"),
    ):
        runner = FakeRunner(startup_s=0.00526, interrupt=interrupt)
        report = loaderprof.compare(DATASET, trials=2, epochs=3, runner=runner)
        assert report.plan is not None
        assert report.plan.stopped == f"interrupted after 0 of 2 planned trials per arm {words}"
        assert report.plan.stopped == plan_words(report)
    # None ran: nothing to add.
    report = loaderprof.compare(
        DATASET, trials=2, epochs=3, runner=FakeRunner(interrupt={("persistent", 0)})
    )
    assert report.plan is not None
    assert report.plan.stopped == "interrupted after 0 of 2 planned trials per arm"
