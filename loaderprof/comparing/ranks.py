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

import contextlib
import os
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loaderprof.config.run import RunConfig
from loaderprof.model.results import (
    DistributedSummary,
    NodeArmTotals,
    NodeSummary,
    RankArmSummary,
    RankSummary,
    Report,
    SlowestRank,
    error_line,
)
from loaderprof.model.trials import TrialError


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
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


def release() -> bool:
    """A last barrier (rank 0 reaches it after reporting), then the group ends. True
    when every rank got there; a rank that is gone makes the barrier fail."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return False
    reached = False
    with contextlib.suppress(Exception):
        dist.barrier()
        reached = True
    finish()
    return reached


def _median(stat: Any) -> float | None:
    return None if stat is None else float(stat.median)


def _failure(rep: Report) -> tuple[str, str] | None:
    """(category, line) of a rank whose run did not complete; None when it did."""
    errors = [e for e in rep.errors if e.category != "interrupted"]
    if not errors and rep.complete:
        return None
    if not errors:
        return "interrupted", "stopped before it finished"
    return errors[0].category, error_line(rep) or errors[0].message


def _rank_summary(rank: int, host: str, rep: Report) -> RankSummary:
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
    failure = _failure(rep)
    return RankSummary(
        rank=rank,
        host=host,
        arms=arms,
        failed=failure is not None,
        error=failure[1] if failure else None,
        error_category=failure[0] if failure else None,
    )


def _slowest_ranks(reports: Sequence[tuple[int, str, Report]]) -> list[SlowestRank]:
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
    return slowest


def _sum_known(values: Sequence[float | None]) -> int | None:
    known = [v for v in values if v is not None]
    return int(sum(known)) if known else None


def _node_summary(host: str, members: Sequence[tuple[int, Report]]) -> NodeSummary:
    totals = {}
    for name in ("persistent", "non_persistent"):
        arms = [r.arms[name] for _, r in members if name in r.arms]
        totals[name] = NodeArmTotals(
            worker_processes=sum(a.summary.peak_worker_processes or 0 for a in arms),
            pss_total_bytes=_sum_known([_median(a.summary.peak_total_pss_bytes) for a in arms]),
            idle_workers_uss_bytes=_sum_known(
                [_median(a.summary.idle_workers_uss_bytes) for a in arms]
            ),
        )
    return NodeSummary(host=host, ranks=tuple(sorted(r for r, _ in members)), arms=totals)


def summarize(reports: Sequence[tuple[int, str, Report]]) -> DistributedSummary:
    """Per-rank figures, the slowest rank per epoch, and per-node totals."""
    ranks = [_rank_summary(*r) for r in sorted(reports, key=lambda r: r[0])]
    by_host: dict[str, list[tuple[int, Report]]] = defaultdict(list)
    for rank, host, rep in reports:
        by_host[host].append((rank, rep))
    nodes = [_node_summary(host, members) for host, members in sorted(by_host.items())]
    return DistributedSummary(
        world_size=len(reports),
        ranks=tuple(ranks),
        slowest=tuple(_slowest_ranks(reports)),
        nodes=tuple(nodes),
    )


def mark_failed_ranks(report: Report, summary: DistributedSummary) -> Report:
    """Rank 0's report speaks for the job: a failed rank makes it incomplete, and each
    failed rank's line (named) becomes one of its errors."""
    import dataclasses

    failed = [r for r in summary.ranks if r.failed]
    if not failed:
        return report
    errors = tuple(
        TrialError(
            r.error_category or "run",  # type: ignore[arg-type]
            "rank_failed",
            f"rank {r.rank} (host {r.host}): {r.error}",
        )
        for r in failed
    )
    return dataclasses.replace(report, complete=False, errors=(*report.errors, *errors))


def adjust_verdict(report: Report, summary: DistributedSummary, cfg: RunConfig) -> Report:
    """Rank 0's report with the verdict decided again, now that the node is known: all
    its ranks' workers, and its memory (NOTE [one verdict])."""
    import dataclasses

    from loaderprof.analysis.verdict import VerdictInputs, decide

    if report.comparison is None or report.verdict is None:
        return report
    inputs = VerdictInputs.of_run(
        cfg,
        report.comparison,
        report.arms["persistent"].summary,
        report.arms["non_persistent"].summary,
        findings=report.findings,
        ranks=summary,
    )
    return dataclasses.replace(report, verdict=decide(inputs))


def for_rank(cfg: RunConfig, ctx: DistContext | None) -> RunConfig:
    """`cfg` as this rank runs it: its rank and the world's size (so, under torchrun,
    a fixed plan: `RunConfig.adaptive`)."""
    import dataclasses

    if ctx is None:
        return cfg
    return dataclasses.replace(cfg, rank=ctx.rank, world_size=ctx.world_size)
