"""The version, in a module of its own so low layers need not import the package."""

__version__ = "0.1.0"
