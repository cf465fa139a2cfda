"""Sweeps: pick the whole loader configuration, not one flag.

Every valid combination of num_workers × prefetch_factor × start method ×
persistence runs with the same trial machinery (a fresh process per trial,
sampled from outside) and the same statistics as `compare`. Trial rounds visit
the points in a freshly shuffled (seeded) order, so drift falls on all alike.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from loaderprof.analysis.summary import noise_warnings, summarize_arm
from loaderprof.comparing.scheduler import Scheduled, ScheduleOutcome, run_trials
from loaderprof.config.run import MP_CONTEXTS, RunConfig
from loaderprof.errors import UsageError
from loaderprof.inside.events import Ev
from loaderprof.measure import contention
from loaderprof.measure.contention import busy_warning
from loaderprof.measure.runner import TrialRunner, TrialSlot
from loaderprof.model.environment import SCHEMA_VERSION, created_now, environment, tool
from loaderprof.model.results import (
    SweepPointResult,
    SweepRecommendation,
    SweepReport,
)
from loaderprof.units import fmt_bytes, fmt_seconds

NEAR_FASTEST = 0.05


def _item_text(value: Any) -> str:
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


@dataclass(frozen=True)
class SweepGrid:
    num_workers: tuple[int, ...] = (0, 2)
    prefetch_factor: tuple[int | None, ...] = (None,)
    mp_context: tuple[str | None, ...] = (None,)
    persistent: tuple[bool, ...] = (True, False)

    KEYS = ("num_workers", "prefetch_factor", "mp_context", "persistent")

    @classmethod
    def from_options(cls, options: Any) -> SweepGrid:
        """From the API's lists (num_workers=[0, 2, 4]) or the CLI's comma lists
        ('0,2,4'), as the fields of a `SweepOptions` or a mapping."""
        get = options.get if isinstance(options, Mapping) else partial(getattr, options)
        texts: dict[str, str | None] = {}
        for key in cls.KEYS:
            value = get(key, None)
            if value is not None and not isinstance(value, str):
                value = ",".join(_item_text(v) for v in _as_tuple(value))
            texts[key] = value
        return cls.parse(**texts)

    @classmethod
    def parse(
        cls,
        num_workers: str | None,
        prefetch_factor: str | None,
        mp_context: str | None,
        persistent: str | None,
    ) -> SweepGrid:
        """From the CLI's comma lists: '0,2,4', '2,4', 'fork,spawn', 'on,off'."""

        def items(text: str | None, what: str) -> list[str]:
            out = [t.strip() for t in (text or "").split(",") if t.strip()]
            if text is not None and not out:
                raise UsageError(f"--{what} needs a comma-separated list")
            return out

        kw: dict[str, Any] = {}
        try:
            if num_workers is not None:
                kw["num_workers"] = tuple(int(x) for x in items(num_workers, "num-workers"))
            if prefetch_factor is not None:
                kw["prefetch_factor"] = tuple(
                    None if x.lower() == "default" else int(x)
                    for x in items(prefetch_factor, "prefetch-factor")
                )
        except ValueError:
            raise UsageError(
                "--num-workers and --prefetch-factor take integers, e.g. 0,2,4"
            ) from None
        if mp_context is not None:
            kw["mp_context"] = tuple(
                None if x == "default" else x for x in items(mp_context, "mp-context")
            )
        if persistent is not None:
            table = {"on": True, "off": False, "true": True, "false": False}
            try:
                kw["persistent"] = tuple(table[x.lower()] for x in items(persistent, "persistent"))
            except KeyError:
                raise UsageError("--persistent takes on, off or on,off") from None
        grid = cls(**kw)
        grid.validate()
        return grid

    def validate(self) -> None:
        if any(w < 0 for w in self.num_workers):
            raise UsageError("--num-workers values must be ≥ 0")
        if any(p is not None and p < 1 for p in self.prefetch_factor):
            raise UsageError("--prefetch-factor values must be ≥ 1")
        for ctx in self.mp_context:
            if ctx is not None and ctx not in MP_CONTEXTS:
                raise UsageError(
                    f"unknown --mp-context {ctx!r}: choose from {', '.join(MP_CONTEXTS)}"
                )


@dataclass(frozen=True)
class SweepPoint:
    num_workers: int
    prefetch_factor: int | None
    mp_context: str | None
    persistent: bool

    @property
    def label(self) -> str:
        if self.num_workers == 0:
            return "workers=0 (main process)"
        parts = [f"workers={self.num_workers}"]
        if self.prefetch_factor is not None:
            parts.append(f"prefetch={self.prefetch_factor}")
        if self.mp_context is not None:
            parts.append(self.mp_context)
        parts.append("persistent" if self.persistent else "non-persistent")
        return " ".join(parts)


def expand(grid: SweepGrid) -> tuple[list[SweepPoint], list[str]]:
    """Valid points, and a note for every combination skipped."""
    points: list[SweepPoint] = []
    skipped: list[str] = []
    available = multiprocessing.get_all_start_methods()
    for nw in grid.num_workers:
        if nw == 0:
            if True in grid.persistent:
                skipped.append("workers=0 × persistent: skipped (persistence needs workers)")
            if False in grid.persistent or True in grid.persistent:
                extra = [p for p in grid.prefetch_factor if p is not None]
                if extra or any(c is not None for c in grid.mp_context):
                    skipped.append(
                        "workers=0 ignores prefetch_factor and the start method: "
                        "one single-process reference point"
                    )
                points.append(SweepPoint(0, None, None, False))
            continue
        for pf in grid.prefetch_factor:
            for ctx in grid.mp_context:
                if ctx is not None and ctx not in available:
                    skipped.append(f"{ctx}: skipped (not available on this platform)")
                    continue
                for pers in grid.persistent:
                    points.append(SweepPoint(nw, pf, ctx, pers))
    unique = list(dict.fromkeys(points))
    return unique, list(dict.fromkeys(skipped))


def _steady(p: SweepPointResult) -> float | None:
    return p.summary.steady_epoch_s.median if p.summary.steady_epoch_s else None


def _pss(p: SweepPointResult) -> float | None:
    return p.summary.peak_total_pss_bytes.median if p.summary.peak_total_pss_bytes else None


def pareto(points: Iterable[SweepPointResult]) -> set[str]:
    """Labels on the time × memory frontier: no other point is as fast and as small
    and strictly better in one of the two."""
    pts = [(p.label, _steady(p), _pss(p)) for p in points if _steady(p) is not None]
    front = set()
    for label, t, m in pts:
        dominated = False
        for other, t2, m2 in pts:
            if other == label or t2 is None:
                continue
            m_le = m is None or (m2 is not None and m2 <= m)
            m_lt = m is not None and m2 is not None and m2 < m
            if t2 <= t and m_le and (t2 < t or m_lt):  # type: ignore[operator]
                dominated = True
                break
        if not dominated:
            front.add(label)
    return front


def recommend(points: Iterable[SweepPointResult], budget: int | None) -> SweepRecommendation:
    measured = [p for p in points if _steady(p) is not None]
    fits = [p for p in measured if budget is None or _pss(p) is None or (_pss(p) or 0) <= budget]
    if not fits:
        return SweepRecommendation(None, None, budget, ("no configuration fits the memory budget",))
    fastest = min(fits, key=lambda p: _steady(p) or 0.0)
    limit = (_steady(fastest) or 0.0) * (1 + NEAR_FASTEST)
    near = [p for p in fits if (_steady(p) or 0.0) <= limit]
    cheapest = min(near, key=lambda p: (_pss(p) is None, _pss(p) or 0.0, _steady(p) or 0.0))
    reasons = [
        f"fastest within {fmt_bytes(budget) if budget else 'no memory budget'}: {fastest.label} "
        f"({fmt_seconds(_steady(fastest))} per steady epoch, peak PSS {fmt_bytes(_pss(fastest))})",
        f"cheapest within {NEAR_FASTEST * 100:.0f} % of it: {cheapest.label} "
        f"({fmt_seconds(_steady(cheapest))}, peak PSS {fmt_bytes(_pss(cheapest))})",
    ]
    return SweepRecommendation(fastest.label, cheapest.label, budget, tuple(reasons))


def default_budget(env: Mapping[str, Any]) -> int | None:
    limit = env.get("cgroup_memory_limit_bytes")
    return int(limit) if limit else env.get("memory_total_bytes")


ProgressCallback = Callable[[int, int, SweepPoint, Mapping[str, Any] | None], None]


def _point_config(cfg: RunConfig, point: SweepPoint) -> RunConfig:
    # A sweep reports no findings, so it pays for no state fingerprints.
    return dataclasses.replace(
        cfg,
        state_checks=False,
        loader=dataclasses.replace(
            cfg.loader,
            num_workers=point.num_workers,
            prefetch_factor=point.prefetch_factor if point.num_workers else None,
            mp_context=point.mp_context if point.num_workers else None,
        ),
    )


def _schedule(cfg: RunConfig, points: list[SweepPoint]) -> list[Scheduled]:
    """Rounds of one trial per point, each round in a freshly shuffled (seeded) order."""
    out = []
    for i in range(cfg.fixed_trials):
        order = list(points)
        random.Random(cfg.seed + i).shuffle(order)
        out += [
            Scheduled(_point_config(cfg, p), TrialSlot(p.label, p.persistent, i), group=p.label)
            for p in order
        ]
    return out


def run_sweep(
    cfg: RunConfig,
    grid: SweepGrid,
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
) -> SweepReport:
    points, skipped = expand(grid)
    if not points:
        raise UsageError("the sweep has no valid combination: " + "; ".join(skipped))
    # A sweep ranks configurations rather than deciding one verdict: a fixed plan.
    cfg = dataclasses.replace(cfg, trials=cfg.fixed_trials)
    by_label = {p.label: p for p in points}
    imported: dict[str, Any] = {}
    total = len(points) * cfg.fixed_trials
    started: list[TrialSlot] = []

    def forward(spec: TrialSlot, ev: Mapping[str, Any] | None) -> None:
        if ev is None:
            started.append(spec)
        elif ev.get("ev") == Ev.IMPORTED and not imported:
            imported.update(ev)
        if on_progress:
            on_progress(len(started) - 1, total, by_label[spec.arm], ev)

    start, cpu = time.monotonic(), contention.mark()
    outcome = run_trials(_schedule(cfg, points), runner=runner, on_progress=forward)
    return _sweep_report(
        cfg,
        grid,
        points,
        skipped,
        outcome,
        imported,
        time.monotonic() - start,
        other_cores=contention.other_cores(cpu, contention.mark()),
    )


def _sweep_report(
    cfg: RunConfig,
    grid: SweepGrid,
    points: list[SweepPoint],
    skipped: list[str],
    outcome: ScheduleOutcome,
    imported: Mapping[str, Any],
    wall_s: float,
    *,
    other_cores: float | None = None,
) -> SweepReport:
    errors = {
        t.arm: t.error.message for t in outcome.trials if not t.complete and t.error is not None
    }
    summarized = [
        SweepPointResult(
            label=p.label,
            num_workers=p.num_workers,
            prefetch_factor=p.prefetch_factor,
            mp_context=p.mp_context,
            persistent=p.persistent,
            trials=tuple(t for t in outcome.trials if t.arm == p.label),
            summary=summarize_arm([t for t in outcome.trials if t.arm == p.label]),
            error=errors.get(p.label),
        )
        for p in points
    ]
    front = pareto(summarized)
    summarized = [dataclasses.replace(p, frontier=p.label in front) for p in summarized]
    summarized.sort(key=lambda p: (_steady(p) is None, _steady(p) or 0.0))
    env = environment(imported)
    budget = cfg.memory_budget_bytes or default_budget(env)
    # The ranking is of timings too: a busy runner's is as noisy as compare's.
    busy = busy_warning(env, other_cores)
    return SweepReport(
        schema_version=SCHEMA_VERSION,
        kind="sweep",
        tool=tool(),
        environment=env,
        config=cfg.to_dict() | {"grid": dataclasses.asdict(grid)},
        points=tuple(summarized),
        skipped=tuple(skipped),
        recommendation=recommend(summarized, budget),
        complete=outcome.interrupted is None and not errors,
        warnings=tuple(f"{p.label}: {p.error}" for p in summarized if p.error)
        + tuple(w for p in summarized for w in noise_warnings(p.label, p.summary, "the ranking"))
        + ((busy,) if busy else ()),
        created=created_now(),
        wall_s=wall_s,
    )
