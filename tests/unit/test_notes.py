"""Each NOTE [name] is written once and pointed to everywhere else (torch/utils/data's
convention): its home is the one place that opens it with a colon, "NOTE [name]: why...",
and every other mention is a pointer, "see NOTE [name]", without one. The package is
where notes live; the tests, benchmarks, JSON Schemas and README only point to them."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

import loaderprof

PACKAGE = Path(loaderprof.__file__).parent
ROOT = PACKAGE.parent
# A name may wrap onto the next comment line: "NOTE [sampled\n    # pauses]".
_NOTE = re.compile(r"NOTE(?:\s|#)+\[([^\]]+)\](:?)")


def notes(texts: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({name: [where it is opened]}, {name: [where it is pointed to]})."""
    homes: dict[str, list[str]] = defaultdict(list)
    pointers: dict[str, list[str]] = defaultdict(list)
    for where, text in texts.items():
        for m in _NOTE.finditer(text):
            name = " ".join(m.group(1).replace("#", " ").split())
            line = text.count("\n", 0, m.start()) + 1
            (homes if m.group(2) else pointers)[name].append(f"{where}:{line}")
    return homes, pointers


def _read(paths: list[Path]) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted(paths)}


def _package() -> dict[str, str]:
    return _read(list(PACKAGE.rglob("*.py")))


def _pointing() -> dict[str, str]:
    """Everything else in the checkout that may mention a note (this file's examples aside)."""
    paths = [*PACKAGE.joinpath("schemas").glob("*.json"), ROOT / "README.md"]
    for folder in ("tests", "benchmarks"):
        paths += [p for p in (ROOT / folder).rglob("*.py") if p != Path(__file__)]
    return _read([p for p in paths if p.exists()])


def test_every_note_has_exactly_one_home() -> None:
    homes, pointers = notes(_package())
    twice = {name: where for name, where in homes.items() if len(where) > 1}
    homeless = {name: where for name, where in pointers.items() if name not in homes}
    assert twice == {}, "a NOTE opened in more than one place; point to one of them"
    assert homeless == {}, "a NOTE pointed to but written nowhere"


def test_tests_benchmarks_schemas_and_readme_only_point_to_notes() -> None:
    if not (ROOT / "tests").is_dir():
        pytest.skip("an installed package: the checkout's other folders are not here")
    package_homes, _ = notes(_package())
    homes, pointers = notes(_pointing())
    assert dict(homes) == {}, "a NOTE opened outside the package; point to its home there"
    homeless = {name: where for name, where in pointers.items() if name not in package_homes}
    assert homeless == {}, "a NOTE pointed to but written nowhere in the package"


def test_the_check_sees_a_second_home_and_a_dangling_pointer() -> None:
    homes, pointers = notes(
        {
            "a.py": "# NOTE [x]: why x.\n# see NOTE [y]\n",
            "b.py": '"""NOTE [x]: x again."""\n# (see NOTE [long\n# name]) and NOTE\n# [z]\n',
        }
    )
    assert homes == {"x": ["a.py:1", "b.py:1"]}
    assert pointers == {"y": ["a.py:2"], "long name": ["b.py:2"], "z": ["b.py:3"]}
