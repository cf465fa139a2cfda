"""Profiling under torchrun: every rank runs the same arms; rank 0 gathers and reports.

`torchrun --nproc-per-node 2 -m loaderprof compare DATASET ...` starts one
loaderprof per rank. Each rank measures its own DataLoader (with a
DistributedSampler for its shard) and its own workers, in trials that start
together (a barrier before each), so the node's memory is measured while all
ranks load at once. Rank 0 gathers every rank's report through
torch.distributed (gloo, on the CPU) and alone prints and writes files.
Without torchrun nothing changes: a single process is world size 1.
"""

from __future__ import annotations

import os
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loaderprof.results import (
    DistributedSummary,
    NodeArmTotals,
    NodeSummary,
    RankArmSummary,
    RankSummary,
    Report,
    SlowestRank,
)


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    host: str


def detect(env: Mapping[str, str] | None = None) -> DistContext | None:
    """The torchrun context from its environment; None for a single process."""
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        return None
    if world <= 1 or "RANK" not in env:
        return None
    return DistContext(
        rank=int(env["RANK"]),
        world_size=world,
        local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
        host=socket.gethostname(),
    )


def init(timeout_s: float) -> None:
    import datetime

    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))


def barrier() -> None:
    import torch.distributed as dist

    dist.barrier()


def gather(obj: Any, world_size: int) -> list[Any] | None:
    """Every rank's object on rank 0 (None elsewhere)."""
    import torch.distributed as dist

    out: list[Any] | None = [None] * world_size if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def finish() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _median(stat: Any) -> float | None:
    return None if stat is None else float(stat.median)


def summarize(reports: Sequence[tuple[int, str, Report]]) -> DistributedSummary:
    """Per-rank figures, the slowest rank per epoch, and per-node totals."""
    ranks = []
    for rank, host, rep in sorted(reports, key=lambda r: r[0]):
        arms = {}
        for name, arm in rep.arms.items():
            s = arm.summary
            pids = sorted({w.pid for t in arm.trials for w in t.workers})
            arms[name] = RankArmSummary(
                steady_epoch_s=_median(s.steady_epoch_s),
                first_batch_s=_median(s.first_batch_s),
                peak_worker_uss_bytes=_median(s.peak_worker_uss_bytes),
                peak_total_pss_bytes=_median(s.peak_total_pss_bytes),
                idle_workers_uss_bytes=_median(s.idle_workers_uss_bytes),
                worker_pids=tuple(pids),
            )
        ranks.append(RankSummary(rank=rank, host=host, arms=arms))
    slowest: list[SlowestRank] = []
    for name in ("persistent", "non_persistent"):
        walls: dict[int, list[tuple[float, int]]] = defaultdict(list)
        for rank, _, rep in reports:
            trials = rep.arms[name].trials if name in rep.arms else ()
            if trials:
                for e in trials[0].epochs:
                    walls[e.epoch].append((e.wall_s, rank))
        for epoch in sorted(walls):
            wall, rank = max(walls[epoch])
            slowest.append(SlowestRank(arm=name, epoch=epoch, rank=rank, wall_s=wall))
    nodes = []
    by_host: dict[str, list[tuple[int, Report]]] = defaultdict(list)
    for rank, host, rep in reports:
        by_host[host].append((rank, rep))
    for host, members in sorted(by_host.items()):
        totals = {}
        for name in ("persistent", "non_persistent"):
            pss = [_median(r.arms[name].summary.peak_total_pss_bytes) for _, r in members]
            idle = [_median(r.arms[name].summary.idle_workers_uss_bytes) for _, r in members]
            workers = sum(int(r.config["loader"]["num_workers"]) for _, r in members)
            totals[name] = NodeArmTotals(
                worker_processes=workers,
                pss_total_bytes=int(sum(v for v in pss if v is not None))
                if any(v is not None for v in pss)
                else None,
                idle_workers_uss_bytes=int(sum(v for v in idle if v is not None))
                if any(v is not None for v in idle)
                else None,
            )
        nodes.append(
            NodeSummary(host=host, ranks=tuple(sorted(r for r, _ in members)), arms=totals)
        )
    return DistributedSummary(
        world_size=len(reports), ranks=tuple(ranks), slowest=tuple(slowest), nodes=tuple(nodes)
    )


def adjust_verdict(report: Report, summary: DistributedSummary, budget: int | None) -> Report:
    """The verdict accounts for the node: all ranks' workers, and the node's memory."""
    import dataclasses

    from loaderprof.results import Verdict
    from loaderprof.units import fmt_bytes

    v = report.verdict
    if v is None or not summary.nodes:
        return report
    node = max(summary.nodes, key=lambda n: n.arms["persistent"].pss_total_bytes or 0)
    p = node.arms["persistent"]
    reason = (
        f"on node {node.host}: {len(node.ranks)} ranks run {p.worker_processes} worker "
        f"processes; with persistence they hold {fmt_bytes(p.idle_workers_uss_bytes)} between "
        f"epochs, and the node peaks at {fmt_bytes(p.pss_total_bytes)} PSS"
    )
    reasons = (*v.reasons, reason)
    if budget is not None and p.pss_total_bytes is not None and p.pss_total_bytes > budget:
        return dataclasses.replace(
            report,
            verdict=Verdict(
                "keep_off",
                "Keep persistent_workers off: the node does not fit the memory budget with it.",
                (
                    f"over budget: node {node.host} peaks at {fmt_bytes(p.pss_total_bytes)} PSS "
                    f"across its ranks, above --memory-budget {fmt_bytes(budget)}",
                    *reasons,
                ),
            ),
        )
    return dataclasses.replace(report, verdict=dataclasses.replace(v, reasons=reasons))
