"""`compare -- COMMAND`'s baselines and finding gates (NOTE [command baseline]) on a real
script: a saved run, then a run gated against it. The gate that fails does so by
construction (the saved figure is edited), never by timing luck."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import Run, assert_nothing_left, run_cli

pytestmark = pytest.mark.e2e

# Its workers open a 0.2 s resource lazily (what persistence keeps), and the main
# process sets `epoch` on the Dataset, which kept workers never see: stale state. Each
# step sleeps 30 ms, so a busy runner's delays stretch a persistent epoch by a small
# share: with 2 trials a side, the ratio's interval is a t-interval of about 1 degree of
# freedom, too wide to tell (inconclusive) once two trials differ by 1.4×, as 10 ms steps
# did beside another test process (0.156 s and 0.050 s).
SCRIPT = """
import sys, time
from torch.utils.data import DataLoader

from loaderprof.examples import LazyResourceDataset

if __name__ == "__main__":
    ds = LazyResourceDataset(n=48, dim=4)
    loader = DataLoader(ds, batch_size=8, num_workers=2)
    for epoch in range(int(sys.argv[1])):
        ds.epoch = epoch
        for batch in loader:
            time.sleep(0.03)
"""


def _compare(tmp_path: Path, *args: str) -> Run:
    # 5 epochs asked, 3 measured: loaderprof stops every trial itself.
    command = ("--", sys.executable, str(tmp_path / "train.py"), "5")
    return run_cli(
        "compare", "--trials", "2", "--epochs", "3", *args, *command, env={"COLUMNS": "80"}
    )


def test_a_saved_run_gates_the_next_relative_gates_and_findings(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    saved, first = tmp_path / "b.json", tmp_path / "r1.json"
    run = _compare(tmp_path, "--save-baseline", str(saved), "--json", str(first))
    assert run.returncode == 0, run.stderr
    # The same report as --json, through the same exporter.
    assert saved.read_text() == first.read_text()
    base = json.loads(saved.read_text())
    assert base["kind"] == "compare-command" and base["created"]

    # The saved persistent epochs made a hundred times shorter: this run is ~100× slower,
    # which 2 trials a side tell even when a busy runner spreads them 2× apart (at 10×,
    # the t-interval of 1 degree of freedom was inconclusive under a full suite's load).
    for t in base["trials"]:
        if t["arm"] == "persistent":
            for e in t["epochs"]:
                e["wall_s"] *= 0.01
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(base))
    gates = (
        "persistent.steady_epoch_s:+10%",
        "non_persistent.steady_epoch_s:+200%",
        "finding:stale-worker-state",
        "finding:workers-leaked",
    )
    out, md = tmp_path / "r2.json", tmp_path / "r2.md"
    args = [a for g in gates for a in ("--fail-on", g)]
    run = _compare(
        tmp_path, "--baseline", str(edited), *args, "--json", str(out), "--markdown", str(md)
    )
    assert run.returncode == 1, run.stderr
    stderr = run.stderr.splitlines()
    assert stderr[-1] == (
        "loaderprof: gate failed: persistent.steady_epoch_s:+10%, finding:stale-worker-state:absent"
    )
    report = json.loads(out.read_text())
    got = {g["gate"]: g for g in report["gates"]}
    assert [g["status"] for g in report["gates"]] == ["fail", "pass", "fail", "skipped"]
    rel = got[gates[0]]
    assert rel["mode"] == "rel" and rel["value"] > 5 and rel["ci_low"] > 1.1
    # The baseline's figure as saved (edited), this run's a hundred times it.
    assert rel["baseline"] < report["persistent"]["steady_epoch_s"]["median"] / 5
    assert report["baseline"]["path"] == str(edited)
    assert report["baseline"]["created"] == base["created"]
    assert report["baseline"]["differences"] == []
    stdout = run.stdout
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("baseline: "))
    # A path too long for the line keeps its end.
    assert lines[at].endswith("edited.json") and lines[at + 1] == f"  saved {base['created']}"
    assert "new ÷ baseline; limit <= 1.100" in stdout
    assert "finding:stale-worker-state" in stdout and "1 found" in stdout
    for line in stdout.splitlines():
        assert len(line) <= 80, line
    assert "new ÷ baseline" in md.read_text()

    # Read back: the same screen; diff takes compare reports only, in one line.
    shown = run_cli("report", str(out), env={"COLUMNS": "80"})
    assert shown.returncode == 0 and "Gates: FAIL" in shown.stdout, shown.stderr
    refused = run_cli("diff", str(saved), str(out))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "compare-command report" in refused.stderr
    assert_nothing_left()
