"""One definition of every option: its name, type, flags, help and help panel.

The option objects below are the single source: the CLI builds its Typer
parameters from their fields (`commands/params.py`), the Python API accepts the
same names as keywords, and both hand the filled, frozen objects to
`session.prepare`, which merges them with the config file into a `RunConfig`.
Nothing here imports typer, torch or pandas.

A value of None means "not given": the config file's value, then the default
that `RunConfig` documents, applies.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loaderprof.errors import UsageError

# The handful of options most runs need. Typer prints its own "Options" panel (where
# --help lands) first, so these open every command's help; the panels below group
# the rest.
ESSENTIALS = "Options"
LOADER = "Loader"
MEASUREMENT = "Measurement"
STATISTICS = "Statistics"
GATES = "CI gates"
OUTPUTS = "Outputs"


def opt(
    *flags: str,
    help: str,
    panel: str,
    default: Any = None,
    cli_type: Any = None,
    hidden: bool = False,
    metavar: str | None = None,
) -> Any:
    """A field with what the CLI needs to show it.

    cli_type: the type Typer parses when the API accepts more (batch size: 'none').
    metavar: the value's name in --help (`--epochs N`); None: one from its type.
    """
    meta = {
        "flags": flags,
        "help": help,
        "panel": panel,
        "cli_type": cli_type,
        "hidden": hidden,
        "metavar": metavar,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunOptions:
    """How the DataLoader is built and how the trials are run and measured."""

    args: tuple[str, ...] | Mapping[str, Any] | None = opt(
        "--arg",
        "-a",
        help="Dataset keyword argument key=value (a Python literal, else a string); repeatable.",
        metavar="KEY=VALUE",
        panel=ESSENTIALS,
        cli_type=list[str] | None,
    )
    config: Path | None = opt(
        "--config",
        "-c",
        help=(
            "TOML config (or a pyproject.toml), used instead of the project's "
            "\\[tool.loaderprof]; flags override it."
        ),
        metavar="FILE",
        panel=ESSENTIALS,
    )
    epochs: int | None = opt(
        "--epochs", help="Epochs per trial (default: 5).", metavar="N", panel=ESSENTIALS
    )
    num_workers: int | None = opt(
        "--num-workers",
        "-w",
        help="DataLoader workers (default: 2).",
        metavar="N",
        panel=ESSENTIALS,
    )
    batch_size: int | str | None = opt(
        "--batch-size",
        "-b",
        help="Batch size, or 'none' to turn automatic batching off (default: 32).",
        metavar="N|none",
        panel=ESSENTIALS,
        cli_type=str | None,
    )
    prefetch_factor: int | None = opt(
        "--prefetch-factor",
        help="Batches prefetched per worker (default: torch's, 2).",
        metavar="N",
        panel=LOADER,
    )
    pin_memory: bool | None = opt(
        "--pin-memory/--no-pin-memory",
        help="Pin batches (falls back with a warning without an accelerator).",
        panel=LOADER,
    )
    mp_context: str | None = opt(
        "--mp-context",
        help="Worker start method: fork, spawn or forkserver (default: the platform's).",
        metavar="METHOD",
        panel=LOADER,
    )
    shuffle: bool | None = opt(
        "--shuffle/--no-shuffle",
        help="Shuffle a map-style dataset (default: off).",
        panel=LOADER,
    )
    drop_last: bool | None = opt(
        "--drop-last/--no-drop-last",
        help="Drop the last incomplete batch (default: off).",
        panel=LOADER,
    )
    in_order: bool | None = opt(
        "--in-order/--no-in-order",
        help=(
            "Deliver batches in sampler order (torch ≥ 2.6; default: on); off lets batches "
            "overtake a slow worker's."
        ),
        panel=LOADER,
    )
    timeout: float | None = opt(
        "--timeout", help="DataLoader timeout in seconds (default: 0).", metavar="S", panel=LOADER
    )
    collate_fn: str | None = opt(
        "--collate-fn",
        help="Your collate function as module:attr.",
        metavar="M:FN",
        panel=LOADER,
    )
    worker_init_fn: str | None = opt(
        "--worker-init-fn",
        help="Your worker_init_fn as module:attr.",
        metavar="M:FN",
        panel=LOADER,
    )
    loader_class: str | None = opt(
        "--loader",
        help=(
            "Your DataLoader class as module:attr (e.g. StatefulDataLoader), built with the"
            " same arguments."
        ),
        metavar="M:CLS",
        panel=LOADER,
    )
    loader_args: tuple[str, ...] | Mapping[str, Any] | None = opt(
        "--loader-arg",
        help="--loader keyword argument key=value; repeatable.",
        metavar="K=V",
        panel=LOADER,
        cli_type=list[str] | None,
    )
    val: str | None = opt(
        "--val",
        help=(
            "A validation Dataset as module:attr: each epoch is a train pass, then a "
            "validation pass."
        ),
        metavar="M:A",
        panel=LOADER,
    )
    val_args: tuple[str, ...] | Mapping[str, Any] | None = opt(
        "--val-arg",
        help="Validation Dataset keyword argument key=value; repeatable.",
        metavar="K=V",
        panel=LOADER,
        cli_type=list[str] | None,
    )
    val_batch_size: int | None = opt(
        "--val-batch-size",
        help="Validation batch size (default: train's).",
        metavar="N",
        panel=LOADER,
    )
    val_num_workers: int | None = opt(
        "--val-num-workers",
        help="Validation workers (default: train's).",
        metavar="N",
        panel=LOADER,
    )
    step_ms: float | None = opt(
        "--step-ms",
        help="Simulated training step per batch, ms (default: 0).",
        metavar="MS",
        panel=LOADER,
    )
    set_epoch: bool | None = opt(
        "--set-epoch/--no-set-epoch",
        help=(
            "Call set_epoch(epoch) on the sampler and Dataset before each epoch, as "
            "training loops do (default: on)."
        ),
        panel=LOADER,
    )
    epoch_hook: str | None = opt(
        "--epoch-hook",
        help="Your per-epoch change as module:FN, called FN(loader, epoch) before each epoch.",
        metavar="M:FN",
        panel=LOADER,
    )
    sample_interval: float | None = opt(
        "--sample-interval",
        help="Memory sampling interval, ms (default: 50; 0: off, compare only).",
        metavar="MS",
        panel=MEASUREMENT,
    )
    uss_interval: float | None = opt(
        "--uss-interval",
        help=(
            "Most time between USS/PSS samples in an epoch, ms; reading them slows the "
            "loader (default: 500)."
        ),
        metavar="MS",
        panel=MEASUREMENT,
    )
    idle_ms: float | None = opt(
        "--idle-ms",
        help=(
            "Pause after each epoch in which idle worker memory is sampled (default: 2 "
            "sampling intervals)."
        ),
        metavar="MS",
        panel=MEASUREMENT,
    )
    trials: int | str | None = opt(
        "--trials",
        help=(
            "Trials per arm: 'auto' (default) stops once the verdict is settled or at "
            "--max-trials; N fixes the plan."
        ),
        metavar="auto|N",
        panel=MEASUREMENT,
        cli_type=str,
    )
    max_trials: int | None = opt(
        "--max-trials",
        help="Most trials per arm for --trials auto (default: 6).",
        metavar="N",
        panel=MEASUREMENT,
    )
    memory_trials: int | None = opt(
        "--memory-trials",
        help="Memory trials per arm (sampled deeply, not timed), run first (default: 2).",
        metavar="N",
        panel=MEASUREMENT,
    )
    warmup_trials: int | None = opt(
        "--warmup-trials",
        help="Trials per arm run first, not counted (default: 0).",
        metavar="N",
        panel=MEASUREMENT,
    )
    seed: int | None = opt(
        "--seed",
        help="Seed for order, shuffle, bootstrap (default: 0).",
        metavar="N",
        panel=MEASUREMENT,
    )
    trial_timeout: float | None = opt(
        "--trial-timeout",
        help="Seconds before a trial is killed (default: 900).",
        metavar="S",
        panel=MEASUREMENT,
    )
    digests: bool | None = opt(
        "--digests/--no-digests",
        help="Digest every sample's content (finds duplicates and carried RNG; costs epoch time).",
        panel=MEASUREMENT,
    )
    max_batches: int | None = opt(
        "--max-batches",
        help="Cut every epoch to N batches and project full epochs from the per-batch time.",
        metavar="N",
        panel=MEASUREMENT,
    )
    epoch_samples: int | None = opt(
        "--epoch-samples",
        help="Samples per full epoch of an IterableDataset without len().",
        metavar="N",
        panel=MEASUREMENT,
    )
    fresh_interpreter: bool | None = opt(
        "--fresh-interpreter/--template",
        help="Start every trial as a fresh interpreter, not a fork of a warm template (slower).",
        panel=MEASUREMENT,
    )
    full_detail: bool | None = opt(
        "--full-detail/--bounded-detail",
        help=(
            "Keep every batch span and memory sample in the JSON (by default long trials "
            "are downsampled)."
        ),
        panel=OUTPUTS,
    )
    state_checks: bool | None = opt(
        "--state-checks/--no-state-checks",
        help=(
            "Fingerprint the Dataset each epoch in the main process and every worker (default: on)."
        ),
        panel=MEASUREMENT,
    )
    train_epochs: int | None = opt(
        "--train-epochs",
        help="Epochs of your real training, for the total saving (default: --epochs).",
        metavar="N",
        panel=STATISTICS,
    )
    min_gain: float | None = opt(
        "--min-gain",
        help="Smallest steady-epoch saving worth enabling for, as a fraction (default: 0.05).",
        metavar="F",
        panel=STATISTICS,
    )
    memory_budget: str | int | None = opt(
        "--memory-budget",
        help="Peak PSS of the whole run allowed with persistence, e.g. 8GiB.",
        metavar="SIZE",
        panel=STATISTICS,
        cli_type=str | None,
    )

    def flags(self) -> dict[str, Any]:
        """The values given, under their RunConfig / config-file names (see `build_config`)."""
        from loaderprof.config.refs import parse_args
        from loaderprof.config.run import FLAG_KEYS

        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("args", "loader_args", "val_args", "config"):
                continue
            out[FLAG_KEYS.get(f.name, f.name)] = getattr(self, f.name)
        for table, flag in (
            ("args", "--arg"),
            ("loader_args", "--loader-arg"),
            ("val_args", "--val-arg"),
        ):
            value = getattr(self, table)
            out[table] = (
                dict(value) if isinstance(value, Mapping) else parse_args(list(value or ()), flag)
            )
        return out


@dataclass(frozen=True)
class GateOptions:
    """CI gates: what fails the run, and the baseline relative gates compare against."""

    fail_on: tuple[str, ...] | None = opt(
        "--fail-on",
        help=(
            "Gate METRIC:LIMIT, repeatable: steady_epoch_ratio:<=0.95, "
            "peak_worker_uss:<=1.5GiB, first_batch_s:+10%, finding:ID."
        ),
        metavar="METRIC:LIMIT",
        panel=GATES,
        cli_type=list[str] | None,
    )
    gates: Path | None = opt(
        "--gates",
        help="TOML file with a \\[gates] (or \\[tool.loaderprof.gates]) table.",
        metavar="FILE",
        panel=GATES,
    )
    strict: bool = opt("--strict", help="Inconclusive gates fail too.", panel=GATES, default=False)
    baseline: Path | None = opt(
        "--baseline", help="A saved report to compare against.", panel=GATES
    )
    save_baseline: Path | None = opt(
        "--save-baseline", help="Save the full report here as a future baseline.", panel=GATES
    )


@dataclass(frozen=True)
class OutputOptions:
    """Where the report goes besides the terminal; every path is checked before any trial."""

    json: str | None = opt(
        "--json",
        help="Write the JSON report here ('-' for stdout).",
        metavar="PATH|-",
        panel=ESSENTIALS,
    )
    csv: Path | None = opt(
        "--csv", help="Write one tidy row per trial × epoch here.", panel=OUTPUTS
    )
    markdown: Path | None = opt(
        "--markdown",
        help="Write the tables, verdict, gates and findings as Markdown.",
        panel=OUTPUTS,
    )
    junit: Path | None = opt("--junit", help="Write one JUnit testcase per gate.", panel=OUTPUTS)
    html: Path | None = opt(
        "--html",
        help="Write one self-contained HTML page (a CI artifact).",
        panel=OUTPUTS,
    )
    plot: Path | None = opt("--plot", help="Draw memory and lifelines (PNG or SVG).", panel=OUTPUTS)
    trace: Path | None = opt(
        "--trace", help="Write a Chrome trace (open in ui.perfetto.dev).", panel=OUTPUTS
    )


@dataclass(frozen=True)
class UiOptions:
    """How the terminal output looks."""

    verbose: bool = opt(
        "--verbose",
        "-v",
        help="Show everything, not one screen: n and RSS, every epoch and worker, evidence.",
        panel=ESSENTIALS,
        default=False,
    )
    quiet: bool = opt("--quiet", "-q", help="No progress bar.", panel=OUTPUTS, default=False)
    debug: bool = opt("--debug", help="Show tracebacks on errors.", panel=OUTPUTS, default=False)


@dataclass(frozen=True)
class SweepOptions:
    """The grid of a sweep: comma lists, one value each for the other run options."""

    num_workers: str | list[int] | None = opt(
        "--num-workers",
        "-w",
        help="e.g. 0,2,4,8 (default: 0,2).",
        metavar="N,N,...",
        panel=ESSENTIALS,
        cli_type=str | None,
    )
    prefetch_factor: str | list[int | None] | None = opt(
        "--prefetch-factor",
        help="e.g. 2,4 (default: torch's).",
        metavar="N,N,...",
        panel=LOADER,
        cli_type=str | None,
    )
    mp_context: str | list[str | None] | None = opt(
        "--mp-context",
        help="e.g. fork,spawn (default: the platform's).",
        metavar="METHOD,...",
        panel=LOADER,
        cli_type=str | None,
    )
    persistent: str | list[bool] | None = opt(
        "--persistent",
        help="on, off or on,off (default: on,off).",
        metavar="on,off",
        panel=LOADER,
        cli_type=str | None,
    )


_KILL_AFTER_S = 10.0


@dataclass(frozen=True)
class WatchStopOptions:
    """How `watch` stops the command after Ctrl-C (its own entry: the rest of watch's
    options live beside it)."""

    kill_after: float = opt(
        "--kill-after",
        help="Seconds the command has to stop by itself after Ctrl-C or SIGTERM "
        "(forwarded to it: a training script saves its checkpoint) before SIGTERM, then "
        f"SIGKILL; a second Ctrl-C ends it at once. Default {_KILL_AFTER_S:g}.",
        metavar="S",
        panel="Stopping",
        default=_KILL_AFTER_S,
    )


# watch's own words for shared options, (help, metavar or None): its --fail-on gates on
# findings only and it has no --baseline, and it has no progress bar for -q to hide.
WATCH_HELP: dict[str, tuple[str, str | None]] = {
    "fail_on": (
        "Gate finding:ID, repeatable: exit 1 when the command succeeded and the report "
        "has that finding (e.g. finding:loader-recreated).",
        "finding:ID",
    ),
    "quiet": ("No 'running' (or 'watching') line before the report.", None),
}


@dataclass(frozen=True)
class AttachOptions:
    """`watch --pid`: a job that is already running, watched from outside."""

    pid: int | None = opt(
        "--pid",
        help="Watch the running job PID from outside instead of running a command: its "
        "worker pools, their memory and lifecycle, read from /proc (nothing is loaded "
        "into the job, nothing signals it).",
        metavar="PID",
        panel="Running job",
    )
    duration: float | None = opt(
        "--duration",
        help="With --pid: stop watching after S seconds (default: when the job exits, "
        "or Ctrl-C, which ends the watch, not the job).",
        metavar="S",
        panel="Running job",
    )
    interval: float | None = opt(
        "--interval",
        help="With --pid: seconds between readings of the job's processes (default: "
        "watch's --sample-interval, 0.05); USS/PSS at most every --uss-interval.",
        metavar="S",
        panel="Running job",
    )


def names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def cli_type(cls: type, name: str) -> Any:
    """The type the CLI parses for a field (its own, or its `cli_type`)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.metadata["cli_type"] or _hints(cls)[name]


def fill(cls: type[Any], values: Mapping[str, Any], *, what: str = "option") -> Any:
    """`cls(**values)` for the keys it has; an unknown key is a usage error with a hint."""
    # RunConfig's own names (sample_interval_ms) are accepted too, as in the config file.
    # (Imported here: the CLI's --help builds its options without loading config.)
    from loaderprof.config.run import FLAG_KEYS

    aliases = {key: name for name, key in FLAG_KEYS.items()}
    values = {aliases.get(k, k): v for k, v in values.items()}
    known = names(cls)
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown {what} {key!r}{hint}")
    return cls(**{k: _tuple(v) for k, v in values.items()})


def _tuple(value: Any) -> Any:
    # Typer hands repeatable options over as lists; the option objects are frozen.
    return tuple(value) if isinstance(value, list) else value


def split(values: Mapping[str, Any], *groups: type[Any]) -> list[Any]:
    """One filled option object per group from a flat mapping of keyword values."""
    return [fill(g, {k: v for k, v in values.items() if k in names(g)}) for g in groups]
