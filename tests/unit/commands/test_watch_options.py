"""Issue 29, rest: watch checks every option before the command starts, and takes
--debug and -q from the options model as compare does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loaderprof.cli import _run
from loaderprof.errors import ExitCode


@pytest.mark.parametrize(
    "bad",
    [
        ["--kill-after", "nan"],
        ["--kill-after", "inf"],
        ["--kill-after", "-1"],
        ["--sample-interval", "nan"],
        ["--uss-interval", "inf"],
        ["--fail-on", "steady_epoch_ratio:<=0.9"],
        ["--json="],
        ["--trace", "/proc/t.json"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_bad_option_is_one_line_before_the_command_or_running_line(
    bad: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    # Each bad option last: the ones before it are all fine.
    argv = ["watch", "--markdown", str(tmp_path / "w.md"), *bad]
    code = _run([*argv, "--", sys.executable, "-c", f"open({str(ran)!r}, 'w')"], debug=False)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == ExitCode.USAGE and len(err) == 1, err
    assert err[0].startswith("loaderprof: error: ")
    assert any(a.rstrip("=") in err[0] for a in bad), err[0]
    assert not ran.exists(), "the command ran before its options were checked"


def test_watch_takes_quiet_and_debug(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["watch", "-q", "--debug", "--", sys.executable, "-c", "pass"], debug=True) == 0
    assert "loaderprof watch: running" not in capsys.readouterr().err
    assert _run(["watch", "--", sys.executable, "-c", "pass"], debug=False) == 0
    assert "loaderprof watch: running" in capsys.readouterr().err


def test_watch_fail_on_help_names_no_option_watch_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _run(["watch", "--help"], debug=False) == 0
    out = capsys.readouterr().out
    assert "--fail-on" in out and "finding:ID" in out
    assert "--baseline" not in out
