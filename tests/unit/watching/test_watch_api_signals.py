"""Issue 29, rest: `loaderprof.watch(...)` gives a Ctrl-C back to its caller once the
report is built, and runs off the main thread without touching signal handlers."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator

import pytest

import loaderprof

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.fixture
def default_sigint() -> Iterator[None]:
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_ctrl_c_to_the_caller_is_raised_after_the_report_is_built(
    default_sigint: None,
) -> None:
    sent: list[float] = []

    def tick(seconds: float) -> None:
        if not sent:
            sent.append(seconds)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt) as caught:
        loaderprof.watch(SLEEPER, on_tick=tick, kill_after=5)
    report = caught.value.report  # type: ignore[attr-defined]
    assert report.interrupted
    # The caller's handler is its own again.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_command_s_own_sigint_is_not_the_caller_s(default_sigint: None) -> None:
    # The command dies of SIGINT by itself: nothing came to this process.
    cmd = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGINT)"]
    report = loaderprof.watch(cmd)
    assert not report.interrupted and report.exit_code == 130


def test_off_the_main_thread_it_runs_without_signal_handlers() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    out: list[object] = []

    def work() -> None:
        try:
            out.append(loaderprof.watch([sys.executable, "-c", "pass"]))
        except BaseException as exc:  # the ValueError of signal.signal, before the fix
            out.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert len(out) == 1 and not isinstance(out[0], BaseException), out
    assert out[0].exit_code == 0  # type: ignore[attr-defined]
    assert {s: signal.getsignal(s) for s in before} == before
