"""The pytest plugin (loaderprof.pytest_plugin), run as a project would: inner test
sessions through pytester, with the fake TrialRunner so that no process starts
(one end-to-end test runs a real compare)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import loaderprof

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parents[2]
DATASET = "loaderprof.examples:CheapDataset"

# The inner sessions import tests/fakes.py, and a runner whose workers outlive
# the loader (the "workers-outlive-loader" warning) without any real worker.
RUNNERS = f"""
import sys

sys.path.insert(0, {str(TESTS)!r})

from fakes import FakeRunner


class LingeringRunner(FakeRunner):
    def _trial(self, cfg, plan, rng):
        events, samples, t = super()._trial(cfg, plan, rng)
        events = [
            {{**ev, "workers_alive": 1}} if ev["ev"] == "loader_closed" else ev for ev in events
        ]
        return events, samples, t
"""


@pytest.fixture(scope="module")
def _imported(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Everything a fake run imports, imported here first.

    An in-process pytester session drops the modules it imported when it ends, and
    numpy's extension cannot load twice in one process: what the inner runs use must
    already be loaded, so one fake run of each kind goes first."""
    from fakes import FakeRunner
    from loaderprof.pytest_plugin import report_text
    from loaderprof.report.exporters import export
    from loaderprof.report.json_report import read_report

    report = loaderprof.check(
        DATASET, epochs=3, gates=["steady_epoch_ratio:<=0.5"], runner=FakeRunner()
    )
    report_text(report)
    path = tmp_path_factory.mktemp("warm") / "report.json"
    export(report, [("save_baseline", path)], strict=False)
    loaderprof.compare(
        DATASET,
        epochs=3,
        baseline=read_report(path),
        gates=["first_batch_s:+10%"],
        runner=FakeRunner(),
    )


@pytest.fixture
def project(pytester: pytest.Pytester, _imported: None) -> pytest.Pytester:
    # Not conftest.py: that name is the outer suite's module in this process.
    pytester.makepyfile(lp_plugin_runners=RUNNERS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def test_assert_verdict_passes_and_fails_with_the_verdict_table(project: pytest.Pytester) -> None:
    project.makepyfile(
        f"""
        from lp_plugin_runners import FakeRunner

        def test_pays(loaderprof):
            report = loaderprof.compare({DATASET!r}, epochs=3, trials=2, runner=FakeRunner())
            assert report.assert_verdict("enable") is report
            assert report.recommendation == "enable"

        def test_expects_keep_off(loaderprof):
            report = loaderprof.compare({DATASET!r}, epochs=3, trials=2, runner=FakeRunner())
            report.assert_verdict("keep_off")
        """
    )
    result = _run(project)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: loaderprof: verdict is 'enable', expected 'keep_off'",
            "*verdict*",
            "*ENABLE  *",
        ]
    )


def test_assert_no_findings_fails_at_or_above_its_severity(project: pytest.Pytester) -> None:
    project.makepyfile(
        f"""
        import pytest
        from lp_plugin_runners import FakeRunner, LingeringRunner

        def test_clean(loaderprof):
            loaderprof.check({DATASET!r}, epochs=3, runner=FakeRunner()).assert_no_findings()

        def test_only_errors_fail(loaderprof):
            report = loaderprof.check({DATASET!r}, epochs=3, runner=LingeringRunner())
            report.assert_no_findings(severity="error")
            with pytest.raises(ValueError):
                report.assert_no_findings(severity="fatal")

        def test_lingering_workers(loaderprof):
            report = loaderprof.check({DATASET!r}, epochs=3, runner=LingeringRunner())
            report.assert_no_findings(severity="warning")
        """
    )
    result = _run(project)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*loaderprof: check found at warning or worse: workers-outlive-loader (warning)",
            "*WARNING *still alive after the loader shut down*",
            "*[[]workers-outlive-loader]",
        ]
    )


def test_assert_gates_judges_the_projects_tool_loaderprof_gates(
    project: pytest.Pytester,
) -> None:
    # No saving from persistence (startup 0): the ratio is 1, past the project's 0.5.
    project.makepyprojecttoml(
        f"""
        [tool.loaderprof]
        dataset = "{DATASET}"
        epochs = 3
        trials = 2

        [tool.loaderprof.gates]
        steady_epoch_ratio = "<=0.5"
        """
    )
    project.makepyfile(
        """
        from lp_plugin_runners import FakeRunner

        def test_saving_passes(loaderprof):
            report = loaderprof.compare(runner=FakeRunner(startup_s=0.2))
            assert report.report.config.epochs == 3
            report.assert_gates()

        def test_no_saving_fails(loaderprof):
            loaderprof.compare(runner=FakeRunner(startup_s=0.0)).assert_gates()

        def test_no_gates_is_no_pass(loaderprof):
            report = loaderprof.compare(
                "loaderprof.examples:CheapDataset", config=None, epochs=3, runner=FakeRunner()
            )
            report.assert_gates()

        def test_inconclusive_warns_and_fails_when_strict(loaderprof):
            # No saving: a ratio about 0.99, its interval reaching below 0.95.
            def run(strict):
                return loaderprof.compare(
                    "loaderprof.examples:CheapDataset", config=None, epochs=3, trials=2,
                    gates=["steady_epoch_ratio:<=0.95"], strict=strict, memory_trials=1,
                    runner=FakeRunner(startup_s=0.0),
                )

            run(strict=False).assert_gates()
            run(strict=True).assert_gates()
        """
    )
    result = _run(project, "-v")
    result.assert_outcomes(passed=1, failed=3, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*test_saving_passes PASSED*",
            "*AssertionError: loaderprof: gate failed: steady_epoch_ratio:<=0.5",
            "*Gates: FAIL*",
            "*fail*steady_epoch_ratio*<=0.5*",
            "*loaderprof: no gates to assert*",
            "*AssertionError: loaderprof: gate failed: steady_epoch_ratio:<=0.95",
            "*inconclusive*steady_epoch_ratio:<=0.95*",
            "*InconclusiveGateWarning: loaderprof: *",
        ]
    )


@pytest.mark.parametrize("target", ["main.json", "baselines"])
def test_save_a_baseline_then_gate_a_slower_run_against_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    # A file holds the session's one report; a directory one per test, named after it.
    if target == "baselines":
        project.mkdir(target)
    project.makepyfile(
        f"""
        import os
        from lp_plugin_runners import FakeRunner

        def test_first_batch(loaderprof):
            work = float(os.environ.get("WORK_S", "0.1"))
            report = loaderprof.compare(
                {DATASET!r}, epochs=3, trials=3, runner=FakeRunner(work_s=work),
                gates=["first_batch_s:+10%"] if loaderprof.baseline else [],
            )
            if loaderprof.baseline:
                assert report.baseline.path == str(loaderprof.baseline)
                report.assert_gates()
        """
    )
    saved = _run(project, "--loaderprof-save-baseline", target)
    saved.assert_outcomes(passed=1)
    path = project.path / target
    if path.is_dir():
        (path,) = path.iterdir()
        assert path.name.endswith(".py_test_first_batch.json")
    baseline = json.loads(path.read_text())
    assert baseline["schema_version"] == 1 and baseline["complete"]

    same = _run(project, "--loaderprof-baseline", target)
    same.assert_outcomes(passed=1)
    monkeypatch.setenv("WORK_S", "0.2")
    slower = _run(project, "--loaderprof-baseline", target)
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*loaderprof: gate failed: *first_batch_s:+10%"])


def test_a_relative_gate_without_a_baseline_and_a_second_save_fail_clearly(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        f"""
        from lp_plugin_runners import FakeRunner

        def test_relative(loaderprof):
            loaderprof.compare({DATASET!r}, epochs=3, gates=["first_batch_s:+10%"])

        def test_first(loaderprof):
            loaderprof.compare({DATASET!r}, epochs=3, trials=1, runner=FakeRunner())

        def test_second(loaderprof):
            loaderprof.compare({DATASET!r}, epochs=3, trials=1, runner=FakeRunner())
        """
    )
    result = _run(project, "--loaderprof-save-baseline", "main.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*loaderprof: error: gate *first_batch_s:+10% is relative to a baseline*",
            "*under pytest: --loaderprof-baseline PATH*",
            "*already holds the report of test_*.py::test_first*",
        ]
    )


def test_a_failed_run_fails_the_test_with_its_error_line(project: pytest.Pytester) -> None:
    project.makepyfile(
        f"""
        from lp_plugin_runners import FakeRunner

        def test_boom(loaderprof):
            runner = FakeRunner(fail={{("persistent", 0)}})
            loaderprof.compare({DATASET!r}, epochs=3, trials=1, runner=runner)
        """
    )
    result = _run(project)
    result.assert_outcomes(failed=1)
    # Loaded from the package's pytest11 entry point, as in any project's session.
    result.stdout.fnmatch_lines(
        [
            "plugins:*loaderprof-*",
            "loaderprof: error: *trial 1*DataLoader worker 0 raised boom*",
            "*incomplete: some trials failed*",
        ]
    )


@pytest.mark.e2e
def test_a_real_compare_through_the_fixture_and_a_cheap_plugin_import(
    project: pytest.Pytester,
) -> None:
    # pytest loads the plugin in every session of every project: it must stay light.
    code = (
        "import sys, loaderprof.pytest_plugin\n"
        "heavy = [m for m in ('torch', 'pandas', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    project.makepyfile(
        f"""
        def test_real(loaderprof):
            report = loaderprof.compare({DATASET!r}, epochs=2, trials=1, num_workers=1)
            assert report.summaries["persistent"].steady_epoch_s.median > 0
            report.assert_no_findings(severity="error")
        """
    )
    _run(project).assert_outcomes(passed=1)
