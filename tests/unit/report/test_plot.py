"""--plot needs matplotlib, an optional extra: without it, one line says how to install it."""

from __future__ import annotations

import pytest

from loaderprof.errors import UsageError
from loaderprof.report import plot as plot_mod


def test_plot_without_matplotlib_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # The one thing not made real here: an environment without matplotlib.
    monkeypatch.setattr(plot_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"pip install 'loaderprof\[plot\]'"):
        plot_mod.require_matplotlib()
