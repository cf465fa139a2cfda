"""See NOTE [memory window]. Figures cover the loader's life, never the set-up or teardown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import TESTS, load, run_cli
from loaderprof.report.json_report import load_schema
from loaderprof.units import MiB

pytestmark = pytest.mark.e2e
# What lp_teardown's atexit handler sleeps.
AT_EXIT_SLEEP_S = 4.0


@pytest.fixture(scope="module")
def teardown_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("teardown") / "report.json"
    run = run_cli(
        "compare",
        f"{TESTS / 'lp_teardown.py'}:TeardownDataset",
        "--trials",
        "1",
        "--epochs",
        "2",
        "--num-workers",
        "2",
        "--batch-size",
        "4",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    return load(Path(out))


def _trials(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for arm in report["arms"].values() for t in arm["trials"]]


def test_no_memory_figure_includes_interpreter_teardown(teardown_report: dict[str, Any]) -> None:
    jsonschema.validate(teardown_report, load_schema(), cls=jsonschema.Draft202012Validator)
    for t in _trials(teardown_report):
        m = t["memory"]
        setup = m["setup_main_pss_bytes"]
        assert setup is not None and m["window_start_s"] < m["window_end_s"]
        # The atexit handler would add 300 MiB to the main process; the loader
        # itself adds a few MiB (iterator, queues, batches).
        assert m["peak_main_pss_bytes"] - setup < 100 * MiB
        assert m["peak_main_rss_bytes"] - m["setup_main_rss_bytes"] < 100 * MiB
        assert m["peak_total_pss_bytes"] - setup < 200 * MiB
        assert m["peak_worker_processes"] == 2
        main = next(p for p in t["timeline"] if p["role"] == "main")
        assert len(main["in_window"]) == len(main["t_s"])
        inside = [r for r, w in zip(main["rss_bytes"], main["in_window"], strict=True) if w]
        assert inside and max(inside) - m["setup_main_rss_bytes"] < 100 * MiB


def test_trial_ends_when_the_loader_is_closed(teardown_report: dict[str, Any]) -> None:
    for t in _trials(teardown_report):
        parts = t["wall_parts"]
        # Interpreter teardown (here an atexit handler that sleeps 4 s) would
        # sit between the loader closing and the trial process being gone: a
        # trial that ran it would show at least those seconds. Killing the trial
        # takes a fraction of one, even on a loaded machine.
        assert parts["exit_s"] < 0.5 * AT_EXIT_SLEEP_S
        assert parts["shutdown_s"] is not None and parts["shutdown_s"] >= 0
        named = sum(
            parts[k]
            for k in ("interpreter_s", "imports_s", "setup_s", "epochs_s", "pauses_s", "shutdown_s")
        )
        # The named parts account for the trial's wall up to the exit: what is
        # left (set_epoch, event writes between epochs) is a small remainder. They
        # are measured apart from the wall, so they must not add up to more than it
        # (`other_s` is clamped at 0, so it cannot show an overlap by itself).
        assert parts["other_s"] < 0.1 * t["wall_s"]
        assert named + parts["exit_s"] <= t["wall_s"] + 1e-3
    summary = teardown_report["arms"]["persistent"]["summary"]
    assert summary["shutdown_s"]["n"] == 1
    assert summary["setup_main_pss_bytes"]["median"] > 0
