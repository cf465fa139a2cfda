"""See NOTE [watch hook]. A watched run's events assembled and checked, without processes."""

from __future__ import annotations

import pytest

from loaderprof.measure.readings import peak_worker_processes
from loaderprof.watching.assemble import by_kind, loaders, pools
from loaderprof.watching.findings import find
from loaderprof.watching.session import exit_code_of

S = 1_000_000_000


def _ev(ev: str, t: float, pid: int = 100, **kw: object) -> dict[str, object]:
    return {"ev": ev, "t": int(t * S), "pid": pid, **kw}


def _loader(lid: str, t: float, site: str, persistent: bool) -> dict[str, object]:
    return _ev(
        "loader_created",
        t,
        loader=lid,
        site=site,
        cls="torch.utils.data.DataLoader",
        num_workers=2,
        persistent_workers=persistent,
        prefetch_factor=2,
        pin_memory=False,
        batch_size=4,
        start_method="fork",
        dataset_type="x.D",
        dataset_len=32,
    )


def _epoch(
    lid: str, start: float, wait: float, wall: float, pids: tuple[int, ...]
) -> list[dict[str, object]]:
    evs = [_ev("iter_start", start, loader=lid)]
    for k, pid in enumerate(pids):
        evs.append(
            _ev(
                "worker_init",
                start + 0.01,
                pid=pid,
                worker_id=k,
                loader=lid,
                proc_start=int((start + 0.005) * S),
            )
        )
        evs.append(_ev("worker_ready", start + 0.02, pid=pid, worker_id=k))
    evs += [
        _ev("iter_first_batch", start + wait, loader=lid),
        _ev("iter_end", start + wall, loader=lid, batches=8),
    ]
    # Its workers exit with the epoch (non-persistent, or a loader dropped after it).
    evs += [_ev("worker_exit", start + wall + 0.01, pid=pid) for pid in pids]
    return evs


def test_a_rebuilt_loader_and_a_non_persistent_candidate() -> None:
    evs = [_loader("L1", 0.1, "train.py:9", False)]
    evs += _epoch("L1", 1.0, 0.4, 0.9, (201, 202))
    evs += _epoch("L1", 2.0, 0.4, 0.9, (203, 204))
    for i, t in enumerate((4.0, 5.0)):
        evs.append(_loader(f"L{i + 2}", t - 0.05, "train.py:20", True))
        evs += _epoch(f"L{i + 2}", t, 0.3, 0.8, (301 + 2 * i, 302 + 2 * i))
    found = loaders(by_kind(evs), [], {}, 0, int(6 * S))
    l1 = found[0]
    assert l1.workers_reused is False and len(l1.workers) == 4
    assert [e.new_worker_pids for e in l1.epochs] == [(201, 202), (203, 204)]
    assert l1.steady_epoch_s is not None and l1.steady_epoch_s.median == pytest.approx(0.9)
    ids = [f.id for f in find(found, pools(found, 6.0), ())]
    # L1: 0.4 s of a 0.9 s epoch waiting for workers; L2 and L3: one site, once each.
    assert ids == ["loader-recreated", "persistence-candidate"]


def test_the_trainers_eval_loaders_rebuilt_at_its_train_loaders_site_are_named() -> None:
    """The HF Trainer builds its train loader and an eval loader for each evaluation at
    one site (inside/frameworks.py): the eval loaders, each iterated once, are a rebuilt
    loader apart from the train loader, and the fix is the Trainer's own setting."""
    setting = "TrainingArguments.dataloader_persistent_workers"
    trainer = {"setting": setting, "built_for": "train"}
    evs = [{**_loader("L1", 0.1, "train.py:30", False), **trainer}]
    for k in range(3):
        t = 1.0 + 2 * k
        evs += _epoch("L1", t, 0.3, 0.9, (201 + 4 * k, 202 + 4 * k))
        evs.append({**_loader(f"L{k + 2}", t + 0.95, "train.py:30", False), **trainer})
        evs[-1]["built_for"] = "eval"
        evs += _epoch(f"L{k + 2}", t + 1.0, 0.3, 0.5, (203 + 4 * k, 204 + 4 * k))
    found = loaders(by_kind(evs), [], {}, 0, int(8 * S))
    assert [ld.built_for for ld in found] == ["train", "eval", "eval", "eval"]
    by_id = {f.id: f for f in find(found, pools(found, 8.0), ("python", "train.py"))}
    rebuilt = by_id["loader-recreated"]
    assert rebuilt.evidence["loaders"] == ["L2", "L3", "L4"]
    assert "every evaluation" in rebuilt.title and "3 eval DataLoaders" in rebuilt.title
    assert rebuilt.fix.startswith(f"set {setting}=True")
    # The train loader's own candidate names the setting the user turns it on with.
    assert by_id["persistence-candidate"].fix.endswith(
        f"then set {setting}=True (the framework builds this loader)"
    )


def test_an_iterator_kept_alive_keeps_its_workers_whenever_each_began() -> None:
    # `it = iter(loader)` at 1.00 s, then `for batch in loader` at 1.01 s: on a busy
    # machine the first iterator's second worker begins after the second iter().
    # Each worker's base seed (seed less its id) names its iterator, as the hook reads
    # it from each iterator after iter() returned.
    evs = [_loader("L1", 0.1, "train.py:9", False)]
    for t, pool in ((1.0, 7), (1.01, 9)):
        evs += [
            _ev("iter_start", t, loader="L1"),
            _ev("iter_pool", t + 0.001, loader="L1", pool=pool),
        ]
    inits = ((201, 0, 1.005, 7), (202, 1, 1.02, 7), (203, 0, 1.03, 9), (204, 1, 1.04, 9))
    for pid, k, t, pool in inits:
        started = int((t - 0.004) * S)
        evs.append(
            _ev("worker_init", t, pid=pid, worker_id=k, loader="L1", pool=pool, proc_start=started)
        )
    evs += [_ev("iter_first_batch", 1.3, loader="L1"), _ev("iter_end", 2.0, loader="L1")]
    evs += _epoch("L1", 2.5, 0.3, 0.9, (205, 206))
    found = loaders(by_kind(evs), [], {}, 0, int(4 * S))
    (ld,) = found
    assert [e.new_worker_pids for e in ld.epochs] == [(201, 202), (203, 204), (205, 206)]
    assert [p.workers for p in pools(found, 4.0)] == [2, 2, 2]
    # Without the seeds (events from before them), the stamps place each worker.
    unseeded = [{k: v for k, v in ev.items() if k != "pool"} for ev in evs]
    (old,) = loaders(by_kind(unseeded), [], {}, 0, int(4 * S))
    assert [e.new_worker_pids for e in old.epochs] == [(201,), (202, 203, 204), (205, 206)]


def test_a_candidate_is_read_from_the_epochs_after_the_cold_one() -> None:
    # A cold first epoch (0.8 s of waiting) must not set the figure a user is told
    # every epoch pays: the later ones wait 0.3 s and 0.5 s.
    evs = [_loader("L1", 0.1, "train.py:9", False)]
    for start, wait in ((1.0, 0.8), (3.0, 0.3), (5.0, 0.5)):
        evs += _epoch("L1", start, wait, 1.0, (int(start * 100), int(start * 100) + 1))
    found = loaders(by_kind(evs), [], {}, 0, int(7 * S))
    (cand,) = [f for f in find(found, pools(found, 7.0), ()) if f.id == "persistence-candidate"]
    assert cand.evidence["steady_epochs"] == 2 and cand.evidence["epochs"] == 3
    assert cand.evidence["median_first_batch_s"] == pytest.approx(0.4)
    assert "its 2 epochs after the first waited a median 0.40 s" in cand.title
    # The fix names the watched command itself under compare's command form.
    assert "loaderprof compare DATASET --num-workers" in cand.fix
    named = find(found, pools(found, 7.0), (), ("python", "train.py", "--lr", "0.1"))
    (cand,) = [f for f in named if f.id == "persistence-candidate"]
    assert "`loaderprof compare -- python train.py --lr 0.1`" in cand.fix


def test_only_worker_processes_count_as_leaked() -> None:
    evs = [_loader("L1", 0.1, "t.py:3", True), *_epoch("L1", 1.0, 0.1, 0.5, (201, 202))]
    found = loaders(by_kind(evs), [], {}, 0, int(2 * S))
    assert [f.id for f in find(found, (), (999,))] == []
    (leak,) = find(found, (), (201, 999))
    assert leak.id == "workers-leaked" and leak.evidence["pids"] == [201]
    assert leak.evidence["other_processes"] == 1


def test_exit_codes_as_a_shell_reports_them() -> None:
    assert (exit_code_of(0), exit_code_of(7), exit_code_of(-2), exit_code_of(None)) == (
        0,
        7,
        130,
        1,
    )
    assert peak_worker_processes([], {1}) is None


def test_the_watch_schema_names_every_field() -> None:
    import dataclasses

    from loaderprof.model.watch import WatchedEpoch, WatchedLoader, WatchedWorker, WatchReport
    from loaderprof.report.json_report import load_schema

    schema = load_schema("watch")
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(WatchReport)}
    for cls in (WatchedLoader, WatchedEpoch, WatchedWorker):
        props = schema["$defs"][cls.__name__]["properties"]
        assert set(props) == {f.name for f in dataclasses.fields(cls)}, cls.__name__


def test_growth_needs_new_memory_and_handles_need_to_rise_every_epoch() -> None:
    import dataclasses

    from loaderprof.watching.findings import check_growth, check_handles

    evs = [_loader("L1", 0.1, "t.py:3", True), *_epoch("L1", 1.0, 0.1, 0.5, (201,))]
    (ld,) = loaders(by_kind(evs), [], {}, 0, int(2 * S))
    mib = 1 << 20
    grows = dataclasses.replace(
        ld,
        idle_uss_by_epoch=(50 * mib, 66 * mib, 82 * mib),
        idle_rss_by_epoch=(200 * mib, 200 * mib, 230 * mib),
    )
    assert [f.id for f in check_growth([grows])] == ["memory-grows-every-epoch"]
    # USS rising while RSS stays put is pages copied on a write, not new memory.
    cow = dataclasses.replace(grows, idle_rss_by_epoch=(200 * mib,) * 3)
    assert check_growth([cow]) == []
    held = ({"files": 2, "inet": 0, "threads": 3, "children": 0},)
    rising = tuple({**held[0], "files": n} for n in (2, 4, 6))
    worker = dataclasses.replace(ld.workers[0], handles_by_pause=rising)
    (leak,) = check_handles([dataclasses.replace(ld, workers=(worker,))])
    assert leak.id == "leaked-files" and leak.evidence["files_by_epoch"] == [2, 4, 6]
    steady = dataclasses.replace(ld.workers[0], handles_by_pause=held * 3)
    assert check_handles([dataclasses.replace(ld, workers=(steady,))]) == []


def test_watch_sampling_intervals_are_checked_before_the_command_runs() -> None:
    from loaderprof.errors import UsageError
    from loaderprof.watching.session import check_intervals

    assert check_intervals(50.0, 500.0) == (50.0, 500.0)
    # Not given: compare's defaults, from the one RunConfig.
    assert check_intervals(None, None) == (50.0, 500.0)
    # A long --sample-interval alone (a watch of days): the deep interval follows it.
    assert check_intervals(1000.0, None) == (1000.0, 1000.0)
    with pytest.raises(UsageError, match="--sample-interval 0 ms: use ≥ 5 ms"):
        check_intervals(0.0, 500.0)
    with pytest.raises(UsageError, match="--uss-interval 10 ms must be ≥"):
        check_intervals(50.0, 10.0)


def test_torchrun_ranks_loaders_stay_apart() -> None:
    """Each rank's hook counts its loaders from 1: ids carry the pid, the report names
    them in build order, and one rank's loader never makes another's pool idle."""
    from rich.console import Console

    from loaderprof.report.watch_console import pools_table

    evs = []
    for rank, pid in enumerate((100, 500)):
        ld = _loader(f"{pid}.1", 0.1 + rank * 0.01, "train.py:9", True)
        evs.append({**ld, "pid": pid, "rank": rank})
        for k, start in enumerate((1.0, 2.0)):
            # Rank 1's epochs fall in rank 0's pauses, while rank 0's pool lives on.
            epoch = _epoch(f"{pid}.1", start + rank * 0.9, 0.2, 0.8, (pid + 1, pid + 2))
            evs += [
                {**e, "pid": pid} if str(e["ev"]).startswith("iter_") else e
                for e in epoch
                if e["ev"] != "worker_exit" and (k == 0 or not str(e["ev"]).startswith("worker_"))
            ]
    found = loaders(by_kind(evs), [], {}, 0, int(4 * S))
    assert [(ld.id, ld.pid, ld.rank) for ld in found] == [("L1", 100, 0), ("L2", 500, 1)]
    assert [sorted(w.pid for w in ld.workers) for ld in found] == [[101, 102], [501, 502]]
    assert all(ld.workers_reused for ld in found)
    assert find(found, pools(found, 4.0), ()) == ()
    from loaderprof.model.watch import WatchReport

    report = WatchReport(
        kind="watch",
        schema_version=1,
        tool={},
        environment={},
        command=("torchrun", "train.py"),
        exit_code=0,
        returncode=0,
        wall_s=4.0,
        loaders=found,
        pools=pools(found, 4.0),
        peak_worker_processes=4,
        leaked_pids=(),
        findings=(),
        sampler_duty_cycle=None,
        interrupted=False,
        warnings=(),
    )
    console = Console(width=120, record=True, color_system=None)
    console.print(pools_table(report))
    text = console.export_text()
    assert "train.py:9 (rank 0)" in text and "train.py:9 (rank 1)" in text


def test_a_pid_is_the_commands_only_with_the_start_it_was_seen_with() -> None:
    """A pid that exited and was taken by another program is never signalled."""
    import os

    from loaderprof.inside import procfs
    from loaderprof.watching.run import _Tree

    me = os.getpid()
    tree = _Tree(root=me)
    started = procfs.start_ticks(me)
    assert started is not None
    tree._known[me] = started
    assert tree._ours(me)
    tree._known[me] = started - 1  # the same pid, an earlier process
    assert not tree._ours(me)


def test_growth_to_tell_needs_enough_epochs_still_rising() -> None:
    """See NOTE [growth to tell]. Litdata's pattern (3 files more after each epoch until every
    chunk is open, then flat) looks like a leak over 4 epochs; over 12 it has levelled
    off. A leak still rises in the last third of 10 epochs."""
    from loaderprof.checks.series import GROWTH_EPOCHS_TO_TELL, growth_trend

    chunks = [float(min(5 + 3 * k, 30)) for k in range(40)]
    assert growth_trend(chunks[:4], 1.0) == "too-few"
    assert growth_trend(chunks[:12], 1.0) is None
    assert growth_trend(chunks, 1.0) is None
    leak = [float(5 + k) for k in range(GROWTH_EPOCHS_TO_TELL)]
    assert growth_trend(leak, 1.0) == "grows"
    assert growth_trend(leak[:-1], 1.0) == "too-few"


def test_growth_findings_name_every_worker_and_their_severity_follows_the_trend() -> None:
    from loaderprof.checks.growth import leaked_handles, memory_growth

    few = leaked_handles(
        "files", {"worker 0": ([5, 8, 11, 14], "too-few"), "worker 1": ([5, 8, 11], "too-few")}, {}
    )
    assert few.severity == "info"
    assert "worker 0 and worker 1 hold more open files" in few.title
    assert "10 would tell" in few.title and few.evidence["trend"] == "too-few"
    assert few.evidence["files_by_epoch_by_worker"]["worker 1"] == [5, 8, 11]
    leak = leaked_handles("files", {"worker 1": (list(range(10)), "grows")}, {})
    assert leak.severity == "warning" and "still rising after 10 epochs" in leak.title
    assert "open-file limit" not in leak.title  # no limit known: no projection
    # 3 files an epoch, 30 held after the 10th: 1024 is reached in about 332 more.
    series = {"worker 0": ([3 + 3 * k for k in range(10)], "grows")}
    leak = leaked_handles("files", {**series, "worker 1": ([4] * 10, "grows")}, {}, limit=1024)
    assert leak.title.endswith(
        "at 3 more per epoch, worker 0 reaches the open-file limit (1024) in about 332 more epochs"
    )
    assert leak.evidence["epochs_to_limit"] == 332
    mib = float(1 << 20)
    grown = memory_growth({"worker 0": ([10 * mib, 14 * mib, 18 * mib], "too-few")}, {})
    assert grown.severity == "info" and "4.0 MiB more private memory" in grown.title
    # No cause asserted from three readings: the fix says how to tell.
    assert "--epochs 10" in grown.fix and "cache" not in grown.title


def test_an_idle_pool_names_the_loaders_that_ran_in_agreeing_words() -> None:
    # L1's persistent pool lives from its first epoch to its last; L2 and L3 run between.
    first = [e for e in _epoch("L1", 1.0, 0.1, 0.5, (201, 202)) if e["ev"] != "worker_exit"]
    second = [
        _ev("iter_start", 6.0, loader="L1"),
        _ev("iter_first_batch", 6.05, loader="L1"),
        _ev("iter_end", 6.5, loader="L1", batches=8),
        _ev("worker_exit", 7.0, pid=201),
        _ev("worker_exit", 7.0, pid=202),
    ]
    evs = [_loader("L1", 0.1, "train.py:9", True), *first, *second]
    for i, t in enumerate((2.0, 4.0)):
        evs.append(_loader(f"L{i + 2}", t - 0.05, f"val.py:{i}", False))
        evs += _epoch(f"L{i + 2}", t, 0.1, 0.5, (301 + 2 * i, 302 + 2 * i))
    found = loaders(by_kind(evs), [], {}, 0, int(8 * S))
    (idle,) = [f for f in find(found, pools(found, 8.0), ()) if f.id == "idle-pools"]
    assert idle.title.startswith(
        "loader L1's 2 persistent workers stay alive and idle while loaders L2 and L3 run "
        "(2 epochs)"
    )
    # The fix names the idle loader: it may be the validation loader, idle in training.
    assert "give loader L1 fewer workers" in idle.fix and "validation loader" not in idle.fix


def test_a_workers_memory_counts_while_its_pool_is_whole() -> None:
    """USS is what a process alone maps: once a sibling exits, the pages the two shared
    become the survivor's. A worker's peak counts until the first of its pool exits
    (measure/readings.pool_whole_until, compare's rule too); another pool's exit does
    not cut it."""
    from loaderprof.measure.readings import pool_whole_until
    from loaderprof.measure.sampler import Sample

    evs = [_loader("L1", 0.1, "train.py:9", False)]
    evs += _epoch("L1", 1.0, 0.4, 0.9, (201, 202))
    for e in evs:
        if e["ev"] == "worker_init":
            e["pool"] = 7
        if e["ev"] == "worker_exit" and e["pid"] == 202:
            e["t"] = int(2.0 * S)  # 201 exits at 1.91 s, 202 at 2.0 s
    # 202 read at 1.5 s (both alive, 100 MiB), and at 1.95 s, after 201 exited (160 MiB).
    mib = 1 << 20
    samples = [
        Sample(1, int(1.5 * S), pid, 100, 200 * mib, 100 * mib, 120 * mib, read_ns=int(1.5 * S))
        for pid in (201, 202)
    ]
    late = int(1.95 * S)
    samples.append(Sample(2, late, 202, 100, 220 * mib, 160 * mib, 170 * mib, read_ns=late))
    ends = {201: int(1.91 * S), 202: int(2.0 * S)}
    inits = [e for e in evs if e["ev"] == "worker_init"]
    assert pool_whole_until(inits, ends, {}) == {201: ends[201], 202: ends[201]}
    (ld,) = loaders(by_kind(evs), samples, {}, 0, int(3 * S))
    assert [w.peak_uss_bytes for w in ld.workers] == [100 * mib, 100 * mib]
    # A worker of another pool (another base seed) is not cut by this pool's exits...
    other = {**inits[0], "pid": 301, "pool": 9}
    assert pool_whole_until([*inits, other], ends, {})[301] > late
    # ...nor one of a later pool with the same seed (a script seeding before each pass).
    again = {**inits[0], "pid": 401, "t": int(2.5 * S)}
    assert pool_whole_until([*inits, again], {**ends, 401: int(4 * S)}, {})[401] == 4 * S
    # A worker whose stream ran out early (an IterableDataset shard) is no shutdown: its
    # sibling's memory counts until the pool's own, 3 s later.
    early = {201: int(0.5 * S), 202: int(3.5 * S)}
    assert pool_whole_until(inits, early, {}) == early


def test_the_candidate_and_the_data_wait_line_give_one_saving() -> None:
    """The finding's wait before the first batch is the data-wait line's (the median
    epoch by wall, as it ran), not the median of the waits apart from the walls."""
    from loaderprof.report.datawait import watch_wait_text
    from loaderprof.units import fmt_seconds

    evs = [_loader("L1", 0.1, "train.py:9", False)]
    # Steady epochs (wait, wall): (0.20, 0.5), (0.19, 0.9), (0.12, 0.6): the waits'
    # median is 0.19 s, the median epoch (0.6 s) waited 0.12 s.
    for k, (wait, wall) in enumerate([(0.3, 0.7), (0.20, 0.5), (0.19, 0.9), (0.12, 0.6)]):
        evs += _epoch("L1", 1.0 + 2 * k, wait, wall, (201 + 2 * k, 202 + 2 * k))
    firsts = iter([0.3, 0.20, 0.19, 0.12])
    for e in evs:
        if e["ev"] == "iter_end":
            e.update(wait_first=next(firsts), wait_steady=0.0)
    (ld,) = loaders(by_kind(evs), [], {}, 0, int(9 * S))
    assert ld.wait is not None and ld.wait.first_s == pytest.approx(0.12)
    (cand,) = [f for f in find((ld,), pools((ld,), 9.0), ()) if f.id == "persistence-candidate"]
    assert cand.evidence["median_first_batch_s"] == pytest.approx(0.12)
    assert "its median epoch after the first (of 3) waited 0.12 s" in cand.title
    text = watch_wait_text(ld)
    assert text is not None and f"saves up to {fmt_seconds(0.12)}" in text
