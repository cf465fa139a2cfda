"""Reading a saved compare report back: its config is typed, so what every report has
recorded must be in the file (a default must not pass for a measured setting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import make_pair
from loaderprof.comparing.session import build_report
from loaderprof.config.run import LoaderOptions, RunConfig
from loaderprof.errors import UsageError
from loaderprof.report.json_report import read_report, to_json


def _saved(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    p, n = make_pair([3.0, 1.0, 1.0], [3.0, 1.5, 1.4])
    cfg = RunConfig(dataset="a:B", epochs=3, loader=LoaderOptions(num_workers=4))
    report = build_report(cfg, [p, n], imported={"torch": "x", "start_method": "fork"})
    path = tmp_path / "r.json"
    path.write_text(to_json(report))
    return path, json.loads(path.read_text())


def test_a_saved_report_reads_back_its_config_typed(tmp_path: Path) -> None:
    path, _ = _saved(tmp_path)
    config = read_report(path).config
    assert (config.dataset, config.loader.num_workers, config.epochs) == ("a:B", 4, 3)


@pytest.mark.parametrize("drop", ["dataset", "loader", "num_workers"])
def test_a_config_without_what_every_report_records_is_refused(tmp_path: Path, drop: str) -> None:
    path, data = _saved(tmp_path)
    config = data["config"]
    assert isinstance(config, dict)
    if drop == "num_workers":
        del config["loader"]["num_workers"]
    else:
        del config[drop]
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="its config lacks the dataset or the loader's"):
        read_report(path)
