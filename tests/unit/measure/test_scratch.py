"""Issue 29, rest: a run killed with SIGKILL leaves its /tmp/loaderprof-XXXX behind; a
later run removes it once its owner is provably gone, and never a live run's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loaderprof.inside import procfs
from loaderprof.measure.scratch import OWNER, remove_stale, scratch_dir


def _dir(root: Path, name: str, owner: str | None) -> Path:
    d = root / name
    d.mkdir()
    (d / "template.log").write_text("")
    if owner is not None:
        (d / OWNER).write_text(owner)
    return d


def test_only_the_dirs_of_runs_provably_gone_are_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ticks = procfs.start_ticks(live.pid)
        gone = _dir(tmp_path, "loaderprof-dead", f"{dead.pid} 1\n")
        # The live process's pid, but another start time: the pid was reused.
        reused = _dir(tmp_path, "loaderprof-reused", f"{live.pid} {(ticks or 0) + 1}\n")
        running = _dir(tmp_path, "loaderprof-live", f"{live.pid} {ticks}\n")
        unowned = _dir(tmp_path, "loaderprof-nofile", None)
        other = _dir(tmp_path, "elsewhere-dead", f"{dead.pid} 1\n")
        removed = remove_stale("loaderprof-", str(tmp_path))
    finally:
        live.kill()
        live.wait()
    assert sorted(removed) == sorted([str(gone), str(reused)])
    assert not gone.exists() and not reused.exists()
    assert running.exists() and unowned.exists() and other.exists()


def test_a_run_names_itself_in_its_dir_and_clears_the_stale_ones_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = _dir(tmp_path, "loaderprof-old", f"{dead.pid} 1\n")
    with scratch_dir("loaderprof-") as tmp:
        assert not stale.exists()
        assert Path(tmp, OWNER).read_text().split()[0] == str(os.getpid())
        # Renamed into place whole: no draft is left beside it.
        assert sorted(p.name for p in Path(tmp).iterdir()) == [OWNER]
        # Our own live dir is never another run's to remove.
        assert remove_stale("loaderprof-", str(tmp_path)) == []
    assert not Path(tmp).exists()
