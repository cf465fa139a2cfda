"""The arm's persistence where a framework keeps a setting of its own (NOTE [command
arms]), in the user's process under `compare -- COMMAND`.

The HF Trainer builds a new evaluation DataLoader for every evaluation unless its
`TrainingArguments.dataloader_persistent_workers` is set, and then keeps it: a loader
rebuilt every epoch starts its workers every epoch whatever its own flag says. The
arm that sets only the loaders' flag left the eval loader's start-up in both arms (a
Trainer evaluating every epoch read 0.28 s persistent steady epochs where the user's
flag gives 0.03 s), so the arm sets the Trainer's argument too, as the user would.
That argument is also what the user turns persistence on with: the report names it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# The user's setting where the HF Trainer builds the loader.
TRAINER_SETTING = "TrainingArguments.dataloader_persistent_workers"
_TRANSFORMERS = f"{os.sep}transformers{os.sep}"


def building_trainer() -> Any | None:
    """The HF Trainer building a loader now, in transformers' own code (found up the
    caller's stack), or None: a loader the user builds in an override of the Trainer's
    (its own get_train_dataloader) takes the user's flags, not the Trainer's."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if (
            owner is not None
            and _TRANSFORMERS in frame.f_code.co_filename
            and _is_trainer(type(owner))
        ):
            return owner
        frame = frame.f_back  # type: ignore[assignment]
    return None


def trainer_follows(trainer: Any, persistent: bool) -> None:
    """`trainer` keeps its loaders as the arm says: its
    `args.dataloader_persistent_workers` set to `persistent`."""
    args = getattr(trainer, "args", None)
    if getattr(args, "dataloader_persistent_workers", persistent) != persistent:
        # Past a frozen TrainingArguments' __setattr__ (some versions refuse it).
        object.__setattr__(args, "dataloader_persistent_workers", persistent)


def _is_trainer(cls: type) -> bool:
    return any(
        c.__name__ == "Trainer" and c.__module__.startswith("transformers.") for c in cls.__mro__
    )
