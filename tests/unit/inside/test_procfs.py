"""procfs's psutil fallback: PSS is reported as measured or not at all."""

from __future__ import annotations

import os
from collections import namedtuple

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
