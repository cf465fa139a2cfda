"""procfs's psutil fallback: PSS is reported as measured or not at all."""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

import psutil
import pytest

from loaderprof.inside import procfs

# What psutil's memory_full_info() returns where it measures no PSS (macOS).
_NoPss = namedtuple("_NoPss", "rss vms pfaults pageins uss")


def test_fallback_reads_the_current_process() -> None:
    mem = procfs.memory_psutil(os.getpid())
    assert mem is not None
    assert mem.rss > 0 and mem.uss > 0
    if hasattr(psutil.Process().memory_full_info(), "pss"):
        # Where psutil measures PSS (Linux) it is passed on, not replaced by the USS:
        # PSS counts the private pages plus a share of the shared ones.
        assert mem.pss is not None
        assert mem.uss <= mem.pss


def test_fallback_without_pss_reports_none_not_uss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        psutil.Process,
        "memory_full_info",
        lambda self: _NoPss(rss=300, vms=900, pfaults=0, pageins=0, uss=100),
    )
    assert procfs.memory_psutil(os.getpid()) == procfs.Mem(rss=300, uss=100, pss=None)
    # memory() takes the fallback where /proc has no smaps_rollup.
    monkeypatch.setattr(procfs, "_HAS_ROLLUP", False)
    assert procfs.memory(os.getpid()) == procfs.Mem(rss=300, uss=100, pss=None)


def test_fallback_for_a_process_that_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(self: psutil.Process) -> None:
        raise psutil.NoSuchProcess(self.pid)

    monkeypatch.setattr(psutil.Process, "memory_full_info", gone)
    assert procfs.memory_psutil(os.getpid()) is None


@pytest.mark.skipif(not procfs._HAS_ROLLUP, reason="no /proc/PID/smaps_rollup here")
def test_rollup_measures_pss_between_uss_and_rss() -> None:
    rollup = procfs.memory(os.getpid())
    assert rollup is not None and rollup.pss is not None
    assert rollup.uss <= rollup.pss <= rollup.rss


FORKSERVER_RUN = """
import multiprocessing, os, time
from loaderprof.inside import procfs

def burn():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass

if __name__ == "__main__":
    worker = multiprocessing.get_context("forkserver").Process(target=burn)
    worker.start()
    worker.join(60)
    servers = procfs.forkservers(os.getpid())
    print(worker.exitcode, len(servers), procfs.forkserver_cpu_s(os.getpid()))
"""


def test_a_forkservers_workers_cpu_is_read_before_it_is_orphaned(tmp_path: Path) -> None:
    """A forkserver is its process's child, the workers the forkserver's: what they ran
    reaches the forkserver's reaped-children time, never the process's `os.times()`.
    It is read from the forkserver's subtree (measure/contention.py counts it). In a
    process of its own: the forkserver ends with it."""
    import subprocess
    import sys

    script = tmp_path / "fs.py"
    script.write_text(FORKSERVER_RUN)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    code, servers, ran = out.stdout.split()
    assert (code, servers) == ("0", "1"), out.stderr
    assert float(ran) >= 0.3
