"""See NOTE [watch hook]. Epochs and loaders as frameworks and hand-written loops make them:
real scripts under `loaderprof watch`, each written into the test's tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import requires, script_site, watch_script

pytestmark = pytest.mark.e2e

LIGHTNING = """
import sys
import torch
import lightning as L
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((4,), float(i)), torch.zeros(1)


class Data(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(Items(160), batch_size=8, num_workers=2, persistent_workers=True)  # TRAIN

    def val_dataloader(self):
        return DataLoader(Items(32), batch_size=8, num_workers=2)  # VAL

    def test_dataloader(self):
        return DataLoader(Items(32), batch_size=8, num_workers=2)  # TEST


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

    def test_step(self, batch, i):
        self.log("test", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    mode = sys.argv[1]
    trainer = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_train_batches=5 if mode == "limit" else None,
    )
    if mode == "validate-test":
        trainer.validate(Model(), datamodule=Data())
        trainer.test(Model(), datamodule=Data())
    else:
        trainer.fit(Model(), datamodule=Data())
"""


def _watch(tmp_path: Path, text: str, *args: str) -> tuple[Any, dict[str, Any]]:
    return watch_script(tmp_path, textwrap.dedent(text), argv=args)


def _site(tmp_path: Path, marker: str) -> str:
    return script_site(tmp_path, marker)


def _by_site(tmp_path: Path, report: dict[str, Any], marker: str) -> dict[str, Any]:
    (found,) = [ld for ld in report["loaders"] if ld["site"] == _site(tmp_path, marker)]
    return found


def _findings(report: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["id"] == rule]


def test_a_loop_that_breaks_out_of_its_epochs_counts_them(tmp_path: Path) -> None:
    run, report = _watch(
        tmp_path,
        """
        import torch
        from torch.utils.data import DataLoader, Dataset


        class Items(Dataset):
            def __len__(self):
                return 64

            def __getitem__(self, i):
                return torch.full((4,), float(i))


        if __name__ == "__main__":
            loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)  # L
            for epoch in range(3):
                for i, batch in enumerate(loader):
                    if i == 5:
                        break
            for batch in loader:
                pass
        """,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (ld,) = report["loaders"]
    assert ld["site"] == _site(tmp_path, "# L")
    epochs = ld["epochs"]
    # Three epochs left at their sixth batch (of 16), then one run to its StopIteration.
    assert [(e["batches"], e["ended"]) for e in epochs] == [(6, "left")] * 3 + [(16, "exhausted")]
    assert all(e["planned_batches"] == 16 and e["end_s"] is not None for e in epochs)
    assert ld["workers_reused"] is True and ld["steady_epoch_s"] is not None
    assert "cut" not in run.stdout


def test_an_epoch_the_program_died_in_stays_cut(tmp_path: Path) -> None:
    _, report = _watch(
        tmp_path,
        """
        import torch
        from torch.utils.data import DataLoader

        if __name__ == "__main__":
            loader = DataLoader(list(range(64)), batch_size=4, num_workers=2)
            for batch in loader:
                pass
            for i, batch in enumerate(loader):
                if i == 3:
                    raise RuntimeError("the training failed")
        """,
    )
    assert report["returncode"] == 1
    (ld,) = report["loaders"]
    assert [(e["batches"], e["ended"]) for e in ld["epochs"]] == [(16, "exhausted"), (None, None)]


@pytest.mark.parametrize("limit", [False, True], ids=["full", "limit_train_batches"])
def test_lightning_fit_has_the_users_loaders_and_their_epochs(tmp_path: Path, limit: bool) -> None:
    requires("lightning")
    run, report = _watch(tmp_path, LIGHTNING, "limit" if limit else "fit")
    assert run.returncode == 0, run.stdout + run.stderr
    # One loader per DataModule method, named by its line, not Lightning's.
    assert len(report["loaders"]) == 2, [ld["site"] for ld in report["loaders"]]
    train, val = _by_site(tmp_path, report, "# TRAIN"), _by_site(tmp_path, report, "# VAL")
    batches = 5 if limit else 20
    assert [(e["batches"], e["ended"]) for e in train["epochs"]] == [(batches, "left")] * 3
    assert all(e["planned_batches"] == 20 for e in train["epochs"])
    assert train["persistent_workers"] and train["workers_reused"] is True
    assert train["cold_epoch_s"] is not None and train["steady_epoch_s"] is not None
    # The sanity check's two batches, then one pass after each training epoch.
    assert [e["batches"] for e in val["epochs"]] == [2, 4, 4, 4]
    assert val["workers_reused"] is False
    assert all(e["end_s"] is not None for ld in report["loaders"] for e in ld["epochs"])
    # Lightning leaves the validation iterator alive: its pool idles through training.
    idle = {f["evidence"]["loader"]: f for f in _findings(report, "idle-pools")}
    assert idle[val["id"]]["evidence"]["persistent_workers"] is False
    assert idle[val["id"]]["evidence"]["while"] == [train["id"]]
    assert not _findings(report, "loader-recreated")


def test_lightning_validate_then_test_is_not_a_recreated_loader(tmp_path: Path) -> None:
    requires("lightning")
    run, report = _watch(tmp_path, LIGHTNING, "validate-test")
    assert run.returncode == 0, run.stdout + run.stderr
    val, test = _by_site(tmp_path, report, "# VAL"), _by_site(tmp_path, report, "# TEST")
    assert len(report["loaders"]) == 2
    assert [(e["batches"], e["ended"]) for e in val["epochs"]] == [(4, "left")]
    assert [(e["batches"], e["ended"]) for e in test["epochs"]] == [(4, "left")]
    assert not _findings(report, "loader-recreated"), report["findings"]
