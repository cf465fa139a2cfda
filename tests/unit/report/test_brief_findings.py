"""The one-screen findings: a title or fix that wraps hangs under its own text."""

from __future__ import annotations

from rich.console import Console

from loaderprof.model.results import Finding
from loaderprof.report.console import brief_findings


def test_a_wrapped_finding_hangs_under_its_text_and_keeps_its_id() -> None:
    f = Finding(
        id="serial-startup",
        severity="warning",
        title="workers start one after another: the last of 2 starts 1.84 s after the "
        "first, 49 % of the 3.73 s wait for an epoch's first batch",
        evidence={},
        fix="under spawn/forkserver each worker's pickled Dataset goes through its pipe "
        "before the next worker starts: make the pickle small, use fork, or "
        "persistent_workers=True so it happens once, not every epoch",
    )
    console = Console(width=80, record=True, color_system=None)
    console.print(brief_findings([f]))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines[0].startswith("WARNING workers start one after another")
    body = lines[1 : lines.index("(-v or the JSON: each finding's evidence)")]
    assert len(body) >= 4 and all(line.startswith(" " * 8) for line in body)
    assert any(line.endswith("[serial-startup]") for line in lines)
    assert any(line.startswith("        fix: under spawn") for line in body)
