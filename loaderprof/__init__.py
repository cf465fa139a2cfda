"""loaderprof: profile the worker lifecycle of PyTorch DataLoaders."""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "compare", "sweep"]


def __getattr__(name: str) -> Any:
    # Lazy: `import loaderprof` (and the CLI's start-up) stays free of torch/pandas.
    if name in ("compare", "sweep"):
        from loaderprof import api

        return getattr(api, name)
    raise AttributeError(f"module 'loaderprof' has no attribute {name!r}")
