"""See NOTE [data wait]. Where each epoch waits for data, measured by `watch` and
`compare` on real loaders, against what the training script measures itself."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import TESTS, Run, load, requires, run_cli, watch_script

pytestmark = pytest.mark.e2e

# A training loop that times its own waits as NOTE [data wait] counts them (iter() and
# each next(), the first batch apart) and its own steps (a sleep of known length) with
# loaderprof.examples.timed_epoch, and writes them beside itself. Its workers take 0.3 s to start
# (worker_init_fn), each sample 5 ms to read; each step 20 ms.
SCRIPT = """
import json, sys
from torch.utils.data import DataLoader
from lp_timed import Slow, start
from loaderprof.examples import timed_epoch

kept = DataLoader(Slow(0.005), batch_size=4, num_workers=2, persistent_workers=True,
                  worker_init_fn=start)
fresh = DataLoader(Slow(0.005), batch_size=4, num_workers=2, persistent_workers=False,
                   worker_init_fn=start)
mine = {name: [timed_epoch(loader, 0.02) for _ in range(3)]
        for name, loader in (("kept", kept), ("fresh", fresh))}
with open(sys.argv[1], "w") as f:
    json.dump(mine, f)
"""


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict[str, Any], dict[str, Any]]:
    """One watched run of SCRIPT: its console run, the watch report, the script's own."""
    tmp = tmp_path_factory.mktemp("wait")
    own = tmp / "own.json"
    shutil.copy(TESTS / "lp_timed.py", tmp)
    run, report = watch_script(tmp, SCRIPT, argv=[str(own)])
    assert run.returncode == 0, run.stderr
    return run, report, json.loads(own.read_text())


def _loaders(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """L1 is the persistent loader (built first), L2 the other."""
    by_id = {ld["id"]: ld for ld in report["loaders"]}
    return {"kept": by_id["L1"], "fresh": by_id["L2"]}


def test_watch_measures_the_waits_the_script_measures(
    watched: tuple[Run, dict[str, Any], dict[str, Any]],
) -> None:
    _, report, own = watched
    for name, ld in _loaders(report).items():
        assert len(ld["epochs"]) == 3
        for epoch, mine in zip(ld["epochs"], own[name], strict=True):
            wait = epoch["wait"]
            # The script's clock runs around the hook's: its figures hold the hook's
            # own cost, and its epoch starts a moment earlier. Wide margins: a busy
            # 2-core machine stretches any one reading.
            measured = wait["first_s"] + wait["steady_s"]
            assert 0.7 < measured / (mine["first_s"] + mine["steady_s"]) < 1.3, (name, wait, mine)
            assert 0.7 < wait["first_s"] / mine["first_s"] < 1.3, (name, wait, mine)
            step = wait["epoch_s"] - measured
            assert 0.7 < step / mine["step_s"] < 1.3, (name, wait, mine)
            assert wait["batches"] == 12


def test_the_first_batch_waits_for_start_up_only_without_persistence(
    watched: tuple[Run, dict[str, Any], dict[str, Any]],
) -> None:
    run, report, _ = watched
    kept, fresh = _loaders(report)["kept"], _loaders(report)["fresh"]
    # Each fresh pool's workers sleep 0.3 s in worker_init_fn before reading a batch;
    # a kept pool has its next batches in flight.
    assert fresh["wait"]["first_s"] > 3 * kept["wait"]["first_s"]
    assert kept["wait_epochs"] == fresh["wait_epochs"] == "steady"
    # The cold epoch starts the kept pool too.
    assert kept["epochs"][0]["wait"]["first_s"] > 3 * kept["wait"]["first_s"]
    assert "L2 each steady epoch waits" in " ".join(run.stdout.split())
    # Persistence skips the start-up and the fresh workers' first items, up to the whole
    # wait before the first batch less a kept pool's own (the figure on the screen).
    words = " ".join(run.stdout.split())
    assert "persistent_workers=True skips the start-up and the fresh workers' first-item" in words
    assert re.search(r"it saves up to [\d.]+ m?s less a kept pool's own first-batch wait\)", words)


def test_compare_splits_each_arms_wait(tmp_path: Path) -> None:

    out = tmp_path / "r.json"
    step_ms = 20
    run = run_cli(
        "compare",
        "loaderprof.examples:LazyResourceDataset",
        "--trials",
        "1",
        "--epochs",
        "3",
        "--num-workers",
        "2",
        "--arg",
        "n=64",
        "--step-ms",
        str(step_ms),
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    report = load(out)
    summary = {name: arm["summary"] for name, arm in report["arms"].items()}
    on, off = summary["persistent"]["steady_wait"], summary["non_persistent"]["steady_wait"]
    # A fresh pool opens its 0.2 s resource before its first batch, every epoch.
    assert off["first_s"] > 3 * on["first_s"]
    for arm in report["arms"].values():
        for trial in arm["trials"]:
            for epoch in trial["epochs"]:
                wait = epoch["wait"]
                step = wait["epoch_s"] - wait["first_s"] - wait["steady_s"]
                # The loop's own step: a sleep of --step-ms per batch. A sleep overshoots,
                # by 24 ms over two batches under a full suite's load: the bound above is
                # half the 0.2 s resource a wait counted as step would add.
                slept = wait["batches"] * step_ms / 1000
                assert 0.9 * slept < step < slept + 0.1, wait
                # The first batch's wait is what compare already reports as first batch.
                assert wait["first_s"] == pytest.approx(epoch["first_batch_s"], rel=0.2, abs=0.01)
    text = " ".join(run.stdout.split())
    assert "persistence cuts the wait to the 1st batch by" in text


LIGHTNING = """
import time
import torch
import lightning as L
from torch.utils.data import DataLoader, Dataset

STEP_S = 0.02


class Items(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.full((4,), float(i)), torch.zeros(1)


class Data(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(Items(160), batch_size=8, num_workers=2, persistent_workers=True)

    def val_dataloader(self):
        return DataLoader(Items(32), batch_size=8, num_workers=2)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, i):
        time.sleep(STEP_S)
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def validation_step(self, batch, i):
        pass

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Model(), datamodule=Data())
"""


def test_lightnings_epochs_split_into_waits_and_its_training_steps(tmp_path: Path) -> None:
    requires("lightning")
    run, report = watch_script(tmp_path, LIGHTNING)
    assert run.returncode == 0, run.stdout + run.stderr
    train, val = report["loaders"]
    for epoch in train["epochs"]:
        wait = epoch["wait"]
        assert wait["batches"] == 20
        step = wait["epoch_s"] - wait["first_s"] - wait["steady_s"]
        # Lightning fetches a batch ahead and ends an epoch at its last batch (left): its
        # wall holds 18 to 20 of the 20 ms steps, and Lightning's own work besides.
        assert 18 * 0.02 * 0.9 < step < 20 * 0.02 * 2, wait
    # Each validation pass starts its workers; the kept train pool has batches ready.
    assert val["wait"]["first_s"] > 2 * train["wait"]["first_s"]
    assert train["wait_epochs"] == val["wait_epochs"] == "steady"


# A loop that leaves each epoch's iterator and drops it only once the next iter()
# replaced it, as Lightning does; each worker takes 0.3 s to exit (a finalizer at its
# exit), so the main process joins the old pool that long before the next first batch.
LEFT = """
import time
from multiprocessing import util
from torch.utils.data import DataLoader
from lp_timed import Slow


def slow_exit(worker_id):
    util.Finalize(None, time.sleep, args=(0.3,), exitpriority=0)


loader = DataLoader(Slow(0.001), batch_size=4, num_workers=2, worker_init_fn=slow_exit)
it = None
for epoch in range(3):
    new = iter(loader)
    it = new
    for i, _ in enumerate(it):
        if i == 5:
            break
"""


def test_the_last_pools_shutdown_after_the_next_iter_is_a_wait_for_the_first_batch(
    tmp_path: Path,
) -> None:
    """See NOTE [data wait]. The old pool's join lands between the new iter() and its
    first batch: persistence removes it, so it is a wait, not the step's."""
    shutil.copy(TESTS / "lp_timed.py", tmp_path)
    run, report = watch_script(tmp_path, LEFT)
    assert run.returncode == 0, run.stderr
    (ld,) = report["loaders"]
    later = ld["epochs"][1:]
    assert len(later) == 2 and all(e["ended"] == "left" for e in later)
    for e in later:
        # From iter() to the first batch, nearly all of it inside the loader or the join.
        assert e["wait"]["first_s"] > 0.8 * e["first_batch_s"], e
