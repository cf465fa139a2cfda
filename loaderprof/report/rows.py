"""What the summary shows, defined once for every reporter (console, Markdown).

Each reporter lays these rows out in its own medium; the labels, the order and
the formatting of a figure with its spread live only here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loaderprof.model.metrics import UNINFORMATIVE_FACTOR, Ratio, Stat
from loaderprof.model.results import ARM_LABEL, ArmResult, GateResult, PlanOutcome, Report
from loaderprof.model.watch import WatchedLoader, whole_epochs
from loaderprof.report.partial import plan_words, unmeasured_arms
from loaderprof.units import fmt_bounds, fmt_bytes, fmt_ratio, fmt_seconds, plural

__all__ = [
    "ARM_LABEL",
    "ARM_SHORT",
    "SummaryRow",
    "caption",
    "fmt_ratio_interval",
    "fmt_stat",
    "summary_rows",
]

REUSED = {True: "yes", False: "no", None: "unclear"}
# A watched loader's: None there is nothing to reuse (no workers, or one epoch).
LOADER_REUSED = {True: "yes", False: "no", None: "–"}


def most_workers(peak: int | None) -> str:
    """A watched run's most worker processes at once; None: no memory tick counted them
    (the command ended before the sampler's first)."""
    return "not sampled" if peak is None else str(peak)


ARM_SHORT = {"persistent": "persist.", "non_persistent": "non-pers."}
# Each arm's colour in every figure (the plot, the HTML page).
ARM_COLOR = {"persistent": "#2a9d8f", "non_persistent": "#e76f51"}
# NOTE [main process share]: a page the main shares with k workers counts 1/(k+1) in
# its PSS, so its peak PSS falls as workers fork and rises as they exit: an arm's
# main reads lower with persistent workers alive while the tree's total is unchanged.
_MEMORY_CAPTION = (
    "memory: from the loader's construction until its workers are gone · "
    "USS: memory only that process holds (a worker's real cost) · "
    "PSS: shared pages split among their users · RSS counts shared pages in every process · "
    "main process PSS: its share of pages it shares with live workers, so it moves with "
    "how many are alive; the PSS total is what the tree costs"
)


def evidence_items(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A finding's evidence as (name, value) to print: what was not read is left out
    (a None printed reads as a figure), and lists and mappings read as themselves,
    not as Python (no quotes)."""

    def text(v: Any) -> str:
        if isinstance(v, Mapping):
            return "{" + ", ".join(f"{k}: {text(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(map(text, v)) + "]"
        return str(v)

    return [(k, text(v)) for k, v in evidence.items() if v is not None]


def interval_text(report: Report, *, brief: bool = False) -> str:
    """What the ratio column is (NOTE [trial is the unit]): a ratio of geometric
    means, which need not equal the medians' ratio beside it."""
    c = report.comparison
    unit = "trial medians" if c is None or c.unit == "trial" else "one trial's epochs"
    what = (
        "ratio of geometric means, persist. ÷ non-pers."
        if brief
        else f"ratio of geometric means of {unit}, persistent ÷ non-persistent"
    )
    wide = "" if brief else f"; (too wide): beyond {UNINFORMATIVE_FACTOR:g}× either way"
    if c is None or abs(c.confidence - 0.95) < 1e-9:
        return f"{what} [95 % CI{wide}]"
    level = f"{c.confidence * 100:.3g} %"
    if brief:
        return f"{what} [CI: steady {level}, rest 95 %]"
    return (
        f"{what} [CI: steady epoch at {level} (the adaptive plan's look), the rest at 95 %{wide}]"
    )


def shown_words(report: Report) -> str:
    """Which trial the single-trial tables show (`ArmResult.shown_trial`): the first
    timed one, or, in an arm that has none (a run cut short), a memory trial, whose
    epochs its sampling held up (NOTE [timing and memory trials])."""
    shown = [a.shown_trial for a in report.arms.values()]
    if all(t is None or t.times_epochs for t in shown):
        return "first timed trial"
    return "first trial, some untimed"


def caption(report: Report) -> str:
    return f"median ± half IQR (n) · {interval_text(report)} · {_MEMORY_CAPTION}"


def loader_text(report: Report) -> str:
    """'StatefulDataLoader · 2 workers · batch 32 · fork': the loader as it was built
    (its class only when --loader named one)."""
    lo = report.config.loader
    method = report.environment.get("start_method") or lo.mp_context or "default"
    cls = lo.loader_class
    parts = [cls.rpartition(":")[2]] if cls else []
    parts += [plural(lo.num_workers, "worker"), f"batch {lo.batch_size}", method]
    return " · ".join(parts)


def plan_text(report: Report) -> str:
    """'5 epochs × 2 trials per arm (adaptive: settled at look 1 of 4)', or what a
    partial report ran of its plan (NOTE [partial reports])."""
    cfg, plan = report.config, report.plan
    partial = plan_words(report)
    if partial is not None:
        return f"{plural(cfg.epochs, 'epoch')} · {partial}"
    if plan is None:
        return f"{plural(cfg.epochs, 'epoch')} × {plural(cfg.schedule.per_arm, 'trial')} per arm"
    return plan_summary(cfg.epochs, plan)


def plan_summary(epochs: int, plan: PlanOutcome) -> str:
    """'5 epochs × 2 trials per arm (adaptive: settled at look 1 of 4)': compare's
    words for the plan that ran, the command form's too."""
    text = f"{plural(epochs, 'epoch')} × {plural(plan.trials_per_arm, 'trial')} per arm"
    if plan.mode == "adaptive":
        state = "settled" if plan.settled else "not settled"
        text += f" (adaptive: {state} at look {plan.looks_taken} of {plan.looks_planned})"
    return text


def fmt_stat(stat: Stat | None, fmt: Callable[[float], str]) -> str:
    if stat is None:
        return "–"
    if stat.n == 1:
        return f"{fmt(stat.median)} (n=1)"
    return f"{fmt(stat.median)} ±{fmt(stat.iqr / 2)} ({stat.n})"


def fmt_ratio_interval(r: Ratio | None) -> str:
    """See NOTE [earned intervals]. An interval only where one was earned."""
    if r is None:
        return "–"
    if not r.has_interval:
        # Read once on a side, or no spread at all: a value, not an interval.
        return f"{fmt_ratio(r.value)} (no CI)"
    if not r.informative:
        return f"{fmt_ratio(r.value)} (too wide)"
    return f"{fmt_ratio(r.value)} {fmt_bounds(r.ci_low, r.ci_high, fmt_ratio)}"


def fmt_delta_bytes(a: Stat | None, b: Stat | None) -> str:
    return "–" if a is None or b is None else fmt_bytes(a.median - b.median, signed=True)


def _rate(v: float) -> str:
    return f"{v:,.0f}"


def _count(v: int | None) -> str:
    return "–" if v is None else str(v)


Kind = Literal["time", "bytes", "rate", ""]


@dataclass(frozen=True)
class SummaryRow:
    label: str
    persistent: str
    non_persistent: str
    compared: str = ""
    # "bold" for the rows the verdict rests on, "dim" for RSS shown only beside USS/PSS.
    emphasis: str = ""
    # True on the first row of a new section.
    section: bool = False
    # The figures behind the text, for a layout that picks one unit per row (the
    # one-screen summary); kind says how to read them. Rows without them, or with
    # `brief` False, show only in the full (-v) summary.
    stats: tuple[Stat | None, Stat | None] | None = None
    kind: Kind = ""
    ratio: Ratio | None = None
    brief: bool = True


def _peak_rss(arm: ArmResult) -> str:
    vals = [w.peak_rss_bytes for t in arm.trials for w in t.workers if w.peak_rss_bytes]
    return fmt_bytes(max(vals)) if vals else "–"


def first_item_extra(arm: ArmResult) -> Stat | None:
    """What a worker's first batch took beyond its typical one (its first fetch to its
    first batch, less its median batch): the start-up a Dataset pays on its first item,
    a lazy open(). From the workers' own timings in the trials that time their epochs,
    as worker start-up is (a memory trial's deep sampling holds its workers up);
    None where they lack them."""
    extras = [
        max(0.0, w.first_batch_s - w.first_fetch_s - w.median_batch_s)
        for t in arm.trials
        if t.times_epochs
        for w in t.workers
        if w.loader == "train"
        and w.first_batch_s is not None
        and w.first_fetch_s is not None
        and w.median_batch_s is not None
    ]
    return Stat.of(extras)


_FORMAT: dict[str, Callable[[float], str]] = {
    "time": fmt_seconds,
    "bytes": fmt_bytes,
    "rate": _rate,
}


def _row(
    label: str,
    a: Stat | None,
    b: Stat | None,
    kind: Kind,
    compared: str = "",
    ratio: Ratio | None = None,
    emphasis: str = "",
    section: bool = False,
    brief: bool = True,
) -> SummaryRow:
    fmt = _FORMAT[kind]
    return SummaryRow(
        label,
        fmt_stat(a, fmt),
        fmt_stat(b, fmt),
        compared,
        emphasis,
        section,
        stats=(a, b),
        kind=kind,
        ratio=ratio,
        brief=brief,
    )


def summary_rows(report: Report) -> list[SummaryRow]:
    """One row per figure: the two arms and the ratio (times) or difference (memory)."""
    p_arm, n_arm = report.arms["persistent"], report.arms["non_persistent"]
    p, n = p_arm.summary, n_arm.summary
    c = report.comparison

    def time_row(label: str, attr: str, ratio: Ratio | None, emphasis: str = "") -> SummaryRow:
        shown = ratio if c else None
        text = fmt_ratio_interval(ratio) if c else "–"
        a, b = getattr(p, attr), getattr(n, attr)
        return _row(label, a, b, "time", text, shown, emphasis)

    def mem_row(label: str, attr: str, **kw: Any) -> SummaryRow:
        a, b = getattr(p, attr), getattr(n, attr)
        return _row(label, a, b, "bytes", fmt_delta_bytes(a, b), **kw)

    # See NOTE [validation pass]. Its rows only when there was one.
    val = (
        [
            time_row("validation pass (steady)", "steady_val_s", None),
            mem_row("train pool USS during val", "val_train_pool_uss_bytes"),
        ]
        if p.steady_val_s is not None or n.steady_val_s is not None
        else []
    )
    return [
        SummaryRow("workers reused", REUSED[p.workers_reused], REUSED[n.workers_reused]),
        time_row("cold epoch (1)", "cold_epoch_s", c.cold_epoch_ratio if c else None),
        time_row(
            "steady epoch (2..N)",
            "steady_epoch_s",
            c.steady_epoch_ratio if c else None,
            emphasis="bold",
        ),
        time_row("first batch (steady)", "first_batch_s", c.first_batch_ratio if c else None),
        *val,
        _row("steady samples/s", p.steady_samples_per_s, n.steady_samples_per_s, "rate"),
        _row("worker start-up", p.worker_startup_s, n.worker_startup_s, "time"),
        # Where the user looks for "why is the first batch slow": when measured, and
        # where an arm ran no timed trial (an interrupted run), to read "not measured"
        # as the other timed rows do rather than vanish from the table.
        *(
            [_row("1st item extra", *extra, "time")]
            if any(extra := (first_item_extra(p_arm), first_item_extra(n_arm)))
            or unmeasured_arms(report)
            else []
        ),
        _row("shutdown after last epoch", p.shutdown_s, n.shutdown_s, "time", brief=False),
        # What persistence costs the whole tree first; the main process only under -v:
        # its PSS moves with how many workers share its pages at the peak, which the
        # PSS total already nets out (NOTE [main process share]).
        mem_row("peak PSS total", "peak_total_pss_bytes", section=True),
        mem_row("idle worker USS held", "idle_workers_uss_bytes", emphasis="bold"),
        mem_row("peak USS / worker", "peak_worker_uss_bytes"),
        mem_row("main process peak PSS", "peak_main_pss_bytes", brief=False),
        mem_row("main PSS before loader", "setup_main_pss_bytes", emphasis="dim", brief=False),
        SummaryRow(
            "worker processes at once",
            _count(p.peak_worker_processes),
            _count(n.peak_worker_processes),
            brief=False,
        ),
        SummaryRow(
            "(peak RSS / worker)",
            _peak_rss(p_arm),
            _peak_rss(n_arm),
            emphasis="dim",
            brief=False,
        ),
    ]


def epoch_count(ld: WatchedLoader) -> str:
    """'6', or '5 (+1 short)': epochs left early among whole ones (NOTE [epochs left
    early]) and epochs cut (ended by no loop) are counted apart from the whole ones."""
    whole = len(whole_epochs(ld.epochs))
    cut = sum(1 for e in ld.epochs if e.end_s is None)
    short = len(ld.epochs) - whole - cut
    extra = [f"+{n} {what}" for n, what in ((short, "short"), (cut, "cut")) if n]
    return f"{whole} ({', '.join(extra)})" if extra else str(whole)


# Why a gate past its limit is inconclusive, in the caption's words.
_STRADDLES = "the interval straddles it"
_NO_INTERVAL = "it has no interval, read once or without spread"
_TOO_WIDE = "its interval is too wide to say"


def _why_inconclusive(g: GateResult) -> str:
    if not g.has_interval:
        return _NO_INTERVAL
    return _STRADDLES if g.informative else _TOO_WIDE


def gates_caption(gates: Sequence[GateResult]) -> str:
    """The legend under a gates table, its "inconclusive" in the words of the gates it
    explains: no interval and one too wide are reasons of their own, not a straddle."""
    looked = any(g.confidence != 0.95 and g.has_interval and g.informative for g in gates)
    seen = {_why_inconclusive(g) for g in gates if g.status == "inconclusive"}
    told = [w for w in (_STRADDLES, _NO_INTERVAL, _TOO_WIDE) if w in seen] or [_STRADDLES]
    return (
        ("intervals at 95 % unless the row names its level · " if looked else "")
        + "fail: the whole interval is past the limit · inconclusive: the median is past "
        f"it but {' or '.join(told)} (fails only with --strict)"
    )
