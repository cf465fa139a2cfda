"""loaderprof: profile the worker lifecycle of PyTorch DataLoaders."""

from __future__ import annotations

# Nothing here imports more than the version: the CLI takes its signals in
# `loaderprof.cli`'s first lines, and every module imported before them is time in
# which a signal is the interpreter's (a traceback) rather than loaderprof's.
from loaderprof.version import __version__

TYPE_CHECKING = False  # typing's own flag, without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__", "check", "compare", "sweep", "to_frame", "watch"]


# Each name is a module-level attribute that no submodule shares, so importing a
# submodule never shadows it (loaderprof.comparing.sweep holds the sweep machinery,
# loaderprof.watching the watch pipeline).
def __getattr__(name: str) -> Any:
    # Lazy: `import loaderprof` (and the CLI's start-up) stays free of torch/pandas.
    if name in ("compare", "check", "sweep", "watch"):
        from loaderprof import api

        return getattr(api, name)
    if name == "to_frame":
        from loaderprof.report.csv_report import to_frame

        return to_frame
    raise AttributeError(f"module 'loaderprof' has no attribute {name!r}")
