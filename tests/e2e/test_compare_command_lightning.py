"""See NOTE [command arms]. `compare -- COMMAND` on a Lightning Trainer: Lightning never
lets the train iterator raise StopIteration and rebuilds the user's loaders; the
arms still switch the user's loaders, --max-batches still cuts each epoch and the
trial still stops after --epochs."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import requires, run_cli, script_site

pytestmark = pytest.mark.e2e

LIGHTNING = """
import time
import torch
import lightning as L
from torch.utils.data import DataLoader, Dataset


class Lazy(Dataset):
    def __init__(self, n):
        self.n, self.resource = n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.resource is None:
            time.sleep(0.2)
            self.resource = object()
        return torch.full((4,), float(i)), torch.zeros(1)


class Data(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(Lazy(160), batch_size=8, num_workers=2, persistent_workers=True)  # TRAIN

    def val_dataloader(self):
        return DataLoader(Lazy(32), batch_size=8, num_workers=2)  # VAL


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def _loss(self, batch):
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def training_step(self, batch, i):
        return self._loss(batch)

    def validation_step(self, batch, i):
        self.log("val", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    trainer = L.Trainer(
        max_epochs=10,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(Model(), datamodule=Data())
"""


def test_a_lightning_datamodule_is_compared_on_its_train_loader(tmp_path: Path) -> None:
    requires("lightning")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(LIGHTNING))
    out = tmp_path / "r.json"
    # One trial an arm: what is tested is the loader it finds, the epochs it stops after
    # and the cut of each (NOTE [cut epochs]), not the plan (each Lightning start costs
    # seconds of the suite).
    args = ("--trials", "1", "--epochs", "3", "--max-batches", "16", "--json", str(out))
    run = run_cli("compare", *args, "--", sys.executable, str(script))
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert len(report["trials"]) == 2
    line = script_site(tmp_path, "# TRAIN").rsplit(":", 1)[1]
    for t in report["trials"]:
        # The user's train loader, named by its own line, not Lightning's rebuild.
        assert t["main"]["site"].endswith(f"train.py:{line}")
        assert t["main"]["persistent_asked"] is True
        assert t["main"]["persistent_workers"] is (t["arm"] == "persistent")
        assert t["stopped"] and len(t["epochs"]) == 3
        # Lightning's fetcher takes the cut's StopIteration and starts its next epoch;
        # told of the cut by len(), it validates after it (4 batches, shorter than
        # the cut): each epoch holds its validation pass (NOTE [cut epochs]).
        assert [(e["batches"], e["cut"], e["planned_batches"]) for e in t["epochs"]] == [
            (16, True, 20)
        ] * 3
        assert all(e["others_s"] > 0 for e in t["epochs"])
    assert "ended after 16 of 20 batches" in " ".join(run.stdout.split())
    assert report["saving"]["saved_s"] > 0
    assert report["verdict"]["recommendation"] in ("enable", "neutral")
