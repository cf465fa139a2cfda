from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import settings

# CI runs the same examples every time, so a failure there reproduces here.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
DATA = str(TESTS / "lp_testdata.py")

PR_SET_CHILD_SUBREAPER = 36


def requires(*modules: str) -> None:
    """Skip the test (or, at a module's top, the module) unless each module is
    installed: found, not imported. pytest.importorskip imports it in the test process,
    where Lightning or transformers cost seconds that the script's own run pays again."""
    for name in modules:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed", allow_module_level=True)


@pytest.fixture(scope="session", autouse=True)
def _subreaper() -> None:
    # Orphaned worker processes re-parent to the nearest subreaper; making
    # pytest one means any process a run leaves behind is our descendant.
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def leftover_processes(timeout: float = 3.0, spare: Collection[int] = ()) -> list[psutil.Process]:
    """Descendants still alive after a run (zombies reaped), waiting briefly; `spare`
    PIDs are not counted."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for child in psutil.Process().children(recursive=True):
            if child.pid in spare:
                continue
            try:
                if child.status() == psutil.STATUS_ZOMBIE:
                    child.wait(0)
                    continue
                alive.append(child)
            except (psutil.NoSuchProcess, psutil.TimeoutExpired):
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def err_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]

    def error_lines(self) -> list[str]:
        """The one-line errors loaderprof printed (`loaderprof: error: ...`)."""
        return [ln for ln in self.stderr.splitlines() if ln.startswith("loaderprof: error:")]


@pytest.fixture
def cli() -> Callable[..., Run]:
    return run_cli


def run_cli(
    *args: str,
    cwd: Path | str = ROOT,
    timeout: float = 240,
    env: dict[str, str] | None = None,
    spare: Collection[int] = (),
) -> Run:
    """Run the CLI; `spare`: PIDs of the test's own helpers (a CPU hog) that the check
    for leftovers leaves alone."""
    full_env = dict(os.environ)
    full_env.update({"COLUMNS": "160", "PYTHONWARNINGS": "ignore"})
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "loaderprof", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    run = Run(proc)
    assert_nothing_left(spare)
    return run


def assert_nothing_left(spare: Collection[int] = ()) -> None:
    """No process of the run outlives it; any that did is killed before the test fails."""
    left = leftover_processes(spare=spare)
    for p in left:
        p.kill()
    assert not left, f"processes left behind: {[p.pid for p in left]}"


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The process's stdout and stderr once it ends. `timeout` is the hang guard:
    past it the process and everything it left are killed and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        for p in leftover_processes(timeout=0):
            p.kill()
        pytest.fail(f"still running {timeout} s on (a hang); its stderr ends: {err[-2000:]}")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture(scope="session")
def lazy_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, dict[str, Any]]]:
    """One compare of the bundled lazy-resource example, shared by many tests."""
    out = tmp_path_factory.mktemp("lazy") / "report.json"
    run = run_cli(
        "compare",
        "--trials",
        "1",
        "loaderprof.examples:LazyResourceDataset",
        # 4 steady epochs per arm: the fewest with which a Mann-Whitney test
        # can reach p < 0.05 (exactly 2/70 when the arms do not overlap).
        "--epochs",
        "5",
        "--num-workers",
        "2",
        "--arg",
        "n=128",
        "--arg",
        "open_cost_s=0.2",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    yield run, load(out)


def watch_script(
    tmp_path: Path,
    source: str,
    *cli: str,
    argv: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> tuple[Run, dict[str, Any]]:
    """Write `source` as tmp_path/train.py, run `loaderprof watch [cli] -- python
    train.py [argv]`, and return the run and its JSON report, checked against the
    watch schema."""
    import jsonschema

    from loaderprof.report.json_report import load_schema

    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "w.json"
    run = run_cli(
        "watch", "--json", str(out), *cli, "--", sys.executable, str(script), *argv, env=env
    )
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema("watch"), cls=jsonschema.Draft202012Validator)
    return run, report


def script_site(tmp_path: Path, marker: str) -> str:
    """`file:line` of train.py's first line holding `marker`: the site watch must name."""
    lines = (tmp_path / "train.py").read_text().splitlines()
    return f"{tmp_path / 'train.py'}:{next(i for i, ln in enumerate(lines, 1) if marker in ln)}"
