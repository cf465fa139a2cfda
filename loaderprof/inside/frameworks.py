"""The arm's persistence where a framework keeps a setting of its own (NOTE [command
arms]), in the user's process under `compare -- COMMAND`.

The HF Trainer builds a new evaluation DataLoader for every evaluation unless its
`TrainingArguments.dataloader_persistent_workers` is set, and then keeps it: a loader
rebuilt every epoch starts its workers every epoch whatever its own flag says. The
arm that sets only the loaders' flag left the eval loader's start-up in both arms (a
Trainer evaluating every epoch read 0.28 s persistent steady epochs where the user's
flag gives 0.03 s), so the arm sets the Trainer's argument too, as the user would.
That argument is also what the user turns persistence on with: the report names it.

The Trainer builds its train, eval and test loaders at one line of its own
(`_get_dataloader`), so all of them have the user's `trainer.train()` line as their
site: which Trainer method asked for each (`built_for`) tells them apart. Without it an
eval loader built anew for each evaluation read as the train loader's rebuild (`watch`
said nothing of it, and `compare --` counted it in `main.built`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

# The user's setting where the HF Trainer builds the loader.
TRAINER_SETTING = "TrainingArguments.dataloader_persistent_workers"
_TRANSFORMERS = f"{os.sep}transformers{os.sep}"


# The Trainer's methods that ask for a loader, and what each loader is for.
_BUILT_FOR = {
    "get_train_dataloader": "train",
    "get_eval_dataloader": "eval",
    "get_test_dataloader": "test",
}
# The loader the Trainer keeps from one call to the next under TRAINER_SETTING (it
# caches its eval loaders); the others it builds once a call whatever the setting.
KEPT_BY_SETTING = "eval"


@dataclass(frozen=True)
class TrainerBuild:
    """The HF Trainer building a loader, and the method that asked for it."""

    trainer: Any
    built_for: str | None


def building_trainer() -> TrainerBuild | None:
    """The HF Trainer building a loader now, in transformers' own code (found up the
    caller's stack), or None: a loader the user builds in an override of the Trainer's
    (its own get_train_dataloader) takes the user's flags, not the Trainer's."""
    trainer: Any = None
    built_for: str | None = None
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if _TRANSFORMERS in filename:
            owner = frame.f_locals.get("self")
            if trainer is None and owner is not None and _is_trainer(type(owner)):
                trainer = owner
            built_for = built_for or _BUILT_FOR.get(frame.f_code.co_name)
        elif not _passed_through(filename):
            break  # the user's own code: what calls it is not building this loader
        frame = frame.f_back  # type: ignore[assignment]
    return None if trainer is None else TrainerBuild(trainer, built_for)


# Code between the DataLoader and whoever builds it: torch, loaderprof's hook,
# accelerate's rebuild, Python's own library.
_THROUGH = tuple(f"{os.sep}{name}{os.sep}" for name in ("torch", "loaderprof", "accelerate"))
_STDLIB = os.path.dirname(os.__file__) + os.sep


def _passed_through(filename: str) -> bool:
    if any(part in filename for part in _THROUGH):
        return True
    return filename.startswith(_STDLIB) and "-packages" not in filename


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
