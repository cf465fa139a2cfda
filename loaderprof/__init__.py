"""loaderprof: profile the worker lifecycle of PyTorch DataLoaders."""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "check", "compare", "sweep", "to_frame"]


def __getattr__(name: str) -> Any:
    # Lazy: `import loaderprof` (and the CLI's start-up) stays free of torch/pandas.
    if name in ("compare", "check", "sweep"):
        from loaderprof import api

        return getattr(api, name)
    if name == "to_frame":
        from loaderprof.report.csv_report import to_frame

        return to_frame
    raise AttributeError(f"module 'loaderprof' has no attribute {name!r}")
