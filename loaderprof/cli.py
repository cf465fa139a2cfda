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
                epoch = f" (epoch {t.error.epoch})" if t.error.epoch else ""
                return f"{where}: {t.error.message}{epoch}"
    return None


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
            help="Dataset keyword argument key=value (a Python "
            "literal, else a string); repeatable.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="TOML config file (or pyproject.toml with "
            "\\[tool.loaderprof]); flags override it.",
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
            help="USS/PSS sampling interval in ms while an epoch is timed (reading them walks "
            "page tables and slows the loader; between epochs every sample has them) "
            "(default: 500)."
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
        int | None, typer.Option(help="Trials per arm, interleaved (default: 1).")
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
    json_out: Annotated[
        str | None, typer.Option("--json", help="Write the JSON report here ('-' for stdout).")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show every worker process.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> int:
    """Run the same DataLoader with persistent_workers on and off, and compare."""
    from rich.console import Console

    from loaderprof.config import build_config, load_config_file
    from loaderprof.report.json_report import check_writable, to_json, write_atomic
    from loaderprof.spec import parse_args

    file_values = load_config_file(config) if config else {}
    bs: Any = batch_size
    if batch_size is not None:
        if batch_size.strip().lower() == "none":
            bs = "none"
        else:
            try:
                bs = int(batch_size)
            except ValueError:
                raise UsageError(
                    f"--batch-size must be an integer or 'none', got {batch_size!r}"
                ) from None
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
        "seed": seed,
        "trial_timeout_s": trial_timeout,
        "min_gain": min_gain,
    }
    cfg = build_config(flags, file_values, file_name=str(config) if config else "config file")
    if train_epochs is not None and train_epochs < 1:
        raise UsageError(f"--train-epochs must be ≥ 1, got {train_epochs}")
    if json_out and json_out != "-":
        check_writable(json_out)

    err = _stderr_console()
    # With the JSON on stdout, the tables move to stderr so stdout stays parseable.
    out = err if json_out == "-" else Console()
    signals = _Signals()
    signals.install()

    from loaderprof.session import run_compare

    show_progress = not quiet and err.is_terminal
    if show_progress:
        progress, on_progress = _progress_callback(cfg, err)
        with progress:
            report = run_compare(cfg, on_progress=on_progress, train_epochs=train_epochs)
    else:
        report = run_compare(cfg, train_epochs=train_epochs)

    code = _exit_code_for(report, signals.signum)
    measured = any(t.epochs for a in report.arms.values() for t in a.trials)
    if json_out and measured:
        text = to_json(report)
        if json_out == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_atomic(json_out, text)
    if code == ExitCode.USAGE:
        raise UsageError(
            _error_line(report) or "invalid input", detail=_detail(report) if debug else None
        )
    if measured:
        from loaderprof.report.console import print_report

        print_report(report, out, verbose=verbose)
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
    return code


def _detail(report: Report) -> str | None:
    for e in report.errors:
        if e.detail:
            return e.detail
    return None


@app.command("report")
def report_cmd(
    path: Annotated[Path, typer.Argument(help="A JSON report written by --json.")],
    json_out: Annotated[
        str | None, typer.Option("--json", help="Re-write the report as JSON ('-' for stdout).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> int:
    """Show a saved report as tables."""
    from rich.console import Console

    from loaderprof.report.console import print_report
    from loaderprof.report.json_report import check_writable, read_report, to_json, write_atomic

    if json_out and json_out != "-":
        check_writable(json_out)
    report = read_report(path)
    if json_out == "-":
        sys.stdout.write(to_json(report))
    elif json_out:
        write_atomic(json_out, to_json(report))
    print_report(report, _stderr_console() if json_out == "-" else Console(), verbose=verbose)
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
