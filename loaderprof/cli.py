"""Command-line interface: parse, build the config, delegate, render, map errors.

Heavy modules (torch, pandas, numpy) are imported inside the commands, never
at module level, so `loaderprof --help` and `--version` start instantly.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click import exceptions as click_exc

from loaderprof import __version__
from loaderprof.errors import ExitCode, LoaderprofError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from loaderprof.config import RunConfig
    from loaderprof.results import Report

app = typer.Typer(
    name="loaderprof",
    help="Profile the worker lifecycle of PyTorch DataLoaders: does persistent_workers "
    "pay for your dataset?",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"loaderprof {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """loaderprof measures DataLoader workers: start-up, epoch latency, memory."""


class _Signals:
    """Turns SIGTERM into the same unwinding as Ctrl-C, remembering which it was."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        raise KeyboardInterrupt


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _progress_callback(cfg: RunConfig, console: Console) -> tuple[Any, Any]:
    """A rich progress bar fed by trial events; returns (progress, callback)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("epochs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    total = cfg.trials * 2 * cfg.epochs
    task = progress.add_task("starting", total=total)
    stages = {
        "child_start": "starting interpreter",
        "imported": "building dataset",
        "dataset_built": "building loader",
        "loader_built": "running",
    }
    label = {"persistent": "persistent", "non_persistent": "non-persistent"}

    def on_progress(plan: Any, ev: Any) -> None:
        head = f"trial {plan.index + 1}/{cfg.trials} {label[plan.arm]}"
        if ev is None:
            progress.update(task, description=f"{head}: starting")
            return
        kind = ev.get("ev")
        if kind in stages:
            progress.update(task, description=f"{head}: {stages[kind]}")
        elif kind == "epoch_start":
            progress.update(task, description=f"{head}: epoch {ev['epoch']}/{cfg.epochs}")
        elif kind == "epoch_end":
            progress.advance(task)

    return progress, on_progress


def _exit_code_for(report: Report, signum: int | None) -> int:
    if signum is not None:
        return int(ExitCode.TERMINATED if signum == signal.SIGTERM else ExitCode.INTERRUPTED)
    categories = {e.category for e in report.errors}
    if "usage" in categories:
        return int(ExitCode.USAGE)
    if categories or not report.complete:
        return int(ExitCode.RUN_FAILED)
    return int(ExitCode.OK)


def _error_line(report: Report) -> str | None:
    for arm in report.arms.values():
        for t in arm.trials:
            if t.error is not None and t.error.category != "interrupted":
                if t.error.category == "usage":
                    return t.error.message
                where = f"{arm.name.replace('_', '-')} arm, trial {t.index + 1}"
                epoch = (
                    f" (epoch {t.error.epoch})"
                    if t.error.epoch and "epoch" not in t.error.message
                    else ""
                )
                return f"{where}: {t.error.message}{epoch}"
    return None


# Options shared by the commands that produce a report.
JsonOut = Annotated[
    str | None, typer.Option("--json", help="Write the JSON report here ('-' for stdout).")
]
CsvOut = Annotated[
    Path | None, typer.Option("--csv", help="Write one tidy row per trial × epoch here.")
]
MarkdownOut = Annotated[
    Path | None, typer.Option("--markdown", help="Write tables, verdict and gates as Markdown.")
]
PlotOut = Annotated[
    Path | None,
    typer.Option("--plot", help="Draw memory and worker lifelines (PNG or SVG, by suffix)."),
]
TraceOut = Annotated[
    Path | None,
    typer.Option("--trace", help="Write a Chrome trace (open in ui.perfetto.dev)."),
]
JunitOut = Annotated[
    Path | None, typer.Option("--junit", help="Write one JUnit testcase per gate.")
]
FailOn = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-on",
        help="Gate METRIC:LIMIT, repeatable: steady_epoch_ratio:<=0.95, "
        "peak_worker_uss:<=1.5GiB, first_batch_s:+10% (against --baseline).",
    ),
]
GatesFile = Annotated[
    Path | None,
    typer.Option(
        "--gates", help="TOML file with a \\[gates] (or \\[tool.loaderprof.gates]) table."
    ),
]
Strict = Annotated[bool, typer.Option("--strict", help="Inconclusive gates fail too.")]
Baseline = Annotated[
    Path | None, typer.Option("--baseline", help="A saved report to compare against.")
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Also show every worker process.")]
Debug = Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")]


def _batch_size(text: str | None) -> int | str | None:
    """--batch-size: an integer, or 'none' (automatic batching off); None when not given."""
    if text is None or text.strip().lower() == "none":
        return None if text is None else "none"
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--batch-size must be an integer or 'none', got {text!r}") from None


class _Outputs:
    """Where a report goes; every path is checked before any trial runs."""

    def __init__(
        self,
        json_out: str | None,
        csv: Path | None,
        markdown: Path | None,
        junit: Path | None,
        save_baseline: Path | None = None,
        plot: Path | None = None,
        trace: Path | None = None,
    ) -> None:
        from loaderprof.report.json_report import check_writable

        self.json_out, self.csv, self.markdown, self.junit = json_out, csv, markdown, junit
        self.save_baseline, self.plot, self.trace = save_baseline, plot, trace
        outs = (
            json_out if json_out != "-" else None,
            csv,
            markdown,
            junit,
            save_baseline,
            plot,
            trace,
        )
        for path in outs:
            if path:
                check_writable(path)
        if plot is not None:
            if plot.suffix.lower() not in (".png", ".svg"):
                raise UsageError(f"--plot {plot}: use a .png or .svg file name")
            from loaderprof.report.plot import require_matplotlib

            require_matplotlib()
        import os

        self.step_summary = os.environ.get("GITHUB_STEP_SUMMARY") or None

    def write(self, report: Report, *, strict: bool) -> None:
        from loaderprof.report.json_report import to_json, write_atomic

        if self.json_out == "-":
            sys.stdout.write(to_json(report))
            sys.stdout.flush()
        elif self.json_out:
            write_atomic(self.json_out, to_json(report))
        if self.save_baseline:
            write_atomic(self.save_baseline, to_json(report))
        if self.csv:
            from loaderprof.report.csv_report import to_csv

            write_atomic(self.csv, to_csv(report))
        markdown = None
        if self.markdown or self.step_summary:
            from loaderprof.report.markdown import to_markdown

            markdown = to_markdown(report)
        if self.markdown and markdown:
            write_atomic(self.markdown, markdown)
        if self.junit:
            from loaderprof.report.junit import to_junit

            write_atomic(self.junit, to_junit(report, strict=strict))
        if self.trace:
            from loaderprof.report.trace import to_trace_json

            write_atomic(self.trace, to_trace_json(report))
        if self.plot:
            from loaderprof.report.plot import render

            # savefig writes in place; render to a temp name, then rename.
            tmp = self.plot.with_name(f".{self.plot.name}.tmp{self.plot.suffix}")
            render(report, tmp)
            tmp.replace(self.plot)
        if self.step_summary and markdown:
            try:
                with open(self.step_summary, "a", encoding="utf-8") as f:
                    f.write(markdown + "\n")
            except OSError as exc:
                sys.stderr.write(
                    f"loaderprof: warning: cannot append to GITHUB_STEP_SUMMARY: {exc}\n"
                )


def _load_gates(fail_on: list[str] | None, gates_file: Path | None, config_gates: Any) -> list[Any]:
    from loaderprof.config import load_config_file
    from loaderprof.gates import gates_from_table, parse_gate

    gates = []
    if config_gates:
        gates += gates_from_table(config_gates, "the config file")
    if gates_file:
        table = load_config_file(gates_file).get("gates")
        if not table:
            raise UsageError(f"{gates_file} has no [gates] table")
        gates += gates_from_table(table, str(gates_file))
    gates += [parse_gate(g) for g in fail_on or []]
    return gates


def _apply_gates(
    report: Report,
    gates: list[Any],
    baseline: Report | None,
    baseline_path: Path | None,
    *,
    strict: bool,
) -> Report:
    import dataclasses

    from loaderprof.analysis import fingerprint_differences
    from loaderprof.gates import evaluate
    from loaderprof.results import BaselineInfo

    info = None
    if baseline is not None:
        diffs = fingerprint_differences(baseline.environment, report.environment)
        info = BaselineInfo(str(baseline_path), baseline.created, tuple(diffs))
    results, status = evaluate(
        report, gates, baseline=baseline, strict=strict, seed=int(report.config.get("seed", 0))
    )
    return dataclasses.replace(report, gates=results, gate_status=status, baseline=info)


def _gate_exit(report: Report) -> int:
    return int(ExitCode.GATE_FAILED) if report.gate_status == "fail" else int(ExitCode.OK)


def _warn_inconclusive(report: Report, err: Console) -> None:
    for g in report.gates:
        if g.status == "inconclusive":
            err.print(f"loaderprof: warning: {g.message}", style="yellow", highlight=False)


@app.command()
def compare(
    dataset: Annotated[
        str | None,
        typer.Argument(
            help="Dataset as 'pkg.module:attr' or 'path/file.py:attr': a Dataset "
            "class, a factory function, or an instance."
        ),
    ] = None,
    arg: Annotated[
        list[str] | None,
        typer.Option(
            "--arg",
            "-a",
            help="Dataset keyword argument key=value (a Python literal, else a string); "
            "repeatable.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="TOML config file (or pyproject.toml with \\[tool.loaderprof]); "
            "flags override it.",
        ),
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs per trial (default: 5).")] = None,
    num_workers: Annotated[
        int | None, typer.Option("--num-workers", "-w", help="DataLoader workers (default: 2).")
    ] = None,
    batch_size: Annotated[
        str | None,
        typer.Option(
            "--batch-size",
            "-b",
            help="Batch size, or 'none' to turn automatic batching off (default: 32).",
        ),
    ] = None,
    prefetch_factor: Annotated[
        int | None, typer.Option(help="Batches prefetched per worker (default: torch's, 2).")
    ] = None,
    pin_memory: Annotated[
        bool | None,
        typer.Option(
            "--pin-memory/--no-pin-memory",
            help="Pin batches (falls back with a warning without an accelerator).",
        ),
    ] = None,
    mp_context: Annotated[
        str | None,
        typer.Option(
            help="Worker start method: fork, spawn or forkserver (default: the platform's)."
        ),
    ] = None,
    shuffle: Annotated[bool | None, typer.Option("--shuffle/--no-shuffle")] = None,
    drop_last: Annotated[bool | None, typer.Option("--drop-last/--no-drop-last")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="DataLoader timeout in seconds (default: 0).")
    ] = None,
    collate_fn: Annotated[
        str | None, typer.Option(help="Your collate function as module:attr.")
    ] = None,
    worker_init_fn: Annotated[
        str | None, typer.Option(help="Your worker_init_fn as module:attr.")
    ] = None,
    step_ms: Annotated[
        float | None,
        typer.Option(
            help="Simulated training step per batch in the main process, ms (default: 0)."
        ),
    ] = None,
    sample_interval: Annotated[
        float | None,
        typer.Option(help="Memory sampling interval in ms; 0 turns sampling off (default: 50)."),
    ] = None,
    uss_interval: Annotated[
        float | None,
        typer.Option(
            help="Most time between USS/PSS samples while an epoch is timed, ms (reading them "
            "walks page tables and slows the loader; they are also read whenever RSS rises, "
            "and on every sample between epochs) (default: 500)."
        ),
    ] = None,
    idle_ms: Annotated[
        float | None,
        typer.Option(
            help="Pause after each epoch (not timed) in which idle worker memory is "
            "sampled (default: 3 sampling intervals)."
        ),
    ] = None,
    trials: Annotated[
        int | None, typer.Option(help="Trials per arm, interleaved A B B A (default: 3).")
    ] = None,
    warmup_trials: Annotated[
        int | None,
        typer.Option(help="Trials per arm run first and left out of the statistics (default: 0)."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for order, shuffling, bootstrap.")] = None,
    trial_timeout: Annotated[
        float | None, typer.Option(help="Seconds before a trial is killed (default: 900).")
    ] = None,
    train_epochs: Annotated[
        int | None,
        typer.Option(
            help="Epochs of your real training, for the total saving (default: --epochs)."
        ),
    ] = None,
    min_gain: Annotated[
        float | None,
        typer.Option(
            help="Smallest steady-epoch saving worth enabling for, as a fraction (default: 0.05)."
        ),
    ] = None,
    memory_budget: Annotated[
        str | None,
        typer.Option(help="Peak PSS of the whole run allowed with persistence, e.g. 8GiB."),
    ] = None,
    fail_on: FailOn = None,
    gates: GatesFile = None,
    strict: Strict = False,
    baseline: Baseline = None,
    save_baseline: Annotated[
        Path | None,
        typer.Option("--save-baseline", help="Save the full report here as a future baseline."),
    ] = None,
    json_out: JsonOut = None,
    csv: CsvOut = None,
    markdown: MarkdownOut = None,
    junit: JunitOut = None,
    plot: PlotOut = None,
    trace: TraceOut = None,
    verbose: Verbose = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    debug: Debug = False,
    digests: Annotated[
        bool,
        typer.Option(
            "--digests",
            help="Digest every sample's content (finds duplicates and RNG carried in "
            "workers; costs epoch time). `loaderprof check` turns it on.",
        ),
    ] = False,
    findings_fail: Annotated[bool, typer.Option(hidden=True)] = False,
) -> int:
    """Run the same DataLoader with persistent_workers on and off, and compare."""
    from rich.console import Console

    from loaderprof.config import build_config, load_config_file
    from loaderprof.gates import check_needs_baseline
    from loaderprof.report.json_report import read_report
    from loaderprof.spec import parse_args

    file_values = load_config_file(config) if config else {}
    bs = _batch_size(batch_size)
    flags = {
        "dataset": dataset,
        "args": parse_args(arg or []),
        "epochs": epochs,
        "num_workers": num_workers,
        "batch_size": bs,
        "prefetch_factor": prefetch_factor,
        "pin_memory": pin_memory,
        "mp_context": mp_context,
        "shuffle": shuffle,
        "drop_last": drop_last,
        "timeout": timeout,
        "collate_fn": collate_fn,
        "worker_init_fn": worker_init_fn,
        "step_ms": step_ms,
        "sample_interval_ms": sample_interval,
        "uss_interval_ms": uss_interval,
        "idle_ms": idle_ms,
        "trials": trials,
        "warmup_trials": warmup_trials,
        "seed": seed,
        "trial_timeout_s": trial_timeout,
        "min_gain": min_gain,
        "train_epochs": train_epochs,
        "memory_budget": memory_budget,
        "digests": digests or None,
    }
    cfg = build_config(flags, file_values, file_name=str(config) if config else "config file")
    gate_list = _load_gates(fail_on, gates, file_values.get("gates"))
    check_needs_baseline(gate_list, baseline is not None)
    base_report = read_report(baseline) if baseline else None
    outputs = _Outputs(json_out, csv, markdown, junit, save_baseline, plot, trace)

    from loaderprof import distributed

    ctx = distributed.detect()
    sync = None
    if ctx is not None:
        import dataclasses

        # Each barrier waits at most for the slowest rank's trial.
        distributed.init(timeout_s=cfg.trial_timeout_s + 300)
        cfg = dataclasses.replace(cfg, rank=ctx.rank, world_size=ctx.world_size)
        sync = distributed.barrier
        quiet = quiet or ctx.rank != 0

    err = _stderr_console()
    # With the JSON on stdout, the tables move to stderr so stdout stays parseable.
    out = err if json_out == "-" else Console()
    signals = _Signals()
    signals.install()

    from loaderprof.session import run_compare

    if not quiet and err.is_terminal:
        progress, on_progress = _progress_callback(cfg, err)
        with progress:
            report = run_compare(cfg, on_progress=on_progress, sync=sync)
    else:
        report = run_compare(cfg, sync=sync)
    if ctx is not None:
        report_or_none = _gather_ranks(report, ctx, cfg)
        if report_or_none is None:  # not rank 0: measured, handed over, silent
            return _exit_code_for(report, signals.signum)
        report = report_or_none

    code = _exit_code_for(report, signals.signum)
    measured = any(t.epochs for a in report.arms.values() for t in a.trials)
    if code == ExitCode.USAGE:
        raise UsageError(
            _error_line(report) or "invalid input", detail=_detail(report) if debug else None
        )
    if measured and code == ExitCode.OK:
        report = _apply_gates(report, gate_list, base_report, baseline, strict=strict)
    if measured:
        # Written even when the run failed: what was measured is never lost.
        outputs.write(report, strict=strict)
        from loaderprof.report.console import print_report

        print_report(report, out, verbose=verbose)
    _warn_inconclusive(report, err)
    if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        where = f"; partial report written to {json_out}" if json_out and json_out != "-" else ""
        err.print(f"loaderprof: interrupted{where}", style="yellow", highlight=False)
    elif code == ExitCode.RUN_FAILED:
        line = _error_line(report) or "the run did not complete"
        if debug:
            detail = _detail(report)
            if detail:
                sys.stderr.write(detail.rstrip() + "\n")
        sys.stderr.write(f"loaderprof: error: {line}\n")
    elif findings_fail and any(f.severity != "info" for f in report.findings):
        worst = [f.id for f in report.findings if f.severity != "info"]
        sys.stderr.write(f"loaderprof: check found: {', '.join(worst)}\n")
        return int(ExitCode.GATE_FAILED)
    elif report.gate_status == "fail":
        failed = [
            g.gate
            for g in report.gates
            if g.status in ("fail", "inconclusive") and (g.status == "fail" or strict)
        ]
        sys.stderr.write(f"loaderprof: gate failed: {', '.join(failed)}\n")
        return _gate_exit(report)
    return code


def _gather_ranks(report: Report, ctx: Any, cfg: RunConfig) -> Report | None:
    """Hand every rank's report to rank 0; rank 0 gets its own, with the node summary."""
    import dataclasses

    from loaderprof import distributed
    from loaderprof.results import Report as ReportModel
    from loaderprof.results import from_dict, to_dict

    gathered = distributed.gather((ctx.rank, ctx.host, to_dict(report)), ctx.world_size)
    distributed.finish()
    if gathered is None:
        return None
    reports = [(rank, host, from_dict(ReportModel, data)) for rank, host, data in gathered]
    summary = distributed.summarize(reports)
    merged = dataclasses.replace(report, distributed=summary)
    return distributed.adjust_verdict(merged, summary, cfg.memory_budget_bytes)


def _detail(report: Report) -> str | None:
    for e in report.errors:
        if e.detail:
            return e.detail
    return None


@app.command()
def check(
    dataset: Annotated[str | None, typer.Argument(help="Dataset as 'pkg.module:attr'.")] = None,
    arg: Annotated[list[str] | None, typer.Option("--arg", "-a", help="key=value")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs per trial (default: 5).")] = None,
    num_workers: Annotated[int | None, typer.Option("--num-workers", "-w")] = None,
    batch_size: Annotated[str | None, typer.Option("--batch-size", "-b")] = None,
    prefetch_factor: Annotated[int | None, typer.Option()] = None,
    mp_context: Annotated[str | None, typer.Option()] = None,
    shuffle: Annotated[bool | None, typer.Option("--shuffle/--no-shuffle")] = None,
    drop_last: Annotated[bool | None, typer.Option("--drop-last/--no-drop-last")] = None,
    collate_fn: Annotated[str | None, typer.Option()] = None,
    worker_init_fn: Annotated[str | None, typer.Option()] = None,
    trials: Annotated[int | None, typer.Option(help="Trials per arm (default: 1).")] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    trial_timeout: Annotated[float | None, typer.Option()] = None,
    json_out: JsonOut = None,
    markdown: MarkdownOut = None,
    verbose: Verbose = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    debug: Debug = False,
) -> int:
    """Run every lifecycle check: leaks, state carried across epochs, memory growth,
    copy-on-read, unsharded IterableDatasets, RNG carried in workers, /dev/shm.

    Exits 1 when a check finds a warning or an error."""
    return compare(
        dataset=dataset,
        arg=arg,
        config=config,
        epochs=epochs,
        num_workers=num_workers,
        batch_size=batch_size,
        prefetch_factor=prefetch_factor,
        pin_memory=None,
        mp_context=mp_context,
        shuffle=shuffle,
        drop_last=drop_last,
        timeout=None,
        collate_fn=collate_fn,
        worker_init_fn=worker_init_fn,
        step_ms=None,
        sample_interval=None,
        uss_interval=None,
        idle_ms=None,
        trials=1 if trials is None else trials,
        warmup_trials=None,
        seed=seed,
        trial_timeout=trial_timeout,
        train_epochs=None,
        min_gain=None,
        memory_budget=None,
        fail_on=None,
        gates=None,
        strict=False,
        baseline=None,
        save_baseline=None,
        json_out=json_out,
        csv=None,
        markdown=markdown,
        junit=None,
        plot=None,
        trace=None,
        verbose=verbose,
        quiet=quiet,
        debug=debug,
        digests=True,
        findings_fail=True,
    )


@app.command("report")
def report_cmd(
    path: Annotated[Path, typer.Argument(help="A JSON report written by --json.")],
    json_out: JsonOut = None,
    csv: CsvOut = None,
    markdown: MarkdownOut = None,
    junit: JunitOut = None,
    plot: PlotOut = None,
    trace: TraceOut = None,
    verbose: Verbose = False,
    debug: Debug = False,
) -> int:
    """Show a saved report as tables, or re-export it."""
    from rich.console import Console

    from loaderprof.report.console import print_report
    from loaderprof.report.json_report import is_sweep, read_report

    if is_sweep(path):
        unsupported = [
            f for f, v in (("--markdown", markdown), ("--junit", junit), ("--trace", trace)) if v
        ]
        if unsupported:
            raise UsageError(
                f"{path} is a sweep report, which exports only --json, --csv and --plot "
                f"(not {', '.join(unsupported)})"
            )
        return _show_sweep(path, json_out, csv, plot)
    outputs = _Outputs(json_out, csv, markdown, junit, plot=plot, trace=trace)
    report = read_report(path)
    outputs.write(report, strict=False)
    print_report(report, _stderr_console() if json_out == "-" else Console(), verbose=verbose)
    return 0


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="The baseline report (JSON).")],
    new: Annotated[Path, typer.Argument(help="The new report (JSON).")],
    fail_on: FailOn = None,
    gates: GatesFile = None,
    strict: Strict = False,
    json_out: JsonOut = None,
    csv: CsvOut = None,
    markdown: MarkdownOut = None,
    junit: JunitOut = None,
    debug: Debug = False,
) -> int:
    """Compare two saved reports offline, with the same statistics and gates."""
    from rich.console import Console

    from loaderprof.analysis import diff_reports
    from loaderprof.gates import metric_kind
    from loaderprof.report.console import diff_table, gates_table
    from loaderprof.report.json_report import read_report
    from loaderprof.units import fmt_bytes, fmt_seconds

    gate_list = _load_gates(fail_on, gates, None)
    outputs = _Outputs(json_out, csv, markdown, junit)
    old_report, new_report = read_report(old), read_report(new)
    report = _apply_gates(new_report, gate_list, old_report, old, strict=strict)

    def fmt(metric: str, v: float) -> str:
        kind = metric_kind(metric)
        if kind == "bytes":
            return fmt_bytes(v)
        if kind == "time":
            return fmt_seconds(v)
        return f"{v:,.1f}"

    rows = [
        (
            d.metric,
            fmt(d.metric, d.baseline),
            fmt(d.metric, d.new),
            f"{d.ratio.value:.3f} [{d.ratio.ci_low:.3f}–{d.ratio.ci_high:.3f}]",
            "–" if d.p_value is None else f"{d.p_value:.3g}",
        )
        for d in diff_reports(old_report, new_report, seed=int(report.config.get("seed", 0)))
    ]
    console = _stderr_console() if json_out == "-" else Console()
    console.print(diff_table(rows, f"{new} vs baseline {old}"))
    if report.baseline is not None and report.baseline.differences:
        console.print(
            "warning: the environments differ, so timing comparisons may not "
            "transfer: " + "; ".join(report.baseline.differences),
            style="yellow",
        )
    if report.gates:
        console.print(gates_table(report))
    outputs.write(report, strict=strict)
    _warn_inconclusive(report, _stderr_console())
    if report.gate_status == "fail":
        sys.stderr.write(
            "loaderprof: gate failed: "
            + ", ".join(
                g.gate
                for g in report.gates
                if g.status == "fail" or (strict and g.status == "inconclusive")
            )
            + "\n"
        )
    return _gate_exit(report)


def _write_sweep(report: Any, json_out: str | None, csv: Path | None, plot: Path | None) -> None:
    import json as _json

    from loaderprof.report.json_report import write_atomic
    from loaderprof.results import to_dict

    if json_out:
        text = _json.dumps(to_dict(report), indent=2, allow_nan=False) + "\n"
        if json_out == "-":
            sys.stdout.write(text)
        else:
            write_atomic(json_out, text)
    if csv:
        from loaderprof.report.csv_report import sweep_csv

        write_atomic(csv, sweep_csv(report))
    if plot:
        from loaderprof.report.plot import render_sweep

        tmp = plot.with_name(f".{plot.name}.tmp{plot.suffix}")
        render_sweep(report, tmp)
        tmp.replace(plot)


def _show_sweep(path: Path, json_out: str | None, csv: Path | None, plot: Path | None) -> int:
    from rich.console import Console

    from loaderprof.report.console import sweep_table
    from loaderprof.report.json_report import read_sweep

    _Outputs(json_out, csv, None, None, plot=plot)
    report = read_sweep(path)
    _write_sweep(report, json_out, csv, plot)
    (_stderr_console() if json_out == "-" else Console()).print(sweep_table(report))
    return 0


@app.command()
def sweep(
    dataset: Annotated[str | None, typer.Argument(help="Dataset as 'pkg.module:attr'.")] = None,
    arg: Annotated[list[str] | None, typer.Option("--arg", "-a", help="key=value")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c")] = None,
    num_workers: Annotated[
        str | None, typer.Option("--num-workers", "-w", help="e.g. 0,2,4,8 (default: 0,2).")
    ] = None,
    prefetch_factor: Annotated[
        str | None, typer.Option(help="e.g. 2,4 (default: torch's).")
    ] = None,
    mp_context: Annotated[
        str | None, typer.Option(help="e.g. fork,spawn (default: the platform's).")
    ] = None,
    persistent: Annotated[
        str | None, typer.Option(help="on, off or on,off (default: on,off).")
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs per trial (default: 5).")] = None,
    batch_size: Annotated[str | None, typer.Option("--batch-size", "-b")] = None,
    trials: Annotated[
        int | None, typer.Option(help="Trials per configuration (default: 3).")
    ] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    step_ms: Annotated[float | None, typer.Option()] = None,
    memory_budget: Annotated[
        str | None,
        typer.Option(help="Peak PSS allowed, e.g. 16GiB (default: the cgroup's or machine's)."),
    ] = None,
    json_out: JsonOut = None,
    csv: CsvOut = None,
    plot: PlotOut = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    debug: Debug = False,
) -> int:
    """Sweep num_workers × prefetch_factor × start method × persistence; find the frontier."""
    from rich.console import Console

    from loaderprof.config import build_config, load_config_file
    from loaderprof.report.console import sweep_table
    from loaderprof.spec import parse_args
    from loaderprof.sweep import SweepGrid, expand, run_sweep

    grid = SweepGrid.parse(num_workers, prefetch_factor, mp_context, persistent)
    file_values = load_config_file(config) if config else {}
    bs = _batch_size(batch_size)
    flags = {
        "dataset": dataset,
        "args": parse_args(arg or []),
        "epochs": epochs,
        "batch_size": bs,
        "trials": trials,
        "seed": seed,
        "step_ms": step_ms,
        "memory_budget": memory_budget,
        # Validated with a worker count; each point then sets its own.
        "num_workers": max([w for w in grid.num_workers if w > 0], default=1),
    }
    cfg = build_config(flags, file_values, file_name=str(config) if config else "config file")
    _Outputs(json_out, csv, None, None, plot=plot)
    points, _ = expand(grid)
    err = _stderr_console()
    signals = _Signals()
    signals.install()
    if not quiet and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            console=err,
            transient=True,
        )
        task = progress.add_task("sweep", total=len(points) * cfg.trials)

        def on_progress(done: int, total: int, point: Any, ev: Any) -> None:
            progress.update(task, completed=done, description=point.label)

        with progress:
            report = run_sweep(cfg, grid, on_progress=on_progress)
    else:
        report = run_sweep(cfg, grid)
    _write_sweep(report, json_out, csv, plot)
    (err if json_out == "-" else Console()).print(sweep_table(report))
    if signals.signum is not None:
        err.print("loaderprof: interrupted", style="yellow")
        return int(
            ExitCode.TERMINATED if signals.signum == signal.SIGTERM else ExitCode.INTERRUPTED
        )
    return int(ExitCode.OK if report.complete else ExitCode.RUN_FAILED)


@app.command()
def plan(
    path: Annotated[Path, typer.Argument(help="A compare report (JSON).")],
    ranks: Annotated[int, typer.Option(help="Training processes per node.")] = 1,
    num_workers: Annotated[
        int | None,
        typer.Option("--num-workers", "-w", help="Workers per rank (default: as measured)."),
    ] = None,
    arm: Annotated[str, typer.Option(help="persistent or non_persistent.")] = "persistent",
    debug: Debug = False,
) -> int:
    """Project the host memory a training node needs: ranks × workers per rank."""
    from rich.console import Console
    from rich.table import Table

    from loaderprof.plan import project
    from loaderprof.report.json_report import read_report
    from loaderprof.session import environment
    from loaderprof.units import fmt_bytes

    report = read_report(path)
    w = num_workers if num_workers is not None else int(report.config["loader"]["num_workers"])
    proj = project(report, ranks=ranks, num_workers=w, arm=arm, environment=environment(None))
    t = Table(
        title=f"Host memory for {ranks} rank(s) × {w} workers ({arm.replace('_', '-')})",
        title_justify="left",
        header_style="bold",
    )
    t.add_column("")
    t.add_column("bytes", justify="right")
    t.add_row(
        "measured: one rank's process tree (peak PSS total)", fmt_bytes(proj.rank_total_pss_bytes)
    )
    t.add_row("measured: peak USS per worker", fmt_bytes(proj.per_worker_uss_bytes))
    t.add_row(f"projected: one rank with {w} workers", fmt_bytes(proj.per_rank_bytes))
    t.add_row(f"projected: node with {ranks} rank(s)", fmt_bytes(proj.node_bytes), style="bold")
    if proj.limit_bytes:
        t.add_row(f"this machine's {proj.limit_source}", fmt_bytes(proj.limit_bytes))
    console = Console()
    console.print(t)
    for a in proj.assumptions:
        console.print(f"assumes: {a}", style="dim", highlight=False)
    if proj.over_limit:
        sys.stderr.write(
            f"loaderprof: warning: the projection ({fmt_bytes(proj.node_bytes)}) exceeds this "
            f"machine's {proj.limit_source} ({fmt_bytes(proj.limit_bytes)})\n"
        )
    return 0


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    command = typer.main.get_command(app)
    code: int
    try:
        rv = command.main(args=args, prog_name="loaderprof", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except click_exc.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        code = 0
    except click_exc.UsageError as exc:
        sub = f" {exc.ctx.info_name}" if exc.ctx and exc.ctx.parent else ""
        sys.stderr.write(
            f"loaderprof: error: {exc.format_message()} (see 'loaderprof{sub} --help')\n"
        )
        code = int(ExitCode.USAGE)
    except click_exc.ClickException as exc:
        sys.stderr.write(f"loaderprof: error: {exc.format_message()}\n")
        code = int(ExitCode.USAGE)
    except LoaderprofError as exc:
        if debug and exc.detail:
            sys.stderr.write(exc.detail.rstrip() + "\n")
        sys.stderr.write(f"loaderprof: error: {exc.message}\n")
        code = int(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        sys.stderr.write("loaderprof: interrupted\n")
        code = int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`| head`); nothing more to say to it.
        code = 0
    except Exception:
        if debug:
            raise
        import traceback

        last = traceback.format_exc().strip().splitlines()[-1]
        sys.stderr.write(f"loaderprof: internal error: {last} (rerun with --debug)\n")
        code = 70
    sys.exit(code)
