"""Synthetic trials with known answers, shared by the unit tests."""

from __future__ import annotations

from loaderprof.model.datawait import WaitSplit
from loaderprof.model.metrics import Stat
from loaderprof.model.results import (
    DistributedSummary,
    Finding,
    NodeArmTotals,
    NodeSummary,
    RankArmSummary,
    RankSummary,
    SlowestRank,
)
from loaderprof.model.trials import EpochResult, Setup, TrialMemory, TrialResult
from loaderprof.model.watch import PoolSpan, WatchedEpoch, WatchedLoader, WatchReport
from loaderprof.units import MiB

__all__ = ["MiB", "distributed_summary", "make_pair", "make_trial", "watch_report"]


def make_trial(
    arm: str, walls: list[float], *, idle: int | None, reused: bool, index: int = 0
) -> TrialResult:
    epochs = []
    t = 0.0
    for i, w in enumerate(walls, start=1):
        if reused:
            new = (1, 2) if i == 1 else ()
            pids = (1, 2)
        else:
            pids = (10 * i + 1, 10 * i + 2)
            new = pids
        epochs.append(EpochResult(i, t, w, w / 2, 4, 128, 128 / w, pids, new))
        t += w
    mem = TrialMemory(
        200 * MiB, 20 * MiB, 10 * MiB, idle, idle, 150 * MiB, 160 * MiB, 170 * MiB, 50
    )
    return TrialResult(
        arm, index, True, t, 0, Setup(1.0, 1.1, 1.2), tuple(epochs), (), mem, (), 999
    )


def make_pair(
    p_walls: list[float],
    n_walls: list[float],
    idle_p: int | None = 20 * MiB,
    idle_n: int | None = 0,
) -> tuple[TrialResult, TrialResult]:
    return (
        make_trial("persistent", p_walls, idle=idle_p, reused=True),
        make_trial("non_persistent", n_walls, idle=idle_n, reused=False),
    )


def watch_report(*, long_names: bool = True) -> WatchReport:
    """A watched run of three loaders with every kind of cell: a persistent pool with
    cold and steady figures, a custom class with a long module path whose epoch was
    cut, and one without workers (no start-up, no USS)."""
    ms = 1e-3
    cls = (
        "my_company.training.data.loaders.BucketingDistributedDataLoader"
        if long_names
        else "torch.utils.data.dataloader.DataLoader"
    )

    def loader(lid: str, cls: str, workers: int, pers: bool, cut: bool) -> WatchedLoader:
        epochs = tuple(
            WatchedEpoch(i, 1.0 + i, 1.1 + i, None if cut and i == 3 else 1.9 + i, 40, (), ())
            for i in range(1, 4)
        )
        return WatchedLoader(
            id=lid,
            site=f"train_{lid.lower()}_with_a_long_script_name.py:{100 + len(lid)}",
            pid=4242,
            rank=None,
            cls=cls,
            num_workers=workers,
            persistent_workers=pers,
            prefetch_factor=2 if workers else None,
            pin_memory=False,
            batch_size=32,
            start_method="fork",
            dataset_type="map",
            dataset_len=1280,
            created_s=0.5,
            epochs=epochs,
            workers=(),
            workers_reused=pers if workers else None,
            cold_epoch_s=935 * ms,
            steady_epoch_s=Stat.of([772 * ms, 781 * ms]),
            cold_first_batch_s=451 * ms if workers else 12 * ms,
            steady_first_batch_s=Stat.of([37 * ms, 38 * ms]) if workers else None,
            worker_startup_s=Stat.of([210 * ms, 230 * ms]) if workers else None,
            peak_worker_uss_bytes=1234 * MiB if workers else None,
            idle_workers_uss_bytes=2 * 1234 * MiB if pers else None,
            # L1 keeps its workers, L2 starts them each epoch, L3 loads in the main process.
            wait=WaitSplit(776 * ms, (37.5 if pers else 451 if workers else 12) * ms, 60 * ms, 40),
            wait_epochs="steady",
        )

    loaders = (
        loader("L1", "torch.utils.data.dataloader.DataLoader", 2, True, False),
        loader("L2", cls, 12, False, True),
        loader("L3", "torch.utils.data.dataloader.DataLoader", 0, False, False),
    )
    finding = Finding(
        "growing_idle_uss",
        "warning",
        "Idle worker USS grows epoch over epoch (L1)",
        {"loader": "L1", "growth_bytes": 12 * MiB},
        "free what __getitem__ caches, or cap the cache",
    )
    return WatchReport(
        kind="watch",
        schema_version=1,
        tool={"name": "loaderprof"},
        environment={},
        command=("python", "train.py", "--epochs", "3"),
        exit_code=0,
        returncode=0,
        wall_s=6.5,
        loaders=loaders,
        pools=tuple(PoolSpan(ld.id, 1.0, 5.5, ld.num_workers) for ld in loaders[:2]),
        peak_worker_processes=14,
        leaked_pids=(),
        findings=(finding,),
        sampler_duty_cycle=0.012,
    )


def distributed_summary() -> DistributedSummary:
    """Four ranks on two nodes with long host names, one arm's idle memory unmeasured."""
    p = RankArmSummary(0.1234, 0.0123, 1234 * MiB, 4321 * MiB, 2468 * MiB, (1, 2, 3, 4))
    n = RankArmSummary(0.3456, 0.2345, 1234 * MiB, 4321 * MiB, 0, (5, 6, 7, 8))
    host = "gpu-node-with-a-long-hostname-{}.cluster.example.org".format
    ranks = tuple(
        RankSummary(r, host(r // 2), {"persistent": p, "non_persistent": n}) for r in range(4)
    )
    slowest = tuple(
        SlowestRank(arm, e, e % 4, 0.4 + e / 10)
        for arm in ("persistent", "non_persistent")
        for e in range(1, 6)
    )
    totals = {
        "persistent": NodeArmTotals(8, 8642 * MiB, 4936 * MiB),
        "non_persistent": NodeArmTotals(8, 8642 * MiB, None),
    }
    nodes = tuple(NodeSummary(host(h), (2 * h, 2 * h + 1), totals) for h in range(2))
    return DistributedSummary(4, ranks, slowest, nodes)
