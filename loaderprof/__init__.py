"""loaderprof: profile the worker lifecycle of PyTorch DataLoaders."""

__version__ = "0.1.0"

__all__ = ["__version__"]
