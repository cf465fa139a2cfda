"""--html: one self-contained page, checked by parsing it (stdlib html.parser).

The report comes from the fake TrialRunner (no processes); the one e2e test runs the
real CLI once. No headless browser is assumed: the page is checked as markup.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from html_page import Page, check_self_contained

import loaderprof
from fakes import FakeRunner
from loaderprof.model.results import Finding, Report
from loaderprof.report import html as html_mod
from loaderprof.report.html import render_html
from loaderprof.report.json_report import to_json
from loaderprof.report.rows import summary_rows

DATASET = "loaderprof.examples:CheapDataset"
# Markup in every string a user or a run controls: none of it may reach the page raw.
HOSTILE = "<b>&amp; <script>alert(1)</script>"


def _report() -> Report:
    """A compare through the fake runner, with a hostile dataset name and two findings."""
    report = loaderprof.compare(DATASET, epochs=3, trials=2, runner=FakeRunner())
    findings = (
        Finding(
            "stale-worker-state",
            "error",
            "workers kept a stale attribute",
            {"attribute": HOSTILE, "epochs": 2},
            f"rebuild it in set_epoch ({HOSTILE})",
            arm="persistent",
        ),
        Finding("dev-shm", "info", "/dev/shm is small", {"size": "64 MiB"}, "raise --shm-size"),
    )
    config = dataclasses.replace(report.config, dataset=f"{DATASET}{HOSTILE}")
    return dataclasses.replace(report, config=config, findings=findings)


@pytest.fixture(scope="module")
def report() -> Report:
    return _report()


@pytest.fixture(scope="module")
def page(report: Report) -> str:
    # Rendered once: drawing the matplotlib figure is the slow part of this file.
    return render_html(report)


def test_the_page_is_well_formed_self_contained_and_has_the_figure(page: str) -> None:
    parsed = check_self_contained(page)
    svgs = parsed.named("svg")
    assert len(svgs) == 1
    # The --plot figure itself (matplotlib's), not the fallback: its axes are there.
    assert any(attrs.get("id") == "figure_1" for _, attrs in parsed.tags)
    assert "<?xml" not in page and "<metadata>" not in page


def test_the_page_carries_summary_verdict_findings_and_every_epoch(
    report: Report, page: str
) -> None:
    words = Page(page).words
    assert report.verdict is not None
    assert " ".join(report.verdict.headline.split()) in words
    for reason in report.verdict.reasons:
        assert " ".join(reason.split()) in words
    # The summary's labels and figures are the ones rows.py defines for every reporter.
    for row in summary_rows(report):
        assert row.label in words and row.persistent in words
    for f in report.findings:
        assert f.id in words and f.title in words
    assert f"fix: rebuild it in set_epoch ({HOSTILE})" in words
    for arm in report.arms.values():
        for t in arm.trials:
            for e in t.epochs:
                assert all(str(pid) in words for pid in e.worker_pids)


def test_user_strings_are_escaped(page: str) -> None:
    assert "<b>" not in page and "<script>" not in page
    assert "&lt;b&gt;&amp;amp; &lt;script&gt;" in page
    # Escaped, not dropped: a reader sees the string as it was.
    assert HOSTILE in Page(page).words


def test_without_matplotlib_the_page_draws_its_own_figure(
    report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html_mod, "_has_matplotlib", lambda: False)
    parsed = check_self_contained(render_html(report))
    assert len(parsed.named("svg")) == 1
    # One bar per epoch and arm (the median wall over its trials), and a legend swatch each.
    bars = [a for a in parsed.named("rect") if "height" in a and a.get("y") != "10"]
    assert len(bars) == 2 * report.config.epochs
    assert "matplotlib is not installed" in parsed.words


def test_report_and_diff_write_it_and_an_unwritable_path_is_one_line(
    report: Report,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from loaderprof.cli import _run

    # The wiring is under test here, not the figure: skip drawing it.
    monkeypatch.setattr(html_mod, "_has_matplotlib", lambda: False)
    saved = tmp_path / "r.json"
    saved.write_text(to_json(report))
    out = tmp_path / "r.html"
    assert _run(["report", str(saved), "--html", str(out)], debug=False) == 0
    assert check_self_contained(out.read_text()).named("svg")
    diffed = tmp_path / "d.html"
    assert _run(["diff", str(saved), str(saved), "--html", str(diffed)], debug=False) == 0
    assert "Per-epoch detail" in diffed.read_text()
    capsys.readouterr()
    code = _run(["report", str(saved), "--html", "/no/such/dir/r.html"], debug=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == (
        "loaderprof: error: cannot write /no/such/dir/r.html: directory /no/such/dir does not exist"
    )


def test_a_sweep_report_refuses_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from loaderprof.cli import _run

    sweep = loaderprof.sweep(DATASET, num_workers=[2], epochs=2, trials=1, runner=FakeRunner())
    saved = tmp_path / "s.json"
    saved.write_text(json.dumps(json.loads(to_json(sweep))))
    assert _run(["report", str(saved), "--html", str(tmp_path / "s.html")], debug=False) == 2
    assert "(not --html)" in capsys.readouterr().err
