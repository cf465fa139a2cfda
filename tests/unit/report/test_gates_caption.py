"""The gates table's legend says why the gates it shows are inconclusive."""

from __future__ import annotations

from loaderprof.analysis.gates import MetricValue, judge, parse_gate
from loaderprof.report.rows import gates_caption


def test_the_legend_names_each_reason_a_gate_shown_is_inconclusive() -> None:
    gate = parse_gate("persistent.steady_epoch_s:<=100ms")
    straddles = judge(gate, MetricValue(0.12, 0.09, 0.15, 4))
    once = judge(gate, MetricValue(0.12, 0.12, 0.12, 1, has_interval=False))
    wide = judge(gate, MetricValue(0.12, 0.005, 3.0, 2))
    passed = judge(gate, MetricValue(0.05, 0.04, 0.06, 4))
    assert [g.status for g in (straddles, once, wide)] == ["inconclusive"] * 3
    assert gates_caption([passed]).endswith("the interval straddles it (fails only with --strict)")
    assert gates_caption([once, passed]).endswith(
        "but it has no interval, read once or without spread (fails only with --strict)"
    )
    assert "but the interval straddles it or its interval is too wide to say (" in gates_caption(
        [wide, straddles]
    )
