"""Issue 29: a failed write loses nothing else, a path that cannot take a file is
refused before any trial, a report of the wrong kind is one line, and a partial
report says what ran."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import loaderprof
from fakes import FakeRunner
from loaderprof.cli import _run
from loaderprof.comparing.scheduler import trial_order
from loaderprof.errors import ExitCode
from loaderprof.report.json_report import to_json

DATASET = "loaderprof.examples:CheapDataset"


def _saved(tmp_path: Path, **kw: Any) -> Path:
    path = tmp_path / "saved.json"
    path.write_text(
        to_json(loaderprof.compare(DATASET, trials=2, epochs=3, runner=FakeRunner(**kw)))
    )
    return path


def _errors(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    out, err = capsys.readouterr()
    return out, [ln for ln in err.splitlines() if ln.strip()]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_is_one_line_the_other_outputs_are_written_and_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = _saved(tmp_path)
    md = tmp_path / "r.md"
    code = _run(["report", str(saved), "--json", "/dev/full", "--markdown", str(md)], debug=False)
    out, err = _errors(capsys)
    assert code == ExitCode.NOT_SAVED == 4
    assert err == ["loaderprof: error: cannot write /dev/full: No space left on device"]
    # The tables were printed, and the other output written, all the same.
    assert "steady epoch" in out
    assert md.read_text().startswith("#")


def _refused(capsys: pytest.CaptureFixture[str], target: str, monkeypatch: Any) -> str:
    runner = FakeRunner()
    monkeypatch.setattr("loaderprof.comparing.scheduler.TemplateRunner", lambda: runner)
    code = _run(["compare", DATASET, "--trials", "1", "--json", target], debug=False)
    _, err = _errors(capsys)
    assert code == ExitCode.USAGE and len(err) == 1, err
    assert not runner.calls, "a trial ran before the output was refused"
    assert err[0].startswith(f"loaderprof: error: cannot write {target}")
    return err[0]


def test_a_path_under_proc_is_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "kernel filesystem" in _refused(capsys, "/proc/r.json", monkeypatch)


def test_a_directory_is_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "is a directory" in _refused(capsys, str(tmp_path), monkeypatch)


def test_a_missing_directory_is_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(capsys, str(tmp_path / "no" / "r.json"), monkeypatch)
    assert "does not exist" in line


def test_a_read_only_directory_is_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("this user writes into a read-only directory (root)")
        assert "not writable" in _refused(capsys, str(ro / "r.json"), monkeypatch)
    finally:
        ro.chmod(0o700)


def test_a_full_filesystem_is_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.statvfs

    def full(path: Any) -> Any:
        fs = real(path)
        # Only the free-block counts matter to the check.
        return type("Full", (), {"f_bavail": 0, "f_bfree": 0, "f_frsize": fs.f_frsize})()

    monkeypatch.setattr("loaderprof.report.exporters.os.statvfs", full)
    line = _refused(capsys, str(tmp_path / "r.json"), monkeypatch)
    assert "is full" in line


WATCH_REPORT = {"kind": "watch", "schema_version": 1, "command": ["python", "train.py"]}


@pytest.mark.parametrize(
    "argv",
    [lambda w, c: ["diff", c, w], lambda w, c: ["diff", w, c]],
    ids=["diff-new", "diff-old"],
)
def test_a_report_of_the_wrong_kind_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: Callable[[str, str], list[str]]
) -> None:
    watch = tmp_path / "w.json"
    watch.write_text(json.dumps(WATCH_REPORT))
    saved = _saved(tmp_path)
    code = _run(argv(str(watch), str(saved)), debug=False)
    _, err = _errors(capsys)
    assert code == ExitCode.USAGE and len(err) == 1, err
    assert f"{watch} is a watch report (read it with loaderprof report)" in err[0]
    assert "reads compare" in err[0] and "__init__" not in err[0]


def test_a_watch_report_cut_short_is_one_line_from_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    watch = tmp_path / "w.json"
    watch.write_text(json.dumps(WATCH_REPORT))
    assert _run(["report", str(watch)], debug=False) == ExitCode.USAGE
    out, err = _errors(capsys)
    assert out == "" and len(err) == 1, err
    assert f"{watch} is not a valid loaderprof watch report" in err[0]


def test_an_interrupted_report_says_what_ran_of_its_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    timed = [p for p in trial_order(3, 0, memory=2) if p.role != "memory"]
    # Stopped in the first timed trial: no arm has a timed trial to its end.
    saved = _saved(tmp_path, interrupt={(timed[0].arm, timed[0].index)})
    assert _run(["report", str(saved)], debug=False) == 0
    out, _ = _errors(capsys)
    assert "interrupted after 0 of 2 planned trials per arm" in out
    steady = next(ln for ln in out.splitlines() if ln.startswith("steady epoch"))
    assert steady.split()[3:5] == ["not", "measured"] and "µs" not in steady


def test_an_interrupted_sweep_says_what_its_recommendation_rests_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rich.console import Console

    from loaderprof.comparing.sweep import SweepGrid, expand, run_sweep
    from loaderprof.config.run import RunConfig
    from loaderprof.report.sweep_console import sweep_table

    cfg = RunConfig(dataset=DATASET, trials=3, epochs=3)
    grid = SweepGrid.from_options({"num_workers": [0, 2]})
    points, _ = expand(grid)
    # The second round's first trial is stopped: one trial per configuration ran.
    stop = {(p.label, 1) for p in points}
    sweep = run_sweep(cfg, grid, runner=FakeRunner(interrupt=stop))
    console = Console(width=160, record=True)
    console.print(sweep_table(sweep))
    text = console.export_text()
    assert "3 trial(s) per configuration" not in text
    assert "interrupted after 1 of 3 planned trials per configuration" in text
    assert f"based on 1 of 3 planned trials per configuration and {len(points)} of" in text


# A library that warns while a command runs (matplotlib did, with --html).
_WARNS = """
import sys, warnings
import loaderprof.cli as cli
real = cli._run
def run(args, *, debug):
    warnings.warn("a library's warning", UserWarning)
    return real(args, debug=debug)
cli._run = run
sys.argv = ["loaderprof", *sys.argv[1:]]
cli.main()
"""


@pytest.mark.parametrize(("flags", "shown"), [((), False), (("-W", "default"), True)])
def test_no_library_warning_reaches_the_terminal_unless_asked(
    tmp_path: Path, flags: tuple[str, ...], shown: bool
) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run(
        [sys.executable, *flags, "-c", _WARNS, "report", str(_saved(tmp_path))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert ("a library's warning" in proc.stderr) is shown, proc.stderr


@pytest.fixture
def interrupts() -> Any:
    import signal

    from loaderprof.errors import Interrupts

    old = {sig: signal.getsignal(sig) for sig in Interrupts.HANDLED}
    hook = sys.unraisablehook
    yield Interrupts().install()
    for sig, handler in old.items():
        signal.signal(sig, handler)
    sys.unraisablehook = hook


def _send(sig: int) -> None:
    import signal
    import time

    os.kill(os.getpid(), sig)
    time.sleep(0.01)  # the handler runs at the next bytecode; make sure there is one
    signal.getsignal(sig)


def test_a_signal_waits_for_the_end_of_a_teardown(interrupts: Any) -> None:
    import signal

    from loaderprof.errors import Interrupted

    done = []
    with pytest.raises(Interrupted) as caught, interrupts.held():
        _send(signal.SIGHUP)
        done.append("teardown")
    assert done == ["teardown"] and caught.value.exit_code == 129


def test_a_signal_in_a_trial_ends_it_and_one_while_it_unwinds_changes_nothing(
    interrupts: Any,
) -> None:
    import signal

    from loaderprof.errors import Interrupted, Measuring

    with Measuring(interrupts) as measuring:
        try:
            _send(signal.SIGTERM)
        finally:
            _send(signal.SIGINT)  # the cleanup is not cut short
    assert isinstance(measuring.interrupted, Interrupted)
    assert interrupts.exit_code() == 143
    # Measuring is over (analysis, writing): another signal ends the run at once.
    with pytest.raises(Interrupted):
        _send(signal.SIGINT)


def test_once_measured_a_first_signal_lets_the_writing_finish(interrupts: Any) -> None:
    import signal

    from loaderprof.errors import Measuring

    with Measuring(interrupts) as measuring:
        pass
    _send(signal.SIGHUP)  # no exception: what was measured is still written
    assert measuring.interrupted is None and interrupts.exit_code() == 129


def test_a_signal_while_a_finalizer_runs_is_not_lost(
    interrupts: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Raised inside a weakref callback, Python would print "Exception ignored" and run
    on as if no signal had come; it is raised again in the run's own code."""
    import gc
    import signal
    import time
    import weakref

    from loaderprof.errors import Interrupted

    class Thing:
        pass

    thing = Thing()
    seen = []
    ref = weakref.ref(thing, lambda _: (seen.append("finalizer"), _send(signal.SIGTERM)))
    with pytest.raises(Interrupted) as caught:
        del thing
        gc.collect()
        for _ in range(200):  # the run's own code: the signal is raised here
            time.sleep(0.01)
        seen.append("run went on")
    assert ref() is None and seen == ["finalizer"], seen
    assert caught.value.signum == signal.SIGTERM and interrupts.exit_code() == 143
    assert "Exception ignored" not in capsys.readouterr().err
