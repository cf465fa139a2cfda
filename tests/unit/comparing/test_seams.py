"""The scheduler, sweep and Python API through a fake TrialRunner: no processes."""

from __future__ import annotations

from pathlib import Path

import pytest

import loaderprof
from fakes import FakeRunner
from loaderprof.comparing.scheduler import Scheduled, run_schedule, run_trials, trial_order
from loaderprof.comparing.sweep import SweepGrid, run_sweep
from loaderprof.config.run import RunConfig
from loaderprof.errors import UsageError

DATASET = "loaderprof.examples:CheapDataset"


def test_schedule_interleaves_arms_and_runs_every_trial() -> None:
    cfg = RunConfig(dataset=DATASET, trials=3, epochs=3)
    runner = FakeRunner()
    outcome = run_schedule(cfg, runner=runner)
    arms = [plan.arm for _, plan in runner.calls]
    assert arms == [p.arm for p in trial_order(3, cfg.seed, memory=2)]
    # A B B A: each pair swaps the order of the one before.
    assert arms[0:2] == arms[2:4][::-1]
    # See NOTE [timing and memory trials]. Two memory pairs first, then 3 timing pairs.
    roles = [plan.role for _, plan in runner.calls]
    assert roles == ["memory"] * 4 + ["timing"] * 6
    assert len(outcome.trials) == 10 and outcome.interrupted is None


def test_schedule_stops_at_the_first_failure_and_keeps_what_was_measured() -> None:
    cfg = RunConfig(dataset=DATASET, trials=3, epochs=3)
    first = trial_order(3, cfg.seed)[1]
    runner = FakeRunner(fail={(first.arm, first.index)})
    outcome = run_schedule(cfg, runner=runner)
    assert len(runner.calls) == 2
    assert outcome.trials[0].complete and not outcome.trials[1].complete
    assert len(outcome.trials[1].epochs) == 1  # the epoch before the failure is kept


def test_schedule_hands_back_the_partial_trial_on_interrupt() -> None:
    cfg = RunConfig(dataset=DATASET, trials=2, epochs=3)
    first = trial_order(2, cfg.seed)[0]
    outcome = run_schedule(cfg, runner=FakeRunner(interrupt={(first.arm, first.index)}))
    assert isinstance(outcome.interrupted, KeyboardInterrupt)
    assert len(outcome.trials) == 1 and len(outcome.trials[0].epochs) == 1


def test_a_failed_group_skips_only_its_own_trials_and_barriers_still_run() -> None:
    cfg = RunConfig(dataset=DATASET, trials=1, epochs=3)
    specs = trial_order(2, cfg.seed)
    runner = FakeRunner(fail={(specs[0].arm, specs[0].index)})
    barriers = []
    outcome = run_trials(
        [Scheduled(cfg, p, group=p.arm) for p in specs],
        runner=runner,
        sync=lambda: barriers.append(1),
    )
    # Every planned trial took part in its barrier, so no other rank would hang.
    assert len(barriers) == len(specs)
    ran = [plan for _, plan in runner.calls]
    assert [p.arm for p in ran].count(specs[0].arm) == 1
    assert len(outcome.trials) == len(ran) == 1 + sum(1 for p in specs if p.arm != specs[0].arm)


def test_api_compare_measures_the_known_saving() -> None:
    report = loaderprof.compare(DATASET, epochs=5, trials=3, runner=FakeRunner(startup_s=0.2))
    assert report.complete and report.recommendation == "enable"
    c = report.comparison
    assert c is not None and c.saved_s_per_epoch == pytest.approx(0.2, rel=0.1)
    assert report.summaries["persistent"].workers_reused is True
    assert report.summaries["non_persistent"].workers_reused is False


def test_api_applies_the_config_files_gates(tmp_path: Path) -> None:
    config = tmp_path / "lp.toml"
    gates = (
        f'dataset = "{DATASET}"\nepochs = 5\n[gates]\nsteady_epoch_ratio = "<=0.9"\n'
        '"persistent.worker_startup_s" = "<=1ms"\n'
    )
    config.write_text(gates + '"persistent.idle_workers_uss" = "<=1MiB"\n')
    report = loaderprof.compare(None, config=str(config), runner=FakeRunner())
    by_gate = {g.metric: g.status for g in report.gates}
    # The fake's figures never differ. Memory is read in pages: figures that agree to
    # the page have an interval a page wide (NOTE [reading resolution]), and 80 MiB
    # held fails <= 1 MiB. Times are not: equal start-ups have no interval, and that
    # gate past its limit is inconclusive, failing the run only under strict.
    assert by_gate == {
        "steady_epoch_ratio": "pass",
        "persistent.worker_startup_s": "inconclusive",
        "persistent.idle_workers_uss": "fail",
    }
    assert report.gate_status == "fail"
    config.write_text(gates)
    assert loaderprof.compare(None, config=str(config), runner=FakeRunner()).gate_status == "pass"
    strict = loaderprof.compare(None, config=str(config), runner=FakeRunner(), strict=True)
    assert strict.gate_status == "fail"


def test_api_check_is_compare_with_every_check_on() -> None:
    runner = FakeRunner()
    report = loaderprof.check(DATASET, epochs=3, runner=runner)
    assert report.config.trials == 1 and report.config.digests is True
    assert len(runner.calls) == 2
    # Flags still win over the preset.
    report = loaderprof.check(DATASET, epochs=3, trials=2, runner=FakeRunner())
    assert report.config.trials == 2
    # Memory trials asked for run in check's one-trial plan too (they were dropped,
    # and its memory gate told the user to ask for them): a memory gate has an interval.
    runner = FakeRunner()
    asked = loaderprof.check(
        DATASET,
        epochs=3,
        memory_trials=2,
        runner=runner,
        gates=["persistent.idle_workers_uss:<=1MiB"],
    )
    roles = [slot.role for _, slot in runner.calls]
    assert roles == ["memory"] * 4 + ["timing"] * 2
    assert asked.gates[0].has_interval and asked.gates[0].status == "fail"


def test_api_rejects_an_unknown_option_with_a_hint() -> None:
    with pytest.raises(UsageError, match="did you mean 'num_workers'"):
        loaderprof.compare(DATASET, num_worker=2, runner=FakeRunner())


def test_sweep_runs_each_point_and_finds_the_frontier() -> None:
    cfg = RunConfig(dataset=DATASET, trials=2, epochs=3)
    grid = SweepGrid.from_options({"num_workers": [0, 2], "persistent": [True, False]})
    runner = FakeRunner(startup_s=0.3, work_s=0.1)
    report = run_sweep(cfg, grid, runner=runner)
    labels = [p.label for p in report.points]
    assert len(runner.calls) == 3 * 2 and len(labels) == 3
    # Persistent workers skip the 0.3 s start-up: fastest; workers=0 has none either.
    fastest = report.points[0]
    assert fastest.persistent or fastest.num_workers == 0
    assert report.recommendation.fastest == fastest.label
    assert any(p.frontier for p in report.points)


def test_sweep_warns_of_noisy_points_and_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import loaderprof.comparing.sweep as sweep_mod

    cfg = RunConfig(dataset=DATASET, trials=2, epochs=4)
    grid = SweepGrid.from_options({"num_workers": [2], "persistent": [True, False]})
    # What a runner reads whose other tenants left it alone, then took both cores: the
    # machine cannot be made idle or busy for a unit test.
    env = sweep_mod.environment({}) | {"cpus_usable": 2, "cpu_count": 2, "load_average": None}
    monkeypatch.setattr(sweep_mod, "environment", lambda imported: env)
    monkeypatch.setattr(sweep_mod.contention, "other_cores", lambda start, end: 0.0)
    quiet = run_sweep(cfg, grid, runner=FakeRunner(jitter=0.0))
    assert not any("noisy" in w or "busy" in w for w in quiet.warnings)
    monkeypatch.setattr(sweep_mod.contention, "other_cores", lambda start, end: 1.6)
    noisy = run_sweep(cfg, grid, runner=FakeRunner(jitter=0.5))
    assert any(
        w.startswith("the machine was busy: other processes kept 1.6 of 2 cores")
        for w in noisy.warnings
    )
    assert any(
        w.startswith("workers=2 non-persistent: steady epoch times are noisy")
        for w in noisy.warnings
    )


def test_sweep_skips_only_the_failed_point() -> None:
    cfg = RunConfig(dataset=DATASET, trials=2, epochs=3)
    grid = SweepGrid.from_options({"num_workers": [2], "persistent": [True, False]})
    bad = "workers=2 non-persistent"
    report = run_sweep(cfg, grid, runner=FakeRunner(fail={(bad, 0), (bad, 1)}))
    by_label = {p.label: p for p in report.points}
    assert by_label[bad].error and len(by_label[bad].trials) == 1
    assert len(by_label["workers=2 persistent"].trials) == 2
    assert not report.complete


def test_api_sweep_takes_lists_and_the_cli_comma_lists_alike() -> None:
    a = SweepGrid.from_options({"num_workers": [0, 2, 4], "prefetch_factor": [None, 4]})
    b = SweepGrid.parse("0,2,4", "default,4", None, None)
    assert a == b
    report = loaderprof.sweep(DATASET, num_workers=[2], epochs=3, trials=1, runner=FakeRunner())
    assert {p.label for p in report.points} == {
        "workers=2 persistent",
        "workers=2 non-persistent",
    }


def test_report_refuses_exports_a_sweep_report_cannot_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from loaderprof.cli import _run
    from loaderprof.report.json_report import to_json

    cfg = RunConfig(dataset=DATASET, trials=1, epochs=3)
    grid = SweepGrid.from_options({"num_workers": [2]})
    path = tmp_path / "sweep.json"
    path.write_text(to_json(run_sweep(cfg, grid, runner=FakeRunner())))
    code = _run(["report", str(path), "--junit", str(tmp_path / "j.xml")], debug=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "is a sweep report, which exports only --json, --csv, --plot (not --junit)" in err[0]
    assert _run(["report", str(path), "--csv", str(tmp_path / "s.csv")], debug=False) == 0
    assert (tmp_path / "s.csv").read_text().startswith("config,")


def test_a_pause_is_answered_only_by_a_reading_that_began_inside_it(tmp_path: Path) -> None:
    """See NOTE [sampled pauses]. The runner tells the trial a pause was read by writing its
    epoch, once a whole walk that began after the pause's start has been read."""
    from loaderprof.measure.runner import _Pauses

    path = tmp_path / "paused"
    pauses = _Pauses(path)
    pauses.answer(10**9)  # no pause under way: nothing to say
    assert not path.exists()
    pauses.began(3, 1_000)
    pauses.answer(999)  # a walk that began before the pause
    assert not path.exists()
    pauses.answer(1_000)
    assert path.read_text() == "3"
