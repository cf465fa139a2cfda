"""The JSON report (schema_version 1): writing, reading back, the schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from loaderprof.errors import UsageError
from loaderprof.model.attached import AttachReport
from loaderprof.model.codec import from_dict, to_dict
from loaderprof.model.command import CommandReport
from loaderprof.model.environment import SCHEMA_VERSION
from loaderprof.model.results import Report, SweepReport
from loaderprof.model.watch import WatchReport

T = TypeVar("T")


def to_json(
    report: Report | SweepReport | WatchReport | AttachReport | CommandReport,
    *,
    indent: int | None = 2,
) -> str:
    return json.dumps(to_dict(report), indent=indent, allow_nan=False) + "\n"


# The JSON schema of each kind of report (a sweep's is the compare report's).
_SCHEMAS = {
    "compare": "report-v1.schema.json",
    "watch": "watch-v1.schema.json",
    "attach": "attach-v1.schema.json",
    "compare-command": "compare-command-v1.schema.json",
}


def load_schema(kind: str = "compare") -> dict[str, Any]:
    text = resources.files("loaderprof").joinpath(f"schemas/{_SCHEMAS[kind]}").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _load(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"report not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read report {p}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{p} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise UsageError(f"{p} is not a loaderprof report (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(
            f"{p} has schema_version {version!r}; this loaderprof reads up to "
            f"{SCHEMA_VERSION}: upgrade loaderprof"
        )
    return data


# Each kind of report, and what reads it: named when a command is given another kind.
READERS = {
    "compare": "read it with loaderprof report or loaderprof diff",
    "sweep": "read it with loaderprof report",
    "watch": "read it with loaderprof report",
    "attach": "read it with loaderprof report",
    "compare-command": "read it with loaderprof report; compare two with compare --baseline",
}


def kind_of(data: dict[str, Any]) -> str:
    # A compare report predates the field: it has none.
    return str(data.get("kind") or "compare")


def kind_in(path: str | Path) -> str:
    """The kind of the report at `path` (one line naming what is wrong with any other
    file)."""
    return kind_of(_load(path))


def require_kind(path: str | Path, data: dict[str, Any], wanted: str, needs: str) -> None:
    """One line naming the kind given and what reads it, for a report of another kind;
    `needs` says what the command takes ("loaderprof diff reads compare reports")."""
    got = kind_of(data)
    if got != wanted:
        reader = READERS.get(got, "not one loaderprof reads")
        article = "an" if got[:1] in "aeiou" else "a"
        raise UsageError(f"{path} is {article} {got} report ({reader}); {needs}")


def read_report(path: str | Path, *, needs: str = "this command reads compare reports") -> Report:
    return _read(path, Report, "compare", needs, "report", check=_has_config)


def _has_config(path: str | Path, data: dict[str, Any]) -> None:
    """The typed config fills what a file leaves out with defaults: what every compare
    report has recorded must be there, or a default would pass for a measured setting."""
    config = data.get("config")
    config = config if isinstance(config, dict) else {}
    loader = config.get("loader")
    if not isinstance(loader, dict) or "num_workers" not in loader or "dataset" not in config:
        raise UsageError(
            f"{path} is not a valid loaderprof report: its config lacks the dataset or "
            "the loader's num_workers"
        )


def read_command(path: str | Path, *, needs: str = "") -> CommandReport:
    """A `compare -- COMMAND` report; one written before a field was added loads with
    that field's default."""
    return _read(path, CommandReport, "compare-command", needs, "compare -- COMMAND report")


def read_watch(path: str | Path) -> WatchReport:
    return _read(path, WatchReport, "watch", "", "watch report")


def read_attach(path: str | Path) -> AttachReport:
    return _read(path, AttachReport, "attach", "", "watch --pid report")


def read_sweep(path: str | Path, *, needs: str = "this command reads sweep reports") -> SweepReport:
    return _read(path, SweepReport, "sweep", needs, "sweep report")


def _read(
    path: str | Path,
    cls: type[T],
    kind: str,
    needs: str,
    what: str,
    check: Callable[[str | Path, dict[str, Any]], None] | None = None,
) -> T:
    data = _load(path)
    require_kind(path, data, kind, needs)
    if check is not None:
        check(path, data)
    try:
        return from_dict(cls, data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path} is not a valid loaderprof {what}: {exc}") from None
