"""The JSON report (schema_version 1) and atomic file output."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from loaderprof.errors import UsageError
from loaderprof.results import SCHEMA_VERSION, Report, SweepReport, from_dict, to_dict


def to_json(report: Report, *, indent: int | None = 2) -> str:
    return json.dumps(to_dict(report), indent=indent, allow_nan=False) + "\n"


def load_schema() -> dict[str, Any]:
    text = resources.files("loaderprof").joinpath("schemas/report-v1.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def write_atomic(path: str | Path, text: str) -> None:
    """Write via a temp file in the same directory + rename: never a truncated file."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; give the report the permissions open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(path: str | Path) -> None:
    """Fail before any trial runs when an output could not be written."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {target}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {target}: directory {parent} is not writable")
    if target.is_dir():
        raise UsageError(f"cannot write {target}: it is a directory")


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


def is_sweep(path: str | Path) -> bool:
    return _load(path).get("kind") == "sweep"


def read_report(path: str | Path) -> Report:
    data = _load(path)
    if data.get("kind") == "sweep":
        raise UsageError(f"{path} is a sweep report; this command needs a compare report")
    try:
        return from_dict(Report, data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path} is not a valid loaderprof report: {exc}") from None


def read_sweep(path: str | Path) -> Any:
    try:
        return from_dict(SweepReport, _load(path))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path} is not a valid loaderprof sweep report: {exc}") from None
