"""The verdict: persistent_workers on or off, decided by one function from every input.

NOTE [one verdict]: what loaderprof recommends is decided here and nowhere else.
`decide` sees, once, all that bears on it (`VerdictInputs`): the steady epochs'
ratio and its interval (time), what persistent workers hold between epochs and
what the process tree peaks at (memory), --memory-budget, the findings that say
what persistence does to the data the model sees (state), and, under torchrun, the
node's totals over its ranks. They weigh in that order, each able to overrule the
one before: time decides within what memory allows; the budget overrules a saving
when persistence alone breaks it; stale state overrules both (NOTE [the verdict is
a promise]); the node's memory, the hardest limit, overrules everything. An input
learned later (rank 0 gathers the ranks after its own report is built) means new
inputs and `decide` again; nothing edits a verdict once it is made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from loaderprof.analysis.advice import (
    PlanMode,
    advice,
    counted,
    interval_words,
    more_trials,
    what_decides,
)
from loaderprof.analysis.assessment import Assessment, assess
from loaderprof.analysis.assessment import epochs_to_decide as epochs_to_decide
from loaderprof.analysis.assessment import settled as settled
from loaderprof.checks.state import CORRECTNESS
from loaderprof.config.run import RunConfig
from loaderprof.model.command import SavingEstimate
from loaderprof.model.metrics import UNINFORMATIVE_FACTOR
from loaderprof.model.results import (
    ARM_LABEL,
    ArmSummary,
    Comparison,
    DistributedSummary,
    Finding,
    Ratio,
    Verdict,
)
from loaderprof.units import MiB, fmt_bytes, fmt_change, fmt_ratio, fmt_seconds, plural


@dataclass(frozen=True)
class VerdictInputs:
    """Everything the verdict weighs (NOTE [one verdict])."""

    # Time, and the memory the arms differ by: the steady ratio with its interval and
    # test, the extra idle memory, the peak-PSS ratio, and each arm's peak against
    # --memory-budget (the comparison records the budget it was measured against).
    comparison: Comparison
    # Each arm's memory figures (idle USS, peak PSS total). Projecting cut epochs
    # (NOTE [short epochs]) changes walls only, so the measured summaries serve.
    persistent: ArmSummary
    non_persistent: ArmSummary
    min_gain: float
    # The adaptive plan's cap (--max-trials); None for a fixed plan.
    max_trials: int | None = None
    # The report's findings; none while the plan is still measuring.
    findings: tuple[Finding, ...] = ()
    # Under torchrun, on rank 0 once it has gathered every rank.
    ranks: DistributedSummary | None = None

    @property
    def memory_budget_bytes(self) -> int | None:
        return self.comparison.memory_budget_bytes

    @classmethod
    def of_run(
        cls,
        cfg: RunConfig,
        comparison: Comparison,
        persistent: ArmSummary,
        non_persistent: ArmSummary,
        *,
        findings: Sequence[Finding] = (),
        ranks: DistributedSummary | None = None,
    ) -> VerdictInputs:
        """The inputs of a run of `cfg`: its --min-gain, and its cap when its plan adapts."""
        return cls(
            comparison,
            persistent,
            non_persistent,
            min_gain=cfg.min_gain,
            max_trials=cfg.schedule.cap,
            findings=tuple(findings),
            ranks=ranks,
        )


def decide(inputs: VerdictInputs) -> Verdict:
    """enable, keep_off or neutral, and why, from every input in its order of weight
    (NOTE [one verdict])."""
    v = _on_measurements(inputs)
    v = weigh_findings(v, inputs.findings)
    if inputs.ranks is not None and inputs.ranks.nodes:
        v = _weigh_node(v, inputs.ranks, inputs.memory_budget_bytes)
    return v


def _on_measurements(inputs: VerdictInputs) -> Verdict:
    """enable: a significant saving of at least min_gain. keep_off: no significant
    gain (or a loss) while persistence holds memory, or persistence alone breaks the
    memory budget. neutral: anything else. With `max_trials` (the adaptive plan's cap)
    a verdict also needs the interval settled on one side of the --min-gain line; until
    then it is not decided. Every sentence comes from one Assessment (NOTE [words
    follow numbers])."""
    comparison, p_sum, min_gain = inputs.comparison, inputs.persistent, inputs.min_gain
    r = comparison.steady_epoch_ratio
    saved = comparison.saved_s_per_epoch
    if r is None or saved is None:
        return Verdict(
            "neutral",
            "Not enough steady epochs were measured to decide.",
            ("need at least one steady epoch (epoch ≥ 2) in each arm",),
        )
    a = assess(
        r,
        comparison.steady_epoch_p,
        comparison.confidence,
        min_gain,
        comparison.steady_epoch_n or 0,
        comparison.unit,
        comparison.steady_epoch_df,
    )
    plan: PlanMode = "adaptive" if inputs.max_trials is not None else "fixed"
    ev = _evidence(comparison, p_sum, r, saved, a, plan, inputs.max_trials)
    budget = inputs.memory_budget_bytes
    alone = comparison.non_persistent_over_budget is False
    if comparison.over_budget and budget is not None and alone and _adds_memory(comparison):
        return _over_budget_verdict(p_sum, ev, budget)
    v = _time_verdict(comparison, ev, min_gain)
    if comparison.over_budget and budget is not None:
        return _neither_fits(v, p_sum, inputs.non_persistent, budget, between=alone)
    return v


def decide_command(
    s: SavingEstimate | None,
    per_arm: int,
    min_gain: float,
    max_trials: int | None,
    findings: Sequence[Finding] = (),
) -> Verdict:
    """The verdict of `compare -- COMMAND` (NOTE [command arms]): time alone, by the
    rules and words of compare's, from the saving's steady ratio, then its arms'
    findings weighed as compare weighs them, but for a persistent-arm finding the
    other arm shows too (the same check at the same site): that one is the loader's,
    not a cost of persistence. No memory is sampled there, and one trial per arm
    decides nothing: its epochs are not units (NOTE [earned intervals]).
    `max_trials`: the adaptive plan's cap, as in `VerdictInputs`."""
    both = {finding_key(f) for f in findings if f.arm == "non_persistent"}
    costs = [f for f in findings if f.arm != "persistent" or finding_key(f) not in both]
    return weigh_findings(_command_on_time(s, per_arm, min_gain, max_trials), costs)


def finding_key(f: Finding) -> tuple[str, str]:
    """One finding per check and site, over a command's runs (loader ids differ)."""
    return f.id, str(f.evidence.get("site", ""))


def _command_on_time(
    s: SavingEstimate | None, per_arm: int, min_gain: float, max_trials: int | None
) -> Verdict:
    if s is None:
        return Verdict(
            "neutral",
            "Not enough steady epochs were measured to decide.",
            ("need at least one steady epoch (epoch ≥ 2) in each arm",),
            decided=False,
        )
    a = assess(s.ratio, s.p, s.confidence, min_gain, per_arm, s.unit, s.df)
    plan: PlanMode = "adaptive" if max_trials is not None else "fixed"
    ev = _Evidence(
        a,
        s.saved_s,
        interval_words(s.ratio, s.p, s.confidence, s.unit, per_arm),
        "compare -- COMMAND reports no memory figures: what persistent workers hold between "
        "epochs is not measured",
        plan,
        max_trials,
    )
    if s.unit != "trial":
        return _undecided(
            "Not decided: one trial per arm cannot show how trials differ.",
            f"an interval needs ≥ 2 trials per arm: {more_trials(plan, max_trials)}",
            ev,
        )
    return _time_verdict(None, ev, min_gain)


@dataclass(frozen=True)
class _Evidence:
    """What the verdict weighs: the assessment of the steady ratio, and both in words."""

    a: Assessment
    saved_s: float
    # "ratio 0.50, 95 % CI 0.48–0.52, t on the logs of 3 trial medians per arm, p=0.01"
    interval: str
    # What the persistent workers hold between epochs.
    memory: str
    plan: PlanMode
    max_trials: int | None

    @property
    def ratio(self) -> Ratio:
        return self.a.ratio


def _evidence(
    comparison: Comparison,
    p_sum: ArmSummary,
    r: Ratio,
    saved: float,
    a: Assessment,
    plan: PlanMode,
    max_trials: int | None,
) -> _Evidence:
    idle = p_sum.idle_workers_uss_bytes.median if p_sum.idle_workers_uss_bytes else None
    memory = (
        f"persistent workers hold {fmt_bytes(idle)} of private memory (USS) between epochs"
        if idle is not None
        else "memory between epochs was not sampled (--sample-interval 0 or --idle-ms 0), "
        "so its cost is unknown"
    )
    return _Evidence(
        a=a,
        saved_s=saved,
        interval=interval_words(
            r,
            comparison.steady_epoch_p,
            comparison.confidence,
            comparison.unit,
            comparison.steady_epoch_n or 0,
        ),
        memory=memory,
        plan=plan,
        max_trials=max_trials,
    )


def _adds_memory(comparison: Comparison) -> bool:
    """Persistence raises the tree's peak beyond noise: the peak-PSS ratio's interval
    means something and lies above 1 (NOTE [earned intervals])."""
    r = comparison.peak_total_pss_ratio
    return r is not None and r.informative and r.ci_low > 1.0


def _time_verdict(comparison: Comparison | None, ev: _Evidence, min_gain: float) -> Verdict:
    """The verdict on time alone; `comparison` None: the command form, which measures
    no memory and no run length (NOTE [command arms])."""
    a, r = ev.a, ev.ratio
    if not a.informative:
        return _cannot_decide_verdict(ev)
    if ev.plan == "adaptive" and a.side == "straddles":
        return _unsettled_verdict(ev, min_gain)
    if a.direction == "saving" and r.value <= a.line:
        return _enable_verdict(comparison, ev)
    if a.direction == "loss":
        return Verdict(
            "keep_off",
            "Keep persistent_workers off: it makes steady epochs slower.",
            (
                f"steady epochs are {fmt_change(r.value)} with persistent workers ({ev.interval})",
                ev.memory,
            ),
        )
    if a.direction == "saving":
        return Verdict(
            "neutral",
            f"Either way: persistence saves a little time ({fmt_seconds(ev.saved_s)} per epoch).",
            (
                f"steady epochs are {fmt_change(r.value)} ({ev.interval}), a real but small "
                f"saving (below the {min_gain * 100:.0f} % worth enabling for)",
                ev.memory,
            ),
        )
    if a.side != "above":
        # NOTE [no gain needs evidence]: "no gain" is a claim of its own; the interval
        # must rule out a saving worth enabling for before it may say keep_off.
        return _undecided(
            f"Not decided: no significant difference, but a saving of up to "
            f"{(1 - r.ci_low) * 100:.0f} % of the epoch is still possible.",
            f"no significant difference in steady epoch time ({ev.interval}), yet the "
            f"interval reaches below {a.line:.2f}: it cannot rule out a saving "
            f"worth enabling for (--min-gain {min_gain:g}); "
            + what_decides(ev.a, ev.plan, ev.max_trials),
            ev,
        )
    return _no_difference_verdict(comparison, ev)


def _cannot_decide_verdict(ev: _Evidence) -> Verdict:
    """An interval reaching past 10× either way is no finding (see NOTE [earned
    intervals])."""
    a, r = ev.a, ev.ratio
    units = "trials" if a.unit == "trial" else "steady epochs"
    level = f"{a.confidence * 100:.3g} %"
    if not r.has_interval:
        why = (
            f"no interval: one reading per arm, or {units} that did not differ at all, "
            "show no spread to judge it by"
        )
        show = "shows" if a.n == 1 else "show"
        headline = f"Not decided: {counted(a)} per arm {show} no spread to decide on."
    else:
        # The endpoints stay in the JSON: printed, they would read as a finding.
        why = (
            f"its {level} interval reaches more than {UNINFORMATIVE_FACTOR:g}× either way "
            f"of it: the {units} spread too much for {a.n} per arm to say anything"
        )
        headline = f"Not decided: {counted(a)} per arm with this spread cannot decide."
    return _undecided(
        headline,
        f"the steady epochs' ratio reads {fmt_ratio(r.value)}, but {why}; "
        + advice(a, ev.plan, ev.max_trials, max(a.n + 2, 4)),
        ev,
    )


def _unsettled_verdict(ev: _Evidence, min_gain: float) -> Verdict:
    a, r = ev.a, ev.ratio
    return _undecided(
        f"Not decided: after {counted(a)} per arm the saving may or may not reach "
        f"--min-gain {min_gain:g}.",
        f"steady epochs look {fmt_change(r.value)} with persistent workers "
        f"({ev.interval}), but the interval reaches both sides of {a.line:.2f}, "
        f"and the adaptive plan stopped at its cap (--max-trials {ev.max_trials}); "
        + what_decides(ev.a, ev.plan, ev.max_trials),
        ev,
    )


def _undecided(headline: str, why: str, ev: _Evidence) -> Verdict:
    """Neutral for now: `why` says what the evidence lacks and what would decide it;
    the memory sentence follows, as on every verdict."""
    return Verdict("neutral", headline, (why, ev.memory), decided=False)


def _over_budget_verdict(p_sum: ArmSummary, ev: _Evidence, budget: int) -> Verdict:
    peak = p_sum.peak_total_pss_bytes.median if p_sum.peak_total_pss_bytes else None
    reasons = [
        f"over budget: with persistent workers the process tree peaks at "
        f"{fmt_bytes(peak)} PSS, above --memory-budget {fmt_bytes(budget)}, which the "
        "run stays within without them"
    ]
    if ev.a.direction == "saving" and ev.a.informative:
        reasons.append(f"it would save {fmt_seconds(ev.saved_s)} per epoch ({ev.interval})")
    reasons.append(ev.memory)
    return Verdict(
        "keep_off",
        "Keep persistent_workers off: the run does not fit the memory budget with it.",
        tuple(reasons),
    )


def _neither_fits(
    v: Verdict, p_sum: ArmSummary, np_sum: ArmSummary, budget: int, *, between: bool
) -> Verdict:
    """Both arms break the budget, or it lies between peaks that do not differ beyond
    noise: persistence is not shown to be what breaks it, so the verdict on time
    stands, and says that neither setting is shown to fit."""
    p_peak = p_sum.peak_total_pss_bytes.median if p_sum.peak_total_pss_bytes else None
    np_peak = np_sum.peak_total_pss_bytes.median if np_sum.peak_total_pss_bytes else None
    peaks = (
        f"the process tree peaks at {fmt_bytes(p_peak)} PSS with persistent workers and "
        f"{fmt_bytes(np_peak)} without"
    )
    if between:
        line = (
            f"--memory-budget {fmt_bytes(budget)} lies between the two peaks ({peaks}), "
            "which do not differ beyond noise, so neither setting is shown to fit and "
            "persistence is not shown to be what breaks it"
        )
        headline = f"{v.headline} Neither setting is shown to fit the memory budget."
    else:
        line = (
            f"neither setting fits --memory-budget {fmt_bytes(budget)}: {peaks}, so "
            "persistence is not what breaks it"
        )
        headline = f"{v.headline} Neither setting fits the memory budget."
    return dataclasses.replace(v, headline=headline, reasons=(line, *v.reasons))


def _total_reason(comparison: Comparison, saved_s: float) -> str:
    """The saving over the run, with its sum: epoch 1 starts workers in both settings,
    so only the steady epochs save; a first epoch the cold ratio shows slower with
    persistence, or read slower once a side, is taken off (`analysis.comparison.compare`),
    noise is not."""
    steady = comparison.train_epochs - 1
    total = comparison.saved_s_total or 0.0
    penalty = saved_s * steady - total
    less = (
        f", less a first epoch {fmt_seconds(penalty)} slower with persistence"
        if penalty >= 0.0005
        else ""
    )
    return (
        f"over {plural(comparison.train_epochs, 'epoch')} that saves about "
        f"{fmt_seconds(total)} ({plural(steady, 'steady epoch')} × {fmt_seconds(saved_s)}{less})"
    )


def _enable_verdict(comparison: Comparison | None, ev: _Evidence) -> Verdict:
    extra = comparison.extra_idle_memory_bytes if comparison else None
    reasons = [
        f"steady epochs are {fmt_change(ev.ratio.value)} with persistent workers "
        f"({ev.interval}), saving {fmt_seconds(ev.saved_s)} per epoch"
    ]
    if comparison is not None and comparison.break_even_epochs is not None:
        reasons.append(f"it pays for itself from epoch {comparison.break_even_epochs} on")
    if comparison is not None and comparison.saved_s_total is not None:
        reasons.append(_total_reason(comparison, comparison.saved_s_per_epoch or 0.0))
    reasons.append(ev.memory)
    return Verdict(
        "enable",
        f"Enable persistent_workers: it saves {fmt_seconds(ev.saved_s)} per epoch "
        f"for {fmt_bytes(extra) if extra is not None else 'an unmeasured amount of'} memory "
        "held between epochs.",
        tuple(reasons),
    )


def _no_difference_verdict(comparison: Comparison | None, ev: _Evidence) -> Verdict:
    reasons = [f"no significant difference in steady epoch time ({ev.interval})"]
    if comparison is None:
        return Verdict(
            "neutral",
            "Either way: persistence does not change steady epoch time measurably.",
            (*reasons, ev.memory),
        )
    extra = comparison.extra_idle_memory_bytes
    if comparison.memory_budget_bytes is not None and not comparison.over_budget:
        reasons.append(f"within --memory-budget {fmt_bytes(comparison.memory_budget_bytes)}")
    reasons.append(ev.memory)
    if extra is not None and extra > MiB:
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


def weigh_findings(verdict: Verdict, findings: Sequence[Finding]) -> Verdict:
    """The verdict with what persistence does to the data the model sees.

    NOTE [the verdict is a promise]: a saving never outweighs training on other
    data than intended. Stale state in the persistent arm turns ENABLE into
    "enable only after the fix, naming the attribute", and anything else into
    KEEP_OFF. Repeated randomness, and a stream whose order one arm repeats, are bugs
    with or without persistence: the verdict names them and depends on them, but they
    do not decide between the arms.
    """
    relevant = [f for f in findings if f.id in CORRECTNESS]
    verdict = _mention_persistent_warnings(verdict, findings)
    if not relevant:
        return verdict
    reasons = [_reason(f) for f in relevant]
    depends = tuple(dict.fromkeys((*verdict.depends_on, *(f.id for f in relevant))))
    stale = next(
        (f for f in relevant if f.id == "stale-worker-state" and f.arm == "persistent"), None
    )
    if stale is None:
        return dataclasses.replace(
            verdict, reasons=(*verdict.reasons, *reasons), depends_on=depends
        )
    attr, epoch = stale.evidence["attribute"], stale.evidence["epoch"]
    if verdict.recommendation == "enable":
        headline = (
            f"Enable persistent_workers only after fixing `{attr}`: persistent workers never "
            f"see it change (from epoch {epoch}), so the model would train on other data. "
            + _upper_first(verdict.headline.removeprefix("Enable persistent_workers: "))
        )
        return Verdict("enable", headline, (*reasons, *verdict.reasons), depends, verdict.decided)
    headline = (
        f"Keep persistent_workers off: with it, workers never see `{attr}` change "
        f"(from epoch {epoch}), so the model would train on other data."
    )
    return Verdict("keep_off", headline, (*reasons, *verdict.reasons), depends)


def findings_the_verdict_must_mention(findings: Sequence[Finding]) -> list[tuple[str, str]]:
    """(id, one sentence) for each warning about the persistent arm other than the
    state findings (which the verdict words itself): a verdict that recommends
    persistence beside it must say what persistence carries with it (a leak, memory
    that keeps growing)."""
    return [
        (f.id, f"warning ({ARM_LABEL.get(f.arm or '', f.arm)} arm): {f.title} [{f.id}]")
        for f in findings
        if f.severity in ("warning", "error") and f.arm == "persistent" and f.id not in CORRECTNESS
    ]


def _mention_persistent_warnings(verdict: Verdict, findings: Sequence[Finding]) -> Verdict:
    """The verdict's reasons name each persistent-arm warning, and it depends on it."""
    mention = findings_the_verdict_must_mention(findings)
    if not mention:
        return verdict
    return dataclasses.replace(
        verdict,
        reasons=(*verdict.reasons, *(text for _, text in mention)),
        depends_on=tuple(dict.fromkeys((*verdict.depends_on, *(fid for fid, _ in mention)))),
    )


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _reason(f: Finding) -> str:
    e = f.evidence
    seen = (
        f"; persistence changes what the model sees from epoch {e['content_differs_from_epoch']}"
        if "content_differs_from_epoch" in e
        else ""
    )
    if f.id == "stale-worker-state":
        return (
            f"stale worker state ({f.arm} arm): the main process set `{e['attribute']}` to "
            f"{e['main_value']} at epoch {e['epoch']}, workers {e['workers']} kept "
            f"{e['worker_value']}{seen}"
        )
    if f.id == "stream-order-repeats":
        return f"the order the model trains on changes with the setting: {f.title}"
    if e.get("attribute") is None:
        # Told by the content digests alone (NOTE [random draws]).
        return f"repeated randomness: {f.title}"
    return f"repeated randomness: `{e['attribute']}` ({e['kind']}) is not reseeded per worker{seen}"


def _weigh_node(verdict: Verdict, ranks: DistributedSummary, budget: int | None) -> Verdict:
    """The verdict accounts for the node: all its ranks' workers, and its memory. The
    node that peaks highest with persistence speaks for the job."""
    node = max(ranks.nodes, key=lambda n: n.arms["persistent"].pss_total_bytes or 0)
    p = node.arms["persistent"]
    ran = [r for r in ranks.ranks if r.rank in node.ranks and not r.failed]
    reason = (
        f"on node {node.host}: {len(ran)} of {plural(len(node.ranks), 'rank')} completed; "
        f"they ran {plural(p.worker_processes, 'worker process')}; with persistence they "
        f"hold {fmt_bytes(p.idle_workers_uss_bytes)} between "
        f"epochs, and the node peaks at {fmt_bytes(p.pss_total_bytes)} PSS"
    )
    reasons = (*verdict.reasons, reason)
    if budget is not None and p.pss_total_bytes is not None and p.pss_total_bytes > budget:
        return Verdict(
            "keep_off",
            "Keep persistent_workers off: the node does not fit the memory budget with it.",
            (
                f"over budget: node {node.host} peaks at {fmt_bytes(p.pss_total_bytes)} PSS "
                f"across its ranks, above --memory-budget {fmt_bytes(budget)}",
                *reasons,
            ),
            depends_on=verdict.depends_on,
        )
    return dataclasses.replace(verdict, reasons=reasons)
