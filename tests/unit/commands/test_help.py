"""`--help` at 80 columns: the options most runs need first, then examples-led prose,
no type placeholders (`--verbose <bool>`), sentences whole, and nothing heavy imported."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys

import pytest
import typer

from loaderprof.commands.app import app

COMMANDS = ("compare", "check", "sweep", "watch", "report", "diff", "plan")
# Every --help rendered in one fresh interpreter, which then names the heavy modules
# it imported: --help must start instantly.
_SCRIPT = """
import contextlib, io, json, sys
from loaderprof.cli import main
out = {}
for argv in [["--help"]] + [[c, "--help"] for c in sys.argv[1:]]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main(argv)
        except SystemExit as e:
            assert e.code == 0, (argv, e.code)
    out[" ".join(argv)] = buf.getvalue()
out["heavy"] = [m for m in ("torch", "pandas", "numpy", "scipy") if m in sys.modules]
print(json.dumps(out))
"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A type placeholder as typer prints one: <bool>, <float>, <list[str]>, <path>.
PLACEHOLDER = re.compile(r"<[a-z][a-z_\[\]|, ]*>")


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "GITHUB_ACTIONS")}
    env.update({"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"})
    env.pop("TERMINAL_WIDTH", None)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *COMMANDS],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, str] = json.loads(proc.stdout)
    return {k: ANSI.sub("", v) if isinstance(v, str) else v for k, v in out.items()}


def _panel(text: str, title: str) -> list[str]:
    """The option names of one help panel, in order."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"╭─ {title} "))
    names = []
    for ln in lines[start + 1 :]:
        if ln.startswith("╰"):
            return names
        m = re.match(r"│ (--[\w-]+)", ln)
        if m:
            names.append(m.group(1))
    raise AssertionError(f"panel {title} not closed")


def _titles(text: str) -> list[str]:
    return re.findall(r"^╭─ (.+?) ─", text, flags=re.MULTILINE)


def test_help_imports_nothing_heavy(helps: dict[str, str]) -> None:
    assert helps["heavy"] == []


@pytest.mark.parametrize("command", ["compare", "check"])
def test_compare_help_opens_with_the_options_most_runs_need(
    helps: dict[str, str], command: str
) -> None:
    text = helps[f"{command} --help"]
    assert _titles(text)[:3] == ["Arguments", "Options", "Loader"]
    assert _panel(text, "Options") == [
        "--arg",
        "--config",
        "--epochs",
        "--num-workers",
        "--batch-size",
        "--json",
        "--verbose",
        "--help",
    ]
    # The examples come before any panel, each on one line of its own.
    head = text[: text.index("╭─")]
    examples = [ln.strip() for ln in head.splitlines() if ln.strip().startswith("loaderprof ")]
    assert len(examples) >= 2
    assert all(ln.startswith(f"loaderprof {command} ") for ln in examples)
    # The rest is grouped below, the whole of the options still there.
    assert {"Measurement", "Statistics", "CI gates", "Outputs"} <= set(_titles(text))
    assert "--trial-timeout" in text and "--memory-budget" in text


def test_sweep_and_watch_open_with_their_own_essentials(helps: dict[str, str]) -> None:
    sweep = helps["sweep --help"]
    assert _panel(sweep, "Options")[:2] == ["--num-workers", "--arg"]
    assert "Examples:" in sweep[: sweep.index("╭─")]
    watch = helps["watch --help"]
    assert _panel(watch, "Options") == ["--json", "--help"]
    assert "loaderprof watch -- python train.py" in watch[: watch.index("╭─")]


def test_no_type_placeholders_anywhere(helps: dict[str, str]) -> None:
    for argv, text in helps.items():
        if argv == "heavy":
            continue
        assert PLACEHOLDER.findall(text) == [], argv
    compare = helps["compare --help"]
    # A flag shows no value; an option names its value.
    assert re.search(r"│ --verbose +-v +Show everything", compare)
    assert re.search(r"│ --epochs +N +Epochs per trial", compare)
    assert re.search(r"│   DATASET +Dataset as", compare)


def test_every_prose_paragraph_is_one_line_for_the_terminal_to_wrap() -> None:
    # A line break inside a docstring's sentence stays in typer's rich help, cutting the
    # sentence at any width other than the source's.
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        for paragraph in (command.help or "").split("\n\n"):
            if not paragraph.startswith(" ") and "\n  " not in paragraph:
                assert "\n" not in paragraph, (name, paragraph)


def test_the_top_level_lists_each_command_in_whole_sentences(helps: dict[str, str]) -> None:
    text = helps["--help"]
    rows = text[text.index("╭─ Commands") :].splitlines()[1:-1]
    cells = " ".join(ln.strip("│ ").strip() for ln in rows)
    flat = re.sub(r"\s+", " ", cells)
    assert (
        "check Run every lifecycle check: leaks, state carried across epochs, memory growth, "
        "copy-on-read, unsharded IterableDatasets, RNG carried in workers, /dev/shm."
    ) in flat
    # No line of a description ends early: the next line's first word would have fit.
    for line, after in itertools.pairwise(rows):
        if not after.startswith("│          "):
            continue
        text_end = len(line.rstrip(" │"))
        room = len(line) - 2  # the cell ends before the space and the border
        next_word = after.strip("│ ").split()[0]
        assert text_end + 1 + len(next_word) > room, (line, after)
