"""The limits the loader runs within: /dev/shm for batches in flight, and the memory
limit (cgroup) the arms' peaks come near."""

from __future__ import annotations

from loaderprof.model.results import Finding, Report
from loaderprof.units import fmt_bytes

# "Near" a limit: a fifth of it left.
NEAR_LIMIT = 0.8


def check_environment(report: Report) -> list[Finding]:
    out = []
    trials = [t for a in report.arms.values() for t in a.trials]
    sizes = [t.shm_size_bytes for t in trials if t.shm_size_bytes]
    if sizes:
        size = max(sizes)
        peak = max((t.shm_peak_used_bytes or 0) for t in trials)
        batch = max(((e.max_batch_bytes or 0) for t in trials for e in t.epochs), default=0)
        lo = report.config.loader
        prefetch = lo.prefetch_factor or 2
        need = lo.num_workers * prefetch * batch
        if peak >= NEAR_LIMIT * size or need >= NEAR_LIMIT * size:
            out.append(
                Finding(
                    id="shm-near-limit",
                    severity="warning",
                    arm=None,
                    title=f"/dev/shm ({fmt_bytes(size)}) is nearly full: peak use "
                    f"{fmt_bytes(peak)}, batches in flight need about {fmt_bytes(need)}",
                    evidence={
                        "shm_size_bytes": size,
                        "shm_peak_used_bytes": peak,
                        "batches_in_flight_bytes": need,
                        "max_batch_bytes": batch,
                    },
                    fix="enlarge /dev/shm (docker --shm-size), or lower num_workers, "
                    "prefetch_factor or the batch size",
                )
            )
    limit = report.environment.get("cgroup_memory_limit_bytes")
    p = report.arms["persistent"].summary.peak_total_pss_bytes
    if limit and p is not None and p.median >= NEAR_LIMIT * limit:
        out.append(
            Finding(
                id="cgroup-memory-near-limit",
                severity="warning",
                arm="persistent",
                title=f"the run peaks at {fmt_bytes(p.median)} PSS, "
                f"{p.median / limit * 100:.0f} % of the cgroup memory limit {fmt_bytes(limit)}",
                evidence={"peak_total_pss_bytes": int(p.median), "cgroup_limit_bytes": limit},
                fix="fewer workers, a smaller per-worker Dataset copy, or a larger memory limit",
            )
        )
    return out
