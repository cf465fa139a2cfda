"""The pytest plugin: a project's DataLoader checks in its own test suite.

    def test_persistence_pays(loaderprof):
        report = loaderprof.compare("mypkg.data:TrainSet", epochs=3, num_workers=2)
        report.assert_verdict("enable")
        report.assert_gates()
        report.assert_no_findings(severity="warning")

The `loaderprof` fixture runs `loaderprof.compare` / `loaderprof.check` through
the Python API with the project's `[tool.loaderprof]` table (its `[gates]`
included), so a test judges the same run the CLI would. A failing assert
carries the table the CLI prints. `--loaderprof-baseline PATH` and
`--loaderprof-save-baseline PATH` are the CLI's `--baseline` / `--save-baseline`.

pytest loads this module in every session of every project that installs
loaderprof, so it imports nothing heavy at module level: torch and pandas come
with `loaderprof.api`, imported only when a test runs a comparison.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from loaderprof.model.results import Report

SEVERITIES = ("info", "warning", "error")
VERDICTS = ("enable", "keep_off", "neutral")
# A wide terminal's width, fixed: the message reads the same in every CI log.
TEXT_WIDTH = 100

# Per session: which test saved a report to which --loaderprof-save-baseline path.
# The plugin loads in every pytest session where loaderprof is installed: a pytest
# older than 7 (no stash) must not fail to start because of it.
_SAVED: Any = pytest.StashKey[dict[Path, str]]() if hasattr(pytest, "StashKey") else None
_SAVED_OLD_PYTEST: dict[int, dict[Path, str]] = {}


def _saved(config: Any) -> dict[Path, str]:
    if _SAVED is None:
        return _SAVED_OLD_PYTEST.setdefault(id(config), {})
    saved: dict[Path, str] = config.stash.setdefault(_SAVED, {})
    return saved


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loaderprof", "loaderprof: DataLoader persistence checks")
    group.addoption(
        "--loaderprof-baseline",
        metavar="PATH",
        default=None,
        help="A saved loaderprof report: the fixture's runs diff against it (relative "
        "gates such as first_batch_s:+10%%), as `loaderprof compare --baseline`. A "
        "directory: each test's own report there, if saved.",
    )
    group.addoption(
        "--loaderprof-save-baseline",
        metavar="PATH",
        default=None,
        help="Save the report of the fixture's run here as a future baseline, as "
        "`loaderprof compare --save-baseline` (one run per session). An existing "
        "directory: one report per test, named after the test.",
    )


def report_text(report: Report, *, verbose: bool = False) -> str:
    """What `loaderprof compare` prints for this report, as plain text."""
    from rich.console import Console

    from loaderprof.report.console import print_report

    console = Console(
        record=True, file=io.StringIO(), width=TEXT_WIDTH, color_system=None, soft_wrap=False
    )
    print_report(report, console, verbose=verbose)
    # Rich pads table titles and captions to the table's width; a test log need not.
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


class InconclusiveGateWarning(UserWarning):
    """A gate's median is past its limit but its interval straddles it (the CLI's
    warning on stderr); strict=True makes it a failure."""


class LoaderprofReport:
    """A Report with asserts that fail a test with the table the CLI prints.

    Every other attribute is the Report's (`recommendation`, `verdict`, `findings`,
    `gates`, `summaries`, ...); `report` is the Report itself. Each assert returns
    self, so they chain.
    """

    def __init__(self, report: Report, *, strict: bool = False) -> None:
        self.report = report
        self.strict = strict

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks; `report` itself missing (a copy
        # made without __init__) must not recurse.
        if name == "report":
            raise AttributeError(name)
        return getattr(self.report, name)

    def __repr__(self) -> str:
        dataset = self.report.config.dataset
        return f"<LoaderprofReport {dataset}: {self.report.recommendation}>"

    def text(self, *, verbose: bool = False) -> str:
        return report_text(self.report, verbose=verbose)

    def _fail(self, headline: str) -> AssertionError:
        return AssertionError(f"{headline}\n\n{self.text()}")

    def assert_verdict(self, *expected: str) -> LoaderprofReport:
        """Fail unless the recommendation is one of `expected` (enable, keep_off, neutral)."""
        __tracebackhide__ = True
        unknown = [e for e in expected if e not in VERDICTS]
        if not expected or unknown:
            raise ValueError(f"assert_verdict takes one or more of {VERDICTS}, got {expected}")
        actual = self.report.recommendation
        if actual not in expected:
            wanted = " or ".join(repr(e) for e in expected)
            got = repr(actual) if actual else "no verdict (not enough was measured)"
            raise self._fail(f"loaderprof: verdict is {got}, expected {wanted}")
        return self

    def assert_no_findings(self, severity: str = "warning") -> LoaderprofReport:
        """Fail when a lifecycle check found something at `severity` or worse
        (info < warning < error); `loaderprof check` exits 1 on "warning"."""
        __tracebackhide__ = True
        if severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
        floor = SEVERITIES.index(severity)
        found = [f for f in self.report.findings if SEVERITIES.index(f.severity) >= floor]
        if found:
            names = ", ".join(f"{f.id} ({f.severity})" for f in found)
            raise self._fail(f"loaderprof: check found at {severity} or worse: {names}")
        return self

    def assert_gates(self) -> LoaderprofReport:
        """Fail when a gate failed (inconclusive ones too with strict=True), as the
        CLI's exit 1. With no gate to judge it fails too: a gate assert that judged
        nothing would pass forever, e.g. when [tool.loaderprof.gates] was not found."""
        __tracebackhide__ = True
        from loaderprof.commands.common import failed_gates

        if not self.report.gates:
            raise self._fail(
                "loaderprof: no gates to assert: set [tool.loaderprof.gates] in the "
                "project's pyproject.toml, or pass gates=[...] / config=... to compare"
            )
        if self.report.gate_status == "fail":
            failed = ", ".join(failed_gates(self.report, self.strict))
            raise self._fail(f"loaderprof: gate failed: {failed}")
        for g in self.report.gates:
            if g.status == "inconclusive":
                # As the CLI: a warning, not a failure (pytest lists it in its summary).
                warnings.warn(f"loaderprof: {g.message}", InconclusiveGateWarning, stacklevel=2)
        return self


class LoaderprofFixture:
    """What the `loaderprof` fixture gives a test: `compare` and `check`, with the
    project's [tool.loaderprof] settings and the session's baseline options."""

    def __init__(
        self,
        *,
        config: Path | None,
        baseline: Path | None,
        save_baseline: Path | None,
        saved: dict[Path, str],
        test: str,
    ) -> None:
        self.config = config
        self.baseline = baseline
        self.save_baseline = save_baseline
        self._saved = saved
        self._test = test

    def compare(self, dataset: Any = None, **kwargs: Any) -> LoaderprofReport:
        """`loaderprof.compare` (same keywords); `config`, `baseline` default to the
        project's pyproject.toml and --loaderprof-baseline."""
        __tracebackhide__ = True
        return self._run("compare", dataset, kwargs)

    def check(self, dataset: Any = None, **kwargs: Any) -> LoaderprofReport:
        """`loaderprof.check`: compare with every lifecycle check on."""
        __tracebackhide__ = True
        return self._run("check", dataset, kwargs)

    def _run(self, verb: str, dataset: Any, kwargs: Mapping[str, Any]) -> LoaderprofReport:
        __tracebackhide__ = True
        from loaderprof import api
        from loaderprof.errors import LoaderprofError

        options = dict(kwargs)
        options.setdefault("config", self.config)
        options.setdefault("baseline", self.baseline)
        error: str | None = None
        try:
            # As the CLI: an output that cannot be written fails before any trial runs.
            self._check_save_target()
            run = api.compare if verb == "compare" else api.check
            report = run(dataset, **options)
        except LoaderprofError as exc:
            error = exc.message
        if error is not None:
            # Outside the except block: the one line alone, as the CLI prints it.
            pytest.fail(_error_message(error), pytrace=False)
        if api.measured(report) and self.save_baseline is not None:
            # Written even when the run failed, as the CLI's --save-baseline.
            self._save(report)
        if not api.gateable(report):
            from loaderprof.model.results import error_line

            line = error_line(report) or "the run did not complete"
            text = report_text(report) if api.measured(report) else ""
            pytest.fail(f"loaderprof: error: {line}\n\n{text}".rstrip(), pytrace=False)
        return LoaderprofReport(report, strict=bool(options.get("strict", False)))

    def _check_save_target(self) -> None:
        if self.save_baseline is None:
            return
        from loaderprof.errors import UsageError
        from loaderprof.report.exporters import check_targets

        first = self._saved.get(self.save_baseline)
        if first is not None:
            # One path holds one report: a second compare would overwrite the first.
            raise UsageError(
                f"--loaderprof-save-baseline {self.save_baseline} already holds the report "
                f"of {first}: select one test (pytest -k / a node id), or save into a "
                "directory (one report per test)"
            )
        check_targets("compare", [("save_baseline", self.save_baseline)])

    def _save(self, report: Report) -> None:
        from loaderprof.report.exporters import export

        assert self.save_baseline is not None
        export(report, [("save_baseline", self.save_baseline)], strict=False)
        self._saved[self.save_baseline] = self._test


def _error_message(message: str) -> str:
    hint = ""
    if "--baseline" in message:
        # The API's message names the CLI's flag; under pytest it is this plugin's.
        hint = "\n(under pytest: --loaderprof-baseline PATH, saved with --loaderprof-save-baseline)"
    return f"loaderprof: error: {message}{hint}"


def project_config(config: pytest.Config) -> Path | None:
    """The project's pyproject.toml when it has a [tool.loaderprof] table: the one
    `loaderprof compare` run from the project's root would use (`find_project_config`),
    looked for from pytest's rootdir (its inifile's folder when that is a pyproject.toml).

    `loaderprof.config.build` parses and validates it, as for the CLI."""
    from loaderprof.config.build import find_project_config

    inipath = config.inipath
    start = inipath.parent if inipath and inipath.name == "pyproject.toml" else config.rootpath
    return find_project_config(start)


def _option_path(config: pytest.Config, name: str) -> Path | None:
    """A path option, relative to where pytest was started (a test may chdir)."""
    value = config.getoption(name)
    return Path(config.invocation_params.dir, value) if value else None


def per_test(path: Path | None, nodeid: str) -> Path | None:
    """A baseline file as given, or in a directory the one named after this test.

    A suite has more than one DataLoader test, each with its own baseline; the
    name comes from the node id, which is stable from one run (or branch) to the
    next as long as the test keeps its name."""
    if path is None or not path.is_dir():
        return path
    return path / (re.sub(r"[^\w.-]+", "_", nodeid).strip("_") + ".json")


@pytest.fixture(name="loaderprof")
def loaderprof_fixture(request: pytest.FixtureRequest) -> LoaderprofFixture:
    """Run loaderprof compare / check with the project's [tool.loaderprof] settings."""
    config, nodeid = request.config, request.node.nodeid
    given = _option_path(config, "loaderprof_baseline")
    baseline = per_test(given, nodeid)
    if baseline is not None and baseline != given and not baseline.exists():
        # A test newer than the directory's baselines runs without one (its relative
        # gates then say a baseline is needed); a missing file named alone is an error.
        baseline = None
    return LoaderprofFixture(
        config=project_config(config),
        baseline=baseline,
        save_baseline=per_test(_option_path(config, "loaderprof_save_baseline"), nodeid),
        saved=_saved(config),
        test=nodeid,
    )
