"""The README's pointers into the repository stay true: every test, benchmark and
module file it names exists (a moved file would leave the manual pointing nowhere), and
its Architecture tree names every module the package has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A user's own test file in the pytest example, not one of ours.
EXAMPLES = {"tests/test_dataloader.py"}


def test_every_file_the_readme_names_exists() -> None:
    text = (ROOT / "README.md").read_text()
    named = set(
        re.findall(r"(?<![\w.])((?:tests|benchmarks|loaderprof)/[\w/.-]+\.(?:py|json))\b", text)
    )
    missing = sorted(p for p in named - EXAMPLES if not (ROOT / p).exists())
    assert named and not missing, missing


def _architecture() -> dict[str, str]:
    """The README's tree, by entry: {"commands/": its text, ...}; "" holds the top level."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Architecture\n", 1)[1]
    block = section.split("```\n", 2)[1]
    entries: dict[str, str] = {}
    head = ""
    for line in block.splitlines():
        if line and not line[0].isspace():
            first = line.split()[0]
            head = first if first.endswith("/") else ""
        entries[head] = entries.get(head, "") + line + "\n"
    return entries


def test_the_architecture_names_every_module_and_only_modules_there_are() -> None:
    package = ROOT / "loaderprof"
    entries = _architecture()
    folders = {
        f"{p.name}/" for p in package.iterdir() if p.is_dir() and not p.name.startswith("__")
    }
    assert set(entries) - {""} == folders, "a folder missing from the tree, or one that is gone"
    for head, body in entries.items():
        folder = package / head
        named = set()
        for prefix, name in re.findall(r"(?<![\w/])(?:(\w+)/)?(\w+\.py|_\w+/)", body):
            where = package / prefix if prefix else folder
            assert (where / name.rstrip("/")).exists(), f"{head or 'loaderprof/'} names {name}"
            if where == folder:
                named.add(name.rstrip("/"))
        there = {
            p.name
            for p in folder.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py")
            or (p.is_dir() and p.name.startswith("_") and p.name != "__pycache__")
        }
        assert there <= named, f"{head or 'loaderprof/'} leaves out {sorted(there - named)}"
