"""The probes in each worker hand the user's own results back untouched."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch.utils.data._utils.collate import default_collate

from loaderprof.inside.probe import CollateProbe, IndexProbe, index_probe


def test_probes_return_the_users_results_untouched(tmp_path: Path) -> None:
    events = str(tmp_path / "ev.jsonl")
    samples = [torch.arange(3), torch.arange(3) + 1]
    sentinel = object()
    assert CollateProbe(events, lambda batch: sentinel, True)(samples) is sentinel
    for digests in (False, True):
        out = CollateProbe(events, default_collate, True, digests=digests)(samples)
        assert torch.equal(out, default_collate(samples))
    lines = (tmp_path / "ev.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(ln)["n"] == 2 for ln in lines)

    class DS:
        def __init__(self) -> None:
            self.handle: str | None = None

        def __len__(self) -> int:
            return 2

        def __getitem__(self, i: int) -> int:
            return i * 10

    inner = DS()
    wrapped = index_probe(inner, events)
    assert isinstance(wrapped, IndexProbe) and not hasattr(wrapped, "__getitems__")
    assert wrapped[1] == 10 and len(wrapped) == 2
    wrapped.handle = "opened in worker_init_fn"  # reaches the user's dataset
    assert inner.handle == "opened in worker_init_fn"


def test_a_deepcopy_of_the_probed_dataset_in_the_main_process_times_nothing(
    tmp_path: Path,
) -> None:
    """See NOTE [start-up breakdown]. The probes' stamps time a spawned worker's
    unpickling; a deepcopy in the main process rebuilds them too, and must leave neither
    a stamp (forked workers would inherit it) nor the import timer behind."""
    import builtins
    import copy

    from loaderprof.inside import probe

    real = builtins.__import__
    events = str(tmp_path / "events.jsonl")
    copy.deepcopy(probe.index_probe([1, 2, 3], events))
    copy.deepcopy(probe.WorkerInitProbe(events, None))
    assert builtins.__import__ is real
    assert probe._unpickle_start is None and probe._unpickle_end is None
