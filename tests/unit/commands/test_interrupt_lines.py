"""Issue 29 review: the line a signal leaves says what is true of the report and its
files, whenever the signal came; one in the first milliseconds is loaderprof's line
too, and one after the last line leaves the run's own code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeRunner
from loaderprof.cli import _run
from loaderprof.commands.common import Outputs, interrupted_words

DATASET = "loaderprof.examples:CheapDataset"
FILES = ["out.json", "out.md"]


@pytest.mark.parametrize(
    ("complete", "written", "when", "line"),
    [
        (True, FILES, "after", "after the report was written (out.json, out.md)"),
        (True, FILES, "writing", "while the report was written; it is complete (out.json, out.md)"),
        (True, FILES, "before", "; the complete report was written first (out.json, out.md)"),
        (True, [], "after", "after the report was printed"),
        (False, FILES, "before", "; partial report written to out.json, out.md"),
        (False, [], None, ""),
    ],
)
def test_the_line_says_what_is_true_of_the_report_and_its_files(
    complete: bool, written: list[str], when: str | None, line: str
) -> None:
    got = interrupted_words("SIGTERM", complete, written, when)
    sep = "" if line[:1] in ";" else " "
    assert got == f"loaderprof: interrupted by SIGTERM{sep}{line}"
    # A complete report is never called partial, whenever the signal came.
    assert ("partial" in got) == (not complete and bool(written))


@pytest.fixture
def handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_a_signal_after_every_output_was_written_says_so_not_partial(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    handlers: None,
) -> None:
    runner = FakeRunner()
    monkeypatch.setattr("loaderprof.comparing.scheduler.TemplateRunner", lambda: runner)
    real = Outputs.write

    def write_then_signal(self: Outputs, report: Any, **kw: Any) -> bool:
        ok = real(self, report, **kw)
        os.kill(os.getpid(), signal.SIGTERM)  # once every file is written
        return ok

    monkeypatch.setattr(Outputs, "write", write_then_signal)
    # A path longer than a console is wide: the line must still be one (a CI log).
    where = tmp_path / ("a-folder-whose-name-is-long-" * 3)
    where.mkdir()
    out, md = where / "out.json", where / "out.md"
    argv = ["compare", DATASET, "--trials", "2", "--epochs", "3", "--json", str(out)]
    code = _run([*argv, "--markdown", str(md), "-q"], debug=False)
    err = capsys.readouterr().err.splitlines()
    assert code == 143
    assert json.loads(out.read_text())["complete"] is True and md.exists()
    assert err == [f"loaderprof: interrupted by SIGTERM after the report was written ({out}, {md})"]


_ENTRY = """
import os, signal, sys, time
sys.argv[0] = os.path.join("bin", "loaderprof")  # as the console script starts
import loaderprof.cli
os.kill(os.getpid(), signal.SIGTERM)  # before main: loaderprof's first lines only ran
time.sleep(10)
"""

_SETTLED = """
import os, signal, sys, time
sys.argv[0] = os.path.join("bin", "loaderprof")
from loaderprof.errors import INTERRUPTS
INTERRUPTS.install()
print("the run's last line", flush=True)
INTERRUPTS.settle(4)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(10)
"""


def _python(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )


def test_a_signal_before_main_is_one_line_and_its_exit_code() -> None:
    proc = _python(_ENTRY)
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr == "loaderprof: interrupted by SIGTERM\n"


def test_a_signal_after_the_last_line_leaves_the_runs_own_code() -> None:
    proc = _python(_SETTLED)
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout == "the run's last line\n" and proc.stderr == ""


def test_a_signal_before_anything_was_measured_names_the_files_it_kept_from_being() -> None:
    got = interrupted_words("SIGINT", False, [], "before", ["out.json", "out.md"])
    assert got == (
        "loaderprof: interrupted by SIGINT before anything was measured: no report written "
        "(out.json, out.md)"
    )
