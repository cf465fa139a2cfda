"""Where the user's objects come from: `pkg.mod:attr` or `path/to/file.py:attr`.

Parsing is pure and torch-free (the CLI validates specs before any trial
starts); resolving imports user code and runs inside the trial child.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import os
import sys
import traceback
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderprof.errors import UsageError

_IDENT_HINT = "expected 'package.module:attr' or 'path/to/file.py:attr'"


def _is_dotted_identifier(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


@dataclass(frozen=True)
class ObjectRef:
    """A reference to a Python object by import path."""

    module: str
    attr: str
    # Directory to put on sys.path when the reference names a file.
    search_dir: str | None = None

    @classmethod
    def parse(cls, text: str, *, what: str = "object") -> ObjectRef:
        text = text.strip()
        target, sep, attr = text.rpartition(":")
        if not sep or not target or not attr:
            raise UsageError(f"bad {what} reference {text!r}: {_IDENT_HINT}")
        if not _is_dotted_identifier(attr):
            raise UsageError(f"bad {what} reference {text!r}: {attr!r} is not an attribute name")
        if target.endswith(".py"):
            path = Path(target).expanduser()
            if not path.is_file():
                raise UsageError(f"{what} file not found: {target}")
            stem = path.stem
            if not stem.isidentifier():
                raise UsageError(
                    f"{what} file name {path.name!r} is not importable: rename it to a valid "
                    "Python module name"
                )
            return cls(module=stem, attr=attr, search_dir=str(path.resolve().parent))
        if not _is_dotted_identifier(target):
            raise UsageError(f"bad {what} reference {text!r}: {_IDENT_HINT}")
        return cls(module=target, attr=attr)

    def __str__(self) -> str:
        if self.search_dir is not None:
            return f"{os.path.join(self.search_dir, self.module)}.py:{self.attr}"
        return f"{self.module}:{self.attr}"

    def resolve(self) -> Any:
        """Import the module and return the attribute; one-line UsageErrors on failure."""
        if self.search_dir is not None and self.search_dir not in sys.path:
            sys.path.insert(0, self.search_dir)
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            missing = exc.name or self.module
            if self.module == missing or self.module.startswith(missing + "."):
                # The folders a user can act on (the working directory first, then
                # PYTHONPATH's); not the interpreter's own, nor import hooks.
                own = (sys.prefix, sys.base_prefix)
                user = [
                    p
                    for p in dict.fromkeys(os.path.abspath(p or ".") for p in sys.path)
                    if os.path.isdir(p) and not p.startswith(own)
                ]
                where = ", ".join(user[:3]) + (f" (+{len(user) - 3} more)" if len(user) > 3 else "")
                close = _close_modules(missing, user)
                hint = f"did you mean {', '.join(map(repr, close))}? Or " if close else ""
                raise UsageError(
                    f"module {self.module!r} not found in {where or 'sys.path'} or the "
                    f"installed packages; {hint}"
                    "run from the folder that holds it, or add that folder to PYTHONPATH",
                    detail=traceback.format_exc(),
                ) from exc
            raise UsageError(
                f"importing {self.module!r} failed: it imports {missing!r}, which is not installed",
                detail=traceback.format_exc(),
            ) from exc
        except Exception as exc:
            raise UsageError(
                f"importing {self.module!r} failed: {one_line(exc)}",
                detail=traceback.format_exc(),
            ) from exc
        obj: Any = module
        walked: list[str] = []
        parts = self.attr.split(".")
        for i, part in enumerate(parts):
            if not hasattr(obj, part):
                # What the ref ends on is a Dataset, a class or a function: never an
                # imported module (`np` for a mistyped name).
                last = i == len(parts) - 1
                names = [
                    n
                    for n in dir(obj)
                    if not n.startswith("_")
                    and not (last and isinstance(getattr(obj, n, None), types.ModuleType))
                ]
                close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
                where = ".".join([self.module, *walked])
                hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise UsageError(f"{where!r} has no attribute {part!r}{hint}")
            obj = getattr(obj, part)
            walked.append(part)
        return obj


def _close_modules(missing: str, folders: list[str]) -> list[str]:
    """Modules close to a mistyped one: its package's, or at the top the user's own
    folders' (not every installed name: 'trian' is not 'trace')."""
    import pkgutil

    parent, _, leaf = missing.rpartition(".")
    try:
        path = importlib.import_module(parent).__path__ if parent else folders
    except (ImportError, AttributeError):  # no such parent, or not a package
        return []
    names = sorted({m.name for m in pkgutil.iter_modules(path)})
    prefix = f"{parent}." if parent else ""
    return [prefix + c for c in difflib.get_close_matches(leaf, names, n=3, cutoff=0.6)]


def one_line(exc: BaseException) -> str:
    """`TypeError: message` on one line, the way a user reads it."""
    text = str(exc).strip().splitlines()
    message = text[-1] if text else ""
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


def parse_value(raw: str) -> Any:
    """A Python literal if the text is one, else the text itself."""
    try:
        return ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def parse_arg(text: str, flag: str = "--arg") -> tuple[str, Any]:
    """Parse one `--arg key=value` (or another such flag)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep:
        raise UsageError(f"bad {flag} {text!r}: expected key=value")
    if not key.isidentifier():
        raise UsageError(f"bad {flag} {text!r}: {key!r} is not a valid keyword argument name")
    return key, parse_value(raw)


def parse_args(items: list[str] | tuple[str, ...], flag: str = "--arg") -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in items:
        key, value = parse_arg(item, flag)
        result[key] = value
    return result


def _looks_like_dataset(obj: Any) -> bool:
    # DataLoader accepts any map-style object (`__getitem__` + `__len__`) or
    # IterableDataset; a torch Dataset subclass without __len__ is also fine.
    from torch.utils.data import Dataset, IterableDataset

    if isinstance(obj, (Dataset, IterableDataset)):
        return True
    return (
        not isinstance(obj, (type, str, bytes))
        and hasattr(obj, "__getitem__")
        and hasattr(obj, "__len__")
    )


def build_dataset(ref: ObjectRef, kwargs: Mapping[str, Any], args_flag: str = "--arg") -> Any:
    """Turn a class, a factory or an instance into a Dataset instance."""
    obj = ref.resolve()
    if not isinstance(obj, type) and _looks_like_dataset(obj):
        if kwargs:
            raise UsageError(
                f"{ref} is already a Dataset instance, so {args_flag} cannot be applied to it; "
                "point at its class or a factory function instead"
            )
        return obj
    if not callable(obj):
        raise UsageError(
            f"{ref} is a {type(obj).__name__}, not a Dataset, a Dataset class or a factory "
            "returning one"
        )
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    try:
        dataset = obj(**kwargs)
    except Exception as exc:
        raise UsageError(
            f"{ref}({shown}) raised {one_line(exc)}", detail=traceback.format_exc()
        ) from exc
    if not _looks_like_dataset(dataset):
        raise UsageError(
            f"{ref}({shown}) returned a {type(dataset).__name__}, not a torch Dataset "
            "(need a torch.utils.data.Dataset / IterableDataset, or an object with "
            "__getitem__ and __len__)"
        )
    return dataset
