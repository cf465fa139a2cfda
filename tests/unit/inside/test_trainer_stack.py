"""inside/frameworks.py: which HF Trainer builds a loader, and for what, read up a stack
of code compiled under transformers-like paths (no transformers needed)."""

from __future__ import annotations

import os
from typing import Any

from loaderprof.inside.frameworks import building_trainer

TRAINER = """
from loaderprof.inside.frameworks import building_trainer


class Trainer:
    def train(self):
        return self.get_train_dataloader()

    def get_train_dataloader(self):
        return self._get_dataloader()

    def get_eval_dataloader(self):
        return self._get_dataloader()

    def _get_dataloader(self):
        return building_trainer()
"""

USER = """
from loaderprof.inside.frameworks import building_trainer


def make(Trainer):
    class MyTrainer(Trainer):
        def get_train_dataloader(self):
            return building_trainer()  # the user's own DataLoader(...)

    class Wrapped(Trainer):
        def get_eval_dataloader(self):
            return super().get_eval_dataloader()

    return MyTrainer, Wrapped
"""


def _module(path: str, name: str, source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": name}
    exec(compile(source, path, "exec"), namespace)
    return namespace


def test_the_trainer_and_the_method_that_asked_are_found_but_not_past_the_users_code() -> None:
    site = os.sep.join(["", "env", "site-packages", "transformers", "trainer.py"])
    trainer_cls = _module(site, "transformers.trainer", TRAINER)["Trainer"]
    mine, wrapped = _module(os.sep.join(["", "work", "train.py"]), "train", USER)["make"](
        trainer_cls
    )
    trainer = trainer_cls()
    build = trainer.train()
    assert build is not None and build.trainer is trainer and build.built_for == "train"
    build = wrapped().get_eval_dataloader()
    assert build is not None and build.built_for == "eval"
    # A loader the user builds in an override takes the user's flags, though the
    # Trainer's own training loop called the override.
    assert mine().train() is None
    assert building_trainer() is None
