"""The GitHub Action's one script run as the runner would (action.yml's shape is
tests/unit/commands/test_action_yml.py).

action.yml's shell steps all call .github/loaderprof-action.sh, which takes its
inputs from INPUT_* variables; here it runs without GitHub, on a fake runner
environment (GITHUB_EVENT_NAME, GITHUB_REF, GITHUB_STEP_SUMMARY, GITHUB_OUTPUT).
Two runs are real (a default-branch push that saves the baseline, then a pull
request gated against it); the rest use a stand-in loaderprof that records its
arguments. `install` runs with a stand-in python, so pip never reaches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, assert_nothing_left

SCRIPT = ROOT / ".github" / "loaderprof-action.sh"
DATASET = "loaderprof.examples:CheapDataset"
TINY = "--epochs 2 --trials 1 --num-workers 1 -q"


def _env_name(inp: str) -> str:
    return "INPUT_" + inp.upper().replace("-", "_")


# --- the script, on a fake runner ---------------------------------------------------


@dataclass
class Result:
    returncode: int
    stderr: str
    outputs: dict[str, str]
    summary: str


def _run_script(
    cwd: Path, command: str, inputs: dict[str, str], runner: dict[str, str], timeout: float = 120
) -> Result:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "RUNNER_"))
    }
    summary, outputs = cwd / "step-summary.md", cwd / "github-output.txt"
    summary.write_text("earlier step\n")
    outputs.write_text("")
    env.update(
        {
            "COLUMNS": "160",
            "PYTHONWARNINGS": "ignore",
            "LOADERPROF_PYTHON": sys.executable,
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(outputs),
            **{_env_name(k): v for k, v in inputs.items()},
            **runner,
        }
    )
    proc = subprocess.run(
        ["bash", str(SCRIPT), command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert_nothing_left()
    return Result(proc.returncode, proc.stderr, _outputs(outputs.read_text()), summary.read_text())


def _outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as GitHub reads it: `NAME<<DELIM`, the value's lines, `DELIM`."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        name, sep, delim = line.partition("<<")
        assert sep, f"not the delimiter form: {line!r}"
        value = []
        for v in lines:
            if v == delim:
                break
            value.append(v)
        out[name] = "\n".join(value)
    return out


PUSH = {
    "GITHUB_EVENT_NAME": "push",
    "GITHUB_REF": "refs/heads/main",
    "INPUT_DEFAULT_BRANCH": "main",
}
PULL = {
    "GITHUB_EVENT_NAME": "pull_request",
    "GITHUB_REF": "refs/pull/7/merge",
    "INPUT_DEFAULT_BRANCH": "main",
}

# A stand-in for `loaderprof`: records its arguments, writes what it is asked to,
# exits with $FAKE_RC (writing nothing from 2 on, like a run that failed early).
FAKE = """\
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "summary": os.environ.get("GITHUB_STEP_SUMMARY")}) + "\\n")
if args[-1] == "--help":
    print("--json <str>  Write the JSON report here.")
    print("--html <path>  Write an HTML report." if os.environ.get("FAKE_HTML") else "")
    sys.exit(0)
rc = int(os.environ.get("FAKE_RC", "0"))
if rc < 2:
    for flag in ("--json", "--junit", "--markdown", "--html", "--save-baseline"):
        if flag in args:
            with open(args[args.index(flag) + 1], "w") as f:
                f.write("### fake " + flag + "\\n" if flag == "--markdown" else
                        json.dumps({"gate_status": "fail" if rc else "pass"}))
sys.exit(rc)
"""


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, str]:
    exe = tmp_path / "fake-loaderprof"
    exe.write_text(f"#!{sys.executable}\n{FAKE}")
    exe.chmod(0o755)
    return {"LOADERPROF_BIN": str(exe), "FAKE_LOG": str(tmp_path / "fake.log")}


def _calls(fake: dict[str, str]) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in Path(fake["FAKE_LOG"]).read_text().splitlines()]


@pytest.mark.e2e
def test_run_builds_compare_from_the_inputs(tmp_path: Path, fake: dict[str, str]) -> None:
    (tmp_path / "gates.toml").write_text('[gates]\nsteady_epoch_ratio = "<=0.95"\n')
    inputs = {
        "dataset": "data/my ds.py:Make",
        "args": "--arg 'name=a b' --epochs 3",
        "gates": "gates.toml  # the file\nfirst_batch_ratio:<=1.1\n# finding:stale-worker-state\n",
        "baseline-gates": "first_batch_s:+10%",
        "output-dir": "out",
    }
    run = _run_script(tmp_path, "run", inputs, {**PULL, **fake})
    assert run.returncode == 0, run.stderr
    help_call, compare = _calls(fake)
    assert help_call["args"] == ["compare", "--help"]
    assert compare["args"] == [
        "compare",
        "data/my ds.py:Make",
        "--arg",
        "name=a b",
        "--epochs",
        "3",
        "--gates",
        "gates.toml",
        "--fail-on",
        "first_batch_ratio:<=1.1",
        # No baseline was restored: no --baseline, no relative gates, no --html
        # (this loaderprof's --help does not list it).
        "--json",
        "out/loaderprof.json",
        "--junit",
        "out/loaderprof.xml",
        "--markdown",
        "out/loaderprof.md",
    ]
    # The script writes the summary, loaderprof must not as well.
    assert compare["summary"] is None
    assert run.summary == "earlier step\n### fake --markdown\n\n"
    assert run.outputs["baseline-used"] == "false"
    assert run.outputs["baseline-saved"] == "false"
    assert run.outputs["gate-status"] == "pass"
    assert run.outputs["html"] == ""


@pytest.mark.e2e
def test_raw_gate_options_html_and_a_forced_save(tmp_path: Path, fake: dict[str, str]) -> None:
    baseline = tmp_path / "b" / "base.json"
    baseline.parent.mkdir()
    baseline.write_text("{}")
    inputs = {
        "dataset": "m:D",
        "gates": "--fail-on steady_epoch_ratio:<=0.9 --strict",
        "baseline-gates": "steady_epoch_s:+5%",
        "baseline-path": str(baseline),
        "save-baseline": "true",
    }
    run = _run_script(tmp_path, "run", inputs, {**PULL, **fake, "FAKE_HTML": "1", "FAKE_RC": "1"})
    assert run.returncode == 1
    args = _calls(fake)[1]["args"]
    new = str(baseline.parent / ".loaderprof-baseline-new.json")
    out = "loaderprof-report"
    assert args[2:] == [
        "--fail-on",
        "steady_epoch_ratio:<=0.9",
        "--strict",
        "--baseline",
        str(baseline),
        "--fail-on",
        "steady_epoch_s:+5%",
        "--json",
        f"{out}/loaderprof.json",
        "--junit",
        f"{out}/loaderprof.xml",
        "--markdown",
        f"{out}/loaderprof.md",
        "--html",
        f"{out}/loaderprof.html",
        "--save-baseline",
        new,
    ]
    assert (tmp_path / out / "loaderprof.html").exists()
    # A failed gate is still a complete run: its report becomes the baseline.
    assert json.loads(baseline.read_text()) == {"gate_status": "fail"}
    assert not Path(new).exists()
    assert run.outputs["exit-code"] == "1"
    assert run.outputs["gate-status"] == "fail"
    assert run.outputs["baseline-saved"] == "true"


@pytest.mark.e2e
def test_a_failed_run_keeps_the_old_baseline(tmp_path: Path, fake: dict[str, str]) -> None:
    baseline = tmp_path / ".loaderprof" / "baseline.json"
    baseline.parent.mkdir()
    baseline.write_text('{"old": true}')
    run = _run_script(tmp_path, "run", {"dataset": "m:D"}, {**PUSH, **fake, "FAKE_RC": "3"})
    assert run.returncode == 3
    assert baseline.read_text() == '{"old": true}'
    assert run.outputs["baseline-saved"] == "false"
    assert run.outputs["gate-status"] == "none"
    assert "**compare exited with 3 before writing its report**" in run.summary


@pytest.mark.e2e
def test_usage_errors(tmp_path: Path, fake: dict[str, str]) -> None:
    run = _run_script(tmp_path, "run", {"dataset": ""}, fake)
    assert run.returncode == 2 and "the dataset input is required" in run.stderr
    run = _run_script(tmp_path, "run", {"dataset": "m:D", "save-baseline": "maybe"}, fake)
    assert run.returncode == 2 and "save-baseline must be auto, true or false" in run.stderr
    run = _run_script(tmp_path, "run", {"dataset": "m:D", "args": "--arg 'x"}, fake)
    assert run.returncode == 2 and "unbalanced quotes" in run.stderr
    run = _run_script(tmp_path, "nonsense", {}, fake)
    assert run.returncode == 2 and "usage:" in run.stderr
    assert not Path(fake["FAKE_LOG"]).exists(), "loaderprof must not have run"


@pytest.mark.e2e
def test_install_pip_installs_torch_then_loaderprof_then_the_project(tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    python = tmp_path / "python"
    # pip calls are logged; the script's own `python -c` word splitting runs for real.
    python.write_text(
        f'#!/bin/sh\nif [ "$1" = -m ]; then echo "$*" >> "{log}"\n'
        f'else exec "{sys.executable}" "$@"; fi\n'
    )
    python.chmod(0o755)
    inputs = {
        "torch-spec": "torch==2.5.1 torchvision",
        "extra-index-url": "https://download.pytorch.org/whl/cpu",
        "loaderprof": "/path/to/action",
        "install": "-e '.[data]'",
    }
    run = _run_script(tmp_path, "install", inputs, {"LOADERPROF_PYTHON": str(python)})
    assert run.returncode == 0, run.stderr
    pip = "-m pip install --disable-pip-version-check --extra-index-url "
    pip += "https://download.pytorch.org/whl/cpu"
    assert log.read_text().splitlines() == [
        f"{pip} torch==2.5.1 torchvision",
        f"{pip} /path/to/action",
        f"{pip} -e .[data]",
    ]
    log.unlink()
    bare = {"torch-spec": "", "loaderprof": "loaderprof==0.1.0"}
    run = _run_script(tmp_path, "install", bare, {"LOADERPROF_PYTHON": str(python)})
    assert run.returncode == 0, run.stderr
    assert log.read_text() == "-m pip install --disable-pip-version-check loaderprof==0.1.0\n"


# --- two real runs: the default branch saves a baseline, a pull request uses it -------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("workspace")
    (ws / "gates.toml").write_text('[gates]\npeak_worker_uss = "<=4GiB"\n')
    return ws


@pytest.fixture(scope="module")
def pushed(workspace: Path) -> Result:
    inputs = {"dataset": DATASET, "args": TINY, "gates": "gates.toml"}
    return _run_script(workspace, "run", inputs, PUSH)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.e2e
def test_default_branch_push_saves_the_baseline(workspace: Path, pushed: Result) -> None:
    assert pushed.returncode == 0, pushed.stderr
    out = workspace / "loaderprof-report"
    report = _load(out / "loaderprof.json")
    assert report["gate_status"] == "pass" and report["complete"] is True
    assert "baseline" not in report or not report["baseline"]
    saved = _load(workspace / ".loaderprof" / "baseline.json")
    assert saved["environment"] == report["environment"]
    assert pushed.outputs["baseline-saved"] == "true"
    assert pushed.outputs["baseline-used"] == "false"
    md = (out / "loaderprof.md").read_text()
    assert md.startswith(f"### loaderprof: `{DATASET}`")
    assert pushed.summary == f"earlier step\n{md}\n"


@pytest.mark.e2e
def test_pull_request_gates_against_the_baseline(workspace: Path, pushed: Result) -> None:
    assert pushed.returncode == 0, pushed.stderr
    baseline = workspace / ".loaderprof" / "baseline.json"
    before = baseline.read_bytes()
    inputs = {
        "dataset": DATASET,
        "args": TINY,
        # Every worker start takes more than a microsecond: this gate fails for sure. (A
        # memory gate cannot fail here: one trial per arm reads memory once.)
        "gates": "gates.toml non_persistent.worker_startup_s:<=1us",
        "baseline-gates": "steady_epoch_s:+1000%",
    }
    run = _run_script(workspace, "run", inputs, PULL)
    assert run.returncode == 1, run.stderr
    assert "gate failed: non_persistent.worker_startup_s:<=1us" in run.stderr
    assert baseline.read_bytes() == before, "a pull request never replaces the baseline"
    out = workspace / "loaderprof-report"
    report = _load(out / "loaderprof.json")
    assert report["baseline"]["path"] == ".loaderprof/baseline.json"
    assert [g["metric"] for g in report["gates"]] == [
        "persistent.peak_worker_uss",
        "non_persistent.worker_startup_s",
        "persistent.steady_epoch_s",
    ]
    assert report["gate_status"] == "fail"
    suite = ET.parse(out / "loaderprof.xml").getroot()
    cases = [c for c in suite.iter("testcase") if c.get("classname") == "loaderprof.gates"]
    assert len(cases) == 3 and suite.get("failures") == "1"
    md = (out / "loaderprof.md").read_text()
    assert "#### Gates: FAIL" in md
    assert run.summary == f"earlier step\n{md}\n", "the Markdown, once"
    if run.outputs["html"]:
        assert (workspace / run.outputs["html"]).stat().st_size > 0
    assert run.outputs == {
        "exit-code": "1",
        "gate-status": "fail",
        "report-dir": "loaderprof-report",
        "json": "loaderprof-report/loaderprof.json",
        "markdown": "loaderprof-report/loaderprof.md",
        "junit": "loaderprof-report/loaderprof.xml",
        "html": run.outputs["html"],
        "baseline-used": "true",
        "baseline-saved": "false",
        "baseline-path": ".loaderprof/baseline.json",
    }
