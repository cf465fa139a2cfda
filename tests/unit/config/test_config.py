from __future__ import annotations

from pathlib import Path

import pytest

from loaderprof.config.build import build_config, load_config_file
from loaderprof.config.refs import ObjectRef, build_dataset, parse_arg, parse_args, parse_value
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError


def test_module_ref() -> None:
    ref = ObjectRef.parse("pkg.mod:Klass")
    assert (ref.module, ref.attr, ref.search_dir) == ("pkg.mod", "Klass", None)
    assert str(ref) == "pkg.mod:Klass"


def test_nested_attr_ref() -> None:
    assert ObjectRef.parse("m:Outer.Inner").attr == "Outer.Inner"


def test_file_ref(tmp_path: Path) -> None:
    f = tmp_path / "my_data.py"
    f.write_text("X = 1\n")
    ref = ObjectRef.parse(f"{f}:X")
    assert ref.module == "my_data" and ref.attr == "X" and ref.search_dir == str(tmp_path)
    assert ref.resolve() == 1


@pytest.mark.parametrize(
    "text", ["nocolon", ":attr", "mod:", "mod:1bad", "bad-mod:X", "missing_file.py:X"]
)
def test_bad_refs(text: str) -> None:
    with pytest.raises(UsageError):
        ObjectRef.parse(text)


def test_file_with_unimportable_name(tmp_path: Path) -> None:
    f = tmp_path / "my-data.py"
    f.write_text("X = 1\n")
    with pytest.raises(UsageError, match="not importable"):
        ObjectRef.parse(f"{f}:X")


def test_resolve_errors() -> None:
    with pytest.raises(UsageError, match="not found"):
        ObjectRef.parse("definitely_not_a_module_q:X").resolve()
    with pytest.raises(UsageError, match="did you mean 'CheapDataset'"):
        ObjectRef.parse("loaderprof.examples:CheapDatset").resolve()
    # A mistyped module is told its package's close names, as an attribute is.
    with pytest.raises(UsageError, match=r"did you mean 'loaderprof\.examples'\? Or run"):
        ObjectRef.parse("loaderprof.exmaples:CheapDataset").resolve()


def test_a_mistyped_top_module_is_told_the_users_own_close_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.py").write_text("X = 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UsageError) as err:
        ObjectRef.parse("trian:X").resolve()
    assert "did you mean 'train'? Or run from the folder" in str(err.value)
    with pytest.raises(UsageError) as err:
        ObjectRef.parse("zzqqxx:X").resolve()
    assert "did you mean" not in str(err.value)


def test_a_mistyped_name_is_never_pointed_at_an_imported_module(tmp_path: Path) -> None:
    (tmp_path / "imgds.py").write_text("import os as np\n\n\ndef nap():\n    return []\n")
    ref = ObjectRef.parse(f"{tmp_path / 'imgds.py'}:nope")
    with pytest.raises(UsageError) as err:
        ref.resolve()
    assert "'nap'" in err.value.message and "'np'" not in err.value.message


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("3", 3),
        ("0.5", 0.5),
        ("True", True),
        ("None", None),
        ("[1, 2]", [1, 2]),
        ("'quoted'", "quoted"),
        ("plain", "plain"),
        ("/data/x.lmdb", "/data/x.lmdb"),
        ("{'a': 1}", {"a": 1}),
        ("", ""),
    ],
)
def test_parse_value(raw: str, value: object) -> None:
    assert parse_value(raw) == value


def test_parse_arg_and_last_wins() -> None:
    assert parse_arg("n=10") == ("n", 10)
    assert parse_arg("path=a=b") == ("path", "a=b")
    assert parse_args(["n=1", "n=2"]) == {"n": 2}
    with pytest.raises(UsageError, match="expected key=value"):
        parse_arg("n")
    with pytest.raises(UsageError, match="not a valid keyword"):
        parse_arg("1n=2")


def test_build_dataset_class_factory_instance() -> None:
    from loaderprof.examples import CheapDataset

    ds = build_dataset(ObjectRef.parse("loaderprof.examples:CheapDataset"), {"n": 7})
    assert isinstance(ds, CheapDataset) and len(ds) == 7
    with pytest.raises(UsageError, match=r"raised TypeError"):
        build_dataset(ObjectRef.parse("loaderprof.examples:CheapDataset"), {"bogus": 1})


def test_build_dataset_instance_rejects_args(tmp_path: Path) -> None:
    f = tmp_path / "inst_mod.py"
    f.write_text("from loaderprof.examples import CheapDataset\nDS = CheapDataset(n=3)\n")
    ref = ObjectRef.parse(f"{f}:DS")
    assert len(build_dataset(ref, {})) == 3
    with pytest.raises(UsageError, match="already a Dataset instance"):
        build_dataset(ref, {"n": 4})


def test_config_precedence_defaults_file_flags(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        'dataset = "loaderprof.examples:CheapDataset"\nepochs = 7\nnum-workers = 3\n'
        "[args]\nn = 10\ndim = 4\n"
    )
    values = load_config_file(f)
    cfg = build_config({"epochs": 3, "args": {"n": 20}, "num_workers": None}, values)
    assert cfg.epochs == 3  # flag beats file
    assert cfg.loader.num_workers == 3  # file beats default
    assert cfg.loader.batch_size == RunConfig(dataset="x:y").loader.batch_size  # default
    assert dict(cfg.dataset_args) == {"n": 20, "dim": 4}


def test_pyproject_tool_table(tmp_path: Path) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "x"\n[tool.loaderprof]\ndataset = "a:B"\nepochs = 4\n')
    assert load_config_file(f) == {"dataset": "a:B", "epochs": 4}
    (tmp_path / "other").mkdir()
    g = tmp_path / "other" / "pyproject.toml"
    g.write_text('[project]\nname = "x"\n')
    with pytest.raises(UsageError, match=r"no \[tool\.loaderprof\]"):
        load_config_file(g)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("epoch = 3", "unknown key 'epoch'"),
        ("epochs = 'five'", "must be an integer"),
        ("pin_memory = 1", "true or false"),
        ("epochs = [", "not valid TOML"),
        ("args = 3", "must be a table"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(f'dataset = "a:B"\n{text}\n')
    with pytest.raises(UsageError, match=match):
        build_config({}, load_config_file(f))


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config file not found"):
        load_config_file(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"num_workers": 0}, "num_workers > 0"),
        ({"epochs": 1}, "at least 2"),
        ({"mp_context": "thread"}, "unknown --mp-context"),
        ({"batch_size": 0}, "batch-size"),
        ({"sample_interval_ms": 1.0}, "too fast"),
        ({"trials": 0}, "trials"),
        ({"prefetch_factor": 0}, "prefetch"),
        ({"collate_fn": "nocolon"}, "collate-fn"),
        ({"loader_class": "nocolon"}, "bad --loader reference"),
        ({"loader_args": {"tag": 1}}, "--loader-arg needs --loader"),
        (
            {"loader_class": "m:L", "loader_args": {"num_workers": 3}},
            "--loader-arg num_workers: loaderprof sets it; use --num-workers",
        ),
        ({"loader_class": "m:L", "loader_args": {"s": {1, 2}}}, "only JSON values"),
        ({"val_args": {"n": 3}}, "--val-arg needs --val"),
        ({"val_num_workers": 2}, "--val-num-workers needs --val"),
        ({"val": "m:V", "val_num_workers": 0}, "--val-num-workers must be ≥ 1"),
        ({"val": "m:V", "val_batch_size": 0}, "--val-batch-size must be ≥ 1"),
        ({"val": "nocolon"}, "bad --val reference"),
        ({"val": "m:V", "max_batches": 4}, "--val with --max-batches is not supported"),
    ],
)
def test_validation(flags: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        build_config({"dataset": "loaderprof.examples:CheapDataset", **flags})


def test_no_dataset() -> None:
    with pytest.raises(UsageError, match="no dataset given"):
        build_config({})


def test_batch_size_none() -> None:
    cfg = build_config({"dataset": "a:B", "batch_size": "none"})
    assert cfg.loader.batch_size is None


def test_idle_pause_defaults_to_two_samples() -> None:
    assert build_config({"dataset": "a:B", "sample_interval_ms": 20.0}).effective_idle_ms == 40
    assert build_config({"dataset": "a:B", "idle_ms": 5.0}).effective_idle_ms == 5


def test_val_loader_defaults_to_the_train_loaders(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('dataset = "a:B"\nval = "m:V"\nbatch_size = 8\n[val_args]\nsplit = "val"\n')
    cfg = build_config({"num_workers": 3, "shuffle": True}, load_config_file(f))
    assert cfg.val == "m:V" and dict(cfg.val_args) == {"split": "val"}
    lo = cfg.val_loader
    assert lo is not None
    # Its own batch size and workers default to the train loader's; never shuffled.
    assert (lo.batch_size, lo.num_workers, lo.shuffle) == (8, 3, None)
    cfg = build_config({"dataset": "a:B", "val": "m:V", "val_batch_size": 2, "val_num_workers": 1})
    assert cfg.val_loader is not None
    assert (cfg.val_loader.batch_size, cfg.val_loader.num_workers) == (2, 1)
    assert RunConfig.from_dict(cfg.to_dict()).val_num_workers == 1
    assert build_config({"dataset": "a:B"}).val_loader is None


def test_loader_args_merge_file_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    # `loader`, the flag's own name, is accepted for `loader_class`.
    f.write_text('dataset = "a:B"\nloader = "m:L"\n[loader_args]\ntag = "file"\nk = 2\n')
    cfg = build_config({"loader_args": {"tag": "flag"}}, load_config_file(f))
    assert cfg.loader.loader_class == "m:L"
    assert dict(cfg.loader.loader_args) == {"tag": "flag", "k": 2}
    # It travels to the trial and back in the saved report.
    again = RunConfig.from_dict(cfg.to_dict())
    assert dict(again.loader.loader_args) == {"tag": "flag", "k": 2}
    with pytest.raises(UsageError, match="bad --loader-arg 'nokey'"):
        parse_args(["nokey"], "--loader-arg")
