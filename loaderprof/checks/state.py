"""Does persistence change what the model sees? Checks on the Dataset's state.

NOTE [stale worker state]: the main process fingerprints its Dataset at each
epoch start and every worker fingerprints its own copy at its first fetch of
the epoch (`loaderprof.inside.fingerprint`). Two hazards show in those fingerprints:

* stale-worker-state: an attribute the training loop changed in the main process
  (set_epoch, an augmentation switch, a curriculum step) that persistent workers
  never see, because they keep the copy they were started with;
* repeated-randomness: a random generator stored on the Dataset that torch does
  not reseed per worker (it reseeds `random`, torch and numpy's global state,
  never Generator objects): workers draw the same numbers, and without
  persistence every epoch starts again from the same state.

Pure functions of a Report, like `loaderprof.checks.registry`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loaderprof.model.results import Finding, Report
from loaderprof.model.trials import DatasetState

STALE_FIX = (
    "keep per-epoch state where the workers see it: in shared memory (a tensor after "
    "share_memory_(), or multiprocessing.Value) updated in place, as HF datasets does for "
    "set_epoch; or apply the change in the workers (worker_init_fn, or derive it in "
    "__getitem__); or build a new iterator (persistent_workers=False) when it changes"
)
RNG_FIX = (
    "seed the generator per worker in worker_init_fn from "
    "torch.utils.data.get_worker_info().seed (e.g. dataset.rng = "
    "np.random.default_rng(info.seed)), or draw from torch's global RNG, which the "
    "DataLoader reseeds in every worker and every epoch"
)
SHOWN = 60


@dataclass(frozen=True)
class Stale:
    attribute: str
    epoch: int
    main_value: str
    worker_value: str
    workers: tuple[int, ...]


def _by_epoch(states: Sequence[DatasetState], role: str) -> dict[int, list[DatasetState]]:
    out: dict[int, list[DatasetState]] = defaultdict(list)
    for s in states:
        if s.role == role:
            out[s.epoch].append(s)
    return out


def stale_in(states: Sequence[DatasetState]) -> list[Stale]:
    """Attributes that changed in the main process and that a worker did not follow
    (one trial's states, or one watched loader's)."""
    main = {e: ss[0].values for e, ss in _by_epoch(states, "main").items()}
    workers = _by_epoch(states, "worker")
    if not main:
        return []
    first = main[min(main)]
    found: dict[str, Stale] = {}
    for epoch in sorted(main):
        changed = {a for a, v in main[epoch].items() if first.get(a) != v}
        for attr in sorted(changed - set(found)):
            # Behind: the worker still holds a value the main process had before. A
            # value the worker set itself (reseeding in worker_init_fn, a cache it
            # filled) never appeared in the main process and is not stale.
            earlier = {main[e][attr] for e in main if e < epoch and attr in main[e]}
            behind = [
                w
                for w in workers.get(epoch, [])
                if attr in w.values
                and w.values[attr] != main[epoch][attr]
                and w.values[attr] in earlier
            ]
            if behind:
                found[attr] = Stale(
                    attr,
                    epoch,
                    main[epoch][attr],
                    behind[0].values[attr],
                    tuple(sorted(w.worker_id for w in behind if w.worker_id is not None)),
                )
    return list(found.values())


def check_stale_worker_state(report: Report) -> list[Finding]:
    """Persistent workers only: non-persistent ones start after the epoch protocol
    ran, from the main process's current state, so they cannot be behind it."""
    out = []
    for arm in report.arms.values():
        if not arm.persistent:
            continue
        stale = next((s for t in arm.trials if (s := stale_in(t.dataset_states))), [])
        if stale:
            out.append(stale_finding(stale, {"arm": arm.name}, arm=arm.name))
    return out


def stale_finding(stale: Sequence[Stale], where: dict[str, str], arm: str | None) -> Finding:
    """The stale-worker-state finding for compare's persistent arm and watch's loaders."""
    first = min(stale, key=lambda s: (s.epoch, s.attribute))
    names = ", ".join(f"`{s.attribute}`" for s in stale)
    return Finding(
        id="stale-worker-state",
        severity="warning",
        arm=arm,
        title=f"workers never see {names} change: from epoch {first.epoch} the main "
        f"process has {first.attribute}={_short(first.main_value)}, its workers still "
        f"{_short(first.worker_value)}",
        evidence={
            "attribute": first.attribute,
            "attributes": [s.attribute for s in stale],
            "epoch": first.epoch,
            "main_value": _short(first.main_value),
            "worker_value": _short(first.worker_value),
            "workers": list(first.workers),
            **where,
        },
        fix=STALE_FIX,
    )


def _rng_attrs(states: Sequence[DatasetState]) -> list[str]:
    return sorted({a for s in states for a, v in s.values.items() if v.startswith("rng:")})


def _used(arm_states: Sequence[DatasetState], attr: str) -> bool:
    """Drawn from: some worker's generator moved between two of its epochs."""
    seen: dict[int, set[str]] = defaultdict(set)
    for s in arm_states:
        if s.role == "worker" and attr in s.values:
            seen[s.pid].add(s.values[attr])
    return any(len(v) > 1 for v in seen.values())


def _same_across_workers(states: Sequence[DatasetState], attr: str) -> list[int]:
    """Epochs in which two workers started with the same generator state."""
    out = []
    for epoch, ss in sorted(_by_epoch(states, "worker").items()):
        values = [s.values[attr] for s in ss if attr in s.values]
        if len(values) > 1 and len(set(values)) < len(values):
            out.append(epoch)
    return out


def _repeats_epochs(states: Sequence[DatasetState], attr: str) -> list[int]:
    """Epochs whose workers start from the state a worker started from the epoch before."""
    by_epoch = {
        e: {s.values[attr] for s in ss if attr in s.values}
        for e, ss in _by_epoch(states, "worker").items()
    }
    return [e for e in sorted(by_epoch) if e - 1 in by_epoch and by_epoch[e] & by_epoch[e - 1]]


def check_repeated_randomness(report: Report) -> list[Finding]:
    trials = {name: arm.trials[0] for name, arm in report.arms.items() if arm.trials}
    every = [s for t in trials.values() for s in t.dataset_states]
    out = []
    for attr in _rng_attrs(every):
        if not _used(every, attr):
            continue
        same = {name: _same_across_workers(t.dataset_states, attr) for name, t in trials.items()}
        np_trial = trials.get("non_persistent")
        repeats = _repeats_epochs(np_trial.dataset_states, attr) if np_trial else []
        if not any(same.values()) and not repeats:
            continue
        evidence: dict[str, object] = {
            "attribute": attr,
            "kind": _kind(every, attr),
            "same_state_in_workers_epochs": {k: v for k, v in same.items() if v},
            "non_persistent_epochs_repeating_the_previous": repeats,
        }
        evidence.update(_content_evidence(report))
        out.append(
            Finding(
                id="repeated-randomness",
                severity="warning",
                arm=None,
                title=f"`{attr}` ({evidence['kind']}) is not reseeded per worker: workers "
                "start from the same generator state"
                + (", and without persistence every epoch repeats the last" if repeats else ""),
                evidence=evidence,
                fix=RNG_FIX,
            )
        )
    return out


def _kind(states: Sequence[DatasetState], attr: str) -> str:
    value = next(s.values[attr] for s in states if attr in s.values)
    return value.removeprefix("rng:").split("#", 1)[0]


def _content_evidence(report: Report) -> Mapping[str, object]:
    """With digests: samples seen twice within an epoch (workers drawing alike)."""
    out: dict[str, object] = {}
    for name, arm in report.arms.items():
        dups = [e.duplicate_samples for t in arm.trials[:1] for e in t.epochs]
        if any(d for d in dups if d):
            out[f"{name}_duplicate_samples_by_epoch"] = dups
    return out


def _short(value: str) -> str:
    return value if len(value) <= SHOWN else value[: SHOWN - 1] + "…"


# The findings that say persistence changes what the model sees: the verdict weighs
# them first (NOTE [the verdict is a promise], in loaderprof.analysis.verdict).
CORRECTNESS = ("stale-worker-state", "repeated-randomness", "stream-order-repeats")


def check_state(report: Report) -> list[Finding]:
    return check_stale_worker_state(report) + check_repeated_randomness(report)
