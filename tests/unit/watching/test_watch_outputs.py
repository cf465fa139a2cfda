"""A watched run's files go through the one exporter registry, as compare's do."""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
from pathlib import Path

import jsonschema
import pytest
import typer
from rich.console import Console

from loaderprof.cli import _run
from loaderprof.commands import watch
from loaderprof.config.options import WATCH_HELP, GateOptions, OutputOptions, RunOptions
from loaderprof.errors import UsageError
from loaderprof.model.watch import WatchReport
from loaderprof.report.exporters import EXPORTERS, check_targets, export, kind_of
from loaderprof.report.json_report import load_schema, read_watch
from loaderprof.report.markdown import watch_markdown
from loaderprof.report.watch_console import render
from loaderprof.watching.run import WatchRun
from loaderprof.watching.session import build_watch_report

S = 1_000_000_000


def _report(other_cores: float | None = None) -> WatchReport:
    evs: list[dict[str, object]] = [
        {
            "ev": "loader_created",
            "t": S // 10,
            "pid": 100,
            "loader": "100.1",
            "site": "train.py:9",
            "cls": "torch.utils.data.DataLoader",
            "num_workers": 2,
            "persistent_workers": True,
            "batch_size": 4,
            "start_method": "fork",
            "dataset_type": "x.D",
            "dataset_len": 32,
        }
    ]
    for k, start in enumerate((1.0, 2.0)):
        evs.append({"ev": "iter_start", "t": int(start * S), "pid": 100, "loader": "100.1"})
        evs.append({"ev": "iter_end", "t": int((start + 0.5) * S), "pid": 100, "loader": "100.1"})
        if k == 0:
            evs += [
                {
                    "ev": "worker_init",
                    "t": int(1.01 * S),
                    "pid": p,
                    "worker_id": w,
                    "loader": "100.1",
                }
                for w, p in enumerate((201, 202))
            ]
    run = WatchRun(("python", "train.py"), 0, 0, 3 * S, evs, [], {}, (), 0.01, None, other_cores)
    return build_watch_report(run)


def test_watch_json_markdown_and_trace_are_written_by_the_registry(tmp_path: Path) -> None:
    report = _report()
    assert kind_of(report) == "watch"
    targets = [(name, tmp_path / f"w.{name}") for name in ("json", "markdown", "trace")]
    check_targets("watch", targets)
    export(report, targets, strict=False)
    data = json.loads((tmp_path / "w.json").read_text())
    jsonschema.validate(data, load_schema("watch"), cls=jsonschema.Draft202012Validator)
    assert data["kind"] == "watch" and [ld["id"] for ld in data["loaders"]] == ["L1"]
    assert "| L1 | `train.py:9` | 2 | yes | 2 | yes |" in (tmp_path / "w.markdown").read_text()
    trace = json.loads((tmp_path / "w.trace").read_text())
    assert any(e.get("name") == "epoch 2" for e in trace["traceEvents"])


def test_report_shows_a_saved_watch_report_as_watch_printed_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(other_cores=1.4)
    saved = tmp_path / "w.json"
    export(report, [("json", saved)], strict=False)
    assert read_watch(saved) == report
    md = tmp_path / "again.md"
    assert _run(["report", str(saved), "--markdown", str(md)], debug=False) == 0
    out = capsys.readouterr().out
    shown = Console(width=80, record=True, color_system=None, file=io.StringIO())
    shown.print(render(report))
    assert [ln.rstrip() for ln in out.splitlines()] == [
        ln.rstrip() for ln in shown.export_text().splitlines()
    ]
    assert md.read_text() == watch_markdown(report)
    # No sampler tick counted the workers of this hand-made run: said, not "None".
    assert "most worker processes at once: not sampled" in out


def test_the_registry_refuses_what_a_watch_report_cannot_be(tmp_path: Path) -> None:
    able = {name for name, e in EXPORTERS.items() if "watch" in e.kinds}
    assert able == {"json", "markdown", "trace"}
    with pytest.raises(UsageError, match=r"a watch report exports only --json, --markdown"):
        check_targets("watch", [("csv", tmp_path / "w.csv")])


def test_the_watch_command_takes_its_flags_from_the_options_model() -> None:
    app = typer.Typer()
    watch.register(app)
    (cmd,) = app.registered_commands
    params = inspect.signature(cmd.callback).parameters  # type: ignore[arg-type]
    model = {
        f.name: f
        for group in (OutputOptions, GateOptions, RunOptions)
        for f in dataclasses.fields(group)
    }
    for name in ("json", "markdown", "trace", "fail_on", "sample_interval", "uss_interval"):
        info = params[name].annotation.__metadata__[0]
        # A shared flag watch uses otherwise has watch's own help (WATCH_HELP).
        want = WATCH_HELP[name][0] if name in WATCH_HELP else model[name].metadata["help"]
        assert info.help == want, name


def test_a_busy_machine_is_said_on_the_screen_and_in_the_files(tmp_path: Path) -> None:
    from rich.console import Console

    from loaderprof.report.watch_console import render

    quiet, busy = _report(0.0), _report(64.0)
    if busy.environment.get("cpus_usable") != busy.environment.get("cpu_count"):
        pytest.skip("a container capped below the host's cores reads the load average")
    assert not quiet.warnings
    (said,) = busy.warnings
    assert said.startswith("the machine was busy: other processes kept 64.0 of")
    assert busy.environment["other_cpu_cores"] == 64.0
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(render(busy))
    assert "warning: the machine was busy" in console.export_text()
    export(busy, [("markdown", tmp_path / "w.md")], strict=False)
    assert "> ⚠️ the machine was busy" in (tmp_path / "w.md").read_text()


def test_a_column_with_no_figure_names_no_unit() -> None:
    """A command that failed before any epoch ended: every time and size is "–", and
    no header names a unit over them."""
    from rich.console import Console

    from builders import watch_report
    from loaderprof.report.watch_console import loaders_table

    report = watch_report()
    blank = {
        "cold_epoch_s": None,
        "steady_epoch_s": None,
        "cold_first_batch_s": None,
        "steady_first_batch_s": None,
        "wait": None,
        "worker_startup_s": None,
        "peak_worker_uss_bytes": None,
        "idle_workers_uss_bytes": None,
    }
    loaders = tuple(dataclasses.replace(ld, **blank) for ld in report.loaders)  # type: ignore[arg-type]
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(loaders_table(dataclasses.replace(report, loaders=loaders)))
    units = {"µs", "ms", "s", "min", "B", "KiB", "MiB", "GiB"}
    assert not units & set(console.export_text().split())
    # The measured report names them.
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(loaders_table(report))
    assert "ms" in console.export_text().split("Epoch times", 1)[1].split("data wait")[0].split()


def test_a_persistent_pool_whose_idle_memory_was_not_read_says_why() -> None:
    from builders import watch_report
    from loaderprof.report.watch_console import unread_idle

    report = watch_report()
    # L1 is persistent and read; L2 and L3 keep no workers between epochs.
    assert unread_idle(report.loaders) == []
    l1 = dataclasses.replace(report.loaders[0], idle_workers_uss_bytes=None)
    ((lid, text),) = unread_idle((l1, *report.loaders[1:]))
    # Its epochs end at 2.9, 3.9 s and start at 3.0, 4.0 s: pauses of 100 ms.
    assert lid == "L1" and text.endswith("(the longest pause: 100.0 ms)"), text


def test_a_command_that_failed_before_any_loader_is_not_told_to_import_torch() -> None:
    """`watch -- python nope.py`: python's own exit status 2, no loader, and no hint
    about torch; the command line reads as it can be pasted back."""
    from rich.console import Console

    from loaderprof.report.watch_console import render

    run = WatchRun(("python", "-c", "import sys; sys.exit(2)"), 2, 0, S, [], [], {}, (), 0.01, None)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(render(build_watch_report(run)))
    text = console.export_text()
    assert "no DataLoader was built: the command exited with status 2 first" in text
    assert "torch.utils.data" not in text
    assert "python -c 'import sys; sys.exit(2)'" in text
