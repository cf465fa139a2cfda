"""`compare -- COMMAND`'s screen: a pure function of the CommandReport, plain text
that fits the width it is given (80 columns and up)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from loaderprof.model.command import CommandReport, CommandTrial
from loaderprof.model.metrics import UNINFORMATIVE_FACTOR, Stat
from loaderprof.model.results import Finding, GateResult
from loaderprof.report.datawait import COMPARE_HEAD, arm_wait_rows
from loaderprof.report.rows import gates_caption, plan_summary
from loaderprof.report.wrap import wrap_text

_ARM = {"persistent": "persistent", "non_persistent": "non-persistent"}


def _s(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.3f} s" if abs(v) < 1 else f"{v:.2f} s"


def _stat(st: Stat | None) -> str:
    return "–" if st is None else _s(st.median)


def _fit(text: str, width: int) -> str:
    """A path too long for the line keeps its end (the file and line)."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _what_to_set(r: CommandReport) -> list[str]:
    """What the verdict asks of the script's own setting: nothing where the script asks
    for it already, and the framework's own setting where one builds the loader
    (inside/frameworks.py)."""
    main = next((t.main for t in r.trials if t.main is not None), None)
    rec = r.verdict.recommendation if r.verdict is not None else "neutral"
    if main is None or rec == "neutral":
        return []
    want = rec == "enable"
    knob = main.setting or "persistent_workers"
    if main.persistent_asked == want:
        return [f"  the script asks {knob}={want} already: keep it"]
    turn = "on" if want else "off"
    if main.setting:
        return [f"  turn it {turn} with {knob}={want}: the framework builds the loader"]
    # "Keep persistent_workers off" reads as if it were off: this script turns it on.
    return [] if want else [f"  the script asks {knob}=True: turn it off ({knob}=False)"]


def _head(r: CommandReport, width: int) -> list[str]:
    lead = "loaderprof compare -- "
    out = [lead + _fit(shlex.join(r.command), width - len(lead))]
    first = r.trials[0] if r.trials else None
    main = first.main if first else None
    if main is not None:
        asked = "True" if main.persistent_asked else "False"
        out.append("main loader: " + _fit(main.site, width - 13))
        knob = main.setting or "persistent_workers"
        out.append(f"  {main.num_workers} workers; the script asks {knob}={asked}")
        if main.others:
            # See NOTE [epoch of the training].
            # By site: a loader rebuilt for each pass (HF's eval loader) is one line.
            many = len(main.others) > 1
            lead = f"  each epoch also holds {'passes' if many else 'a pass'} of loaders built at "
            out.append(lead + _fit(", ".join(main.others), width - len(lead)))
        if main.ranks:
            # NOTE [ranks in a command]
            out.append(f"  {main.ranks} ranks built it: each epoch is its slowest rank's")
    if r.loader_site:
        lead = "  switched only at --loader-site "
        out.append(lead + _fit(r.loader_site, width - len(lead)))
    n = len(r.trials)
    order = " ".join("A" if t.arm == "persistent" else "B" for t in r.trials)
    stopped = sum(t.stopped for t in r.trials)
    low, high = _epochs_run(r)
    if stopped == n:
        how = f"loaderprof stopped each after epoch {r.epochs}"
    elif stopped:
        how = f"loaderprof stopped {stopped} of {n} after epoch {r.epochs}, the rest ended"
    else:
        ran = f"{low}" if low == high else f"{low} to {high}"
        how = f"each ended by itself after {ran} epochs"
    out.append(f"{n} trial{'s' * (n != 1)} ({order}; A persistent): {how}")
    if high < r.epochs:
        out.append(
            f"  warning: the command ran {high if low == high else f'{low} to {high}'} "
            f"epochs of its main loader, not --epochs {r.epochs}: the figures are of those"
        )
    if r.max_batches is not None:
        full = _full_batches(r)
        of = f" of {full}" if full else ""
        out.append(
            f"  --max-batches {r.max_batches}: each epoch of the switched loaders ended "
            f"after {r.max_batches}{of} batches; the script saw shorter epochs"
        )
        out += _cut_warnings(r, full)
    if r.plan is not None:
        # compare's words for the plan that ran (report/rows.plan_summary).
        words = r.plan.stopped if not r.complete else plan_summary(_epochs_run(r)[1], r.plan)
        out.append(f"plan: {words}")
    return out


def _cut_warnings(r: CommandReport, full: int | None) -> list[str]:
    """What the projection (NOTE [short epochs]) cannot do with this cut."""
    if full is None:
        return ["  the main loader has no len(): the figures and the verdict are of cut epochs"]
    main = r.trials[0].main if r.trials else None
    if main is None or r.max_batches is None:
        return []
    queued = main.num_workers * (main.prefetch_factor or 2)
    if r.max_batches >= 4 * queued:
        return []
    return [
        f"  warning: the first {queued} batches of an epoch are prefetched (or wait for a "
        "pool just started), so a cut this short projects wrong; use --max-batches "
        f"{4 * queued} or more"
    ]


def _epochs_run(r: CommandReport) -> tuple[int, int]:
    """The fewest and the most epochs a trial measured: --epochs, unless the command
    ended by itself before it."""
    ran = [len(t.epochs) for t in r.trials if t.epochs]
    return (min(ran), max(ran)) if ran else (r.epochs, r.epochs)


def _full_batches(r: CommandReport) -> int | None:
    """The batches a whole epoch of the main loader has, as its len() says."""
    return next((e.planned_batches for t in r.trials for e in t.epochs if e.planned_batches), None)


def _arms(r: CommandReport) -> list[str]:
    p, n, epochs = r.persistent, r.non_persistent, _epochs_run(r)[1]
    cut = " (cut)" if r.max_batches is not None else ""
    rows = [
        ("start to main loader built", lambda a: a.built_s),
        ("before epoch 1 (imports, set-up)", lambda a: a.before_first_s),
        (f"cold epoch (1){cut}", lambda a: a.cold_epoch_s),
        (f"steady epoch (2..{epochs}){cut}", lambda a: a.steady_epoch_s),
    ]
    full = _full_batches(r)
    if r.max_batches is not None and full:
        # The saving and the verdict are of these (see NOTE [cut epochs]).
        rows.append((f"  projected to {full} batches", lambda a: a.projected_steady_epoch_s))
    out = [f"{'median of trials':<34}{'persistent':>14}{'non-persistent':>16}"]
    for label, get in rows:
        a = _stat(get(p)) if p else "–"
        b = _stat(get(n)) if n else "–"
        out.append(f"  {label:<32}{a:>14}{b:>16}")
    return out


def _trials(trials: Sequence[CommandTrial], width: int) -> list[str]:
    out = ["trial  arm              before   epochs (s)"]
    for t in trials:
        head = f"{t.index:>5}  {_ARM[t.arm]:<15}{_s(t.before_first_s):>8}   "
        walls = " ".join(f"{e.wall_s:.3f}" for e in t.epochs)
        if len(head) + len(walls) > width:
            walls = walls[: width - len(head) - 1].rsplit(" ", 1)[0] + " …"
        out.append(head + walls)
    return out


def _saving(r: CommandReport) -> list[str]:
    s = r.saving
    if s is None:
        return ["saving per steady epoch: – (no steady epoch in one of the arms)"]
    pct = (1 - s.ratio.value) * 100
    level = f"{s.confidence * 100:.3g} %"
    if s.low_s is not None and s.high_s is not None:
        ci = f" ({level} CI {_s(s.low_s)} to {_s(s.high_s)})"
    elif s.unit != "trial":
        ci = " (no interval: it needs ≥ 2 trials per arm)"
    elif s.ratio.has_interval:
        # Its endpoints, printed, would read as a finding (NOTE [earned intervals]).
        wide = f"{UNINFORMATIVE_FACTOR:g}× either way"
        ci = f" (no interval: its {level} interval reaches more than {wide})"
    else:
        ci = " (no interval: the trials show no spread)"
    full = _full_batches(r) if r.max_batches is not None else None
    # The saving is of projected epochs where they were cut (NOTE [short epochs]).
    which = f"steady epoch projected to {full} batches" if full else "steady epoch"
    base = s.non_persistent_s
    # The figures it is the difference of, which the medians above need not give.
    of = "trials' medians" if s.unit == "trial" else "steady epochs"
    means = (
        ""
        if base is None
        else f" ({_s(base)} → {_s(base * s.ratio.value)}, geometric means of the {of})"
    )
    return [f"saving per {which}: {_s(s.saved_s)}{means}, {pct:.0f} % of the epoch{ci}"]


def render(r: CommandReport, width: int = 80) -> str:
    out = _head(r, width)
    if r.nothing_to_compare:
        out += [
            "",
            "nothing to compare: persistence cannot change this command's epochs,",
            f"  {r.nothing_to_compare}.",
            "  change the line: " + _fit(r.site or "?", width - 19),
        ]
        return "\n".join(_wrap(out, width)) + "\n"
    out += ["", *_arms(r), ""]
    out += _trials(r.trials, width)
    out += ["", *_saving(r)]
    if r.verdict is not None:
        out.append(f"verdict: {r.verdict.recommendation}: {r.verdict.headline}")
        out += [f"  {reason}" for reason in r.verdict.reasons]
        out += _what_to_set(r)
    out += _waits(r, width)
    out += _findings(r.findings, r.site, width)
    out += _baseline(r, width)
    if r.interrupted:
        out.append(f"interrupted: {len(r.trials)} trial(s) measured, the report is partial")
    out += [f"warning: {w}" for w in r.warnings]
    text = "\n".join(_wrap(out, width)) + "\n"
    return text + ("\n" + _gates(r, width) if r.gates else "")


def _baseline(r: CommandReport, width: int) -> list[str]:
    """The saved report the relative gates were judged against, each of their figures
    as it was there (the gates table has new ÷ baseline), and what differs."""
    b = r.baseline
    if b is None:
        return []
    from loaderprof.analysis.gates import format_value

    out = ["", "baseline: " + _fit(b.path, width - 10)]
    if b.created:
        out.append(f"  saved {b.created}")
    for g in r.gates:
        if g.mode == "rel" and g.baseline is not None:
            out.append(f"  {g.metric}: {format_value(g.metric, g.baseline)} in the baseline")
    if b.differences:
        out.append(
            "  warning: the baseline differs from this run, so its timings may not "
            "transfer: " + "; ".join(b.differences)
        )
    return out


def _gate_row(g: GateResult) -> tuple[str, str, str | None]:
    """(gate, value [CI], the line under it) of one gate; a relative gate's value is
    new ÷ baseline, a finding gate's the warnings the persistent arm showed."""
    from loaderprof.analysis.gates import FINDING, format_result

    shown, _ = format_result(g)
    # A finding gate's limit ("absent") goes without saying.
    name = g.metric if g.metric.startswith(FINDING) else g.gate
    if g.status == "skipped":
        return name, shown, g.message.partition("skipped (")[2].removesuffix(")") or None
    if g.metric.startswith(FINDING):
        return name, "none found" if not g.value else f"{g.value:.0f} found", None
    if g.mode == "rel":
        return g.gate, shown, f"new ÷ baseline; limit {g.op} {g.limit:.3f}"
    return g.gate, shown, None


def _gates(r: CommandReport, width: int) -> str:
    """compare's gates (report/console.gates_table) as plain text: a row too wide for
    the width puts its value under its gate rather than cut either."""
    from loaderprof.analysis.gates import FINDING

    rows = [(g.status, *_gate_row(g)) for g in r.gates]
    looked = any(g.confidence != 0.95 and g.has_interval and g.informative for g in r.gates)
    head = "value [CI]" if looked else "value [95 % CI]"
    sw = max(len("result"), *(len(s) for s, *_ in rows)) + 3
    gw = max(len(name) for _, name, _, _ in rows)
    vw = max(len(head), *(len(v) for _, _, v, _ in rows))
    total = sw + gw + 2 + vw
    flat = total <= width
    # Notes and the caption wrap at the table's own width, as compare's caption does.
    cap = min(width, max(total, 64))
    out = [f"Gates: {(r.gate_status or '').upper()}"]
    if flat:
        out += [f"{'result':<{sw}}{'gate':<{gw}}  {head:>{vw}}", "─" * total]
    for status, name, value, note in rows:
        if flat:
            out.append(f"{status:<{sw}}{name:<{gw}}  {value:>{vw}}")
        else:
            out += [_fit(f"{status:<{sw}}{name}", width), " " * (sw + 2) + value]
        if note:
            out += _hang(" " * (sw + 2), note, sw + 2, cap)
    caption = gates_caption(r.gates)
    if any(g.metric.startswith(FINDING) for g in r.gates):
        caption += " · finding:ID counts the persistent arm's warnings of that id"
    out += wrap_text(caption, cap)
    return "\n".join(out) + "\n"


def _hang(label: str, text: str, column: int, width: int) -> list[str]:
    """`label` in its column, `text` after it wrapped under itself."""
    return wrap_text(
        text, width, initial_indent=f"{label:<{column}}", subsequent_indent=" " * column
    )


def _waits(r: CommandReport, width: int) -> list[str]:
    """The sentence compare's Dataset form prints, per arm (see NOTE [data wait])."""
    arms = {"persistent": r.persistent, "non_persistent": r.non_persistent}
    rows = arm_wait_rows({k: a.steady_wait for k, a in arms.items() if a is not None})
    if not rows:
        return []
    column = max(len(label) for label, _ in rows) + 3
    out = ["", COMPARE_HEAD]
    for label, text in rows:
        out += _hang(f"  {label or '→'}", text, column, width)
    return out


def _findings(findings: Sequence[Finding], main_site: str | None, width: int) -> list[str]:
    """Watch's findings, each named by its arm (see NOTE [command findings]), then where
    the loaders they name were built: the screen shows no table of them."""
    if not findings:
        return []
    out = ["", "findings (each from the arm whose trials showed it):"]
    sites: dict[str, set[str]] = {}
    for f in findings:
        arm = _ARM.get(f.arm or "", f.arm or "?")
        seen = f.evidence.get("trials", [])
        where = f"{arm} arm, trial{'s' * (len(seen) != 1)} {', '.join(map(str, seen))}"
        out += _hang(f"{f.severity.upper():<8}", f"{f.title} [{f.id}] ({where})", 8, width)
        out += _hang("", f"fix: {f.fix}", 8, width)
        lid, site = f.evidence.get("loader"), f.evidence.get("site")
        if isinstance(lid, str) and isinstance(site, str):
            sites.setdefault(lid, set()).add(site)
    if sites:
        named = [
            f"{lid} at {' or '.join(sorted(s))}{' (the main loader)' * (main_site in s)}"
            for lid, s in sorted(sites.items(), key=lambda kv: (len(kv[0]), kv[0]))
        ]
        out += _hang("", f"loaders named: {', '.join(named)}", 8, width)
    return out


def _wrap(lines: Sequence[str], width: int) -> list[str]:
    """Lines longer than the width break at a space, the rest indented; never between
    a number and its unit ("0.275 s", "99.4 %")."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        out += wrap_text(line, width, subsequent_indent=indent)
    return out


def command_markdown(r: CommandReport) -> str:
    """--markdown: the screen at 80 columns in a fenced block (a CI job summary keeps
    its columns), under the verdict as a heading."""
    head = f"{r.verdict.recommendation}: {r.verdict.headline}" if r.verdict else "no verdict"
    if r.nothing_to_compare:
        head = "nothing to compare"
    return f"## loaderprof compare -- COMMAND: {head}\n\n```text\n{render(r, width=80)}```\n"
