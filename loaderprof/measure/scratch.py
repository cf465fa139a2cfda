"""The scratch directories a run keeps its files in (/tmp/loaderprof-XXXX), and the
removal of those a killed run left behind.

A run killed with SIGKILL cannot remove its own directory. Each one therefore holds
an owner file naming the process that made it (pid and start time); a later run
removes a directory only when that file proves the owner gone, and never one that
has no such file (another run between making it and writing the file) or that is
not the user's own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from loaderprof.inside import procfs

OWNER = ".loaderprof-owner"


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A TemporaryDirectory (removed on the way out) with its owner file, after the
    stale ones of earlier runs are removed."""
    remove_stale(prefix)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        pid = os.getpid()
        # Written aside, then renamed: the owner file is whole whenever it exists (an
        # empty one, seen by a run between its creation and its write, proved nothing).
        # A run killed before the rename leaves no owner file, and its directory stays,
        # as one killed before writing it always did: never provably gone.
        draft = Path(tmp, OWNER + ".draft")
        draft.write_text(f"{pid} {procfs.start_ticks(pid)}\n")
        os.replace(draft, Path(tmp, OWNER))
        yield tmp


def remove_stale(prefix: str, root: str | None = None) -> list[str]:
    """Remove the `prefix`* directories under `root` (the temp dir) whose owner is
    provably gone; the paths removed."""
    removed = []
    base = Path(root or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for path in base.glob(prefix + "*"):
            if _stale(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(str(path))
    return removed


def _stale(path: Path) -> bool:
    try:
        st = path.lstat()  # a symlink is never followed, nor removed
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        pid_s, ticks_s = (path / OWNER).read_text().split()
        pid = int(pid_s)
    except (OSError, ValueError):
        return False  # no owner file: not provably ours, or not provably dead
    return pid != os.getpid() and _gone(pid, None if ticks_s == "None" else int(ticks_s))


def _gone(pid: int, ticks: int | None) -> bool:
    """True only when `pid` is provably not the process that wrote the owner file."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's: not ours to judge
    if procfs.state(pid) == "Z":
        return True
    now = procfs.start_ticks(pid)
    # The pid was reused by a later process: its start time differs.
    return ticks is not None and now is not None and now != ticks
