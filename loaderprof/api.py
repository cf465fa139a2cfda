"""The Python API: the same functions the CLI is a thin layer over.

import loaderprof
report = loaderprof.compare("mypkg.data:MyDataset", epochs=5, num_workers=4)
assert report.verdict.recommendation == "enable"
frame = loaderprof.to_frame(report)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loaderprof.errors import UsageError
from loaderprof.results import Report


def spec_of(dataset: Any) -> str:
    """'module:attr' for a spec string, or for a top-level class / factory function.

    Each trial runs in a fresh interpreter, so the Dataset must be importable by
    name there; an instance or a locally defined class cannot travel.
    """
    if isinstance(dataset, str):
        return dataset
    module = getattr(dataset, "__module__", None)
    qualname = getattr(dataset, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or module == "__main__":
        raise UsageError(
            f"cannot profile {dataset!r} by reference: pass 'module:attr', or a class or "
            "factory defined at the top level of an importable module (each trial imports "
            "it in a fresh process)"
        )
    return f"{module}:{qualname}"


def _flags(
    dataset: Any, args: Mapping[str, Any] | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    flags: dict[str, Any] = {"dataset": spec_of(dataset), "args": dict(args or {})}
    renames = {
        "sample_interval": "sample_interval_ms",
        "uss_interval": "uss_interval_ms",
        "trial_timeout": "trial_timeout_s",
    }
    for key, value in options.items():
        flags[renames.get(key, key)] = value
    return flags


def compare(
    dataset: Any,
    *,
    args: Mapping[str, Any] | None = None,
    config: str | None = None,
    gates: Sequence[str] = (),
    baseline: str | Report | None = None,
    strict: bool = False,
    **options: Any,
) -> Report:
    """Run persistence on vs off and return the Report (what `loaderprof compare` prints).

    `options` are the CLI's options by name: epochs, num_workers, batch_size,
    prefetch_factor, pin_memory, mp_context, shuffle, drop_last, timeout,
    collate_fn, worker_init_fn, step_ms, sample_interval, trials, warmup_trials,
    seed, train_epochs, min_gain, memory_budget, digests, ...
    """
    import dataclasses

    from loaderprof.config import build_config, load_config_file
    from loaderprof.gates import check_needs_baseline, evaluate, parse_gate
    from loaderprof.report.json_report import read_report
    from loaderprof.session import run_compare

    file_values = load_config_file(config) if config else {}
    cfg = build_config(_flags(dataset, args, options), file_values)
    gate_list = [parse_gate(g) for g in gates]
    check_needs_baseline(gate_list, baseline is not None)
    base = read_report(baseline) if isinstance(baseline, str) else baseline
    report = run_compare(cfg)
    if gate_list:
        results, status = evaluate(report, gate_list, baseline=base, strict=strict, seed=cfg.seed)
        report = dataclasses.replace(report, gates=results, gate_status=status)
    return report


def sweep(dataset: Any, *, args: Mapping[str, Any] | None = None, **options: Any) -> Any:
    """Run every valid combination of the grid; see `loaderprof.sweep.run_sweep`."""
    from loaderprof.sweep import SweepGrid, run_sweep

    grid = SweepGrid.from_options(options)
    from loaderprof.config import build_config

    base = {k: v for k, v in options.items() if k not in SweepGrid.KEYS}
    base.setdefault("num_workers", max([w for w in grid.num_workers if w > 0], default=2))
    cfg = build_config(_flags(dataset, args, base))
    return run_sweep(cfg, grid)
