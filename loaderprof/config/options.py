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
    spec: str,
    help: str,
    *,
    panel: str,
    default: Any = None,
    cli_type: Any = None,
    hidden: bool = False,
) -> Any:
    """A field with what the CLI needs to show it.

    spec: the option as --help shows it: its flags, then the value's name where it
    takes one (`--num-workers -w N`); a flag alone names none (`--strict`), and an
    option with no name of its own gets one from its type.
    cli_type: the type Typer parses when the API accepts more (batch size: 'none').
    """
    words = spec.split()
    flags = tuple(w for w in words if w.startswith("-"))
    rest = words[len(flags) :]
    meta = {
        "flags": flags,
        "help": help,
        "panel": panel,
        "cli_type": cli_type,
        "hidden": hidden,
        "metavar": rest[0] if rest else None,
    }
    return field(default=default, metadata=meta)


# One per panel, so that the declarations below read as a table, a line or two each.
def _essential(spec: str, help: str, **kw: Any) -> Any:
    return opt(spec, help, panel=ESSENTIALS, **kw)


def _loader(spec: str, help: str, **kw: Any) -> Any:
    return opt(spec, help, panel=LOADER, **kw)


def _measured(spec: str, help: str, **kw: Any) -> Any:
    return opt(spec, help, panel=MEASUREMENT, **kw)


def _stats(spec: str, help: str, **kw: Any) -> Any:
    return opt(spec, help, panel=STATISTICS, **kw)


def _gate(spec: str, help: str, **kw: Any) -> Any:
    return opt(spec, help, panel=GATES, **kw)


def _output(spec: str, help: str, **kw: Any) -> Any:
    return opt(spec, help, panel=OUTPUTS, **kw)


@dataclass(frozen=True)
class RunOptions:
    """How the DataLoader is built and how the trials are run and measured."""

    args: tuple[str, ...] | Mapping[str, Any] | None = _essential(
        "--arg -a KEY=VALUE",
        "Dataset keyword argument key=value (a Python literal, else a string); repeatable.",
        cli_type=list[str] | None,
    )
    config: Path | None = _essential(
        "--config -c FILE",
        "TOML config (or a pyproject.toml), used instead of the project's "
        "\\[tool.loaderprof]; flags override it.",
    )
    epochs: int | None = _essential("--epochs N", "Epochs per trial (default: 5).")
    num_workers: int | None = _essential("--num-workers -w N", "DataLoader workers (default: 2).")
    batch_size: int | str | None = _essential(
        "--batch-size -b N|none",
        "Batch size, or 'none' to turn automatic batching off (default: 32).",
        cli_type=str | None,
    )
    prefetch_factor: int | None = _loader(
        "--prefetch-factor N", "Batches prefetched per worker (default: torch's, 2)."
    )
    pin_memory: bool | None = _loader(
        "--pin-memory/--no-pin-memory",
        "Pin batches (falls back with a warning without an accelerator).",
    )
    mp_context: str | None = _loader(
        "--mp-context METHOD",
        "Worker start method: fork, spawn or forkserver (default: the platform's).",
    )
    shuffle: bool | None = _loader(
        "--shuffle/--no-shuffle", "Shuffle a map-style dataset (default: off)."
    )
    drop_last: bool | None = _loader(
        "--drop-last/--no-drop-last", "Drop the last incomplete batch (default: off)."
    )
    in_order: bool | None = _loader(
        "--in-order/--no-in-order",
        "Deliver batches in sampler order (torch ≥ 2.6; default: on); off lets batches "
        "overtake a slow worker's.",
    )
    timeout: float | None = _loader("--timeout S", "DataLoader timeout in seconds (default: 0).")
    collate_fn: str | None = _loader("--collate-fn M:FN", "Your collate function as module:attr.")
    worker_init_fn: str | None = _loader(
        "--worker-init-fn M:FN", "Your worker_init_fn as module:attr."
    )
    loader_class: str | None = _loader(
        "--loader M:CLS",
        "Your DataLoader class as module:attr (e.g. StatefulDataLoader), built with the"
        " same arguments.",
    )
    loader_args: tuple[str, ...] | Mapping[str, Any] | None = _loader(
        "--loader-arg K=V",
        "--loader keyword argument key=value; repeatable.",
        cli_type=list[str] | None,
    )
    val: str | None = _loader(
        "--val M:A",
        "A validation Dataset as module:attr: each epoch is a train pass, then a validation pass.",
    )
    val_args: tuple[str, ...] | Mapping[str, Any] | None = _loader(
        "--val-arg K=V",
        "Validation Dataset keyword argument key=value; repeatable.",
        cli_type=list[str] | None,
    )
    val_batch_size: int | None = _loader(
        "--val-batch-size N", "Validation batch size (default: train's)."
    )
    val_num_workers: int | None = _loader(
        "--val-num-workers N", "Validation workers (default: train's)."
    )
    step_ms: float | None = _loader(
        "--step-ms MS", "Simulated training step per batch, ms (default: 0)."
    )
    set_epoch: bool | None = _loader(
        "--set-epoch/--no-set-epoch",
        "Call set_epoch(epoch) on the sampler and Dataset before each epoch, as "
        "training loops do (default: on).",
    )
    epoch_hook: str | None = _loader(
        "--epoch-hook M:FN",
        "Your per-epoch change as module:FN, called FN(loader, epoch) before each epoch.",
    )
    sample_interval: float | None = _measured(
        "--sample-interval MS", "Memory sampling interval, ms (default: 50; 0: off, compare only)."
    )
    uss_interval: float | None = _measured(
        "--uss-interval MS",
        "Most time between USS/PSS samples in an epoch, ms; reading them slows the "
        "loader (default: 500).",
    )
    idle_ms: float | None = _measured(
        "--idle-ms MS",
        "Pause after each epoch in which idle worker memory is sampled (default: 2 "
        "sampling intervals).",
    )
    trials: int | str | None = _measured(
        "--trials auto|N",
        "Trials per arm: 'auto' (default) stops once the verdict is settled or at "
        "--max-trials; N fixes the plan.",
        cli_type=str,
    )
    max_trials: int | None = _measured(
        "--max-trials N", "Most trials per arm for --trials auto (default: 6)."
    )
    memory_trials: int | None = _measured(
        "--memory-trials N",
        "Memory trials per arm (sampled deeply, not timed), run first (default: 2; check: 0).",
    )
    warmup_trials: int | None = _measured(
        "--warmup-trials N", "Trials per arm run first, not counted (default: 0)."
    )
    seed: int | None = _measured("--seed N", "Seed for order, shuffle, bootstrap (default: 0).")
    trial_timeout: float | None = _measured(
        "--trial-timeout S", "Seconds before a trial is killed (default: 900)."
    )
    digests: bool | None = _measured(
        "--digests/--no-digests",
        "Digest every sample's content (finds duplicates and carried RNG; costs epoch time).",
    )
    max_batches: int | None = _measured(
        "--max-batches N",
        "Cut every epoch to N batches and project full epochs from the per-batch time.",
    )
    epoch_samples: int | None = _measured(
        "--epoch-samples N", "Samples per full epoch of an IterableDataset without len()."
    )
    fresh_interpreter: bool | None = _measured(
        "--fresh-interpreter/--template",
        "Start every trial as a fresh interpreter, not a fork of a warm template (slower).",
    )
    full_detail: bool | None = _output(
        "--full-detail/--bounded-detail",
        "Keep every batch span and memory sample in the JSON (by default long trials "
        "are downsampled).",
    )
    state_checks: bool | None = _measured(
        "--state-checks/--no-state-checks",
        "Fingerprint the Dataset each epoch in the main process and every worker (default: on).",
    )
    train_epochs: int | None = _stats(
        "--train-epochs N",
        "Epochs of your real training, for the total saving (default: --epochs).",
    )
    min_gain: float | None = _stats(
        "--min-gain F",
        "Smallest steady-epoch saving worth enabling for, as a fraction (default: 0.05).",
    )
    memory_budget: str | int | None = _stats(
        "--memory-budget SIZE",
        "Peak PSS of the whole run allowed with persistence, e.g. 8GiB.",
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

    fail_on: tuple[str, ...] | None = _gate(
        "--fail-on METRIC:LIMIT",
        "Gate METRIC:LIMIT, repeatable: 'steady_epoch_ratio:<=0.95', "
        "'peak_worker_uss:<=1.5GiB', first_batch_s:+10%, finding:ID (quote < and > in a "
        "shell).",
        cli_type=list[str] | None,
    )
    gates: Path | None = _gate(
        "--gates FILE", "TOML file with a \\[gates] (or \\[tool.loaderprof.gates]) table."
    )
    strict: bool = _gate("--strict", "Inconclusive gates fail too.", default=False)
    baseline: Path | None = _gate("--baseline", "A saved report to compare against.")
    save_baseline: Path | None = _gate(
        "--save-baseline", "Save the full report here as a future baseline."
    )


@dataclass(frozen=True)
class OutputOptions:
    """Where the report goes besides the terminal; every path is checked before any trial."""

    json: str | None = _essential("--json PATH|-", "Write the JSON report here ('-' for stdout).")
    csv: Path | None = _output("--csv", "Write one tidy row per trial × epoch here.")
    markdown: Path | None = _output(
        "--markdown", "Write the tables, verdict, gates and findings as Markdown."
    )
    junit: Path | None = _output("--junit", "Write one JUnit testcase per gate.")
    html: Path | None = _output("--html", "Write one self-contained HTML page (a CI artifact).")
    plot: Path | None = _output("--plot", "Draw memory and lifelines (PNG or SVG).")
    trace: Path | None = _output("--trace", "Write a Chrome trace (open in ui.perfetto.dev).")


@dataclass(frozen=True)
class UiOptions:
    """How the terminal output looks."""

    verbose: bool = _essential(
        "--verbose -v",
        "Show everything, not one screen: n and RSS, every epoch and worker, evidence.",
        default=False,
    )
    quiet: bool = _output("--quiet -q", "No progress bar.", default=False)
    debug: bool = _output("--debug", "Show tracebacks on errors.", default=False)


# compare's option groups, in the order `split` returns them; its command form reads
# some of the same options.
COMPARE_GROUPS = (RunOptions, GateOptions, OutputOptions, UiOptions)


@dataclass(frozen=True)
class SweepOptions:
    """The grid of a sweep: comma lists, one value each for the other run options."""

    num_workers: str | list[int] | None = _essential(
        "--num-workers -w N,N,...", "e.g. 0,2,4,8 (default: 0,2).", cli_type=str | None
    )
    prefetch_factor: str | list[int | None] | None = _loader(
        "--prefetch-factor N,N,...", "e.g. 2,4 (default: torch's).", cli_type=str | None
    )
    mp_context: str | list[str | None] | None = _loader(
        "--mp-context METHOD,...", "e.g. fork,spawn (default: the platform's).", cli_type=str | None
    )
    persistent: str | list[bool] | None = _loader(
        "--persistent on,off", "on, off or on,off (default: on,off).", cli_type=str | None
    )


_KILL_AFTER_S = 10.0


@dataclass(frozen=True)
class WatchStopOptions:
    """How `watch` stops the command after Ctrl-C (its own entry: the rest of watch's
    options live beside it)."""

    kill_after: float = opt(
        "--kill-after S",
        "Seconds the command has to stop by itself after Ctrl-C or SIGTERM "
        "(forwarded to it: a training script saves its checkpoint) before SIGTERM, then "
        f"SIGKILL; a second Ctrl-C ends it at once. Default {_KILL_AFTER_S:g}.",
        panel="Stopping",
        default=_KILL_AFTER_S,
    )


@dataclass(frozen=True)
class CommandOptions:
    """`compare -- COMMAND`: the user's own command as both arms (NOTE [command arms])."""

    loader_site: str | None = opt(
        "--loader-site FILE:LINE",
        "With -- COMMAND: switch persistence only for loaders built at this line, and "
        "time that loader's epochs.",
        panel="Your command (after --)",
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
    "markdown": ("Write the tables and findings as Markdown.", None),
}


@dataclass(frozen=True)
class AttachOptions:
    """`watch --pid`: a job that is already running, watched from outside."""

    pid: int | None = opt(
        "--pid PID",
        "Watch the running job PID from outside instead of running a command: its "
        "worker pools, their memory and lifecycle, read from /proc (nothing is loaded "
        "into the job, nothing signals it).",
        panel="Running job",
    )
    duration: float | None = opt(
        "--duration S",
        "With --pid: stop watching after S seconds (default: when the job exits, "
        "or Ctrl-C, which ends the watch, not the job).",
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
