"""loaderprof: profile the worker lifecycle of PyTorch DataLoaders."""

from typing import Any

from loaderprof.version import __version__

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
