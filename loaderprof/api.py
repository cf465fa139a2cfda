"""The Python API, and the one path every run takes (the CLI's commands call it too).

import loaderprof
report = loaderprof.compare("mypkg.data:MyDataset", epochs=5, num_workers=4)
assert report.verdict.recommendation == "enable"
frame = loaderprof.to_frame(report)
watched = loaderprof.watch(["python", "train.py"])

`prepare` merges options, the config file (its `[gates]` included) and a
baseline into what a run needs; `execute` runs it (under torchrun: every rank,
gathered on rank 0); `finalize` applies the gates. `loaderprof compare` and
`loaderprof.compare(...)` both go through these three, so they cannot diverge.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.analysis.gates import Gate, check_needs_baseline
from loaderprof.comparing.scheduler import ProgressCallback
from loaderprof.config.build import build_config, load_config_file
from loaderprof.config.options import GateOptions, RunOptions, SweepOptions, fill
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError
from loaderprof.measure.runner import TrialRunner
from loaderprof.model.command import CommandReport
from loaderprof.model.results import BaselineInfo, Report, SweepReport
from loaderprof.report.json_report import read_report

# `loaderprof.watch(...)`: the watch pipeline for callers (it gives a Ctrl-C back to them);
# the CLI runs the same pipeline through `session.collect`, the signal its status.
from loaderprof.watching.session import watch as watch

# `check` is `compare` with every lifecycle check on: one trial per arm and
# content digests, unless the flags or the config file say otherwise.
CHECK_PRESET: Mapping[str, Any] = {"trials": 1, "digests": True}


def spec_of(dataset: Any) -> str | None:
    """'module:attr' for a spec string, or for a top-level class / factory function.

    Each trial runs in a fresh interpreter, so the Dataset must be importable by
    name there; an instance or a locally defined class cannot travel.
    """
    if dataset is None or isinstance(dataset, str):
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


@dataclass(frozen=True)
class Prepared:
    """Everything a run needs, validated before any trial starts."""

    cfg: RunConfig
    gates: tuple[Gate, ...]
    strict: bool
    baseline: Report | None
    baseline_path: Path | None


def load_gates(
    fail_on: Sequence[str] | None,
    gates_file: Path | None,
    config_gates: Any,
    *,
    command: bool = False,
) -> list[Gate]:
    """Gates from the config file's table, a gates file and --fail-on, in that order;
    `command`: `compare -- COMMAND`'s, whose finding gates name watch's findings."""
    from loaderprof.analysis import gates as g

    make = g.make_command_gate if command else g.make_gate
    parse = g.parse_command_gate if command else g.parse_gate
    gates: list[Gate] = []
    if config_gates:
        gates += g.gates_from_table(config_gates, "the config file", make)
    if gates_file:
        table = load_config_file(gates_file).get("gates")
        if not table:
            raise UsageError(f"{gates_file} has no [gates] table")
        gates += g.gates_from_table(table, str(gates_file), make)
    gates += [parse(text) for text in fail_on or ()]
    return gates


def prepare(
    dataset: Any,
    run: RunOptions,
    gates: GateOptions,
    *,
    preset: Mapping[str, Any] | None = None,
    baseline: Report | None = None,
) -> Prepared:
    file_values = load_config_file(run.config) if run.config else {}
    flags = {"dataset": spec_of(dataset), **run.flags()}
    for key, value in (preset or {}).items():
        if flags.get(key) is None and file_values.get(key) is None:
            flags[key] = value
    cfg = build_config(flags, file_values, source=run.config)
    gate_list = load_gates(gates.fail_on, gates.gates, file_values.get("gates"))
    check_needs_baseline(gate_list, gates.baseline is not None or baseline is not None)
    if baseline is None and gates.baseline is not None:
        baseline = read_report(gates.baseline, needs="--baseline takes a compare report")
    return Prepared(cfg, tuple(gate_list), gates.strict, baseline, gates.baseline)


@dataclass(frozen=True)
class Execution:
    """What a run produced on this process: rank 0 (or a single process) has the report."""

    report: Report | None
    # This rank's own report (equal to `report` on rank 0 and without torchrun).
    local: Report
    rank: int = 0
    # Under torchrun: `release` ends the process group once rank 0 has reported.
    distributed: bool = False


def execute(
    prep: Prepared,
    *,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    distributed: bool = True,
) -> Execution:
    """Run both arms; under torchrun every rank runs and rank 0 gathers."""
    from loaderprof.comparing import ranks as dist
    from loaderprof.comparing.session import run_compare

    ctx = dist.detect() if distributed else None
    if ctx is None:
        report = run_compare(prep.cfg, runner=runner, on_progress=on_progress)
        return Execution(report, report)
    # Each barrier waits at most for the slowest rank's trial.
    dist.init(timeout_s=prep.cfg.trial_timeout_s + 300)
    cfg = dist.for_rank(prep.cfg, ctx)
    local = run_compare(
        cfg,
        runner=runner,
        on_progress=on_progress if ctx.rank == 0 else None,
        sync=dist.barrier,
    )
    return Execution(_gather(local, ctx, cfg), local, ctx.rank, True)


def _gather(report: Report, ctx: Any, cfg: RunConfig) -> Report | None:
    """Every rank's report to rank 0, which gets its own with the per-node summary."""
    from loaderprof.comparing import ranks as dist
    from loaderprof.model.codec import from_dict, to_dict

    gathered = dist.gather((ctx.rank, ctx.host, to_dict(report)), ctx.world_size)
    if gathered is None:
        return None
    reports = [(rank, host, from_dict(Report, data)) for rank, host, data in gathered]
    summary = dist.summarize(reports)
    merged = dist.mark_failed_ranks(dataclasses.replace(report, distributed=summary), summary)
    return dist.adjust_verdict(merged, summary, cfg)


def release(done: Execution) -> bool:
    """Under torchrun: every rank waits here until rank 0 has written and printed the
    report, so that no rank's exit (torchrun stops the others when one fails) cuts it
    short; then the process group ends. True when rank 0 reported for every rank."""
    if not done.distributed:
        return False
    from loaderprof.comparing import ranks as dist

    return dist.release()


def measured(report: Report) -> bool:
    return any(t.epochs for a in report.arms.values() for t in a.trials)


def gateable(report: Report) -> bool:
    """A run that failed or was stopped is reported, not gated."""
    return measured(report) and report.complete and not report.errors


def finalize(report: Report, prep: Prepared) -> Report:
    """The gates' results and the baseline's environment differences, on the report."""
    from loaderprof.analysis.gates import evaluate
    from loaderprof.model.environment import environment_differences

    info = None
    if prep.baseline is not None:
        diffs = environment_differences(prep.baseline.environment, report.environment)
        path = str(prep.baseline_path) if prep.baseline_path else "(in memory)"
        info = BaselineInfo(path, prep.baseline.created, tuple(diffs))
    if not prep.gates:
        # A saved report's own gates were judged in another run: not carried over.
        return dataclasses.replace(report, gates=(), gate_status=None, baseline=info)
    results, status = evaluate(
        report, list(prep.gates), baseline=prep.baseline, strict=prep.strict, seed=prep.cfg.seed
    )
    return dataclasses.replace(report, gates=results, gate_status=status, baseline=info)


def _options(
    args: Mapping[str, Any] | None,
    config: str | Path | None,
    gates: Sequence[str],
    baseline: str | Path | Report | None,
    strict: bool,
    options: Mapping[str, Any],
) -> tuple[RunOptions, GateOptions, Report | None]:
    run = fill(
        RunOptions,
        {**options, "args": dict(args or {}), "config": Path(config) if config else None},
    )
    base_path = None if baseline is None or isinstance(baseline, Report) else Path(baseline)
    gate_opts = GateOptions(fail_on=tuple(gates), strict=strict, baseline=base_path)
    return run, gate_opts, baseline if isinstance(baseline, Report) else None


def compare(dataset: Any, **kwargs: Any) -> Report:
    """Run persistence on vs off and return the Report (what `loaderprof compare` prints).

    Keywords: `args` (the Dataset's keyword arguments), `config` (a TOML file, whose
    `[gates]` apply as on the command line), `gates` (expressions such as
    "steady_epoch_ratio:<=0.95"), `baseline` (a saved report's path, or a Report),
    `strict`, `on_progress`, `runner` (replaces the process-per-trial runner; tests use
    a fake one), and the CLI's run options by name (see `loaderprof.config.options.RunOptions`):
    epochs, num_workers, batch_size, prefetch_factor, pin_memory, mp_context, shuffle,
    drop_last, timeout, collate_fn, worker_init_fn, step_ms, sample_interval, trials,
    warmup_trials, seed, train_epochs, min_gain, memory_budget, digests, ...
    """
    return _compare(dataset, **kwargs)


def check(dataset: Any, **kwargs: Any) -> Report:
    """`compare` with every lifecycle check on (what `loaderprof check` runs): one trial
    per arm and content digests unless the options or the config file say otherwise."""
    return _compare(dataset, preset=CHECK_PRESET, **kwargs)


def _compare(
    dataset: Any,
    *,
    args: Mapping[str, Any] | None = None,
    config: str | Path | None = None,
    gates: Sequence[str] = (),
    baseline: str | Path | Report | None = None,
    strict: bool = False,
    runner: TrialRunner | None = None,
    on_progress: ProgressCallback | None = None,
    preset: Mapping[str, Any] | None = None,
    **options: Any,
) -> Report:
    run, gate_opts, base = _options(args, config, gates, baseline, strict, options)
    prep = prepare(dataset, run, gate_opts, preset=preset, baseline=base)
    done = execute(prep, runner=runner, on_progress=on_progress, distributed=False)
    assert done.report is not None
    return finalize(done.report, prep) if gateable(done.report) else done.report


def prepare_sweep(dataset: Any, run: RunOptions, grid_opts: SweepOptions) -> tuple[Any, Any]:
    """The sweep's RunConfig (validated with a worker count; each point sets its own)
    and its grid."""
    from loaderprof.comparing.sweep import SweepGrid

    grid = SweepGrid.from_options(grid_opts)
    file_values = load_config_file(run.config) if run.config else {}
    flags = {"dataset": spec_of(dataset), **run.flags()}
    flags["num_workers"] = max([w for w in grid.num_workers if w > 0], default=1)
    return build_config(flags, file_values, source=run.config), grid


def sweep(
    dataset: Any,
    *,
    args: Mapping[str, Any] | None = None,
    config: str | Path | None = None,
    runner: TrialRunner | None = None,
    on_progress: Callable[..., None] | None = None,
    **options: Any,
) -> SweepReport:
    """Run every valid combination of the grid (num_workers, prefetch_factor, mp_context,
    persistent: lists) with the other run options; see `loaderprof.comparing.sweep.run_sweep`."""
    from loaderprof.comparing.sweep import run_sweep
    from loaderprof.config.options import names

    grid_keys = names(SweepOptions)
    grid_opts = fill(SweepOptions, {k: v for k, v in options.items() if k in grid_keys})
    run = fill(
        RunOptions,
        {
            **{k: v for k, v in options.items() if k not in grid_keys},
            "args": dict(args or {}),
            "config": Path(config) if config else None,
        },
    )
    cfg, grid = prepare_sweep(dataset, run, grid_opts)
    return run_sweep(cfg, grid, runner=runner, on_progress=on_progress)


def compare_command(
    command: Sequence[str],
    *,
    epochs: int = 3,
    trials: int | str = "auto",
    max_trials: int = 6,
    seed: int = 0,
    loader_site: str | None = None,
    min_gain: float = 0.05,
    fail_on: Sequence[str] = (),
    strict: bool = False,
    max_batches: int | None = None,
    baseline: str | Path | CommandReport | None = None,
) -> Any:
    """`loaderprof compare -- COMMAND` (NOTE [command arms]): run `command` (argv:
    ["python", "train.py", ...]) unchanged as both arms, interleaved, each stopped
    after `epochs` epochs of its main loader: `trials` "auto" is compare's adaptive
    plan (up to `max_trials` per arm), a number fixes it; `fail_on` gates
    ("saved_s_per_epoch:>=100ms") are judged into the report. Returns the
    CommandReport. A failure of the command itself raises LoaderprofError (its last
    lines in `.detail`; where trials were measured before it, their report in
    `.report`); bad input raises UsageError. `max_batches`: each epoch of the
    switched loaders ends after that many batches, projected to the loader's len()
    (NOTE [cut epochs]). Each trial's findings are watch's (NOTE [command findings]).
    `baseline`: a saved command report (a path, or a CommandReport) for relative gates
    ("steady_epoch_ratio:+10%", see NOTE [command baseline])."""
    from loaderprof.analysis.gates import check_command_gates, parse_command_gate
    from loaderprof.comparing.command import CommandPlan
    from loaderprof.comparing.command import compare_command as run
    from loaderprof.report.json_report import read_command
    from loaderprof.watching.session import run_findings

    gates = tuple(parse_command_gate(g) for g in fail_on)
    check_command_gates(gates, has_baseline=baseline is not None)
    saved, path = (baseline, None) if isinstance(baseline, CommandReport) else (None, baseline)
    if path is not None:
        saved = read_command(path, needs="baseline takes a compare -- COMMAND report")
    plan = CommandPlan(
        tuple(command),
        epochs,
        trials,
        seed,
        loader_site,
        min_gain,
        max_trials=max_trials,
        gates=gates,
        strict=strict,
        max_batches=max_batches,
        baseline=saved,
        baseline_path=None if path is None else str(path),
    )
    return run(plan, inspect=run_findings)
