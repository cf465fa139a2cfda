"""Where an epoch waits for data, in words (NOTE [data wait]): the one sentence builder
for compare's screen and Markdown and watch's. Pure functions of the results."""

from __future__ import annotations

from collections.abc import Mapping

from loaderprof.model.datawait import WaitSplit
from loaderprof.model.results import ARM_LABEL, ARMS, Report
from loaderprof.model.watch import WatchedLoader
from loaderprof.units import fmt_pct, fmt_seconds

COMPARE_HEAD = "data wait in the median steady epoch (the main process inside its loaders)"


def _pct(share: float | None) -> str:
    return "" if share is None else f" ({fmt_pct(share)})"


def _firsts(passes: int) -> str:
    """What `first_s` waited for: an epoch with a validation pass (or the script's other
    passes) waits for each pass's first batch (NOTE [data wait])."""
    return "the 1st batch" if passes <= 1 else f"the 1st batches of {passes} passes"


def _split(w: WaitSplit) -> str:
    """'1.20 s of 2.90 s (41 %): 1.10 s for the 1st batch, 100.0 ms after'."""
    return (
        f"{fmt_seconds(w.wait_s)} of {fmt_seconds(w.epoch_s)}{_pct(w.wait_share)}: "
        f"{fmt_seconds(w.first_s)} for {_firsts(w.passes)}, {fmt_seconds(w.steady_s)} after"
    )


def compare_wait_rows(report: Report, *, cold: bool = False) -> list[tuple[str, str]]:
    """(label, text) rows under COMPARE_HEAD: each arm's median steady epoch (with
    `cold`, its cold epoch too), its wait of its wall split at the first batch; then
    what persistence changed before the first batch (label ""). None where no arm
    measured its waits (a report written before they were)."""
    arms = [name for name in ARMS if name in report.arms]
    return arm_wait_rows(
        {name: report.arms[name].summary.steady_wait for name in arms},
        {name: report.arms[name].summary.cold_wait for name in arms} if cold else None,
    )


def arm_wait_rows(
    steady: Mapping[str, WaitSplit | None], cold: Mapping[str, WaitSplit | None] | None = None
) -> list[tuple[str, str]]:
    """compare_wait_rows from each arm's waits (both forms of compare: the command's
    arms have no Report)."""
    rows = [(ARM_LABEL[name], _split(w)) for name, w in steady.items() if w is not None]
    if not rows:
        return []
    for name, w in (cold or {}).items():
        if w is not None:
            rows.append((f"{ARM_LABEL[name]}, cold", _split(w)))
    on, off = steady.get("persistent"), steady.get("non_persistent")
    if on is not None and off is not None:
        rows.append(("", _compare_action(on, off)))
    return rows


# The share of the non-persistent arm's waits after the first batch that persistence
# must cut before the sentence says it cut them (one median epoch a side: a smaller
# difference is not told from noise).
AFTER_CUT_SHARE = 0.2


def _compare_action(on: WaitSplit, off: WaitSplit) -> str:
    cut = off.first_s - on.first_s
    change = f"({fmt_seconds(off.first_s)} → {fmt_seconds(on.first_s)})"
    firsts = _firsts(max(on.passes, off.passes))
    before = (
        f"persistence cuts the wait to {firsts} by {fmt_seconds(cut)} an epoch {change}"
        if cut > 0
        else f"persistence does not cut the wait to {firsts} {change}"
    )
    after = off.steady_s - on.steady_s
    if after > AFTER_CUT_SHARE * off.steady_s:
        # Likely a fresh pool still starting after its first batch (its other workers'
        # first items; under spawn, workers that start one after another): not measured,
        # so said as a likelihood. Persistence cut those waits; what is left is the pace.
        return (
            f"{before}, and the waits after it by {fmt_seconds(after)} "
            f"({fmt_seconds(off.steady_s)} → {fmt_seconds(on.steady_s)}: a fresh pool may "
            f"still be starting after {firsts}); the {fmt_seconds(on.steady_s)} left are what "
            "more workers or prefetch would shorten"
        )
    return (
        f"{before}; the waits after it ({fmt_seconds(on.steady_s)} persistent, "
        f"{fmt_seconds(off.steady_s)} not) are what more workers or prefetch would shorten"
    )


WATCH_HEAD = (
    "Data wait (the main process inside the loader; after an epoch's first batch, "
    "what more workers or prefetch would shorten)"
)


def _first_reason(ld: WatchedLoader, first_s: float) -> str:
    """What the wait before the first batch (`first_s`) is, for this loader's
    settings."""
    if ld.num_workers == 0:
        return "num_workers=0: loaded in the main process"
    if not ld.persistent_workers:
        # The fresh workers' start-up, then their first batch, named with its own figure.
        startup = ld.worker_startup_s
        took = f" of {fmt_seconds(startup.median)} a worker" if startup else ""
        part = f"worker start-up{took}, then the first batch"
        # Only a loader iterated again has later epochs whose start-up persistence skips
        # (one built every epoch is `loader-recreated`: persistence alone cannot help).
        if ld.wait_epochs == "steady":
            # Kept workers skip more than the start-up: the work a fresh worker does in
            # its first items (a lazy open, a cache filled) lies inside the first batch,
            # and compare measures the two together. A kept pool still waits for its
            # own first batch, which this run did not measure: the saving is a bound.
            return (
                f"{part}: persistent_workers=True skips the start-up and the fresh "
                f"workers' first-item work: it saves up to {fmt_seconds(first_s)} less a "
                "kept pool's own first-batch wait"
            )
        return part
    if ld.wait_epochs == "steady":
        return "workers kept"
    return "worker start-up, once: workers kept"


def watch_wait_text(ld: WatchedLoader) -> str | None:
    """'each steady epoch waits 3.40 s of 61.00 s (6 %) for data: 3.10 s before its
    first batch (worker start-up: ...), 300.0 ms after it; the step takes 57.60 s'."""
    w = ld.wait
    if w is None:
        return None
    which = "each steady epoch" if ld.wait_epochs == "steady" else "its first epoch"
    return (
        f"{which} waits {fmt_seconds(w.wait_s)} of {fmt_seconds(w.epoch_s)}"
        f"{_pct(w.wait_share)} for data: {fmt_seconds(w.first_s)} before its first batch "
        f"({_first_reason(ld, w.first_s)}), {fmt_seconds(w.steady_s)} after it; the step takes "
        f"{fmt_seconds(w.step_s)}"
    )


def watch_wait_line(ld: WatchedLoader) -> str | None:
    """The loader's sentence, named: 'L1: each steady epoch waits ...'."""
    text = watch_wait_text(ld)
    return None if text is None else f"{ld.id}: {text}"
