"""DataLoader classes for `--loader`: a project's subclass, and things that are not one."""

from __future__ import annotations

import os
from typing import Any

from torch.utils.data import DataLoader


class TaggedLoader(DataLoader):  # type: ignore[type-arg]
    """A project's DataLoader subclass with an extra, required keyword argument: it
    appends `tag pid` to the file `out` each time it is built."""

    def __init__(self, *args: Any, tag: str, out: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with open(out, "a", encoding="utf-8") as f:
            f.write(f"{tag} {os.getpid()}\n")


def not_a_loader(*args: Any, **kwargs: Any) -> None:
    """A function, not a DataLoader class."""
