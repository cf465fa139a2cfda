"""The parent's handoff to the trial child (inside/spec.py) and the one recipe both of
the trial's DataLoaders are built from (inside/loader.py): real loaders, no workers."""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DataLoader, SequentialSampler

from loaderprof.config.run import LoaderOptions, RunConfig
from loaderprof.inside.events import Ev, read_events
from loaderprof.inside.loader import OrderRecorder, recipe
from loaderprof.inside.probe import IndexProbe
from loaderprof.inside.spec import TrialSpec

DATASET = "loaderprof.examples:CheapDataset"


def test_a_spec_reads_back_as_written(tmp_path: Path) -> None:
    cfg = RunConfig(dataset=DATASET, trials=3, epochs=2, idle_ms=7.0, seed=11)
    spec = TrialSpec(
        events_path=str(tmp_path / "e.jsonl"),
        persistent=True,
        pause_ack_path=None,
        config=cfg.to_dict(),
    )
    path = tmp_path / "t.spec.json"
    spec.write(path)
    back = TrialSpec.read(path)
    assert back == spec
    assert back.run_config() == cfg


def _cfg() -> RunConfig:
    return RunConfig(
        dataset=DATASET,
        loader=LoaderOptions(batch_size=4, num_workers=0, shuffle=True, drop_last=True),
        val=DATASET,
        val_batch_size=2,
        seed=3,
    )


def test_train_and_val_loaders_come_from_one_recipe(tmp_path: Path) -> None:
    from loaderprof.examples import CheapDataset

    path = str(tmp_path / "e.jsonl")
    cfg = _cfg()
    train = recipe(path, cfg, CheapDataset(), val=False, persistent=False, counter=None)
    val = recipe(path, cfg, CheapDataset(), val=True, persistent=False, counter=None)
    # One recipe: the same class and the same keyword arguments, but the order
    # recorder that only the train loader has (the validation pass runs in order).
    assert train.cls is val.cls is DataLoader
    assert set(train.kwargs) - set(val.kwargs) == {"sampler"}
    assert isinstance(train.recorder, OrderRecorder) and val.recorder is None
    assert (train.kwargs["batch_size"], val.kwargs["batch_size"]) == (4, 2)
    assert (train.kwargs["drop_last"], val.kwargs["drop_last"]) == (True, False)
    assert train.kwargs["worker_init_fn"].loader == "train"
    assert val.kwargs["worker_init_fn"].loader == "val"

    loader = train.build(path)
    val_loader = val.build(path)
    assert isinstance(loader.dataset, IndexProbe) and isinstance(val_loader.dataset, IndexProbe)
    assert isinstance(val_loader.sampler, SequentialSampler)
    order = [int(x) for b in loader for x in b[:, 0]]
    assert sorted(order) == list(range(len(CheapDataset()))) and order != sorted(order)
    assert train.recorder is not None and train.recorder.last_digest is not None
    # Each batch stamped by the collate probe, and nothing else (no pinning warning).
    assert [ev["ev"] for ev in read_events(path)] == [Ev.BATCH] * len(loader)


def test_pinned_memory_without_an_accelerator_is_a_warning(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():  # pragma: no cover - a GPU machine pins for real
        return
    path = str(tmp_path / "e.jsonl")
    cfg = RunConfig(dataset=DATASET, loader=LoaderOptions(batch_size=2, pin_memory=True))
    from loaderprof.examples import CheapDataset

    made = recipe(path, cfg, CheapDataset(), val=False, persistent=False, counter=None)
    assert made.kwargs["pin_memory"] is False
    assert [ev["ev"] for ev in read_events(path)] == [Ev.WARNING]
