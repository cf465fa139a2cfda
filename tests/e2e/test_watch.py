"""See NOTE [watch hook]. `loaderprof watch -- COMMAND` on real training scripts."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import ROOT, TESTS, finish, run_cli, script_site, watch_script
from loaderprof.report.json_report import load_schema

pytestmark = pytest.mark.e2e

HEADER = """
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __init__(self, n=32):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((4,), float(i))
"""


def _watch(
    tmp_path: Path, body: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[Any, dict[str, Any]]:
    return watch_script(tmp_path, HEADER + textwrap.dedent(body), *extra, env=env)


def _site(tmp_path: Path, text: str) -> str:
    return script_site(tmp_path, text)


def _alive(pids: list[int]) -> list[int]:
    """Those of `pids` not dead: a killed process stays a zombie until it is reaped,
    which init does a moment after its parent died too."""
    from loaderprof.inside import procfs

    deadline = time.monotonic() + 2
    while True:
        alive = [p for p in pids if procfs.state(p) not in (None, "Z")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _ids(report: dict[str, Any]) -> list[str]:
    return [f["id"] for f in report["findings"]]


def test_persistent_train_and_val_loaders(tmp_path: Path) -> None:
    run, report = _watch(
        tmp_path,
        """
        train = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)
        val = DataLoader(Items(16), batch_size=4, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            for batch in train:
                pass
            for batch in val:
                pass
            time.sleep(0.2)  # the rest of a training step: logging, a checkpoint
        """,
        *("--trace", str(tmp_path / "w.trace.json"), "--markdown", str(tmp_path / "w.md")),
        # Pools that live under a second: on a loaded machine a 500 ms walk could miss
        # one's USS altogether (it is then reported as unknown, not as 0).
        *("--uss-interval", "100"),
    )
    assert run.returncode == 0, run.stderr
    train, val = report["loaders"]
    assert train["site"] == _site(tmp_path, "train = DataLoader")
    assert val["site"] == _site(tmp_path, "val = DataLoader")
    for ld in (train, val):
        assert ld["persistent_workers"] and ld["workers_reused"] is True
        assert len(ld["epochs"]) == 3 and all(e["batches"] for e in ld["epochs"])
        assert len(ld["workers"]) == 2
        assert ld["peak_worker_uss_bytes"] > 0
    # Both pools alive at once, counted from PIDs.
    assert report["peak_worker_processes"] == 4
    assert set(_ids(report)) == {"idle-pools"}
    assert "DataLoaders" in run.stdout
    # The trace: each loader's 3 epochs on its own track, each worker's life on its own.
    trace = json.loads((tmp_path / "w.trace.json").read_text())["traceEvents"]
    epochs = [e for e in trace if e.get("cat") == "epoch"]
    assert len(epochs) == 6 and all(e["dur"] > 0 for e in epochs)
    lives = {e["pid"] for e in trace if e.get("cat") == "worker"}
    assert lives == {w["pid"] for ld in report["loaders"] for w in ld["workers"]}
    assert "| L1 |" in (tmp_path / "w.md").read_text()


def test_the_api_returns_the_report_the_cli_writes(tmp_path: Path) -> None:
    """`loaderprof.watch(...)`: the same pipeline as `loaderprof watch`, its report
    returned (and writable by the same registry, to the same schema)."""
    import loaderprof
    from loaderprof.model.watch import WatchReport
    from loaderprof.report.json_report import to_json

    script = tmp_path / "train.py"
    script.write_text(
        HEADER
        + textwrap.dedent(
            """
            loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)
            for epoch in range(2):
                for batch in loader:
                    pass
            sys.exit(3)
            """
        )
    )
    ticks: list[float] = []
    report = loaderprof.watch(
        [sys.executable, str(script)], sample_interval=20, uss_interval=100, on_tick=ticks.append
    )
    assert isinstance(report, WatchReport) and report.exit_code == 3
    (ld,) = report.loaders
    assert ld.site == _site(tmp_path, "loader = DataLoader")
    assert len(ld.epochs) == 2 and ld.workers_reused is True
    jsonschema.validate(
        json.loads(to_json(report)), load_schema("watch"), cls=jsonschema.Draft202012Validator
    )


def test_a_loader_rebuilt_every_epoch_and_the_exit_status(tmp_path: Path) -> None:
    # The project's own sitecustomize still runs, imported as `sitecustomize`.
    own = tmp_path / "site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE'] = __name__\n")
    run, report = _watch(
        tmp_path,
        """
        for epoch in range(3):
            loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)
            for batch in loader:
                pass
        sys.exit(7 if os.environ.get("OWN_SITE") == "sitecustomize" else 9)
        """,
        "--fail-on",
        "finding:loader-recreated",
        env={"PYTHONPATH": str(own)},
    )
    # The command's own status passes through; a gate cannot turn a failure into 1.
    assert run.returncode == 7, run.stderr
    assert report["exit_code"] == 7
    assert len(report["loaders"]) == 3
    assert len(report["findings"]) == 1, [(f["id"], f["title"]) for f in report["findings"]]
    (finding,) = report["findings"]
    assert finding["id"] == "loader-recreated"
    assert finding["evidence"]["persistent_workers"] is True
    assert finding["evidence"]["site"] == _site(tmp_path, "loader = DataLoader")


def test_a_non_persistent_loader_under_spawn_is_a_candidate(tmp_path: Path) -> None:
    run, report = _watch(
        tmp_path,
        """
        if __name__ == "__main__":
            loader = DataLoader(Items(), batch_size=8, num_workers=2,
                                multiprocessing_context="spawn")
            for epoch in range(2):
                for batch in loader:
                    pass
        """,
        "--fail-on",
        "finding:persistence-candidate",
    )
    (ld,) = report["loaders"]
    assert ld["start_method"] == "spawn" and ld["workers_reused"] is False
    # Every epoch started 2 spawned workers: 4 worker processes, each seen by its pid.
    assert len(ld["workers"]) == 4
    assert all(w["started_s"] is not None and w["ready_s"] for w in ld["workers"])
    assert _ids(report) == ["persistence-candidate"]
    # The gate turns the command's 0 into 1.
    assert run.returncode == 1 and "watch found: persistence-candidate" in run.stderr


def test_a_pool_left_alive_at_exit_is_a_leak(tmp_path: Path) -> None:
    run, report = _watch(
        tmp_path,
        """
        loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)
        for batch in loader:
            pass
        sys.stdout.flush()
        os._exit(0)  # no shutdown: the workers outlive their parent
        """,
    )
    assert run.returncode == 0, run.stderr
    (finding,) = [f for f in report["findings"] if f["id"] == "workers-leaked"]
    worker_pids = {w["pid"] for w in report["loaders"][0]["workers"]}
    # torch's worker loop checks that its parent lives after each task, and otherwise
    # every 5 s: a worker still holding an index when the parent died leaves at once
    # (on a loaded machine, all of them could), an idle one 5 s later. The epoch ran
    # to its end, so the persistent workers sit idle: both are left, and leaked.
    leaked = set(finding["evidence"]["pids"])
    assert leaked == worker_pids, (leaked, worker_pids, report["leaked_pids"])
    # watch killed them after recording them.
    time.sleep(0.2)
    assert not [p for p in worker_pids if Path(f"/proc/{p}").exists()]


def test_sigint_reaches_torchrun_ranks_in_their_own_sessions(tmp_path: Path) -> None:
    """torchrun starts each rank in a session of its own; these ranks and their
    workers ignore SIGINT and SIGTERM. The forwarded SIGINT, then SIGTERM, then
    SIGKILL must still reach every one, and what was measured is written."""
    script, marker = tmp_path / "train.py", tmp_path / "two-epochs-done"
    script.write_text(
        HEADER
        + textwrap.dedent(
            f"""
            import signal
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            loader = DataLoader(Items(), batch_size=4, num_workers=1, persistent_workers=True)
            for epoch in range(100000):
                for batch in loader:
                    time.sleep(0.01)
                if epoch == 1:
                    open({str(marker)!r} + os.environ["RANK"], "w").close()
            """
        )
    )
    out = tmp_path / "w.json"
    torchrun = (sys.executable, "-m", "torch.distributed.run", "--standalone")
    stop_fast = ("--kill-after", "1", "--json", str(out))
    ranks = ("--nproc-per-node", "2", str(script))
    proc = subprocess.Popen(
        [sys.executable, "-m", "loaderprof", "watch", *stop_fast, "--", *torchrun, *ranks],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not all(Path(f"{marker}{r}").exists() for r in (0, 1)):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    # Forwarded, SIGTERM at 1 s (--kill-after), SIGKILL 1 s later; then the report.
    # The timeout is the hang guard: without the escalation the ranks ignore both
    # signals and never end.
    _, err = finish(proc, timeout=60)
    report = json.loads(out.read_text())
    assert report["interrupted"] is True and report["exit_code"] != 0, err
    # loaderprof says so in a line of its own, after whatever the command printed.
    assert "loaderprof: the signal was passed on to the command, which ended with status" in err
    # Each rank's hook named its loader 1; the report tells them apart.
    assert [
        (ld["id"], ld["rank"]) for ld in sorted(report["loaders"], key=lambda x: x["rank"])
    ] == [
        ("L1", 0),
        ("L2", 1),
    ] or [(ld["id"], ld["rank"]) for ld in report["loaders"]] == [("L1", 1), ("L2", 0)]
    assert len({ld["pid"] for ld in report["loaders"]}) == 2
    assert "idle-pools" not in _ids(report)
    pids = [ld["pid"] for ld in report["loaders"]]
    pids += [w["pid"] for ld in report["loaders"] for w in ld["workers"]]
    assert len(pids) == 4 and all(len(ld["epochs"]) >= 2 for ld in report["loaders"])
    assert _alive(pids) == []


def test_a_command_not_found_is_one_line_and_exit_2() -> None:
    run = run_cli("watch", "--", "no-such-command-xyz")
    assert run.returncode == 2
    lines = run.error_lines()
    assert lines == ["loaderprof: error: command not found: no-such-command-xyz"]


def test_a_subclass_and_statefuldataloader_are_watched(tmp_path: Path) -> None:
    pytest.importorskip("torchdata.stateful_dataloader", reason="torchdata is not installed")
    run, report = _watch(
        tmp_path,
        """
        from torchdata.stateful_dataloader import StatefulDataLoader


        class ProjectLoader(DataLoader):
            def __init__(self, dataset, **kwargs):
                super().__init__(dataset, batch_size=4, **kwargs)


        if __name__ == "__main__":
            mine = ProjectLoader(Items(), num_workers=1, persistent_workers=True)
            stateful = StatefulDataLoader(Items(), batch_size=8, num_workers=2,
                                          persistent_workers=True)
            for epoch in range(2):
                for batch in mine:
                    pass
                for batch in stateful:
                    pass
        """,
    )
    assert run.returncode == 0, run.stderr
    mine, stateful = report["loaders"]
    assert mine["cls"].endswith("ProjectLoader") and stateful["cls"].endswith("StatefulDataLoader")
    # Where the script built each one, not the subclass's super() call.
    assert mine["site"] == _site(tmp_path, "mine = ProjectLoader")
    assert stateful["site"] == _site(tmp_path, "stateful = StatefulDataLoader")
    assert [e["batches"] for e in mine["epochs"]] == [8, 8]
    assert [e["batches"] for e in stateful["epochs"]] == [4, 4]
    assert mine["workers_reused"] is True and stateful["workers_reused"] is True


def test_a_persistent_pool_growing_and_leaking_files_every_epoch(tmp_path: Path) -> None:
    run, report = _watch(
        tmp_path,
        """
        import tempfile


        class Caching(Items):
            cache, files = [], []

            def __getitem__(self, i):
                self.cache.append(bytes([i % 251]) * (1 << 20))  # 1 MiB a read, kept
                if i % 16 == 0:
                    self.files.append(tempfile.TemporaryFile())  # never closed
                return super().__getitem__(i)


        loader = DataLoader(Caching(), batch_size=4, num_workers=2, persistent_workers=True)
        for epoch in range(4):
            for batch in loader:
                pass
            time.sleep(0.4)  # checkpointing, logging: the pool sits idle
        """,
        "--uss-interval",
        "100",
    )
    assert run.returncode == 0, run.stderr
    (ld,) = report["loaders"]
    assert len(ld["idle_uss_by_epoch"]) >= 3
    (finding,) = [f for f in report["findings"] if f["id"] == "memory-grows-every-epoch"]
    # Each worker reads 16 items an epoch: 2 × 16 MiB more after every epoch.
    assert finding["evidence"]["growth_bytes_per_epoch"] >= 24 * 1024 * 1024
    # Worker 0 reads items 0 and 16 and opens a file for each, every epoch.
    (leak,) = [f for f in report["findings"] if f["id"] == "leaked-files"]
    series = leak["evidence"]["files_by_epoch"]
    assert series == sorted(series) and series[-1] - series[0] >= 2 * (len(series) - 1)
    # See NOTE [growth to tell]. 4 epochs are too few to tell a leak from a cache that
    # fills, by the rule compare uses: found, at info, saying how many would tell.
    for f in (finding, leak):
        assert (f["severity"], f["evidence"]["trend"]) == ("info", "too-few"), f


def test_files_leaked_by_epochs_run_back_to_back_are_counted_by_each_worker(
    tmp_path: Path,
) -> None:
    # No pause between epochs for the sampler to read in: each persistent worker
    # counts what it holds itself as its next epoch begins.
    run, report = _watch(
        tmp_path,
        """
        import tempfile


        class Leaky(Items):
            files = []

            def __getitem__(self, i):
                if i % 4 == 0:  # the first item of every batch: both workers leak
                    self.files.append(tempfile.TemporaryFile())  # never closed
                return super().__getitem__(i)


        loader = DataLoader(Leaky(), batch_size=4, num_workers=2, persistent_workers=True)
        for epoch in range(4):
            for batch in loader:
                pass
        """,
    )
    assert run.returncode == 0, run.stderr
    (leak,) = [f for f in report["findings"] if f["id"] == "leaked-files"]
    assert leak["evidence"]["workers_affected"] == 2, leak
    # Each worker builds 4 batches an epoch: 4 more files as each later epoch begins,
    # and as it exits: a reading after each of the 4 epochs.
    for series in leak["evidence"]["files_by_epoch_by_worker"].values():
        steps = [b - a for a, b in itertools.pairwise(series)]
        assert steps == [4, 4, 4], leak
    assert leak["evidence"]["epochs_seen"] == 4
    assert "let the script run 10 or more epochs" in leak["fix"]


def test_the_hook_never_fails_the_program_it_watches(tmp_path: Path) -> None:
    """Records that cannot be written (here: a directory that is not there; a full
    disk alike) are lost with one line, and the training runs to its end."""
    script = tmp_path / "train.py"
    script.write_text(
        "from loaderprof.inside import hook\nhook.install()\n"
        + HEADER
        + textwrap.dedent(
            """
            loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)
            print(sum(len(b) for epoch in range(2) for b in loader))
            """
        )
    )
    env = {**os.environ, "LOADERPROF_WATCH_EVENTS": str(tmp_path / "gone" / "events.jsonl")}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["64"]
    lost = [ln for ln in run.stderr.splitlines() if ln.startswith("loaderprof watch:")]
    assert len(lost) == 1 and "a record was lost" in lost[0]


def test_copy_on_read_in_a_forked_pool(tmp_path: Path) -> None:
    """A Dataset of millions of Python ints built in the parent: forked workers that
    read them turn shared pages private (compare's rule, NOTE [copy-on-read])."""
    run, report = _watch(
        tmp_path,
        f"""
        sys.path.insert(0, {str(TESTS)!r})
        from lp_findings import PythonObjects

        loader = DataLoader(PythonObjects(), batch_size=4, num_workers=2,
                            persistent_workers=True, multiprocessing_context="fork")
        for epoch in range(5):
            for batch in loader:
                time.sleep(0.02)
            time.sleep(0.2)
        """,
        "--uss-interval",
        "100",
    )
    assert run.returncode == 0, run.stderr
    assert _ids(report) == ["copy-on-read"], report["findings"]
    ev = report["findings"][0]["evidence"]
    assert ev["loader"] == "L1" and ev["samples_read"] > 0
    assert ev["uss_growth_bytes"] >= 16 << 20 and ev["rss_growth_bytes"] < ev["uss_growth_bytes"]


def test_stale_worker_state_under_forkserver(tmp_path: Path) -> None:
    """set_epoch on the main process's Dataset never reaches a persistent pool's
    copies (compare's rule, NOTE [stale worker state]); here under forkserver."""
    run, report = _watch(
        tmp_path,
        """
        class Epoched(Items):
            def __init__(self):
                super().__init__()
                self.epoch = 0

            def set_epoch(self, epoch):
                self.epoch = epoch


        if __name__ == "__main__":
            ds = Epoched()
            loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True,
                                multiprocessing_context="forkserver")
            for epoch in range(3):
                ds.set_epoch(epoch)
                for batch in loader:
                    pass
        """,
    )
    assert run.returncode == 0, run.stderr
    (ld,) = report["loaders"]
    assert ld["start_method"] == "forkserver" and ld["workers_reused"] is True
    assert _ids(report) == ["stale-worker-state"], report["findings"]
    ev = report["findings"][0]["evidence"]
    assert (ev["attribute"], ev["epoch"], ev["main_value"], ev["worker_value"]) == (
        "epoch",
        2,
        "1",
        "0",
    )
    assert sorted(ev["workers"]) == [0, 1] and ev["loader"] == "L1"
    # The main process at each of 3 epochs; each worker at epochs 2 and 3.
    roles = [(s["role"], s["epoch"]) for s in ld["dataset_states"]]
    assert (
        sorted(roles)
        == [("main", 1), ("main", 2), ("main", 3)] + [("worker", 2)] * 2 + [("worker", 3)] * 2
    )


def test_an_iterator_kept_alive_is_a_pool_of_its_own_workers(tmp_path: Path) -> None:
    # The first iterator's workers may begin after the loop's iter() (a busy machine):
    # each worker is its iterator's by the base seed torch gave it (inside/seed.py).
    run, report = _watch(
        tmp_path,
        """
        loader = DataLoader(Items(), batch_size=4, num_workers=2)
        kept = iter(loader)
        for epoch in range(2):
            for batch in loader:
                pass
        del kept
        """,
    )
    assert run.returncode == 0, run.stderr
    (ld,) = report["loaders"]
    assert [len(e["new_worker_pids"]) for e in ld["epochs"]] == [2, 2, 2], ld["epochs"]
    assert [p["workers"] for p in report["pools"]] == [2, 2, 2], report["pools"]
    assert len({p for e in ld["epochs"] for p in e["new_worker_pids"]}) == 6
