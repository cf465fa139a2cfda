"""Bounded detail: a long run's JSON stays a size a CI artifact can hold.

A trial of 100,000 batches carries 100,000 batch spans and, over hours, tens of
thousands of memory samples per process. Past a cap they are downsampled:
evenly spaced entries plus the peaks (the longest batch spans; the samples
where RSS, USS and PSS are highest), in their original order. Every figure of
the report is computed before this, from everything measured; the report says
what was kept (`trials[].detail`), and `--full-detail` keeps it all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from loaderprof.model.trials import DetailInfo, ProcessTimeline, TrialResult

MAX_BATCH_SPANS = 20_000
MAX_TIMELINE_SAMPLES = 5_000
# The share of a cap given to the peaks; the rest is evenly spaced.
PEAK_SHARE = 0.1


def _keep(n: int, cap: int, peaks: Sequence[int]) -> list[int]:
    """Indices to keep of n: the peaks, then evenly spaced ones up to the cap."""
    chosen = set(peaks[: max(1, int(cap * PEAK_SHARE))])
    step = n / max(1, cap - len(chosen))
    i = 0.0
    while len(chosen) < cap and int(i) < n:
        chosen.add(int(i))
        i += step
    return sorted(chosen)


def _by_size(values: Sequence[float | int | None]) -> list[int]:
    return sorted((i for i, v in enumerate(values) if v is not None), key=lambda i: -values[i])  # type: ignore[operator]


def _timeline(tl: ProcessTimeline, cap: int) -> ProcessTimeline:
    n = len(tl.t_s)
    if n <= cap:
        return tl
    peaks = [
        series[0]
        for series in (_by_size(tl.rss_bytes), _by_size(tl.uss_bytes), _by_size(tl.pss_bytes))
        if series
    ]
    keep = _keep(n, cap, peaks)

    def pick(values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(values[i] for i in keep) if values else ()

    return dataclasses.replace(
        tl,
        t_s=pick(tl.t_s),
        rss_bytes=pick(tl.rss_bytes),
        uss_bytes=pick(tl.uss_bytes),
        pss_bytes=pick(tl.pss_bytes),
        in_window=pick(tl.in_window),
        walk_processes=pick(tl.walk_processes),
    )


def bounded(
    trial: TrialResult,
    *,
    max_batches: int = MAX_BATCH_SPANS,
    max_samples: int = MAX_TIMELINE_SAMPLES,
) -> TrialResult:
    """The trial with its batch spans and timelines downsampled past the caps."""
    batches = trial.batches
    if len(batches) > max_batches:
        longest = sorted(
            range(len(batches)), key=lambda i: -(batches[i].end_s - batches[i].start_s)
        )
        batches = tuple(batches[i] for i in _keep(len(batches), max_batches, longest))
    timeline = tuple(_timeline(tl, max_samples) for tl in trial.timeline)
    samples_before = sum(len(tl.t_s) for tl in trial.timeline)
    samples_after = sum(len(tl.t_s) for tl in timeline)
    if len(batches) == len(trial.batches) and samples_after == samples_before:
        return trial
    return dataclasses.replace(
        trial,
        batches=batches,
        timeline=timeline,
        detail=DetailInfo(len(trial.batches), len(batches), samples_before, samples_after),
    )
