"""See NOTE [framework rebuilds]. A real HF `transformers.Trainer` script (its own
DataLoader, which accelerate's `prepare` rebuilds before the first epoch) under
`watch` and under `compare --` (skipped where transformers or accelerate is not
installed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_nothing_left, requires, run_cli, script_site, watch_script
from loaderprof.inside.site import same_site

pytestmark = pytest.mark.e2e
requires("transformers", "accelerate")

TRAINER = """
import torch
from torch import nn
from transformers import Trainer, TrainingArguments

# Its workers open a 0.2 s resource lazily: what persistence keeps.
from loaderprof.examples import LazyResourceDataset


class Items(LazyResourceDataset):
    def __getitem__(self, i):
        x = super().__getitem__(i)
        return {"x": x, "labels": x.sum()}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}


if __name__ == "__main__":
    args = TrainingArguments(
        output_dir="out", num_train_epochs=4, per_device_train_batch_size=8,
        dataloader_num_workers=2, report_to=[], use_cpu=True, save_strategy="no",
        logging_strategy="no", disable_tqdm=True,
    )
    trainer = Trainer(model=Model(), args=args, train_dataset=Items(n=64, dim=4))
    trainer.train()  # TRAIN
"""


def _evaluating(source: str) -> str:
    """The Trainer script, evaluating after every epoch."""
    return source.replace(
        'save_strategy="no",', 'save_strategy="no", eval_strategy="epoch",'
    ).replace(
        "train_dataset=Items(n=64, dim=4)",
        "train_dataset=Items(n=64, dim=4), eval_dataset=Items(n=32, dim=4)",
    )


def test_the_trainers_loader_is_one_loader_at_the_users_line(tmp_path: Path) -> None:
    run, report = watch_script(tmp_path, _evaluating(TRAINER), env={"HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    # The Trainer's loader and accelerate's rebuild of it: one loader, four epochs; then
    # an eval loader built for each evaluation, at the same line (inside/frameworks.py).
    train, *evals = report["loaders"]
    assert train["site"] == script_site(tmp_path, "# TRAIN") and train["built_for"] == "train"
    assert len(train["epochs"]) == 4 and train["workers_reused"] is False
    assert [ld["built_for"] for ld in evals] == ["eval"] * 4
    assert {ld["site"] for ld in evals} == {train["site"]}
    setting = "TrainingArguments.dataloader_persistent_workers"
    by_id = {f["id"]: f for f in report["findings"]}
    cand = by_id["persistence-candidate"]
    assert f"loaderprof compare -- {sys.executable} {tmp_path / 'train.py'}" in cand["fix"]
    assert f"set {setting}=True" in cand["fix"]
    # The eval loader's rebuilds: the Trainer's setting keeps it.
    rebuilt = by_id["loader-recreated"]
    assert rebuilt["evidence"]["loaders"] == [ld["id"] for ld in evals]
    assert rebuilt["fix"].startswith(f"set {setting}=True")
    assert_nothing_left()


def _compare_trials(tmp_path: Path, source: str) -> tuple[Any, dict[str, Any]]:
    """`compare -- python train.py`, one trial per arm: the run, and each arm's trial."""
    script = tmp_path / "train.py"
    script.write_text(source)
    out = tmp_path / "cmd.json"
    run = run_cli(
        "compare", "--epochs", "3", "--trials", "1", "--json", str(out), "--",
        sys.executable, str(script), cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return run, {t["arm"]: t for t in json.loads(out.read_text())["trials"]}


def test_a_trainer_evaluating_every_epoch_keeps_its_eval_loader_in_the_persistent_arm(
    tmp_path: Path,
) -> None:
    # See inside/frameworks.py: the Trainer keeps its eval loader only when its own
    # dataloader_persistent_workers is set, so the arm sets that too. Setting only the
    # loaders' flag left a fresh eval pool (its 0.2 s lazy open) in every persistent
    # epoch: about half the non-persistent epoch, where the user's flag leaves a tenth.
    run, by_arm = _compare_trials(tmp_path, _evaluating(TRAINER))
    # Each epoch holds the evaluation (see NOTE [epoch of the training]).
    assert all(e["others_s"] > 0 for t in by_arm.values() for e in t["epochs"])
    for trial in by_arm.values():
        main = trial["main"]
        # Named relative to the command's directory: the same line, where the Trainer
        # builds its eval loaders too; they are not the train loader's rebuilds.
        assert same_site(script_site(tmp_path, "# TRAIN"), main["site"])
        assert main["built"] == 1
        # TrainingArguments' default, whatever the arm set on the rebuild; and that
        # argument is what the user turns persistence on with.
        assert main["persistent_asked"] is False
        assert main["setting"] == "TrainingArguments.dataloader_persistent_workers"
    words = "the script asks TrainingArguments.dataloader_persistent_workers=False"
    assert words in " ".join(run.stdout.split())
    steady = {arm: max(e["wall_s"] for e in t["epochs"][1:]) for arm, t in by_arm.items()}
    assert steady["persistent"] < 0.3 * steady["non_persistent"], steady
    assert_nothing_left()
