"""See NOTE [command arms]. `loaderprof compare -- COMMAND` on real training scripts
the tests write: both arms are the script itself, each trial a fresh run of it."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, assert_nothing_left, finish, run_cli, script_site

pytestmark = pytest.mark.e2e

# A plain loop whose workers open a 0.2 s resource lazily, and a second loader's pass
# after each epoch's (a validation pass, whose worker opens it too); it times its own
# epochs (the training step and that pass inside: NOTE [epoch of the training]) and
# writes them beside the arm it ran in.
LAZY = """
import sys, time
import torch
from torch.utils.data import DataLoader

# Its workers open a 0.2 s resource lazily: what persistence keeps.
from loaderprof.examples import LazyResourceDataset


if __name__ == "__main__":
    log, epochs = sys.argv[1], int(sys.argv[2])
    loader = DataLoader(LazyResourceDataset(n=64, dim=4), batch_size=8, num_workers=2)  # TRAIN
    other = DataLoader(LazyResourceDataset(n=64, dim=4), batch_size=32, num_workers=1)  # OTHER
    for epoch in range(epochs):
        t = time.perf_counter()
        for batch in loader:
            time.sleep(0.01)  # the training step
        for batch in other:  # its validation pass
            pass
        wall = time.perf_counter() - t
        with open(log, "a") as f:
            f.write(f"{loader.persistent_workers} {epoch} {wall}\\n")
"""


def _script(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source))
    return path


def _compare(tmp_path: Path, *args: str, argv: tuple[str, ...] = (), **kw: Any) -> Any:
    return run_cli("compare", *args, "--", sys.executable, str(tmp_path / "train.py"), *argv, **kw)


@pytest.fixture(scope="module")
def lazy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """One fixed-plan run of LAZY (2 trials a side, 3 epochs) with a gate that fails by
    construction and one that passes: the saving's test and the gates' read it (one
    run of a script that starts torch in every trial serves both)."""
    tmp_path = tmp_path_factory.mktemp("lazy")
    _script(tmp_path, LAZY)
    gates = ("--fail-on", "saved_s_per_epoch:>=5s", "--fail-on", "steady_epoch_ratio:<=0.9")
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    args = ("--trials", "2", "--epochs", "3", *gates, "--json", str(out), "--markdown", str(md))
    run = _compare(tmp_path, *args, argv=(str(tmp_path / "clock.txt"), "8"), env={"COLUMNS": "80"})
    return run, tmp_path


def test_a_lazy_resource_enables_with_a_saving_close_to_the_scripts_own_clock(
    lazy_run: tuple[Any, Path],
) -> None:
    run, tmp_path = lazy_run
    log, out = tmp_path / "clock.txt", tmp_path / "r.json"
    assert run.returncode == 1, run.stderr  # its failing gate (the next test)
    report = json.loads(out.read_text())
    arms = [t["arm"] for t in report["trials"]]
    assert len(arms) == 4 and arms[0] == arms[3] != arms[1] == arms[2]  # A B B A
    assert all(t["stopped"] and len(t["epochs"]) == 3 for t in report["trials"])
    main = report["trials"][0]["main"]
    assert main["site"].endswith(script_site(tmp_path, "# TRAIN").rsplit("/", 1)[1])
    assert main["persistent_asked"] is False and main["num_workers"] == 2
    assert main["setting"] is None  # the DataLoader's own flag
    # Its epochs hold the second loader's pass (NOTE [epoch of the training]).
    other = script_site(tmp_path, "# OTHER").rsplit("/", 1)[1]
    assert len(main["others"]) == 1 and main["others"][0].endswith(other)
    assert report["verdict"]["recommendation"] == "enable"
    # The script's own clock: its steady epochs (each trial writes epochs 0, 1, 2,
    # stopped at its 4th epoch's iter()). Both loaders' savings are in it: the second's
    # alone would read about half.
    rows = [ln.split() for ln in log.read_text().splitlines()]
    own = {
        arm: statistics.median(float(w) for p, e, w in rows if p == arm and int(e) >= 1)
        for arm in ("True", "False")
    }
    ratio = report["saving"]["saved_s"] / (own["False"] - own["True"])
    assert 0.8 < ratio < 1.25, (report["saving"], own)
    low, high = report["saving"]["low_s"], report["saving"]["high_s"]
    assert 0 < low <= report["saving"]["saved_s"] <= high
    for line in run.stdout.splitlines():
        assert len(line) <= 80, line
    assert "saving per steady epoch" in run.stdout and "95 % CI" in run.stdout
    assert "plan: 3 epochs × 2 trials per arm\n" in run.stdout


def test_the_adaptive_plan_stops_at_a_look_once_the_saving_is_decided(tmp_path: Path) -> None:
    # --trials auto is the default: compare's looks (2, 3, 4, 6 per arm) and stop rule.
    # Its first look, at 99.4 % with 2 trials per arm and Welch's 1-2 degrees of
    # freedom, settled in 2 of 6 runs of this script (the rest at the second look).
    _script(tmp_path, LAZY)
    out = tmp_path / "r.json"
    run = _compare(tmp_path, "--json", str(out), argv=(str(tmp_path / "c.txt"), "8"))
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    plan = report["plan"]
    k, look = plan["trials_per_arm"], plan["looks_taken"]
    assert plan["mode"] == "adaptive" and plan["settled"] and k < plan["max_trials"] == 6
    assert len(report["trials"]) == 2 * k and k == [2, 3, 4][look - 1]
    assert report["verdict"]["recommendation"] == "enable"
    # Each look's level is stricter than 95 % (alpha spent over the looks).
    assert report["saving"]["confidence"] == plan["confidence"] > 0.95
    words = f"plan: 3 epochs × {k} trials per arm (adaptive: settled at look {look} of 4)"
    assert words in run.stdout
    assert report["tool"]["name"] == "loaderprof" and report["environment"]["python"]


def test_a_failing_gate_exits_as_compares_and_report_shows_the_screen_again(
    lazy_run: tuple[Any, Path],
) -> None:
    run, tmp_path = lazy_run
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    assert run.returncode == 1, run.stderr
    assert run.stderr.splitlines()[-1] == "loaderprof: gate failed: saved_s_per_epoch:>=5s"
    assert "Traceback" not in run.stderr
    report = json.loads(out.read_text())
    assert [g["status"] for g in report["gates"]] == ["fail", "pass"]
    assert report["gate_status"] == "fail" and report["plan"]["mode"] == "fixed"
    assert "Gates: FAIL" in run.stdout and "fixed plan" not in run.stdout
    assert "```text" in md.read_text() and "Gates: FAIL" in md.read_text()
    again = run_cli("report", str(out), env={"COLUMNS": "80"})
    assert again.returncode == 0, again.stderr
    assert again.stdout == run.stdout


def test_loader_site_switches_one_loader_and_times_it(tmp_path: Path) -> None:
    _script(tmp_path, LAZY)
    site = script_site(tmp_path, "# OTHER")
    out = tmp_path / "r.json"
    run = _compare(
        tmp_path,
        "--trials",
        "1",
        "--epochs",
        "2",
        "--loader-site",
        site,
        "--json",
        str(out),
        argv=(str(tmp_path / "clock.txt"), "6"),
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert {t["main"]["site"].rsplit(":", 1)[1] for t in report["trials"]} == {
        site.rsplit(":", 1)[1]
    }
    # The train loader kept the script's setting in both arms.
    rows = [ln.split() for ln in (tmp_path / "clock.txt").read_text().splitlines()]
    assert {p for p, _, _ in rows} == {"False"}
    assert "one trial" in run.stdout


REBUILT = """
import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.arange(64.0))
for epoch in range(6):
    loader = DataLoader(data, batch_size=8, num_workers=2)  # REBUILT
    for batch in loader:
        pass
"""


def test_a_loader_rebuilt_every_epoch_has_nothing_to_compare(tmp_path: Path) -> None:
    _script(tmp_path, REBUILT)
    out = tmp_path / "r.json"
    run = _compare(tmp_path, "--json", str(out))
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert len(report["trials"]) == 1 and report["verdict"] is None
    assert "built anew every epoch" in report["nothing_to_compare"]
    line = script_site(tmp_path, "# REBUILT").rsplit(":", 1)[1]
    assert report["site"].endswith(f"train.py:{line}")
    assert "nothing to compare" in run.stdout
    assert f"change the line: {report['site']}" in run.stdout


def test_no_workers_has_nothing_to_compare(tmp_path: Path) -> None:
    _script(tmp_path, REBUILT.replace("num_workers=2", "num_workers=0"))
    run = _compare(tmp_path)
    assert run.returncode == 0, run.stderr
    assert "num_workers=0" in run.stdout


ARGV = """
import sys
if len(sys.argv) < 2:
    sys.exit("usage: train.py DATA_DIR (the script's own error)")
"""


def test_a_script_failing_on_its_own_is_its_error_exit_3(tmp_path: Path) -> None:
    _script(tmp_path, ARGV)
    run = _compare(tmp_path)
    assert run.returncode == 3
    assert "the script's own error" in run.stderr
    (line,) = run.error_lines()
    assert line.startswith("loaderprof: error: the command exited with status 1 in trial 1")
    assert "Traceback" not in run.stderr


# Runs its loop once; every later run fails ("exit": as a script whose data went away)
# or runs one epoch only ("short": a run unlike the first).
FAILS_LATER = """
import os, sys
from torch.utils.data import DataLoader
from loaderprof.examples import LazyResourceDataset

if __name__ == "__main__":
    count, epochs, later = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    runs = int(open(count).read()) if os.path.exists(count) else 0
    with open(count, "w") as f:
        f.write(str(runs + 1))
    if runs and later == "exit":
        sys.exit("the data mount is gone (the script's own error)")
    if runs:
        epochs = 1
    loader = DataLoader(LazyResourceDataset(n=32, dim=4), batch_size=8, num_workers=2)
    for epoch in range(epochs):
        for batch in loader:
            pass
"""


@pytest.mark.parametrize(
    ("later", "words"),
    [
        ("exit", "the command exited with status 1 in trial 2"),
        ("short", "the command ended after 1 epoch(s) of its main loader in trial 2"),
    ],
)
def test_a_later_trials_failure_keeps_the_trials_measured(
    tmp_path: Path, later: str, words: str
) -> None:
    _script(tmp_path, FAILS_LATER)
    out = tmp_path / "r.json"
    argv = (str(tmp_path / "count"), "50", later)
    gate = ("--fail-on", "saved_s_per_epoch:>=1ms")
    run = _compare(tmp_path, "--trials", "2", "--epochs", "2", *gate, "--json", str(out), argv=argv)
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr
    assert later == "short" or "the script's own error" in run.stderr
    (line,) = run.error_lines()
    assert line.startswith(f"loaderprof: error: {words}")
    report = json.loads(out.read_text())
    assert len(report["trials"]) == 1 and report["complete"] is False
    assert report["error"] == line.removeprefix("loaderprof: error: ")
    assert report["plan"]["stopped"] == (
        "stopped by a failure after 1 persistent and 0 non-persistent of 2 planned trials per arm"
    )
    # A run cut short is reported, not gated.
    assert report["gates"] == [] and report["gate_status"] is None
    assert "1 trial" in run.stdout
    assert_nothing_left()


def test_ctrl_c_before_the_first_trial_ends_writes_nothing(tmp_path: Path) -> None:
    _script(tmp_path, LAZY)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "loaderprof", "compare", "--json", str(out), "--epochs", "40"]
    cmd += ["--", sys.executable, str(tmp_path / "train.py"), str(tmp_path / "c.txt"), "50"]
    pipe = subprocess.PIPE
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=pipe, stderr=pipe, text=True)
    assert proc.stderr is not None
    seen = [proc.stderr.readline()]
    assert "trial 1/" in seen[0], seen
    time.sleep(1.5)  # inside trial 1
    proc.send_signal(signal.SIGINT)
    out_text, err = finish(proc, 60)
    assert proc.returncode == 130, "".join(seen) + err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("loaderprof: ")]
    assert line == (
        f"loaderprof: interrupted by SIGINT before anything was measured: no report written ({out})"
    )
    assert not out.exists() and out_text == ""
    assert_nothing_left()


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("--",), 2, "no command after --"),
        (("--", "no-such-command-xyz"), 2, "command not found: no-such-command-xyz"),
        (("--epochs", "0", "--", sys.executable, "-c", "pass"), 2, "--epochs 0"),
        (("--", sys.executable, "-c", "import time; time.sleep(0.2)"), 2, "never built"),
        (("-w", "3", "--", sys.executable, "-c", "pass"), 2, "does not apply"),
        (("--fail-on", "peak_worker_uss:<=1GiB", "--", "python"), 2, "does not measure"),
        (("--baseline", "no-such-b.json", "--", "python"), 2, "report not found"),
        (("--trials", "two", "--", "python"), 2, "--trials 'two'"),
    ],
)
def test_bad_input_is_one_line(args: tuple[str, ...], code: int, words: str) -> None:
    run = run_cli("compare", *args)
    assert run.returncode == code, run.stderr
    assert len(run.error_lines()) == 1 and words in run.error_lines()[0], run.stderr
    assert "Traceback" not in run.stderr


def test_ctrl_c_mid_trial_keeps_the_trials_measured(tmp_path: Path) -> None:
    _script(tmp_path, LAZY)
    saved = tmp_path / "cut.json"
    cmd = [sys.executable, "-m", "loaderprof", "compare", "--trials", "3", "--epochs", "3"]
    cmd += ["--json", str(saved)]
    cmd += ["--", sys.executable, str(tmp_path / "train.py"), str(tmp_path / "c.txt"), "50"]
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "trial 3/6" in line:
            break
    time.sleep(1.5)  # inside trial 3
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc, 60)
    assert proc.returncode == 130, "".join(seen) + err
    # The screen counts the trials; the last line says, as compare's, where they went.
    assert "interrupted: 2 trial(s) measured" in out
    assert f"loaderprof: interrupted by SIGINT; partial report written to {saved}" in err
    assert json.loads(saved.read_text())["complete"] is False
    assert "non-persistent" in out and "partial" in out
    assert_nothing_left()
