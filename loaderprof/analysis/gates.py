"""CI gates: thresholds on report metrics, judged with their intervals.

Pure: gates take metrics and return results; they never exit. A gate
*fails* only when the whole 95 % interval lies past the limit. When the
median is past it but the interval straddles it, the gate is *inconclusive*
(a warning; `--strict` makes it fail). Otherwise it *passes*. A gate that
cries wolf on a noisy shared runner gets deleted, so noise alone must never
fail one.

Expressions are `METRIC:LIMIT`:

* absolute: `<=0.95`, `<1.2`, `>=1000`, `<=1.5GiB`, `<=250ms`, `<=2s`;
* relative to a baseline report: `+10%` (at most 10 % above the baseline),
  `-5%` (at most 5 % below it).

Metric names: the comparison ratios (`steady_epoch_ratio`, `cold_epoch_ratio`,
`first_batch_ratio`, `peak_total_pss_ratio`), the saving per steady epoch
(`saved_s_per_epoch`, seconds, e.g. `>=100ms`), and per-arm figures
(`steady_epoch_s`, `cold_epoch_s`, `first_batch_s`, `worker_startup_s`,
`steady_samples_per_s`, `peak_worker_uss`, `peak_total_pss`,
`idle_workers_uss`, `peak_main_pss`), which mean the persistent arm unless
prefixed `non_persistent.` (or `persistent.`).

`finding:ID` (e.g. `finding:stale-worker-state`) fails when a lifecycle check
reported that finding.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loaderprof.analysis.summary import MEMORY_METRICS
from loaderprof.checks.catalogue import ATTACH_FINDING_IDS, FINDING_IDS, WATCH_FINDING_IDS
from loaderprof.errors import UsageError
from loaderprof.model.command import CommandReport
from loaderprof.model.metrics import UNINFORMATIVE_FACTOR, MetricValue
from loaderprof.model.results import GateResult, GateStatus, Report
from loaderprof.units import fmt_bounds, fmt_bytes, fmt_seconds, parse_size

RATIO_METRICS = (
    "steady_epoch_ratio",
    "cold_epoch_ratio",
    "first_batch_ratio",
    "peak_total_pss_ratio",
)
# Persistent against non-persistent, in seconds: non-persistent minus persistent.
SAVING_METRICS = ("saved_s_per_epoch",)
TIME_METRICS = ("steady_epoch_s", "cold_epoch_s", "first_batch_s", "worker_startup_s")
BYTE_METRICS = (*MEMORY_METRICS, "node_pss_total", "node_idle_workers_uss")
RATE_METRICS = ("steady_samples_per_s", "node_worker_processes")
ARM_METRICS = TIME_METRICS + BYTE_METRICS + RATE_METRICS
ARM_PREFIXES = ("persistent", "non_persistent")

Kind = Literal["ratio", "time", "bytes", "rate", "count"]
# `finding:ID` (a lifecycle finding that must be absent) is a count with limit 0.
FINDING = "finding:"

_ABS = re.compile(r"^\s*(<=|<|>=|>)\s*(.+?)\s*$")
_REL = re.compile(r"^\s*([+-])\s*([0-9]*\.?[0-9]+)\s*%\s*$")
_TIME = re.compile(r"^([0-9]*\.?[0-9]+)\s*(ms|s|us|µs)?$")


@dataclass(frozen=True)
class Gate:
    metric: str
    expression: str
    # "abs": compare to `limit`; "rel": compare value / baseline to `limit`.
    mode: Literal["abs", "rel"]
    op: Literal["<=", "<", ">=", ">"]
    limit: float

    @property
    def kind(self) -> Kind:
        return metric_kind(self.metric)

    def __str__(self) -> str:
        return f"{self.metric}:{self.expression}"


def metric_kind(metric: str) -> Kind:
    if metric.startswith(FINDING):
        return "count"
    base = metric.split(".", 1)[-1]
    if base in RATIO_METRICS:
        return "ratio"
    if base in TIME_METRICS or base in SAVING_METRICS:
        return "time"
    if base in BYTE_METRICS:
        return "bytes"
    return "rate"


def normalize_metric(name: str, known: Sequence[str] | None = None) -> str:
    """`persistent.steady_epoch_s` from what a user wrote (no prefix: the persistent
    arm); `known`: the metrics offered when the name is unknown (compare's all)."""
    name = name.strip()
    arm, dot, base = name.partition(".")
    if not dot:
        arm, base = "", name
    if arm and arm not in ARM_PREFIXES:
        raise UsageError(
            f"unknown arm {arm!r} in gate metric {name!r}: use persistent. or non_persistent."
        )
    if base in RATIO_METRICS or base in SAVING_METRICS:
        if arm:
            raise UsageError(f"{base} compares the two arms; it takes no arm prefix")
        return base
    if base.endswith("_bytes"):
        base = base[: -len("_bytes")]
    if base not in ARM_METRICS:
        raise _unknown_metric(name, arm, base, known)
    return f"{arm or 'persistent'}.{base}"


def _unknown_metric(name: str, arm: str, base: str, known: Sequence[str] | None) -> UsageError:
    """One line with the nearest metric, in the arm the user named: a hint that
    dropped the prefix would gate the other arm."""
    import difflib

    names = list(known or (*RATIO_METRICS, *SAVING_METRICS, *ARM_METRICS))
    bases: dict[str, str] = {}
    for n in names:  # an unprefixed name is the persistent arm's: the first listed
        bases.setdefault(n.partition(".")[2] or n, n)
    close = difflib.get_close_matches(base, list(bases), n=1)
    hint = ""
    if close:
        near = close[0]
        if near in ARM_METRICS:
            near = f"{arm}.{near}" if arm else bases[near]
        hint = f" (did you mean {near!r}?)"
    return UsageError(f"unknown gate metric {name!r}{hint}; known: {', '.join(names)}")


def _parse_number(kind: Kind, text: str, gate: str) -> float:
    text = text.strip()
    try:
        if kind == "bytes":
            return float(parse_size(text))
        if kind == "time":
            m = _TIME.match(text)
            if not m:
                raise ValueError(text)
            unit = m.group(2) or "s"
            scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}[unit]
            return float(m.group(1)) * scale
        value = float(text)
    except ValueError:
        units = {"bytes": " (e.g. 1.5GiB)", "time": " (e.g. 250ms or 2s)"}.get(kind, "")
        raise UsageError(f"bad limit in gate {gate!r}: {text!r} is not a number{units}") from None
    if not math.isfinite(value):
        raise UsageError(f"bad limit in gate {gate!r}: {text!r} is not finite")
    return value


def parse_gate(text: str) -> Gate:
    metric_text, sep, expr = text.partition(":")
    if not sep or not metric_text.strip() or not expr.strip():
        # A shell reads an unquoted < or > as a redirect, leaving `METRIC:` alone.
        shell = (
            "; quote it in a shell (an unquoted < or > redirects)"
            if sep and not expr.strip()
            else ""
        )
        raise UsageError(
            f"bad gate {text!r}: expected METRIC:LIMIT, e.g. 'steady_epoch_ratio:<=0.95'{shell}"
        )
    return make_gate(metric_text, expr, source=text)


def finding_gate(
    finding_id: str, shown: str, known: Sequence[str] = FINDING_IDS, who: str = "compare"
) -> Gate:
    """`finding:ID`, once its id is one that `who`'s checks can report: a gate on an id
    no check reports could never fail."""
    finding_id = finding_id.strip()
    if finding_id not in known:
        import difflib

        close = difflib.get_close_matches(finding_id, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(
            f"bad gate {shown!r}: {who} finds no {finding_id!r}{hint}; known: {', '.join(known)}"
        )
    return Gate(f"{FINDING}{finding_id}", "absent", "abs", "<=", 0.0)


def watch_gates(fail_on: Sequence[str], *, pid: bool = False) -> tuple[str, ...]:
    """The finding ids of watch's `--fail-on finding:ID` gates (its only kind: a watched
    run has no arms to set figures against), each one its checks can report (`pid`:
    those of `watch --pid`)."""
    known, who = (ATTACH_FINDING_IDS, "watch --pid") if pid else (WATCH_FINDING_IDS, "watch")
    ids = []
    for g in fail_on:
        if not g.startswith(FINDING) or not g[len(FINDING) :]:
            raise UsageError(f"--fail-on {g!r}: watch gates on findings only (finding:ID)")
        ids.append(finding_gate(g[len(FINDING) :], f"--fail-on {g}", known, who).metric)
    return tuple(i[len(FINDING) :] for i in ids)


def watch_gates_hit(gates: Sequence[str], found: Sequence[str]) -> tuple[str, ...]:
    """The gated findings a watched run found: each one fails it."""
    seen = set(found)
    return tuple(g for g in gates if g in seen)


def _finding_spec(metric_text: str, expr: str, shown: str) -> str | None:
    """The id of a finding gate, written `finding:ID` or `finding:ID:absent`; None for
    a gate on a figure."""
    name = metric_text.strip()
    if name == FINDING.rstrip(":"):
        return expr
    if name.startswith(FINDING):
        if expr.strip() not in ("absent", "<=0"):
            raise UsageError(f'bad gate {shown!r}: a finding gate\'s limit is "absent"')
        return name[len(FINDING) :]
    return None


def make_gate(
    metric_text: str,
    expr: str,
    *,
    source: str | None = None,
    known: Sequence[str] | None = None,
) -> Gate:
    shown = source or f"{metric_text}:{expr}"
    finding_id = _finding_spec(metric_text, expr, shown)
    if finding_id is not None:
        return finding_gate(finding_id, shown)
    metric = normalize_metric(metric_text, known)
    kind = metric_kind(metric)
    rel = _REL.match(expr)
    if rel:
        sign, pct = rel.groups()
        frac = float(pct) / 100
        if sign == "+":
            return Gate(metric, expr.strip(), "rel", "<=", 1 + frac)
        if frac >= 1:
            raise UsageError(f"bad gate {shown!r}: a drop of {pct}% or more cannot be checked")
        return Gate(metric, expr.strip(), "rel", ">=", 1 - frac)
    m = _ABS.match(expr)
    if not m:
        raise UsageError(
            f"bad gate {shown!r}: the limit must look like <=0.95, >=100, <=1.5GiB, <=250ms, "
            "+10% or -5%"
        )
    op = m.group(1)
    limit = _parse_number(kind, m.group(2), shown)
    return Gate(metric, expr.strip(), "abs", op, limit)  # type: ignore[arg-type]


def gates_from_table(
    table: Mapping[str, object], source: str, make: Callable[..., Gate] | None = None
) -> list[Gate]:
    """`[gates]` / `[tool.loaderprof.gates]`: metric = "limit" or a list of limits, each
    made by `make` (compare's `make_gate`, or the command form's)."""
    gates = []
    for metric, value in table.items():
        limits = value if isinstance(value, list) else [value]
        for limit in limits:
            if not isinstance(limit, str):
                raise UsageError(
                    f'gate {metric!r} in {source} must be a string such as "<=0.95" or '
                    f'"+10%", got {limit!r}'
                )
            gates.append((make or make_gate)(metric, limit))
    return gates


def _past(op: str, x: float, limit: float) -> bool:
    """True when x violates `op limit`."""
    return {
        "<=": x > limit,
        "<": x >= limit,
        ">=": x < limit,
        ">": x <= limit,
    }[op]


def format_value(metric: str, v: float, mode: str = "abs") -> str:
    """A gate value or limit in the unit of its metric (relative: a plain ratio)."""
    return _fmt(metric_kind(metric), v, mode)


def _bracket(
    kind: Kind, mode: str, low: float, high: float, earned: bool, informative: bool
) -> str:
    """See NOTE [earned intervals]. "[low–high]" only where it was earned and means something."""
    if not earned:
        return "(no CI)"
    if not informative:
        return "(too wide)"

    def shown(v: float) -> str:
        return _fmt(kind, v, mode)

    # A half-width in the value's own unit; a ratio's or a count's in two digits.
    if mode != "rel" and kind in ("bytes", "time"):
        return fmt_bounds(low, high, shown, shown)
    return fmt_bounds(low, high, shown)


def _level(confidence: float, earned: bool) -> str:
    """The interval's level where it is not the 95 % every other interval has."""
    return f" {confidence * 100:g} %" if earned and abs(confidence - 0.95) > 1e-9 else ""


def format_result(g: GateResult) -> tuple[str, str]:
    """(value [CI], limit) for tables; an interval at another level than 95 % names it."""
    if g.value is None or g.ci_low is None or g.ci_high is None:
        shown = "–"
    else:
        kind = metric_kind(g.metric)
        ci = _bracket(kind, g.mode, g.ci_low, g.ci_high, g.has_interval, g.informative)
        level = _level(g.confidence, g.has_interval and g.informative)
        shown = f"{format_value(g.metric, g.value, g.mode)} {ci}{level}"
    if g.mode == "rel":
        return shown, f"{g.op} {g.limit:.3f} × baseline"
    return shown, f"{g.op} {format_value(g.metric, g.limit)}"


def _fmt(kind: Kind, v: float, mode: str) -> str:
    if kind == "count":
        return f"{v:.0f}"
    if mode == "rel" or kind == "ratio":
        return f"{v:.3f}"
    if kind == "bytes":
        return fmt_bytes(v)
    if kind == "time":
        return fmt_seconds(v)
    return f"{v:,.1f}"


def judge(
    gate: Gate,
    m: MetricValue | None,
    *,
    baseline: MetricValue | None = None,
    relative: MetricValue | None = None,
) -> GateResult:
    """Judge one gate. For relative gates `relative` is new / baseline with its interval."""
    value = relative if gate.mode == "rel" else m
    if value is None:
        why = (
            "needs --baseline"
            if gate.mode == "rel" and baseline is None
            else "metric was not measured"
        )
        return GateResult(
            str(gate),
            gate.metric,
            "skipped",
            None,
            None,
            None,
            gate.limit,
            gate.op,
            gate.mode,
            f"{gate}: skipped ({why})",
            baseline.value if baseline else None,
        )
    # The interval end nearest the limit decides a fail: all of it must be past. A
    # figure read once, or whose interval is too wide to mean anything, cannot fail
    # (NOTE [earned intervals]).
    nearest = value.ci_low if gate.op in ("<=", "<") else value.ci_high
    if not _past(gate.op, value.value, gate.limit):
        status: GateStatus = "pass"
    elif value.informative and _past(gate.op, nearest, gate.limit):
        status = "fail"
    else:
        status = "inconclusive"
    kind = gate.kind
    shown = _fmt(kind, value.value, gate.mode)
    ci = _bracket(
        kind, gate.mode, value.ci_low, value.ci_high, value.has_interval, value.informative
    )
    ci += _level(value.confidence, value.has_interval and value.informative)
    target = (
        f"{gate.op} {gate.limit:.3f} × baseline"
        if gate.mode == "rel"
        else f"{gate.op} {_fmt(kind, gate.limit, 'abs')}"
    )
    what = "new ÷ baseline " if gate.mode == "rel" else ""
    message = f"{gate}: {status} ({what}{shown} {ci}, limit {target}, n={value.n})"
    if status == "inconclusive" and not value.has_interval:
        message += (
            ": past the limit, but read once per side (or with no spread), so there is no "
            "interval to say it is beyond noise (more trials, or --memory-trials for memory "
            "figures, give one)"
        )
    elif status == "inconclusive" and not value.informative:
        message += (
            f": past the limit, but its interval reaches more than {UNINFORMATIVE_FACTOR:g}× "
            "either way, too wide to say it is beyond noise"
        )
    elif status == "inconclusive":
        message += ": the median is past the limit but the interval straddles it"
    return GateResult(
        str(gate),
        gate.metric,
        status,
        value.value,
        value.ci_low,
        value.ci_high,
        gate.limit,
        gate.op,
        gate.mode,
        message,
        baseline.value if baseline else None,
        has_interval=value.has_interval,
        informative=value.informative,
        confidence=value.confidence,
    )


# What `compare -- COMMAND` measures (NOTE [command arms]): time only, no memory.
COMMAND_METRICS = (
    "steady_epoch_ratio",
    "cold_epoch_ratio",
    "saved_s_per_epoch",
    *(f"{arm}.{m}" for arm in ARM_PREFIXES for m in ("steady_epoch_s", "cold_epoch_s")),
)


# The findings a `compare -- COMMAND` trial can report: watch's checks (NOTE [command
# findings]) less the advice to run this comparison (`persistence-candidate`).
COMMAND_FINDING_IDS = tuple(i for i in WATCH_FINDING_IDS if i != "persistence-candidate")
_COMMAND = "compare -- COMMAND"


def make_command_gate(metric_text: str, expr: str, *, source: str | None = None) -> Gate:
    """`make_gate` for `compare -- COMMAND`, whose findings are watch's, not compare's."""
    shown = source or f"{metric_text}:{expr}"
    finding_id = _finding_spec(metric_text, expr, shown)
    if finding_id is not None:
        return finding_gate(finding_id, shown, COMMAND_FINDING_IDS, _COMMAND)
    return make_gate(metric_text, expr, source=source, known=COMMAND_METRICS)


def parse_command_gate(text: str) -> Gate:
    metric_text, sep, expr = text.partition(":")
    if not sep or not metric_text.strip() or not expr.strip():
        return parse_gate(text)  # its one line for a malformed gate
    return make_command_gate(metric_text, expr, source=text)


def check_command_gates(gates: Sequence[Gate], *, has_baseline: bool = False) -> None:
    """Refuse, before any trial, a gate on a figure the command form does not measure,
    and a relative gate with no baseline to be relative to."""
    check_needs_baseline(gates, has_baseline)
    for g in gates:
        if g.metric.startswith(FINDING):
            # compare's lifecycle checks (parse_gate knows their ids) are not run here.
            finding_gate(
                g.metric[len(FINDING) :], str(g), COMMAND_FINDING_IDS, "compare -- COMMAND"
            )
            continue
        if g.metric not in COMMAND_METRICS:
            raise UsageError(
                f"gate {g}: compare -- COMMAND does not measure {g.metric}; it gates "
                "steady_epoch_ratio, cold_epoch_ratio, saved_s_per_epoch, each arm's "
                "steady_epoch_s and cold_epoch_s, and finding:ID"
            )


def _findings_of_persistent_arm(report: CommandReport) -> dict[str, MetricValue]:
    """finding:ID for each id the command form finds: the persistent arm's findings of
    that id (what persistence is gated on), at any severity as compare and watch count
    them (a gate the screen's findings contradict is no gate), a count read once."""
    out = {}
    # Leaked workers are looked for only in a trial the command ended by itself (NOTE
    # [command findings]): with none, the gate is not measured, and skips.
    ended = any(t.arm == "persistent" and t.returncode is not None for t in report.trials)
    for finding_id in COMMAND_FINDING_IDS:
        if finding_id == "workers-leaked" and not ended:
            continue
        count = float(
            sum(1 for f in report.findings if f.id == finding_id and f.arm == "persistent")
        )
        out[f"{FINDING}{finding_id}"] = MetricValue(count, count, count, 1)
    return out


def evaluate_command(
    report: CommandReport,
    gates: Sequence[Gate],
    *,
    strict: bool = False,
    seed: int = 0,
    baseline: CommandReport | None = None,
) -> tuple[tuple[GateResult, ...], Literal["pass", "fail"] | None]:
    """Judge every gate against a `compare -- COMMAND` report, as `evaluate` does; a
    relative gate against `baseline` (see NOTE [command baseline])."""
    if not gates:
        return (), None
    from loaderprof.analysis.comparison import command_metrics

    metrics = command_metrics(report, seed)
    metrics.update(_findings_of_persistent_arm(report))
    base: dict[str, MetricValue] = {}
    rel: dict[str, MetricValue] = {}
    if baseline is not None:
        from loaderprof.analysis.command_baseline import relative_command_metrics

        base = command_metrics(baseline, seed)
        rel = relative_command_metrics(report, baseline, seed)
    results = tuple(
        _why_skipped(judge(g, metrics.get(g.metric), baseline=b, relative=rel.get(g.metric)), b)
        for g in gates
        for b in [base.get(g.metric)]
    )
    return results, overall(results, strict=strict)


def _why_skipped(r: GateResult, baseline: MetricValue | None) -> GateResult:
    """A skipped command gate's reason in the command form's words."""
    if r.status != "skipped":
        return r
    import dataclasses

    if r.metric == f"{FINDING}workers-leaked":
        why = (
            "loaderprof stopped every persistent trial; leaked workers are looked for "
            "only after the command exits by itself"
        )
    elif r.mode == "rel" and baseline is not None and not baseline.value > 0:
        why = "the baseline's figure is not positive: no change relative to it means anything"
    else:
        return r
    return dataclasses.replace(r, message=f"{r.gate}: skipped ({why})")


def overall(results: Sequence[GateResult], *, strict: bool) -> Literal["pass", "fail"]:
    bad = {"fail", "inconclusive"} if strict else {"fail"}
    return "fail" if any(r.status in bad for r in results) else "pass"


def evaluate(
    report: Report,
    gates: Sequence[Gate],
    *,
    baseline: Report | None = None,
    strict: bool = False,
    seed: int = 0,
) -> tuple[tuple[GateResult, ...], Literal["pass", "fail"] | None]:
    """Judge every gate against a report (and a baseline for relative gates)."""
    if not gates:
        return (), None
    from loaderprof.analysis.comparison import relative_metrics, report_metrics

    metrics = report_metrics(report, seed)
    for g in gates:
        finding_id = g.metric[len(FINDING) :]
        # A finding whose check had no data to run is not measured: the gate skips.
        if g.metric.startswith(FINDING) and finding_id in report.findings_checked:
            count = float(sum(1 for f in report.findings if f.id == finding_id))
            metrics[g.metric] = MetricValue(count, count, count, 1)
    base = report_metrics(baseline, seed) if baseline is not None else {}
    rel = relative_metrics(report, baseline, seed) if baseline is not None else {}
    results = tuple(
        judge(g, metrics.get(g.metric), baseline=base.get(g.metric), relative=rel.get(g.metric))
        for g in gates
    )
    return results, overall(results, strict=strict)


def check_needs_baseline(gates: Sequence[Gate], has_baseline: bool) -> None:
    rel = [str(g) for g in gates if g.mode == "rel"]
    if rel and not has_baseline:
        raise UsageError(
            f"gate {rel[0]} is relative to a baseline: pass --baseline REPORT.json "
            "(saved earlier with --save-baseline)"
        )
