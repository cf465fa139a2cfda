"""One `compare -- COMMAND` trial's hook events (NOTE [watch hook]) as the epochs of
its training: read while the command runs (to stop it after --epochs epochs) and
once it ended (its figures).

NOTE [epoch of the training]: an epoch is its main loader's iter() to the end of the
last pass, before that loader's next iter(), of any other loader the arm switches in
the same process: the training's epoch with its validation pass, as the script's own
clock around its epoch loop sees it. The arm switches those loaders too, so what
persistence saves on them is part of the saving (a Lightning validation loader's
start-up is as large as its train loader's). An epoch is whole once the main loader's
next iter() came, or the command ended: the trial is stopped at the iter() after its
--epochs epochs. Loaders the arm leaves alone (no workers, or not at --loader-site)
run alike in both arms and are left out, so --loader-site times its loader alone."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev
from loaderprof.inside.site import same_site, switched
from loaderprof.inside.waits import wait_split
from loaderprof.measure.readings import IterSpan, add_iter_event
from loaderprof.model.command import CommandEpoch, MainLoader
from loaderprof.model.datawait import WaitSplit


def _end_ns(e: IterSpan) -> int | None:
    return None if e.end is None else int(e.end["t"])


def _batches(e: IterSpan) -> int:
    return 0 if e.end is None else int(e.end.get("batches", 0))


@dataclass(frozen=True)
class _Period:
    """One epoch of the training (see NOTE [epoch of the training]): the main loader's
    pass, and the other switched loaders' passes that began inside it."""

    main: IterSpan
    others: tuple[IterSpan, ...]
    # Where each of `others` was built.
    sites: frozenset[str]

    @property
    def end_ns(self) -> int:
        return max(_end_ns(e) or e.start_ns for e in (self.main, *self.others))

    @property
    def wall_ns(self) -> int:
        return self.end_ns - self.main.start_ns


@dataclass
class _Loader:
    created: Mapping[str, Any]
    # Its epochs, each event added as it is read (`add_iter_event`).
    epochs: list[IterSpan] = field(default_factory=list)

    @property
    def ended(self) -> list[IterSpan]:
        return [e for e in self.epochs if e.end is not None]

    @property
    def batches(self) -> int:
        return sum(_batches(e) for e in self.ended)


class CommandTrace:
    """The loaders of one run of the command and their epochs, fed its events in the
    order they were read; each loader's epochs by the one rule (`add_iter_event`)."""

    def __init__(self, t0_ns: int, site: str | None = None) -> None:
        self.t0 = t0_ns
        self.site = site
        self.loaders: dict[str, _Loader] = {}
        # Every event read, in order: watch's checks read them once the trial ended.
        self.events: list[Mapping[str, Any]] = []
        # The command ended by itself: its last epoch is whole without a next iter().
        self.ended = False
        # `epochs_done` as of (events read, ended): the trial asks it every poll.
        self._done: tuple[tuple[int, bool], int] | None = None

    def feed(self, events: Iterable[Mapping[str, Any]]) -> None:
        for ev in events:
            self.events.append(ev)
            lid = ev.get("loader")
            if not isinstance(lid, str):
                continue
            if ev.get("ev") == Ev.LOADER_CREATED:
                self.loaders.setdefault(lid, _Loader(ev))
            elif lid in self.loaders:
                add_iter_event(self.loaders[lid].epochs, ev)

    def in_epoch(self) -> bool:
        """Some loader's epoch has begun and not ended, as far as the events read say."""
        return any(ld.epochs and ld.epochs[-1].end is None for ld in self.loaders.values())

    def main_id(self) -> str | None:
        """The loader that ran the most batches in ended epochs (the first built on a
        tie), leaving out a pass the script ran after its training (`_after_training`);
        with --loader-site, only loaders built there."""
        trained_by = self._trained_by()
        ranked = [
            (not self._after_training(lid, trained_by), ld.batches, -i, lid)
            for i, (lid, ld) in enumerate(self.loaders.items())
            if ld.batches > 0
            and (self.site is None or same_site(str(ld.created.get("site", "")), self.site))
        ]
        return max(ranked)[3] if ranked else None

    def _passes(self, lid: str) -> list[IterSpan]:
        """The iter()s of `lid` and of its rebuilds (`_siblings`)."""
        return [e for ld in self._siblings(lid) for e in ld.epochs]

    def _trained_by(self) -> int | None:
        """The earliest last iter() among the loaders iterated more than once."""
        lasts = [
            max(e.start_ns for e in passes)
            for passes in map(self._passes, self.loaders)
            if len(passes) > 1
        ]
        return min(lasts, default=None)

    def _after_training(self, lid: str, trained_by: int | None) -> bool:
        """Iterated once, after every pass of a loader iterated more than once
        (`trained_by`): a pass the script ran after its training (a test set's, however
        many batches), no epoch of it. A Lightning sanity check makes its validation
        loader one iterated twice before the train loader's second pass, never after
        its first."""
        passes = self._passes(lid)
        return trained_by is not None and len(passes) == 1 and passes[0].start_ns > trained_by

    def _site_of(self, lid: str) -> str:
        return str(self.loaders[lid].created.get("site", "?"))

    def _siblings(self, lid: str, rank: object = "same") -> list[_Loader]:
        """The loaders built at `lid`'s site for the same kind of Dataset by the same
        rank (or by `rank`): one loader, rebuilt (a loader built every epoch is one
        loader to its user)."""
        created = self.loaders[lid].created
        want = created.get("rank") if rank == "same" else rank
        return [
            ld
            for ld in self.loaders.values()
            if _same_loader(ld.created, created) and ld.created.get("rank") == want
        ]

    def _ranks(self, lid: str) -> list[object]:
        """The torchrun ranks (RANK) that built the main loader at its site; [None]
        without torchrun. NOTE [ranks in a command]: under torchrun every rank builds
        its own loader at the same line, and the job's epoch lasts as long as its
        slowest rank's (the ranks meet at each step's all-reduce), so a command's
        epoch is, index by index, its slowest rank's."""
        created = self.loaders[lid].created
        seen = {
            ld.created.get("rank")
            for ld in self.loaders.values()
            if _same_loader(ld.created, created)
        }
        return sorted(seen, key=lambda r: -1 if r is None else int(str(r)))

    def _rank_periods(self, lid: str, rank: object) -> list[_Period]:
        """The rank's whole epochs of the training, in time order (see NOTE [epoch of
        the training])."""
        siblings = self._siblings(lid, rank)
        rebuilt = len(siblings) > 1 and all(len(ld.epochs) <= 1 for ld in siblings)
        # Rebuilt every epoch: each rebuild's pass is one; else the one that ran the
        # most batches, as `main_id` chooses.
        mains = siblings if rebuilt else [max(siblings, key=lambda ld: ld.batches)]
        spans = sorted((e for ld in mains for e in ld.epochs), key=lambda e: e.start_ns)
        pids = {ld.created.get("pid") for ld in mains}
        others = [
            (str(ld.created.get("site", "?")), e)
            for ld in self.loaders.values()
            if ld not in mains
            and ld.created.get("pid") in pids
            and ld.created.get("rank") == rank
            and self._switched(ld)
            for e in ld.ended
        ]
        periods: list[_Period] = []
        for i, span in enumerate(spans):
            nxt = spans[i + 1].start_ns if i + 1 < len(spans) else None
            if span.end is None:
                continue  # running, or left without its end stamped: no epoch
            if nxt is None and not self.ended:
                break
            inside = [
                (site, e)
                for site, e in others
                if span.start_ns <= e.start_ns and (nxt is None or e.start_ns < nxt)
            ]
            if nxt is None:
                inside = _as_before(inside, periods)
            sites = frozenset(site for site, _ in inside)
            periods.append(_Period(span, tuple(e for _, e in inside), sites))
        return periods

    def _switched(self, ld: _Loader) -> bool:
        """Whether the arm switched this loader, by the hook's rule."""
        return switched(ld.created.get("num_workers"), str(ld.created.get("site", "")), self.site)

    def _slowest(self, lid: str) -> list[_Period]:
        """The training's whole epochs in time order, over the main loader's rebuilds;
        under torchrun each epoch its slowest rank's, as many as every rank ended."""
        per_rank = [self._rank_periods(lid, r) for r in self._ranks(lid)]
        n = min(len(p) for p in per_rank)
        return [max((p[i] for p in per_rank), key=lambda e: e.wall_ns) for i in range(n)]

    def epochs_done(self) -> int:
        """Whole epochs of the training (see NOTE [epoch of the training]), counted over
        the main loader's rebuilds when it is rebuilt every epoch and over its ranks
        (the fewest any rank ended): the trial ends after as many."""
        key = (len(self.events), self.ended)
        if self._done is None or self._done[0] != key:
            lid = self.main_id()
            self._done = (key, 0 if lid is None else len(self._slowest(lid)))
        return self._done[1]

    def main(self) -> MainLoader | None:
        lid = self.main_id()
        if lid is None:
            return None
        created = self.loaders[lid].created
        siblings = self._siblings(lid)
        return MainLoader(
            site=self._site_of(lid),
            num_workers=int(created.get("num_workers", 0)),
            persistent_asked=bool(created.get("persistent_asked", False)),
            persistent_workers=bool(created.get("persistent_workers", False)),
            built=len(siblings),
            epochs_per_loader=max(len(ld.epochs) for ld in siblings),
            ranks=len(self._ranks(lid)) if self._ranks(lid) != [None] else None,
            prefetch_factor=_int_or_none(created.get("prefetch_factor")),
            others=tuple(sorted(set().union(*(p.sites for p in self._slowest(lid))))),
            setting=_str_or_none(created.get("setting")),
        )

    def epochs(self, limit: int) -> tuple[CommandEpoch, ...]:
        """The training's first `limit` whole epochs (over its main loader's rebuilds, in
        time order)."""
        lid = self.main_id()
        if lid is None:
            return ()
        return tuple(_epoch(i + 1, e) for i, e in enumerate(self._slowest(lid)[:limit]))

    def built_s(self) -> float | None:
        lid = self.main_id()
        if lid is None:
            return None
        return (int(self.loaders[lid].created["t"]) - self.t0) / NS

    def before_first_s(self) -> float | None:
        lid = self.main_id()
        if lid is None:
            return None
        starts = [e.start_ns for e in self._passes(lid)]
        return (min(starts) - self.t0) / NS if starts else None

    def built_any(self) -> bool:
        return bool(self.loaders)


def _as_before(
    inside: list[tuple[str, IterSpan]], before: list[_Period]
) -> list[tuple[str, IterSpan]]:
    """The last epoch of a command that ended by itself has no next iter() to end it:
    it holds one pass of each loader the epochs before it held (its validation pass),
    not what the script ran after its training (a test pass, an evaluation of its
    own)."""
    sites = frozenset().union(*(p.sites for p in before))
    first: dict[str, tuple[str, IterSpan]] = {}
    for site, e in sorted(inside, key=lambda x: x[1].start_ns):
        if site in sites:
            first.setdefault(site, (site, e))
    return list(first.values())


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, int) else None


def _same_loader(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two loaders' creation events name one loader of the script's, built again: its
    site, its kind of Dataset, and what the HF Trainer built it for (its train, eval and
    test loaders share the user's site: inside/frameworks.py)."""
    return all(a.get(k) == b.get(k) for k in ("site", "dataset_type", "built_for"))


def _epoch(index: int, period: _Period) -> CommandEpoch:
    e = period.main
    end = e.end or {}
    wall = period.wall_ns / NS
    last = end.get("last_batch")
    others = [((_end_ns(o) or o.start_ns) - o.start_ns) / NS for o in period.others]
    full = [_full_pass(o, s) for o, s in zip(period.others, others, strict=True)]
    return CommandEpoch(
        index=index,
        wall_s=wall,
        first_batch_s=None if e.first_ns is None else (e.first_ns - e.start_ns) / NS,
        batches=_batches(e),
        wait=_waits((e, *period.others), wall),
        cut=end.get("ended") == "cut",
        planned_batches=e.planned,
        last_batch_s=(int(last) - e.start_ns) / NS if isinstance(last, int) else None,
        others_s=sum(others),
        others_full_s=sum(full) if full != others else None,
    )


def _waits(passes: Iterable[IterSpan], wall_s: float) -> WaitSplit | None:
    """The epoch's waits: each pass's, added (a validation pass's first batch is a
    start-up wait again, as inside/waits.py `start_pass` counts it); None where a pass
    has none."""
    splits = [wait_split(p.end or {}, wall_s) for p in passes]
    if any(w is None for w in splits):
        return None
    have = [w for w in splits if w is not None]
    return WaitSplit(
        wall_s,
        sum(w.first_s for w in have),
        sum(w.steady_s for w in have),
        sum(w.batches for w in have),
        sum(w.passes for w in have),
    )


def _full_pass(e: IterSpan, wall_s: float) -> float:
    """A pass --max-batches cut, projected to its len() by its own per-batch time (NOTE
    [cut epochs]); a whole one as it ran."""
    end = e.end or {}
    last, batches = end.get("last_batch"), _batches(e)
    if end.get("ended") != "cut" or not e.planned or e.first_ns is None:
        return wall_s
    if not isinstance(last, int) or batches < 2 or e.planned <= batches:
        return wall_s
    step = (last - e.first_ns) / NS / (batches - 1)
    return wall_s + (e.planned - batches) * step


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None
