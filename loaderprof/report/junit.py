"""JUnit XML: one testcase per gate, for CI systems that show test reports."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from loaderprof.model.results import Report


def to_junit(report: Report, *, strict: bool = False) -> str:
    suite = ET.Element(
        "testsuite", name="loaderprof", timestamp=report.created, time=f"{report.wall_s:.3f}"
    )
    cases = 0
    failures = skipped = errors = 0
    run = ET.SubElement(
        suite, "testcase", classname="loaderprof", name="run", time=f"{report.wall_s:.3f}"
    )
    cases += 1
    if not report.complete:
        errors += 1
        msg = "; ".join(e.message for e in report.errors) or "the run did not complete"
        ET.SubElement(run, "error", message=msg)
    for g in report.gates:
        case = ET.SubElement(suite, "testcase", classname="loaderprof.gates", name=g.gate)
        cases += 1
        if g.status == "fail" or (strict and g.status == "inconclusive"):
            failures += 1
            ET.SubElement(case, "failure", message=g.message, type=g.status)
        elif g.status in ("inconclusive", "skipped"):
            skipped += 1
            ET.SubElement(case, "skipped", message=g.message)
        else:
            ET.SubElement(case, "system-out").text = g.message
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )
