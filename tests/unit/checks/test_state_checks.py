"""State fingerprints, the stale-state and randomness rules, and gates on them (the
verdict weighs them in tests/unit/analysis/test_verdict.py)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch

from loaderprof.analysis.gates import evaluate, parse_gate
from loaderprof.checks.state import stale_in
from loaderprof.errors import UsageError
from loaderprof.inside.fingerprint import describe, fingerprint
from loaderprof.model.results import Finding
from loaderprof.model.trials import DatasetState


class _Holder:
    def __init__(self) -> None:
        self.n = 3
        self.name = "train"
        self.rng = np.random.default_rng(0)
        self.table = list(range(10_000))
        self.weights = torch.arange(100_000, dtype=torch.float32)
        self.fn = len
        self.handle = open(__file__)  # noqa: SIM115 - unpicklable on purpose

    def method(self) -> None:
        pass


def test_fingerprint_keeps_small_values_digests_the_rest_and_names_the_unpicklable() -> None:
    h = _Holder()
    try:
        values, skipped = fingerprint(h)
    finally:
        h.handle.close()
    assert values["n"] == "3" and values["name"] == "'train'"
    assert values["rng"].startswith("rng:numpy.Generator#")
    assert values["table"].startswith("list(len=10000)#")
    assert values["weights"].startswith("Tensor((100000,), torch.float32)#")
    assert "fn" not in values and skipped == ["handle"]


def test_a_generator_digest_follows_its_state_not_its_identity() -> None:
    a, b = np.random.default_rng(0), np.random.default_rng(0)
    assert describe(a) == describe(b)
    a.random()
    assert describe(a) != describe(b)
    r = random.Random(1)
    g = torch.Generator().manual_seed(1)
    assert describe(r).startswith("rng:random.Random#")
    assert describe(g).startswith("rng:torch.Generator#")


def test_a_large_tensor_changed_in_place_changes_its_digest() -> None:
    t = torch.zeros(1_000_000)
    before = describe(t)
    t[::1000] = 1.0  # on the strided sample the digest reads
    assert describe(t) != before


class _Index:
    def __init__(self, n: int) -> None:
        self.ids = list(range(n))


def test_a_long_list_inside_an_attribute_is_sampled_and_its_ends_still_tell() -> None:
    meta = {"ids": list(range(100_000)), "split": "train"}
    index = _Index(100_000)
    before = describe(meta), describe(index)
    meta["ids"][-1] = -1
    index.ids[0] = -1
    assert describe(meta) != before[0] and describe(index) != before[1]
    assert describe(index).startswith("_Index#")


def _uss() -> int:
    import psutil

    return int(psutil.Process().memory_full_info().uss)


def _fork_measure(holder: Any, ids: list[int]) -> tuple[int, int]:
    """In a forked child (a worker's view of the main process's Dataset): its private
    memory grown by fingerprinting `holder`, and by one walk over `ids` inside it."""
    import os

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        start = _uss()
        describe(holder)
        fingerprinted = _uss()
        sum(1 for _ in ids)
        walked = _uss()
        os.write(write, f"{fingerprinted - start} {walked - fingerprinted}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    os.waitpid(pid, 0)
    a, b = text.split()
    return int(a), int(b)


class _IndexedDataset(torch.utils.data.Dataset[int]):
    """A torch Dataset (a typing.Generic, whose empty __slots__ pickle ignores)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


class _Node:
    """An index with a back-pointer to itself: the cycle reaches past any depth."""

    def __init__(self, ids: list[int]) -> None:
        self.ids, self.me = ids, self


@pytest.mark.parametrize("kind", ["dict", "dataset", "cycle"])
def test_fingerprinting_in_a_forked_worker_copies_a_sample_not_the_whole_index(
    kind: str,
) -> None:
    """A walk over a list of millions writes every item's reference count, copying its
    page into the worker: the worker's USS grew by tens of MiB per epoch where the
    training's own workers never touched it. Fingerprinting reads a sample, wherever the
    list is held."""
    ids = list(range(2_000_000))
    holder = {"dict": {"ids": ids}, "dataset": _IndexedDataset(ids), "cycle": _Node(ids)}[kind]
    assert "too large" not in (describe(holder) or "")
    fingerprinted, walked = _fork_measure(holder, ids)
    assert walked > 20 * 2**20  # the whole walk copies the list's items
    assert fingerprinted < walked / 10


def _state(epoch: int, role: str, values: dict[str, str], wid: int | None = None) -> DatasetState:
    return DatasetState(epoch, role, 100 if role == "main" else 200 + (wid or 0), wid, values)  # type: ignore[arg-type]


def test_stale_only_where_the_main_changed_and_the_worker_did_not_follow() -> None:
    states = [
        _state(1, "main", {"epoch": "0", "cache": "None"}),
        _state(2, "main", {"epoch": "1", "cache": "None"}),
        # The worker filled its own cache (the main never changed it): not stale.
        _state(1, "worker", {"epoch": "0", "cache": "None"}, 0),
        _state(2, "worker", {"epoch": "0", "cache": "dict#ab"}, 0),
    ]
    (stale,) = stale_in(states)
    assert (stale.attribute, stale.epoch, stale.main_value, stale.worker_value) == (
        "epoch",
        2,
        "1",
        "0",
    )
    followed = [*states[:3], _state(2, "worker", {"epoch": "1"}, 0)]
    assert stale_in(followed) == []
    # The main process reseeds in set_epoch, the worker in worker_init_fn: the worker's
    # value never was the main's, so it is its own state, not stale.
    reseeded = [
        _state(1, "main", {"rng": "rng:a"}),
        _state(2, "main", {"rng": "rng:b"}),
        _state(1, "worker", {"rng": "rng:w1"}, 0),
        _state(2, "worker", {"rng": "rng:w2"}, 0),
    ]
    assert stale_in(reseeded) == []


def _finding(fid: str, arm: str | None) -> Finding:
    evidence = {
        "attribute": "epoch",
        "epoch": 2,
        "main_value": "1",
        "worker_value": "0",
        "workers": [0],
        "kind": "numpy.Generator",
    }
    return Finding(fid, "warning", "t", evidence, "fix", arm)


def test_a_gate_fails_on_a_finding_and_passes_without_it() -> None:
    import dataclasses

    from builders import make_pair
    from loaderprof.comparing.session import build_report
    from loaderprof.config.run import RunConfig

    gate = parse_gate("finding:stale-worker-state")
    assert (gate.metric, gate.op, gate.limit) == ("finding:stale-worker-state", "<=", 0.0)
    p, n = make_pair([3.0, 1.0, 1.0], [3.0, 1.5, 1.5])
    report = build_report(RunConfig(dataset="a:B", epochs=3), [p, n], imported={})
    # No fingerprints in these trials: the check did not run, so the gate cannot pass.
    results, _ = evaluate(report, [gate])
    assert results[0].status == "skipped"
    report = dataclasses.replace(report, findings_checked=("stale-worker-state",))
    results, status = evaluate(report, [gate])
    assert status == "pass" and results[0].value == 0.0
    flagged = dataclasses.replace(report, findings=(_finding("stale-worker-state", "persistent"),))
    results, status = evaluate(flagged, [gate])
    assert status == "fail" and results[0].value == 1.0
    with pytest.raises(UsageError, match="did you mean 'stale-worker-state'"):
        parse_gate("finding:stale-worker-stat")
