"""Capacity planning: project a training node's host memory from one measurement."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loaderprof.errors import UsageError
from loaderprof.model.results import Report
from loaderprof.units import plural


@dataclass(frozen=True)
class NodeMemoryEstimate:
    """A training node's host memory, estimated from one measured rank (`loaderprof
    plan`); not `model.results.Projection`, which projects cut epochs to full ones."""

    arm: str
    ranks: int
    num_workers: int
    measured_workers: int
    per_worker_uss_bytes: int
    rank_total_pss_bytes: int
    per_rank_bytes: int
    node_bytes: int
    limit_bytes: int | None
    limit_source: str | None
    assumptions: tuple[str, ...]

    @property
    def over_limit(self) -> bool:
        return self.limit_bytes is not None and self.node_bytes > self.limit_bytes


def project(
    report: Report,
    *,
    ranks: int,
    num_workers: int,
    arm: str = "persistent",
    environment: Mapping[str, Any] | None = None,
) -> NodeMemoryEstimate:
    """node = ranks × (measured PSS total of one rank + (W − W_measured) × peak worker USS).

    PSS sums to the true total of a process tree: the measured tree (main process
    plus W_measured workers, shared pages counted once) is the base; each extra
    worker adds its private pages (USS); ranks share nothing with each other.
    """
    if ranks < 1 or num_workers < 0:
        raise UsageError("--ranks must be ≥ 1 and --num-workers ≥ 0")
    if arm not in report.arms:
        raise UsageError(f"no arm {arm!r} in the report (use persistent or non_persistent)")
    s = report.arms[arm].summary
    if s.peak_total_pss_bytes is None or s.peak_worker_uss_bytes is None:
        raise UsageError(
            "the report has no memory figures (it was measured with "
            "--sample-interval 0): measure again with sampling on"
        )
    measured = report.config.loader.num_workers
    uss = int(s.peak_worker_uss_bytes.median)
    base = int(s.peak_total_pss_bytes.median)
    per_rank = base + (num_workers - measured) * uss
    node = ranks * per_rank
    env = environment if environment is not None else report.environment
    limit, source = None, None
    if env.get("cgroup_memory_limit_bytes"):
        limit, source = int(env["cgroup_memory_limit_bytes"]), "cgroup memory limit"
    elif env.get("memory_total_bytes"):
        limit, source = int(env["memory_total_bytes"]), "memory"
    assumptions = (
        f"one rank = the measured process tree ({plural(measured, 'worker')}, peak PSS total, "
        "shared "
        "pages counted once)",
        f"each worker beyond {measured} adds the measured peak worker USS (its private pages)",
        "ranks share no pages with each other (library pages are counted per rank: an upper bound)",
        f"the {arm.replace('_', '-')} arm's peaks; persistent workers hold theirs between "
        "epochs too",
        "the Dataset copy per worker stays the same size with more workers",
    )
    return NodeMemoryEstimate(
        arm, ranks, num_workers, measured, uss, base, per_rank, node, limit, source, assumptions
    )
