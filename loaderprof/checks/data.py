"""The data the model sees: the sampler's order, the samples' contents epoch by epoch,
and an IterableDataset's split over workers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loaderprof.model.results import ARM_LABEL, ArmResult, Finding, Report
from loaderprof.units import noun, plural


def check_order(report: Report) -> list[Finding]:
    out = []
    shuffle = bool(report.config.loader.shuffle)
    orders = {
        name: [e.order_digest for e in arm.trials[0].epochs] if arm.trials else []
        for name, arm in report.arms.items()
    }
    p = orders.get("persistent", [])
    if shuffle and len(p) >= 2 and all(o is not None for o in p) and len(set(p)) < len(p):
        out.append(
            Finding(
                id="order-repeats",
                severity="error",
                arm="persistent",
                title="with shuffle=True the persistent arm repeats the same sample order",
                evidence={"order_digests": p},
                fix="seed shuffling from the epoch (sampler.set_epoch) or the loader's "
                "generator, not from state fixed when the worker started",
            )
        )
    n = orders.get("non_persistent", [])
    if shuffle and p and n and p[0] == n[0] and p[1:] != n[1:]:
        out.append(
            Finding(
                id="order-differs-between-arms",
                severity="info",
                arm=None,
                title="from epoch 2 the shuffled order differs between the arms",
                evidence={
                    "first_differing_epoch": next(
                        (i + 1 for i, (a, b) in enumerate(zip(p, n, strict=False)) if a != b), None
                    )
                },
                fix="expected: DataLoader draws each new iterator's worker seed from the same "
                "generator as the sampler, and persistent workers skip that draw",
            )
        )
    return out


def check_stream_order(report: Report) -> list[Finding]:
    """An IterableDataset that shuffles itself: an arm whose workers yield epoch 1's
    order in every epoch while the other arm's order changes. The shuffle's state lives
    in the workers' copies of the Dataset (an epoch counter they advance): kept workers
    go on from it, a fresh pool starts again from the main process's copy (or the
    reverse, where the main process's copy moves and kept workers never see it). The
    setting changes the order the model trains on; the samples are the same ones."""
    if report.extras.get("dataset_kind") != "iterable":
        return []
    orders = {
        name: [e.order_digest for e in arm.trials[0].epochs if e.order_digest]
        for name, arm in report.arms.items()
        if arm.trials
    }
    distinct, epochs = _tally(orders)
    return [
        Finding(
            "stream-order-repeats",
            "warning",
            f"the {ARM_LABEL[name]} arm's workers yield the same order every epoch "
            f"({plural(len(own), 'epoch')}, one order), while the other arm's "
            f"{plural(len(others), 'epoch')} come in {plural(len(set(others)), 'order')}",
            {"arm": name, "distinct_orders_by_arm": distinct, "epochs_by_arm": epochs},
            _RESHUFFLE,
            arm=name,
        )
        for name, own, others in repeating_arms(orders)
    ]


_RESHUFFLE = (
    "the Dataset shuffles from state its workers keep: advance it from the main process "
    "before each epoch (set_epoch on the Dataset, as litdata and HF datasets take it), "
    "which every new pool copies and loaderprof calls unless --no-set-epoch"
)


def _tally(by_arm: Mapping[str, Sequence[str]]) -> tuple[dict[str, int], dict[str, int]]:
    """Per arm: how many different digests its epochs gave, and how many epochs."""
    return {k: len(set(v)) for k, v in by_arm.items()}, {k: len(v) for k, v in by_arm.items()}


def repeating_arms(
    by_arm: Mapping[str, Sequence[str]],
) -> list[tuple[str, Sequence[str], list[str]]]:
    """(arm, its digests, the other arm's) for each arm whose every epoch repeats its
    first epoch's digest while the other arm's epochs give two or more: only the whole
    run repeating counts, beside an arm that shows the data does change (NOTE [random
    draws])."""
    out = []
    for name, own in by_arm.items():
        others = [d for other, ds in by_arm.items() if other != name for d in ds]
        if len(own) >= 2 and len(set(own)) == 1 and len(set(others)) >= 2:
            out.append((name, own, others))
    return out


def content_differs_from(report: Report) -> tuple[int | None, list[int], bool]:
    """With digests, the first trial of each arm epoch by epoch: (the first epoch the
    arms see different samples, every such epoch, whether epoch 1 agreed)."""
    p, n = report.arms["persistent"], report.arms["non_persistent"]
    if not p.trials or not n.trials:
        return None, [], False
    pairs = [
        (a, b)
        for a, b in zip(p.trials[0].epochs, n.trials[0].epochs, strict=False)
        if a.content_digest is not None and b.content_digest is not None
    ]
    differs = [a.epoch for a, b in pairs if a.content_digest != b.content_digest]
    if not differs:
        return None, [], False
    return differs[0], differs, pairs[0][0].content_digest == pairs[0][1].content_digest


def _digests(arm: ArmResult) -> list[tuple[int, str]]:
    """(epoch, content digest) of the arm's first trial, where digested."""
    if not arm.trials:
        return []
    return [(e.epoch, e.content_digest) for e in arm.trials[0].epochs if e.content_digest]


def check_content_repeats(report: Report) -> list[Finding]:
    """NOTE [random draws]: an arm whose every epoch sees exactly the samples of its
    first, while the other arm's epochs differ from each other: the data is random, and
    that arm draws the same values every epoch (a generator that restarts from one
    state). Only the whole run repeating counts: a deterministic Dataset repeats in both
    arms, and one epoch matching another by chance (a sample dropped the same way) is
    not a pattern."""
    by_arm = {name: _digests(arm) for name, arm in report.arms.items()}
    out = []
    contents = {name: [d for _, d in digests] for name, digests in by_arm.items()}
    distinct, counts = _tally(contents)
    for name, _, others in repeating_arms(contents):
        epochs = [e for e, _ in by_arm[name]]
        label = ARM_LABEL[name]
        out.append(
            Finding(
                id="repeated-randomness",
                severity="warning",
                arm=name,
                title=f"the {label} arm repeats its random draws: epochs "
                f"{', '.join(map(str, epochs[1:]))} see exactly epoch {epochs[0]}'s samples, "
                f"while the other arm's {plural(len(others), 'epoch')} see "
                f"{plural(len(set(others)), 'different set')}",
                evidence={
                    "attribute": None,
                    "source": "content digests",
                    "arm": name,
                    "epochs_repeating_the_first": epochs[1:],
                    "distinct_epochs_by_arm": distinct,
                    "epochs_by_arm": counts,
                },
                fix="the random source restarts from the same state each epoch (a generator "
                "seeded once, at import or in __init__, and copied into fresh workers): draw "
                "from torch's RNG, which the DataLoader reseeds for every iterator, or seed "
                "the generator in worker_init_fn from torch.utils.data.get_worker_info().seed",
            )
        )
    return out


def check_content(report: Report, explained: Sequence[Finding] = ()) -> list[Finding]:
    """With digests: do the arms see the same samples in each epoch? See NOTE [random
    draws]; torch reseeds `random`, numpy's and torch's global RNG in every worker of
    every new iterator, and persistent workers continue the stream they were seeded
    with; so with random augmentations the arms agree in epoch 1 and then draw
    differently. Both draw fresh values every epoch: persistence changes which draws
    the model sees, not their quality (info). Repetition is the hazard, told by
    `check_content_repeats` and the state checks; a difference they explain is told
    there, not twice."""
    first, differs, agreed_first = content_differs_from(report)
    if first is None or explained:
        return []
    if agreed_first:
        by_arm = {name: _digests(arm) for name, arm in report.arms.items()}
        fresh, epochs = _tally({k: [d for _, d in v] for k, v in by_arm.items()})
        # Said only where no epoch of either arm saw another's samples again.
        quality = ", not their quality" if fresh == epochs else ""
        return [
            Finding(
                id="rng-carried-in-workers",
                severity="info",
                arm=None,
                title=f"persistence changes which random draws the model sees from epoch "
                f"{first}{quality}: the arms agree in epoch 1 and draw differently "
                f"in {noun(len(differs), 'epoch')} {', '.join(map(str, differs))}; "
                + "; ".join(
                    f"the {ARM_LABEL[k]} arm saw {plural(fresh[k], 'different set')} in "
                    f"{plural(epochs[k], 'epoch')}"
                    for k in by_arm
                ),
                evidence={
                    "epochs_differing": differs,
                    "from_epoch": first,
                    "distinct_epochs_by_arm": fresh,
                    "epochs_by_arm": epochs,
                },
                fix="nothing to fix: torch reseeds the workers' random, numpy and torch RNGs for "
                "every iterator, and persistent workers continue their seeded stream instead; "
                "if results must match across the setting, derive augmentations from the "
                "index and the epoch",
            )
        ]
    return [
        Finding(
            id="content-not-reproducible",
            severity="info",
            arm=None,
            title="samples differ between the arms already in epoch 1, with the same seed",
            evidence={"epochs_differing": differs},
            fix="the dataset draws randomness from a source loaderprof cannot seed (time, "
            "os.urandom, an unseeded generator created at import)",
        )
    ]


def check_iterable(report: Report) -> list[Finding]:
    ds_len = report.extras.get("dataset_length")
    if report.extras.get("dataset_kind") != "iterable":
        return []
    workers = report.config.loader.num_workers
    out = []
    for arm in report.arms.values():
        for t in arm.trials[:1]:
            for e in t.epochs[:1]:
                repeats = e.max_sample_repeats
                unsharded: tuple[str, dict[str, Any]] | None = None
                if e.duplicate_samples:
                    unsharded = (
                        f"{plural(e.duplicate_samples, 'duplicate sample')} in epoch 1, each "
                        f"sample seen up to {plural(repeats, 'time')} with "
                        f"{plural(workers, 'worker')}",
                        {
                            "samples": e.samples,
                            "distinct": e.distinct_samples,
                            "max_repeats": repeats,
                            "len": ds_len,
                        },
                    )
                elif ds_len and e.samples == workers * ds_len and workers > 1:
                    unsharded = (
                        f"epoch 1 yielded {plural(e.samples, 'sample')} = "
                        f"{plural(workers, 'worker')} × len {ds_len}",
                        {"samples": e.samples, "len": ds_len, "workers": workers},
                    )
                if unsharded is not None:
                    out.append(
                        Finding(
                            id="iterable-duplicates",
                            severity="error",
                            arm=arm.name,
                            title=f"IterableDataset not sharded: {unsharded[0]}",
                            evidence=unsharded[1],
                            fix="shard the stream in __iter__ with "
                            "torch.utils.data.get_worker_info() (id, num_workers)",
                        )
                    )
                elif ds_len and e.samples != ds_len and not report.config.loader.drop_last:
                    out.append(
                        Finding(
                            id="iterable-length",
                            severity="warning",
                            arm=arm.name,
                            title=f"IterableDataset yielded {plural(e.samples, 'sample')} in "
                            "epoch 1 but "
                            f"len() says {ds_len}",
                            evidence={"samples": e.samples, "len": ds_len},
                            fix="make __len__ match what __iter__ yields across all workers "
                            "(DataLoader warns when they disagree)",
                        )
                    )
        if out:
            break
    return out
