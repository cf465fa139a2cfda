"""A long trial's JSON stays bounded, its peaks kept (detail.py): synthetic trials."""

from __future__ import annotations

import dataclasses
import json

from builders import make_trial
from loaderprof.model.codec import to_dict
from loaderprof.model.detail import MAX_BATCH_SPANS, MAX_TIMELINE_SAMPLES, bounded
from loaderprof.model.trials import BatchSpan, ProcessTimeline
from loaderprof.units import MiB


def _long_trial(batches: int = 100_000, samples: int = 60_000):  # type: ignore[no-untyped-def]
    spans = tuple(BatchSpan(100 + i % 2, i * 0.01, i * 0.01 + 0.005, 32) for i in range(batches))
    # One slow batch and one memory peak, somewhere in the middle.
    mid = batches // 2
    spans = (*spans[:mid], BatchSpan(100, mid * 0.01, mid * 0.01 + 7.0, 32), *spans[mid + 1 :])
    rss = [200 * MiB + (i % 7) * 4096 for i in range(samples)]
    rss[samples // 2] = 900 * MiB
    uss = [None if i % 3 else 10 * MiB for i in range(samples)]
    timeline = ProcessTimeline(
        1,
        "main",
        None,
        tuple(i * 0.05 for i in range(samples)),
        tuple(rss),
        tuple(uss),
        tuple(uss),
        tuple(True for _ in range(samples)),
    )
    base = make_trial("persistent", [3.0, 1.0], idle=0, reused=True)
    return dataclasses.replace(base, batches=spans, timeline=(timeline,))


def test_a_trial_of_100000_batches_stays_under_10_mb_with_its_peaks() -> None:
    trial = _long_trial()
    full = len(json.dumps(to_dict(trial)))
    small = bounded(trial)
    size = len(json.dumps(to_dict(small), indent=2))
    assert size <= 10 * MiB < full * 2
    assert 0.9 * MAX_BATCH_SPANS <= len(small.batches) <= MAX_BATCH_SPANS
    assert 0.9 * MAX_TIMELINE_SAMPLES <= len(small.timeline[0].t_s) <= MAX_TIMELINE_SAMPLES
    # The peaks survive, and order is kept.
    assert max(b.end_s - b.start_s for b in small.batches) == max(
        b.end_s - b.start_s for b in trial.batches
    )
    assert max(small.timeline[0].rss_bytes) == 900 * MiB
    assert list(small.timeline[0].t_s) == sorted(small.timeline[0].t_s)
    assert small.detail is not None
    assert small.detail.batch_spans == 100_000
    assert small.detail.batch_spans_kept == len(small.batches)
    assert small.detail.timeline_samples == 60_000


def test_a_short_trial_is_left_alone() -> None:
    trial = _long_trial(batches=100, samples=100)
    assert bounded(trial) is trial and trial.detail is None
