"""The event vocabulary is written once (inside/events.py `Ev`): every emitter passes
an `Ev` kind and every parser names kinds through `Ev`, never as a string of its own."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import loaderprof
from loaderprof.inside import events
from loaderprof.inside.events import KINDS, Ev, read_events

PACKAGE = Path(loaderprof.__file__).parent
# Where the events are keyed by kind (the assemblers' `by_kind` maps).
BY_KIND_NAMES = {"by_kind", "evs", "_by_kind"}


def _modules() -> list[tuple[Path, ast.Module]]:
    return [
        (p, ast.parse(p.read_text(encoding="utf-8"), str(p)))
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "events.py"
    ]


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _literals(node: ast.AST) -> list[str]:
    """The strings a kind operand spells out: a constant, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _literals(e)]
    return []


def _is_kind_of_event(node: ast.AST) -> bool:
    """`ev["ev"]` or `ev.get("ev")`: an event's kind."""
    if isinstance(node, ast.Subscript):
        return _literals(node.slice) == ["ev"]
    if isinstance(node, ast.Call) and _name(node.func) == "get":
        return bool(node.args) and _literals(node.args[0]) == ["ev"]
    return False


def _kinds_only(node: ast.AST) -> list[str]:
    """The strings of a tuple, list, set or dict's keys when each is an event kind."""
    if isinstance(node, ast.Dict):
        keys = [s for k in node.keys if k is not None for s in _literals(k)]
        return keys if len(keys) >= 2 and set(keys) <= KINDS else []
    spelled = _literals(node) if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
    return spelled if spelled and set(spelled) <= KINDS else []


def _spelled_kinds(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, literal) of every kind written as a string where events are emitted or read:
    passed to an emitter, compared with an event's kind (or a variable `kind`), used as a
    key of a map of events by kind, or listed with other kinds (a loop over kinds, a
    table keyed by kind: two kinds or more)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found += [(node.lineno, s) for s in _kinds_only(node)]
        elif isinstance(node, (ast.For, ast.comprehension)):
            found += [(node.iter.lineno, s) for s in _kinds_only(node.iter)]
        if isinstance(node, ast.Call) and _name(node.func) in {"emit", "_emit", "_state"}:
            for arg in node.args[:2]:
                found += [(node.lineno, s) for s in _literals(arg)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_kind_of_event(s) for s in sides):
                found += [(node.lineno, s) for side in sides for s in _literals(side)]
            elif any(_name(s) == "kind" for s in sides):
                found += [(node.lineno, s) for side in sides for s in _literals(side) if s in KINDS]
        elif isinstance(node, ast.Subscript) and _name(node.value) in BY_KIND_NAMES:
            found += [(node.lineno, s) for s in _literals(node.slice)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and _name(node.func.value) in BY_KIND_NAMES
            and node.args
        ):
            found += [(node.lineno, s) for s in _literals(node.args[0])]
    return found


def _pointed(path: Path, line: int) -> bool:
    """model/ sits below inside/ and cannot import Ev: a kind spelled there says which
    Ev constant it is in a comment on the line above."""
    return "model" in path.parts and "Ev." in path.read_text().splitlines()[line - 2]


def test_no_module_spells_an_event_kind_itself() -> None:
    spelled = sorted(
        {
            f"{path.relative_to(PACKAGE.parent)}:{line}: {kind!r}"
            for path, tree in _modules()
            for line, kind in _spelled_kinds(tree)
            if not _pointed(path, line)
        }
    )
    assert spelled == [], "name event kinds through inside.events.Ev:\n" + "\n".join(spelled)


def test_the_scan_sees_a_spelled_kind() -> None:
    # The scan itself can fail: each way of spelling a kind is caught.
    tree = ast.parse(
        'events.emit(path, "batch")\n'
        'self._emit("worker_ready")\n'
        'ok = ev["ev"] == "epoch_end"\n'
        'ok = ev.get("ev") in ("imported", "error")\n'
        'x = by_kind["worker_init"]\n'
        'y = evs.get("iter_start", [])\n'
        "z = by_kind[Ev.BATCH]\n"
        'ok = kind == "trial_end" or kind == "not a kind"\n'
        'stages = {"child_start": "starting", "imported": "building"}\n'
        'states = [e for k in ("main_state", "worker_state") for e in ks[k]]\n'
        'words = ("batch", "not a kind")\n'
        'ok = severity in ("warning", "error")\n'
    )
    kinds = sorted({k for _, k in _spelled_kinds(tree)})
    assert kinds == sorted(
        {
            "batch",
            "worker_ready",
            "epoch_end",
            "imported",
            "error",
            "worker_init",
            "iter_start",
            "trial_end",
            "child_start",
            "main_state",
            "worker_state",
        }
    )


def test_kinds_are_distinct_strings() -> None:
    names = [k for k in vars(Ev) if k.isupper()]
    assert len(KINDS) == len(names) >= 35
    assert all(getattr(Ev, n) == n.lower() for n in names)


def test_an_emitted_event_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events.emit(str(path), Ev.EPOCH_START, epoch=1)
    with open(path, "ab") as f:
        f.write(b'{"ev": "batch", "t"')  # a torn last line, as a killed writer leaves it
    (ev,) = read_events(path)
    assert ev["ev"] == Ev.EPOCH_START and ev["epoch"] == 1 and isinstance(ev["t"], int)
    assert json.loads(path.read_text().splitlines()[0])["ev"] in KINDS


def test_no_file_no_events(tmp_path: Path) -> None:
    assert read_events(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_emitted_somewhere(kind: str) -> None:
    # A kind nobody emits is a dead word in the vocabulary.
    name = kind.upper()
    sources = [p.read_text(encoding="utf-8") for p in (PACKAGE / "inside").glob("*.py")]
    assert any(f"Ev.{name}" in s for s in sources if "def emit" not in s)
