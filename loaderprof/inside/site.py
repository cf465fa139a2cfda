"""Where a DataLoader was built: the user's own line, told apart from torch's,
loaderprof's and the frameworks' frames (NOTE [framework rebuilds]). Light imports
only: it runs in the user's process (inside/hook.py)."""

from __future__ import annotations

import os
import sys

# Frames from these directories are not the user's construction site.
_SKIP = (os.path.dirname(os.path.abspath(__file__)), f"{os.sep}torch{os.sep}")
# Frameworks that rebuild the user's DataLoader (or build one for the user's Dataset):
# their frames are not the user's site either.
_FRAMEWORKS = tuple(
    f"{os.sep}{name}{os.sep}"
    for name in ("lightning", "lightning_fabric", "pytorch_lightning", "transformers", "accelerate")
)


def user_site() -> tuple[str, bool]:
    """The first frame outside torch, loaderprof and the frameworks, and whether a
    framework's frame came before it (the framework built this loader)."""
    frame = sys._getframe(2)
    framework = False
    while frame is not None:
        name = frame.f_code.co_filename
        if not any(s in name for s in _SKIP) and not name.startswith("<frozen"):
            if any(f in name for f in _FRAMEWORKS):
                framework = True
            else:
                # Relative to the command's directory where it lies inside it.
                rel = os.path.relpath(name)
                return f"{name if rel.startswith('..') else rel}:{frame.f_lineno}", framework
        frame = frame.f_back  # type: ignore[assignment]
    return "?", framework


def same_site(site: str, wanted: str) -> bool:
    """`site` (as `user_site` names it) is the FILE:LINE the user gave: the same line of
    the same file, however the file was spelled (relative, absolute, a path's tail)."""
    path, _, line = site.rpartition(":")
    w_path, _, w_line = wanted.rpartition(":")
    if not path or line != w_line.strip():
        return False
    a, b = os.path.abspath(path), os.path.abspath(w_path)
    return a == b or a.endswith(os.sep + os.path.normpath(w_path))


def switched(num_workers: object, site: str, wanted: str | None) -> bool:
    """Whether `compare -- COMMAND`'s arm switches a loader (NOTE [command arms]): one
    with workers, at --loader-site's line (`wanted`) where one was given. The hook
    decides by it in the user's process, and the parent by it reads the same loaders'
    passes as the epoch's (NOTE [epoch of the training])."""
    return (
        isinstance(num_workers, int) and num_workers > 0 and (not wanted or same_site(site, wanted))
    )
