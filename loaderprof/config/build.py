"""From flags and TOML to one validated RunConfig: defaults < the project's
[tool.loaderprof] or a TOML config file < command-line flags.

Every TOML file loaderprof reads is read here, the project's pyproject.toml found
here too (`find_project_config`); each key's type is checked once, and `validate`
checks the whole RunConfig, so everything downstream may trust it.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from loaderprof.config.refs import ObjectRef
from loaderprof.config.run import AUTO, FLAG_KEYS, MP_CONTEXTS, LoaderOptions, RunConfig
from loaderprof.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


_LOADER_KEYS = {f.name for f in fields(LoaderOptions)}
_RUN_KEYS = {f.name for f in fields(RunConfig)} - {"loader", "dataset_args"}
# Keys a TOML file may use; `args` is the table of dataset keyword arguments,
# `loader_args` that of the --loader class, `gates` the table of CI gates,
# `memory_budget` a size such as "8GiB".
CONFIG_KEYS = frozenset(
    (_LOADER_KEYS | _RUN_KEYS | {"args", "gates", "memory_budget"})
    - {"memory_budget_bytes", "config_file"}
)

_INT_KEYS = {
    "max_batches",
    "epoch_samples",
    "num_workers",
    "prefetch_factor",
    "epochs",
    "max_trials",
    "warmup_trials",
    "memory_trials",
    "seed",
    "train_epochs",
    "val_batch_size",
    "val_num_workers",
}
_FLOAT_KEYS = {
    "timeout",
    "step_ms",
    "sample_interval_ms",
    "uss_interval_ms",
    "idle_ms",
    "trial_timeout_s",
    "min_gain",
}
_BOOL_KEYS = {
    "pin_memory",
    "shuffle",
    "drop_last",
    "in_order",
    "digests",
    "set_epoch",
    "state_checks",
    "fresh_interpreter",
    "full_detail",
}
_STR_KEYS = {
    "dataset",
    "mp_context",
    "collate_fn",
    "worker_init_fn",
    "epoch_hook",
    "loader_class",
    "val",
}
# Tables of keyword arguments: merged key by key, the flags' over the file's.
_TABLES = ("args", "loader_args", "val_args")
PYPROJECT = "pyproject.toml"


def find_project_config(start: Path) -> Path | None:
    """The project's settings: the nearest pyproject.toml from `start` upward, when it
    has a [tool.loaderprof] table. The CLI (without --config) and the pytest plugin
    both ask here, so a project's settings apply alike in a terminal and in its tests.

    The walk ends at the first pyproject.toml (the project `start` belongs to: a parent
    project's settings are not its own), at the folder holding `.git` (the top of the
    repository) or at the filesystem root. A pyproject.toml that cannot be read or
    parsed is returned too: reading it then names the problem, where skipping it would
    drop the user's settings without a word."""
    for folder in (start, *start.parents):
        path = folder / PYPROJECT
        if path.is_file():
            return path if _has_tool_table(path) else None
        if (folder / ".git").exists():
            return None
    return None


def _has_tool_table(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "loaderprof" in tool


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a loaderprof TOML file, or the `[tool.loaderprof]` table of a pyproject.toml."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"config file not found: {p}") from None
    except OSError as exc:
        raise UsageError(f"cannot read config file {p}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"config file {p} is not valid TOML: not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {p} is not valid TOML: {exc}") from None
    if p.name == PYPROJECT:
        tool = data.get("tool", {})
        data = tool.get("loaderprof", {}) if isinstance(tool, dict) else {}
        if not data:
            raise UsageError(f"{p} has no [tool.loaderprof] table")
    normalized: dict[str, Any] = {}
    for key, value in data.items():
        norm = key.replace("-", "_")
        norm = FLAG_KEYS.get(norm, norm)
        # `loader` is the flag's name (--loader); the RunConfig field is `loader_class`.
        norm = "loader_class" if norm == "loader" else norm
        if norm not in CONFIG_KEYS:
            import difflib

            close = difflib.get_close_matches(norm, sorted(CONFIG_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown key {key!r} in config file {p}{hint}")
        normalized[norm] = value
    for table in (*_TABLES, "gates"):
        if table in normalized and not isinstance(normalized[table], dict):
            raise UsageError(f"'{table}' in config file {p} must be a table")
    return normalized


def _check_type(key: str, value: Any, source: str) -> Any:
    def bad(kind: str) -> UsageError:
        return UsageError(f"{key} in {source} must be {kind}, got {value!r}")

    if value is None:
        return None
    if key in _INT_KEYS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
    elif key in _FLOAT_KEYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        value = float(value)
    elif key in _BOOL_KEYS:
        if not isinstance(value, bool):
            raise bad("true or false")
    elif key in _STR_KEYS:
        if not isinstance(value, str):
            raise bad("a string")
    elif key == "trials":
        text = str(value).strip().lower() if isinstance(value, str) else None
        if text == AUTO:
            return AUTO
        if text is not None and text.lstrip("-").isdecimal():
            return int(text)
        if isinstance(value, bool) or not isinstance(value, int):
            if source == "the command line":
                raise UsageError(f"--trials must be an integer or 'auto', got {value!r}")
            raise bad("an integer or 'auto'")
    elif key == "memory_budget":
        from loaderprof.units import parse_size

        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise bad('a size such as "8GiB"')
        try:
            return parse_size(str(value))
        except ValueError as exc:
            where = (
                "--memory-budget" if source == "the command line" else f"memory_budget in {source}"
            )
            raise UsageError(f"{where}: {exc}") from None
    elif key == "batch_size":
        if isinstance(value, str):
            # The command line hands over text: an integer, or 'none'.
            text = value.strip().lower()
            if text == "none":
                return None
            if text.lstrip("-").isdecimal():
                return int(text)
            if source == "the command line":
                raise UsageError(f"--batch-size must be an integer or 'none', got {value!r}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer or 'none'")
    return value


def build_config(
    flags: Mapping[str, Any],
    file_values: Mapping[str, Any] | None = None,
    *,
    source: str | Path | None = None,
) -> RunConfig:
    """Merge defaults, file values (read from `source`) and flags (flags whose value is
    None were not given)."""
    file_name = str(source) if source else "config file"
    merged: dict[str, Any] = {"config_file": str(source) if source else None}
    for key, value in (file_values or {}).items():
        if key in (*_TABLES, "gates"):
            continue
        merged[key] = _check_type(key, value, file_name)
    for key, value in flags.items():
        if key in _TABLES:
            continue
        if value is not None:
            merged[key] = _check_type(key, value, "the command line")
    if "memory_budget" in merged:
        merged["memory_budget_bytes"] = merged.pop("memory_budget")
    tables: dict[str, dict[str, Any]] = {}
    for table in _TABLES:
        tables[table] = dict((file_values or {}).get(table, {}))
        tables[table].update(flags.get(table) or {})
    args = tables["args"]
    for table in ("loader_args", "val_args"):
        if tables[table]:
            merged[table] = tables[table]

    dataset = merged.pop("dataset", None)
    if not dataset:
        raise UsageError(
            "no dataset given: pass DATASET (module:attr) or set 'dataset' in --config "
            "or the project's [tool.loaderprof]"
        )
    loader_kwargs = {k: merged.pop(k) for k in list(merged) if k in _LOADER_KEYS}
    unknown = set(merged) - _RUN_KEYS
    if unknown:
        many = "s" if len(unknown) > 1 else ""
        raise UsageError(f"unknown option{many}: {', '.join(sorted(unknown))}")
    cfg = RunConfig(
        dataset=dataset, dataset_args=args, loader=LoaderOptions(**loader_kwargs), **merged
    )
    validate(cfg)
    return cfg


# What loaderprof itself passes to the loader class, and where the user sets it
# instead: a --loader-arg may not set it.
OWN_LOADER_KWARGS: dict[str, str] = {
    "dataset": "the DATASET argument",
    "batch_size": "--batch-size",
    "num_workers": "--num-workers",
    "collate_fn": "--collate-fn",
    "worker_init_fn": "--worker-init-fn",
    "pin_memory": "--pin-memory",
    "drop_last": "--drop-last",
    "in_order": "--in-order/--no-in-order",
    "timeout": "--timeout",
    "persistent_workers": "nothing: it is what the two arms compare",
    "generator": "--seed",
    "sampler": "--shuffle (loaderprof records the order through its own sampler)",
    "shuffle": "--shuffle",
    "prefetch_factor": "--prefetch-factor",
    "multiprocessing_context": "--mp-context",
}


def _validate_loader_class(lo: LoaderOptions) -> None:
    if lo.loader_class is not None:
        ObjectRef.parse(lo.loader_class, what="--loader")
    elif lo.loader_args:
        raise UsageError("--loader-arg needs --loader (the class that takes it)")
    clash = sorted(set(lo.loader_args) & set(OWN_LOADER_KWARGS))
    if clash:
        raise UsageError(
            f"--loader-arg {clash[0]}: loaderprof sets it; use {OWN_LOADER_KWARGS[clash[0]]}"
        )


def _validate_val(cfg: RunConfig) -> None:
    if cfg.val is None:
        extra = [
            flag
            for flag, given in (
                ("--val-arg", cfg.val_args),
                ("--val-batch-size", cfg.val_batch_size is not None),
                ("--val-num-workers", cfg.val_num_workers is not None),
            )
            if given
        ]
        if extra:
            raise UsageError(f"{extra[0]} needs --val (the validation Dataset it is for)")
        return
    ObjectRef.parse(cfg.val, what="--val")
    _check_json("--val-arg", cfg.val_args)
    if cfg.max_batches is not None:
        raise UsageError(
            "--val with --max-batches is not supported: a cut train pass is projected to its "
            "full length, and the validation pass inside the epoch would be projected too"
        )
    if cfg.val_batch_size is not None and cfg.val_batch_size < 1:
        raise UsageError(f"--val-batch-size must be ≥ 1, got {cfg.val_batch_size}")
    if cfg.val_num_workers is not None and cfg.val_num_workers < 1:
        raise UsageError(
            f"--val-num-workers must be ≥ 1, got {cfg.val_num_workers}: a validation loader "
            "without workers has no pool for persistence to keep"
        )


def _check_json(flag: str, table: Mapping[str, Any]) -> None:
    """The trial receives its config as JSON: a value JSON cannot carry (a set, bytes, a
    complex number) is a usage error, not a traceback. (A tuple arrives as a list.)"""
    for key, value in table.items():
        try:
            json.dumps(value, allow_nan=True)
        except (TypeError, ValueError):
            raise UsageError(
                f"{flag} {key}={value!r}: only JSON values (numbers, strings, booleans, None, "
                "lists, dicts with string keys) can be passed to the trial"
            ) from None


def check_epochs(epochs: int) -> None:
    """Both forms of compare: persistence changes only the epochs after the first."""
    if epochs < 2:
        raise UsageError(
            f"--epochs {epochs}: need at least 2, since epoch 1 is cold in both arms and "
            "persistence only changes epochs 2..N"
        )


def validate(cfg: RunConfig) -> None:
    ObjectRef.parse(cfg.dataset, what="dataset")
    lo = cfg.loader
    if lo.num_workers < 1:
        raise UsageError(
            f"--num-workers {lo.num_workers}: persistent_workers needs worker processes "
            "(num_workers > 0); num_workers=0 loads in the main process and is meant for "
            "debugging, so there is nothing to compare"
        )
    if lo.batch_size is not None and lo.batch_size < 1:
        raise UsageError(f"--batch-size must be ≥ 1 (or 'none'), got {lo.batch_size}")
    if lo.prefetch_factor is not None and lo.prefetch_factor < 1:
        raise UsageError(f"--prefetch-factor must be ≥ 1, got {lo.prefetch_factor}")
    if lo.mp_context is not None:
        if lo.mp_context not in MP_CONTEXTS:
            raise UsageError(
                f"unknown --mp-context {lo.mp_context!r}: choose one of {', '.join(MP_CONTEXTS)}"
            )
        available = multiprocessing.get_all_start_methods()
        if lo.mp_context not in available:
            raise UsageError(
                f"--mp-context {lo.mp_context} is not available on this platform "
                f"(available: {', '.join(available)})"
            )
    if lo.timeout < 0:
        raise UsageError(f"--timeout must be ≥ 0, got {lo.timeout}")
    for what, ref in (("collate_fn", lo.collate_fn), ("worker_init_fn", lo.worker_init_fn)):
        if ref is not None:
            ObjectRef.parse(ref, what=f"--{what.replace('_', '-')}")
    _validate_loader_class(lo)
    _check_json("--arg", cfg.dataset_args)
    _check_json("--loader-arg", lo.loader_args)
    _validate_val(cfg)
    if cfg.max_batches is not None and cfg.max_batches < 2:
        raise UsageError(
            f"--max-batches must be ≥ 2 (a per-batch time needs two batches), got {cfg.max_batches}"
        )
    if cfg.epoch_samples is not None:
        if cfg.max_batches is None:
            raise UsageError(
                "--epoch-samples sizes the full epoch that cut epochs are projected to: "
                "it needs --max-batches"
            )
        if cfg.epoch_samples < 1:
            raise UsageError(f"--epoch-samples must be ≥ 1, got {cfg.epoch_samples}")
    if cfg.epoch_hook is not None:
        ObjectRef.parse(cfg.epoch_hook, what="--epoch-hook")
    check_epochs(cfg.epochs)
    if isinstance(cfg.trials, int) and cfg.trials < 1:
        raise UsageError(f"--trials must be ≥ 1 (or 'auto'), got {cfg.trials}")
    if cfg.max_trials < 1:
        raise UsageError(f"--max-trials must be ≥ 1, got {cfg.max_trials}")
    if cfg.memory_trials is not None and cfg.memory_trials < 1:
        raise UsageError(f"--memory-trials must be ≥ 1, got {cfg.memory_trials}")
    if cfg.warmup_trials < 0:
        raise UsageError(f"--warmup-trials must be ≥ 0, got {cfg.warmup_trials}")
    if cfg.train_epochs is not None and cfg.train_epochs < 1:
        raise UsageError(f"--train-epochs must be ≥ 1, got {cfg.train_epochs}")
    if cfg.memory_budget_bytes is not None and cfg.memory_budget_bytes <= 0:
        raise UsageError("--memory-budget must be a positive size such as 8GiB")
    if cfg.step_ms < 0:
        raise UsageError(f"--step-ms must be ≥ 0, got {cfg.step_ms}")
    if cfg.sample_interval_ms < 0:
        raise UsageError(
            f"--sample-interval must be ≥ 0 ms (0 turns sampling off), got {cfg.sample_interval_ms}"
        )
    if 0 < cfg.sample_interval_ms < 5:
        raise UsageError(
            f"--sample-interval {cfg.sample_interval_ms:g} ms is too fast to measure honestly "
            "(each sample reads /proc for every process); use ≥ 5 ms or 0 to turn sampling off"
        )
    if cfg.uss_interval_ms < 0:
        raise UsageError(f"--uss-interval must be ≥ 0 ms, got {cfg.uss_interval_ms}")
    if cfg.idle_ms is not None and cfg.idle_ms < 0:
        raise UsageError(f"--idle-ms must be ≥ 0, got {cfg.idle_ms}")
    if cfg.trial_timeout_s <= 0:
        raise UsageError(f"--trial-timeout must be > 0 seconds, got {cfg.trial_timeout_s}")
    if not 0 <= cfg.min_gain < 1:
        raise UsageError(f"--min-gain must be in [0, 1), got {cfg.min_gain}")
