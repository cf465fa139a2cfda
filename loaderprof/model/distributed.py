"""Under torchrun: each rank's figures and the per-node totals rank 0 reports
(schema_version 1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RankArmSummary:
    steady_epoch_s: float | None
    first_batch_s: float | None
    peak_worker_uss_bytes: float | None
    peak_total_pss_bytes: float | None
    idle_workers_uss_bytes: float | None
    worker_pids: tuple[int, ...]


@dataclass(frozen=True)
class RankSummary:
    rank: int
    host: str
    arms: Mapping[str, RankArmSummary]
    # The rank's run did not complete; its one error line (what the same run
    # without torchrun would print) and its category (usage / run / interrupted).
    failed: bool = False
    error: str | None = None
    error_category: str | None = None


@dataclass(frozen=True)
class SlowestRank:
    """The rank the whole job waits for in one epoch."""

    arm: str
    epoch: int
    rank: int
    wall_s: float


@dataclass(frozen=True)
class NodeArmTotals:
    # Worker processes the node ran at once, measured: per rank the most worker PIDs
    # alive at once (sampler ticks, epochs), summed over the node's ranks.
    worker_processes: int
    # Sum over the node's ranks of each rank's peak PSS total (trials start
    # together, so the peaks overlap).
    pss_total_bytes: int | None
    # Memory held between epochs by all the node's persistent workers.
    idle_workers_uss_bytes: int | None


@dataclass(frozen=True)
class NodeSummary:
    host: str
    ranks: tuple[int, ...]
    arms: Mapping[str, NodeArmTotals]


@dataclass(frozen=True)
class DistributedSummary:
    world_size: int
    ranks: tuple[RankSummary, ...]
    slowest: tuple[SlowestRank, ...]
    nodes: tuple[NodeSummary, ...]
