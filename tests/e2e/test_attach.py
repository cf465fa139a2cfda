"""See NOTE [pools from outside]. `loaderprof watch --pid PID` on real training jobs the
tests start and then watch from outside."""

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
import psutil
import pytest

from conftest import ROOT, assert_nothing_left, finish, leftover_processes, run_cli
from loaderprof.report.json_report import load_schema

pytestmark = pytest.mark.e2e

# The job waits for GO before it builds a loader: the watch is under way by then.
HEADER = """
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset


class Busy(Dataset):
    # Each item costs 10 ms of CPU (a pool at work is told by its CPU time) and, with
    # `grow`, keeps that many bytes for good (a cache without a bound).
    def __init__(self, n, grow=0):
        self.n, self.grow, self.kept = n, grow, []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.01:
            pass
        if self.grow:
            self.kept.append(bytearray(self.grow))
        return torch.full((4,), float(i))


GO, STOP = sys.argv[1], sys.argv[2]


def start():
    print("ready", flush=True)
    while not os.path.exists(GO):
        time.sleep(0.02)
"""


class Job:
    """A training job the test starts; `watch` attaches to it."""

    def __init__(self, tmp_path: Path, body: str) -> None:
        script = tmp_path / "job.py"
        # Under a guard: spawn and forkserver import the script again, as __mp_main__.
        main = textwrap.indent(textwrap.dedent(body), "    ")
        script.write_text(f"{HEADER}\n\nif __name__ == '__main__':\n    start()\n{main}")
        self.go, self.stop = tmp_path / "go", tmp_path / "stop"
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.go), str(self.stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def watch(self, out: Path, *extra: str) -> subprocess.Popen[str]:
        """Start `watch --pid` on it, and let the job go once the watch said it began."""
        env = {**os.environ, "COLUMNS": "80", "PYTHONWARNINGS": "ignore"}
        pid = str(self.proc.pid)
        watch = subprocess.Popen(
            [sys.executable, "-m", "loaderprof", "watch", "--pid", pid, "--json", str(out), *extra],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watch.stderr is not None
        first = watch.stderr.readline()
        assert first.startswith("loaderprof watch: watching pid"), first
        self.go.touch()
        return watch


def _report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    assert data["kind"] == "attach"
    jsonschema.validate(data, load_schema("attach"), cls=jsonschema.Draft202012Validator)
    return data


def _ids(report: dict[str, Any]) -> list[str]:
    return [f["id"] for f in report["findings"]]


def test_a_persistent_train_pool_and_a_validation_pool_rebuilt_every_epoch(
    tmp_path: Path,
) -> None:
    job = Job(
        tmp_path,
        """
        train = DataLoader(Busy(200), batch_size=4, num_workers=2, persistent_workers=True)
        # Its passes idle the train pool for 0.4 s and more, past PAUSE_MIN_S on a fast,
        # idle machine too (a 0.2 s pass left the train pool's epochs untold).
        val = DataLoader(Busy(80), batch_size=4, num_workers=2)
        # Lightning's sanity check: a validation batch, its iterator alive as the train
        # pool starts (born within the birth window of its workers), dropped later.
        sanity = iter(val)
        next(sanity)
        time.sleep(0.08)  # the framework's own work between the two
        for epoch in range(3):
            for _ in train:
                pass
            sanity = None
            for _ in val:
                pass
        """,
    )
    out, trace = tmp_path / "a.json", tmp_path / "a.trace.json"
    stdout, stderr = finish(job.watch(out, "--trace", str(trace)), timeout=90)
    assert job.proc.wait(timeout=30) == 0  # the job ran to its end, untouched
    report = _report(out)
    assert report["ended_by"] == "job exit", stderr
    # Two pools, not one of both loaders' workers: the sanity pool ended first.
    train, val = sorted(report["pools"], key=lambda p: not p["persistent"])
    assert (train["workers"], len(train["generations"]), train["persistent"]) == (2, 1, True)
    assert (val["workers"], len(val["generations"]), val["persistent"]) == (2, 4, False)
    assert (val["epochs_inferred"], val["epochs_from"]) == (4, "pool births")
    assert {"pool-rebuilt", "idle-pools"} <= set(_ids(report)), report["findings"]
    rebuilt = next(f for f in report["findings"] if f["id"] == "pool-rebuilt")
    assert rebuilt["evidence"]["pool"] == val["id"]
    assert rebuilt["evidence"]["not_seen"]
    # Births and exits on one clock: every worker was born after the job was let go,
    # moments after the watch began, and each validation pool exited before the next.
    gens = train["generations"] + val["generations"]
    assert all(w["born_s"] > -0.5 for g in gens for w in g["workers"])
    for a, b in itertools.pairwise(val["generations"]):
        assert a["born_s"] < a["ended_s"] <= b["born_s"] + report["interval_s"]
    # Both pools' workers are real children of the job, and fork's.
    assert {train["parent_pid"], val["parent_pid"]} == {job.proc.pid}
    assert train["start_method"] == val["start_method"] == "fork"
    # The screen fits 80 columns and names both pools.
    assert max(len(line) for line in stdout.splitlines()) <= 80
    assert "P1" in stdout and "P2" in stdout
    # The trace draws what the JSON says: each validation generation, each worker.
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e.get("cat") == "pool"]
    assert len(spans) == len(train["generations"]) + len(val["generations"])
    workers = {e["pid"] for e in events if e.get("cat") == "worker"}
    assert workers == {w["pid"] for g in gens for w in g["workers"]}
    assert_nothing_left()


def test_a_pool_whose_memory_grows_every_epoch(tmp_path: Path) -> None:
    job = Job(
        tmp_path,
        """
        # A Python program of the job's own (a metrics service): not a pool. Nor a
        # multiprocessing Pool's forks (preprocessing), which have the job's command
        # line as the loader's workers do: only those name themselves pt_data_worker
        # (NOTE [workers by name]; without it, one pool of 4 workers).
        import multiprocessing, subprocess
        service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        pre = multiprocessing.get_context("fork").Pool(2)
        pre.map(abs, range(4))
        loader = DataLoader(
            Busy(80, grow=300_000), batch_size=4, num_workers=2, persistent_workers=True
        )
        for epoch in range(4):
            for _ in loader:
                pass
            time.sleep(0.8)
        pre.close()
        pre.join()
        service.kill()
        service.wait()
        """,
    )
    out = tmp_path / "a.json"
    # Whole walks every 2 s fall in few of the 0.8 s pauses: each pause is read as it
    # begins (NOTE [pauses not read]).
    finish(job.watch(out, "--uss-interval", "2000"), timeout=90)
    assert job.proc.wait(timeout=30) == 0
    report = _report(out)
    (pool,) = report["pools"]
    assert pool["persistent"] is True and pool["workers"] == 2
    roles = sorted(h["role"] for h in report["helpers"])
    assert roles == ["Python process", *["multiprocessing child"] * 2], report["helpers"]
    assert report["peak_worker_processes"] == 2
    assert pool["epochs_from"] == "CPU activity"
    assert len(pool["idle_uss_by_epoch"]) >= 3
    assert pool["idle_after_epochs"] == list(range(1, len(pool["idle_uss_by_epoch"]) + 1))
    series = {k: pool[k] for k in ("epochs_inferred", "idle_uss_by_epoch", "idle_rss_by_epoch")}
    assert "memory-grows-every-epoch" in _ids(report), series
    growth = next(f for f in report["findings"] if f["id"] == "memory-grows-every-epoch")
    assert growth["evidence"]["pool"] == pool["id"]
    assert growth["evidence"]["epochs_inferred_from"] == "CPU activity"
    # 80 items of 300 kB kept an epoch: 24.0 MB (22.9 MiB) more in the pool each epoch,
    # counted per epoch, not per reading.
    assert 20e6 <= growth["evidence"]["growth_bytes_per_epoch"] <= 30e6
    assert_nothing_left()


def test_workers_at_once_count_a_pool_started_just_before_the_last_one_exited(
    tmp_path: Path,
) -> None:
    job = Job(
        tmp_path,
        """
        train = DataLoader(Busy(40), batch_size=4, num_workers=2)
        val = DataLoader(Busy(60), batch_size=4, num_workers=2)
        for epoch in range(3):
            batches = iter(train)
            for _ in range(len(train)):
                next(batches)
            # As Lightning does: the next loader's workers start before the last
            # iterator's exit, which ends its workers 0.1 s later, before the watch
            # places the new forked workers (0.2 s after their birth).
            checks = iter(val)
            time.sleep(0.1)
            del batches
            for _ in checks:
                pass
        """,
    )
    out = tmp_path / "a.json"
    finish(job.watch(out), timeout=90)
    assert job.proc.wait(timeout=30) == 0
    report = _report(out)
    gens = [g for p in report["pools"] for g in p["generations"]]
    assert sum(len(g["workers"]) for g in gens) == 12
    # The header's count is the report's own lifetimes': 4 alive at once, not the 2
    # of the pools the watch had placed by each tick.
    assert report["peak_worker_processes"] == 4
    assert_nothing_left()


def test_workers_that_live_less_than_the_fork_exec_delay_are_counted(tmp_path: Path) -> None:
    # A forked child is placed once it is FORK_EXEC_S old or gone: one gone sooner
    # never exec'd, so it was a worker (a short pass's), met as it was. Each worker
    # makes 3 batches (about 0.15 s alive, 3 ticks): with 1, it lived 0.09 s, and a
    # tick late under a full suite's load missed one of them altogether.
    job = Job(
        tmp_path,
        """
        short = DataLoader(Busy(12), batch_size=2, num_workers=2)
        for epoch in range(3):
            for _ in short:
                pass
            time.sleep(0.5)
        """,
    )
    out = tmp_path / "a.json"
    finish(job.watch(out), timeout=90)
    assert job.proc.wait(timeout=30) == 0
    report = _report(out)
    lives = [w for p in report["pools"] for g in p["generations"] for w in g["workers"]]
    assert len(lives) == 6, report["pools"]
    assert max(w["exited_s"] - w["born_s"] for w in lives) < 0.5
    assert_nothing_left()


def test_a_job_that_exits_leaving_its_workers_behind(tmp_path: Path) -> None:
    # os._exit skips the loader's shutdown: its workers notice their parent is gone
    # only at their next status check, seconds later.
    job = Job(
        tmp_path,
        """
        loader = DataLoader(Busy(400), batch_size=4, num_workers=2, persistent_workers=True)
        it = iter(loader)
        next(it)
        time.sleep(0.5)
        os._exit(0)
        """,
    )
    out = tmp_path / "a.json"
    try:
        # A service's health check: fail when workers outlive the job.
        watch = job.watch(out, "--fail-on", "finding:workers-leaked")
        _, stderr = finish(watch, timeout=90)
        assert watch.returncode == 1, stderr
        assert "loaderprof: watch found: workers-leaked" in stderr
        job.proc.wait(timeout=30)
        report = _report(out)
        (pool,) = report["pools"]
        workers = {w["pid"] for g in pool["generations"] for w in g["workers"]}
        assert report["ended_by"] == "job exit"
        assert report["left_behind_pids"] and set(report["left_behind_pids"]) <= workers
        (left,) = [f for f in report["findings"] if f["id"] == "workers-leaked"]
        assert left["evidence"]["pools"] == [pool["id"]]
        # Nothing was signalled: those left are still running when the watch ends.
        alive = [p for p in report["left_behind_pids"] if psutil.pid_exists(p)]
        assert alive
    finally:
        for p in leftover_processes(timeout=0):
            p.kill()


def test_duration_and_ctrl_c_end_the_watch_not_the_job(tmp_path: Path) -> None:
    # Under forkserver: the workers' parent is the server, a helper, not a worker.
    job = Job(
        tmp_path,
        """
        loader = DataLoader(
            Busy(40),
            batch_size=4,
            num_workers=2,
            persistent_workers=True,
            multiprocessing_context="forkserver",
        )
        while not os.path.exists(STOP):
            for _ in loader:
                pass
        """,
    )
    try:
        out = tmp_path / "a.json"
        watch = job.watch(out, "--duration", "1.5")
        _, stderr = finish(watch, timeout=60)
        assert watch.returncode == 0, stderr
        assert _report(out)["ended_by"] == "duration"
        assert job.proc.poll() is None

        out2 = tmp_path / "b.json"
        watch = job.watch(out2)
        deadline = time.monotonic() + 30
        while not out2.exists() and time.monotonic() < deadline:
            # Until its pool was seen, then Ctrl-C.
            if len(psutil.Process(job.proc.pid).children(recursive=True)) >= 4:
                time.sleep(0.5)
                watch.send_signal(signal.SIGINT)
                break
            time.sleep(0.05)
        _, stderr = finish(watch, timeout=30)
        assert watch.returncode == 130, stderr
        assert "SIGINT ended the watch (the job goes on)" in stderr, stderr
        assert "after the report" not in stderr
        report = _report(out2)
        assert (report["ended_by"], report["interrupted"]) == ("interrupt", True)
        (pool,) = report["pools"]
        assert (pool["workers"], pool["start_method"]) == (2, "forkserver")
        server = {h["pid"]: h["role"] for h in report["helpers"]}
        assert server.get(pool["parent_pid"]) == "forkserver"
        assert job.proc.poll() is None  # Ctrl-C ended the watch, not the job
    finally:
        job.stop.touch()
        assert job.proc.wait(timeout=30) == 0
    assert_nothing_left()


def test_a_bad_pid_is_one_line_and_exit_2(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_CAPTURE)
    run = run_cli("watch", "--pid", gone.stdout.strip())
    assert run.returncode == 2
    assert run.error_lines() == [f"loaderprof: error: --pid {gone.stdout.strip()}: no such process"]
    both = run_cli("watch", "--pid", str(os.getpid()), "--", sys.executable, "-c", "pass")
    assert both.returncode == 2
    assert len(both.error_lines()) == 1 and "one or the other" in both.error_lines()[0]
    # Checked before the watch starts: a running job has findings to gate on, no arms.
    gate = run_cli("watch", "--pid", str(os.getpid()), "--fail-on", "steady_epoch_ratio:<1")
    assert gate.returncode == 2
    assert gate.error_lines() == [
        "loaderprof: error: --fail-on 'steady_epoch_ratio:<1': watch gates on findings only "
        "(finding:ID)"
    ]

    # A bad --duration is refused before the banner says how long it will watch.
    short = run_cli("watch", "--pid", str(os.getpid()), "--duration", "-1")
    assert short.returncode == 2
    assert "watching pid" not in short.stderr
    assert short.error_lines() == ["loaderprof: error: --duration -1: use seconds > 0"]


def test_a_job_that_is_not_python_is_watched_with_a_warning_said_at_once() -> None:
    # A launcher may start the training later: watched, but the user hears at once
    # that it is not Python (a watch of `sleep` read "no worker pool" only at its end).
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        run = run_cli("watch", "--pid", str(sleeper.pid), "--duration", "0.5", spare=[sleeper.pid])
        assert run.returncode == 0, run.stderr
        warning = f"pid {sleeper.pid} is not a Python process"
        assert warning in run.stderr and "Traceback" not in run.stderr
        assert run.stderr.index("watching pid") < run.stderr.index(warning)
    finally:
        sleeper.kill()
        sleeper.wait()


_CAPTURE: dict[str, Any] = {"capture_output": True, "text": True, "check": True}
