"""See NOTE [command arms] and NOTE [cut epochs]. The hook's switch on a real
DataLoader (no worker is started: nothing here iterates it)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loaderprof.inside import cut, hook


@pytest.fixture
def arm(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv(hook.ENV_PERSIST, "1")
    monkeypatch.setenv(cut.ENV_MAX_BATCHES, "16")
    monkeypatch.delenv(hook.ENV_LOADER_SITE, raising=False)
    return monkeypatch


def test_the_arm_switches_persistence_and_the_cut(
    arm: pytest.MonkeyPatch,
) -> None:
    data = TensorDataset(torch.arange(8.0))
    user = DataLoader(data, batch_size=2, num_workers=2)
    assert hook._force_persistence(user, "train.py:3") is False
    assert user.persistent_workers is True and user.__dict__["_lp_cut"] == 16
    # len() tells the script of the cut (Lightning validates after len() batches); the
    # projection reads the loader's own. A loader shorter than the cut is as it was.
    long = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=2, num_workers=2)
    hook._force_persistence(long, "train.py:3")
    assert (len(long), cut.planned(long)) == (16, 32)
    assert (len(user), cut.planned(user)) == (4, 4)
    # A framework's rebuild copies the arm's value; what the script asked is its
    # origin's (see NOTE [framework rebuilds], and tests/e2e/test_hf_trainer.py).
    # A loader without workers, or off the chosen site, is left as the script built it.
    none = DataLoader(data, batch_size=2)
    assert hook._force_persistence(none, "train.py:5") is False
    assert none.persistent_workers is False and "_lp_cut" not in none.__dict__
    assert len(DataLoader(TensorDataset(torch.arange(64.0)), batch_size=2)) == 32
    arm.setenv(hook.ENV_LOADER_SITE, "train.py:3")
    other = DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2, num_workers=1)
    hook._force_persistence(other, "train.py:7")
    assert other.persistent_workers is False and "_lp_cut" not in other.__dict__
