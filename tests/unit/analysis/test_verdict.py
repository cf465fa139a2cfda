"""The verdict: KEEP_OFF only on evidence (a verdict says "not decided" until the
interval decides it), and `decide` weighing each of its inputs."""

from __future__ import annotations

import dataclasses

import loaderprof
from builders import make_pair, make_trial
from fakes import FakeRunner
from loaderprof.analysis.summary import summarize_arm
from loaderprof.analysis.verdict import (
    VerdictInputs,
    decide,
    decide_command,
    epochs_to_decide,
    findings_the_verdict_must_mention,
)
from loaderprof.checks.state import Stale, stale_finding
from loaderprof.comparing import ranks
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.model.metrics import Ratio
from loaderprof.model.results import Comparison, Finding, Report
from loaderprof.model.trials import TrialResult
from loaderprof.units import MiB

DATASET = "loaderprof.examples:CheapDataset"


def _run(trials: int, epochs: int, startup_s: float, work_s: float, jitter: float) -> object:
    runner = FakeRunner(startup_s=startup_s, work_s=work_s, jitter=jitter)
    return loaderprof.compare(DATASET, trials=trials, epochs=epochs, runner=runner)


def test_a_real_12_percent_saving_with_too_few_epochs_is_undecided_and_says_what_decides() -> None:
    # Workers cost 30 ms to start, an epoch's work 220 ms: persistence saves ~12 %.
    report = _run(1, 3, startup_s=0.03, work_s=0.22, jitter=0.15)
    v = report.verdict  # type: ignore[attr-defined]
    assert v.recommendation == "neutral" and not v.decided
    assert v.headline.startswith("Not decided")
    # One trial per arm: the advice names the options that act on that plan.
    assert any("run --epochs" in r and "--trials auto" in r for r in v.reasons)


def test_the_same_saving_with_enough_epochs_is_enable() -> None:
    report = _run(4, 11, startup_s=0.03, work_s=0.22, jitter=0.15)
    v = report.verdict  # type: ignore[attr-defined]
    assert v.recommendation == "enable" and v.decided


def test_a_saving_well_below_min_gain_with_enough_epochs_is_decided_against_enabling() -> None:
    report = _run(3, 11, startup_s=0.002, work_s=0.3, jitter=0.01)
    v = report.verdict  # type: ignore[attr-defined]
    assert v.recommendation in ("neutral", "keep_off") and v.decided


def test_keep_off_for_lack_of_gain_needs_an_interval_that_rules_the_gain_out() -> None:
    # The case: ratio 0.97 [0.89–1.06], p = 1, memory held: not KEEP_OFF.
    p, n = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 1.0])
    p_sum, n_sum = summarize_arm([p]), summarize_arm([n])

    def comparison(r: Ratio, saved: float) -> Comparison:
        return Comparison(
            steady_epoch_ratio=r,
            cold_epoch_ratio=None,
            first_batch_ratio=None,
            saved_s_per_epoch=saved,
            extra_idle_memory_bytes=20 << 20,
            extra_peak_pss_bytes=None,
            break_even_epochs=None,
            train_epochs=5,
            saved_s_total=None,
            steady_epoch_p=1.0,
        )

    v = decide(VerdictInputs(comparison(Ratio(0.97, 0.89, 1.06), 0.03), p_sum, n_sum, 0.05))
    assert v.recommendation == "neutral" and not v.decided
    assert "a saving of up to 11 %" in v.headline
    v = decide(VerdictInputs(comparison(Ratio(1.0, 0.97, 1.03), 0.0), p_sum, n_sum, 0.05))
    assert v.recommendation == "keep_off" and v.decided


def test_a_ratio_close_to_the_line_asks_for_no_plan_nobody_would_run() -> None:
    p, n = make_pair([3.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 1.0])
    ratio = Ratio(0.96, 0.90, 1.024)  # 0.01 from the 0.95 line on a ±0.065 interval
    c = Comparison(ratio, None, None, 0.04, 20 << 20, None, None, 5, None, 0.2)
    c = dataclasses.replace(c, unit="trial", steady_epoch_n=6)
    v = decide(VerdictInputs(c, summarize_arm([p]), summarize_arm([n]), 0.05, max_trials=6))
    text = " ".join(v.reasons)
    assert "more than is practical: for this spread, the ratio sits close to 0.95" in text
    assert "raise --max-trials" not in text and not v.decided


def test_epochs_to_decide_follows_the_spread() -> None:
    # Half-width 0.088 (log) around 0.97, 0.021 from the 0.95 line; with 7 degrees of
    # freedom the standard error is 0.088 ÷ t(7) = 0.037, and the interval is inside
    # the distance once t(7 + k) × 0.037 × √(8 ÷ (8 + k)) < 0.021: at about k = 93.
    more = epochs_to_decide(Ratio(0.97, 0.885, 1.055), 8, 0.05, df=7)
    assert more is not None and 85 <= more <= 100
    # More degrees of freedom now: the same half-width is a wider standard error.
    more_df = epochs_to_decide(Ratio(0.97, 0.885, 1.055), 8, 0.05, df=14)
    assert more_df is not None and more_df > more
    # Not known (an older report): the 1/√n rule alone, n × (0.088 ÷ 0.021)² − n ≈ 135,
    # the most any degrees of freedom would ask.
    unknown = epochs_to_decide(Ratio(0.97, 0.885, 1.055), 8, 0.05)
    assert unknown is not None and 130 <= unknown <= 140 and unknown > more_df
    assert epochs_to_decide(Ratio(0.95, 0.90, 1.00), 8, 0.05) is None


# -- decide: every input, and what each one changes (NOTE [one verdict]) ----------

IMPORTED = {"torch": "2.x", "start_method": "fork"}
# Persistence saves half of every steady epoch: on time alone, enable.
FAST, SLOW = [3.0, 1.0, 1.01, 0.99, 1.0], [3.0, 2.0, 2.02, 1.98, 2.0]


def _peaked(t: TrialResult, peak_mib: float) -> TrialResult:
    memory = dataclasses.replace(t.memory, peak_total_pss_bytes=int(peak_mib * MiB))
    return dataclasses.replace(t, memory=memory)


def _three_trials(
    p_peak: float = 170, n_peak: float = 170, budget: int | None = None, host: str = "h"
) -> tuple[RunConfig, Report]:
    """Three trials per arm through the real summaries and comparison; each arm's
    process tree peaks near `p_peak` / `n_peak` MiB."""
    trials = []
    for i, spread in enumerate((-1.0, 0.0, 1.0)):
        p = make_trial("persistent", FAST, idle=20 * MiB, reused=True, index=i)
        n = make_trial("non_persistent", SLOW, idle=0, reused=False, index=i)
        trials += [_peaked(p, p_peak + spread), _peaked(n, n_peak + spread)]
    cfg = RunConfig(dataset="a:B", epochs=5, trials=3, memory_budget_bytes=budget)
    return cfg, build_report(cfg, trials, imported=IMPORTED)


def _inputs(cfg: RunConfig, report: Report, **kw: object) -> VerdictInputs:
    assert report.comparison is not None
    inputs = VerdictInputs.of_run(
        cfg,
        report.comparison,
        report.arms["persistent"].summary,
        report.arms["non_persistent"].summary,
    )
    return dataclasses.replace(inputs, **kw)


def test_time_alone_decides_when_nothing_else_weighs() -> None:
    cfg, report = _three_trials()
    v = decide(_inputs(cfg, report))
    assert v.recommendation == "enable" and v.decided
    # The report's verdict is the same function of the same inputs.
    assert report.verdict == v


def test_a_time_win_is_kept_off_when_persistence_alone_breaks_the_memory_budget() -> None:
    # Persistent peaks at 300 MiB, non-persistent at 200: a 250 MiB budget.
    cfg, report = _three_trials(p_peak=300, n_peak=200, budget=250 * MiB)
    v = decide(_inputs(cfg, report))
    assert v.recommendation == "keep_off"
    assert v.headline.endswith("does not fit the memory budget with it.")
    assert any(r.startswith("it would save") for r in v.reasons)
    # The same measurements with room for both: the time win stands.
    cfg, roomy = _three_trials(p_peak=300, n_peak=200, budget=400 * MiB)
    assert decide(_inputs(cfg, roomy)).recommendation == "enable"
    # Both arms over it: persistence is not what breaks it, so time decides, and says so.
    cfg, tight = _three_trials(p_peak=300, n_peak=200, budget=100 * MiB)
    v = decide(_inputs(cfg, tight))
    assert v.recommendation == "enable" and "Neither setting fits" in v.headline


def _stale() -> Finding:
    return stale_finding(
        [Stale("epoch", 2, "1", "0", (0, 1))], {"arm": "persistent"}, arm="persistent"
    )


def test_stale_state_makes_persistence_unsafe_whatever_the_time_says() -> None:
    cfg, report = _three_trials()
    inputs = _inputs(cfg, report)
    v = decide(dataclasses.replace(inputs, findings=(_stale(),)))
    assert v.recommendation == "enable" and v.decided
    assert v.headline.startswith("Enable persistent_workers only after fixing `epoch`")
    assert v.depends_on == ("stale-worker-state",)
    assert v.reasons[0].startswith("stale worker state (persistent arm)")
    # A saving below --min-gain: the finding alone keeps persistence off.
    no_gain = dataclasses.replace(inputs, min_gain=0.9)
    assert decide(no_gain).recommendation != "keep_off"
    v = decide(dataclasses.replace(no_gain, findings=(_stale(),)))
    assert v.recommendation == "keep_off" and "never see `epoch` change" in v.headline


def test_findings_that_do_not_decide_are_named_and_depended_on() -> None:
    cfg, report = _three_trials()
    inputs = _inputs(cfg, report)
    plain = decide(inputs)
    rng = Finding(
        "repeated-randomness", "warning", "t", {"attribute": "rng", "kind": "G"}, "fix", None
    )
    v = decide(dataclasses.replace(inputs, findings=(rng,)))
    # Randomness not reseeded is a bug either way: named, depended on, not decisive.
    assert v.recommendation == "enable" and v.headline == plain.headline
    assert v.depends_on == ("repeated-randomness",)
    leak = Finding(
        "leaked-files", "warning", "worker 0 holds more open files", {}, "f", "persistent"
    )
    early = Finding("leaked-files", "info", "too few epochs", {}, "f", "persistent")
    threads = Finding("thread-oversubscription", "warning", "threads", {}, "f", None)
    v = decide(dataclasses.replace(inputs, findings=(leak, early, threads)))
    assert v.recommendation == "enable"
    assert v.reasons == (
        *plain.reasons,
        "warning (persistent arm): worker 0 holds more open files [leaked-files]",
    )
    assert v.depends_on == ("leaked-files",)
    assert findings_the_verdict_must_mention([early, threads]) == []
    # Beside stale state, both are depended on.
    both = decide(dataclasses.replace(inputs, findings=(_stale(), leak)))
    assert both.depends_on == ("leaked-files", "stale-worker-state")
    # A finding the verdict does not weigh changes nothing.
    cow = Finding("copy-on-read", "warning", "t", {}, "f", None)
    assert decide(dataclasses.replace(inputs, findings=(cow,))) == plain


def test_ranks_that_disagree_with_rank_0_overrule_it_through_the_node() -> None:
    # Each rank alone fits a 500 MiB budget (300 MiB with persistence); the node, two
    # ranks on one host, peaks at 600: rank 0's time win does not survive the node.
    cfg, rank0 = _three_trials(p_peak=300, n_peak=200, budget=500 * MiB)
    _, rank1 = _three_trials(p_peak=300, n_peak=200, budget=500 * MiB)
    assert rank0.verdict is not None and rank0.verdict.recommendation == "enable"
    summary = ranks.summarize([(0, "node-a", rank0), (1, "node-a", rank1)])
    v = decide(_inputs(cfg, rank0, ranks=summary))
    assert v.recommendation == "keep_off"
    assert v.headline.endswith("the node does not fit the memory budget with it.")
    assert v.reasons[0].startswith("over budget: node node-a peaks at 600.0 MiB PSS")
    # On two hosts, each node is one rank: within the budget, rank 0's verdict stands,
    # with the node's line after its own reasons.
    apart = ranks.summarize([(0, "node-a", rank0), (1, "node-b", rank1)])
    v = decide(_inputs(cfg, rank0, ranks=apart))
    assert v.recommendation == "enable" and v.headline == rank0.verdict.headline
    assert v.reasons[:-1] == rank0.verdict.reasons
    assert "1 of 1 rank completed" in v.reasons[-1]
    # Rank 0 decides again from rebuilt inputs: the same function, the same answer.
    assert ranks.adjust_verdict(rank0, summary, cfg).verdict == decide(
        _inputs(cfg, rank0, findings=rank0.findings, ranks=summary)
    )


def test_under_torchrun_the_plan_is_fixed_everywhere_it_is_asked() -> None:
    auto = RunConfig(dataset="a:B", epochs=3)
    rank = ranks.for_rank(auto, ranks.DistContext(rank=1, world_size=2, host="h"))
    assert auto.adaptive and not rank.adaptive
    assert ranks.for_rank(auto, None) is auto
    assert rank.planned_trials == rank.fixed_trials == 3
    # The verdict's inputs carry no cap, so no verdict speaks of --max-trials.
    _, report = _three_trials()
    assert report.comparison is not None
    s = report.arms["persistent"].summary
    assert VerdictInputs.of_run(auto, report.comparison, s, s).max_trials == auto.max_trials
    assert VerdictInputs.of_run(rank, report.comparison, s, s).max_trials is None


def test_a_command_verdict_names_only_the_warnings_persistence_brings() -> None:
    def leak(arm: str, site: str) -> Finding:
        evidence = {"site": site}
        return Finding("leaked-files", "warning", f"files at {site}", evidence, "close", arm=arm)

    # The same check at the same site in both arms is the loader's; at another site,
    # or in the persistent arm alone, it is what persistence brings.
    found = [leak("persistent", "a.py:1"), leak("non_persistent", "a.py:1")]
    found.append(leak("persistent", "b.py:2"))
    v = decide_command(None, 0, 0.05, None, found)
    named = [r for r in v.reasons if "leaked-files" in r]
    assert named == ["warning (persistent arm): files at b.py:2 [leaked-files]"]
    assert v.depends_on == ("leaked-files",)


def test_one_trial_per_arm_asks_for_no_run_of_thousands_of_epochs() -> None:
    """Steady epochs stand in for trials with one trial per arm: past PRACTICAL_EPOCHS
    the verdict says the ratio sits close to the line instead of `--epochs 5001`."""
    from loaderprof.analysis.advice import PRACTICAL_EPOCHS, what_decides
    from loaderprof.analysis.assessment import assess

    a = assess(Ratio(0.952, 0.90, 1.01), 0.5, 0.95, 0.05, 8, "epoch", df=7)
    assert a.more is not None and a.n + a.more > PRACTICAL_EPOCHS
    text = what_decides(a, "fixed", None)
    assert "more than is practical" in text and "--epochs" not in text
