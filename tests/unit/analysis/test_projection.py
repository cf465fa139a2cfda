"""See NOTE [short epochs]. Cut epochs projected to full ones; the verdict on full epochs."""

from __future__ import annotations

import dataclasses

import pytest

from builders import make_pair
from loaderprof.analysis.projection import batch_interval, full_batches, project_trials
from loaderprof.cli import _run
from loaderprof.comparing.session import build_report
from loaderprof.config.run import RunConfig
from loaderprof.model.trials import EpochResult


def _epoch(epoch: int, wall: float, first: float, last: float, batches: int) -> EpochResult:
    return EpochResult(
        epoch, 0.0, wall, first, batches, batches * 8, None, (), (), last_batch_s=last
    )


def test_the_per_batch_time_is_pooled_over_the_trials_steady_epochs() -> None:
    # Steady epochs at 9 and 11 ms per batch (noise), a slow first epoch (warm-up): each
    # steady epoch is projected at the pooled 10 ms, keeping its own start-up.
    epochs = (
        _epoch(1, wall=0.50, first=0.40, last=0.48, batches=5),
        _epoch(2, wall=0.40, first=0.30, last=0.336, batches=5),
        _epoch(3, wall=0.45, first=0.35, last=0.394, batches=5),
    )
    (p, _) = make_pair([1.0, 1.0], [1.0, 1.0])
    (projected,) = project_trials([dataclasses.replace(p, epochs=epochs)], full=105, cut_at=5)
    walls = [e.wall_s for e in projected.epochs]
    assert walls == pytest.approx([0.50 + 1.0, 0.40 + 1.0, 0.45 + 1.0])


def test_a_cut_epoch_is_projected_by_its_own_per_batch_time() -> None:
    e = _epoch(2, wall=0.35, first=0.30, last=0.34, batches=5)
    assert batch_interval(e) == pytest.approx(0.01)
    (p, _) = make_pair([1.0, 1.0], [1.0, 1.0])
    t = dataclasses.replace(p, epochs=(e,))
    (projected,) = project_trials([t], full=105, cut_at=5)
    # 100 more batches at 10 ms each.
    assert projected.epochs[0].wall_s == pytest.approx(0.35 + 1.0)
    # A whole epoch (fewer batches than the cut) is left as measured.
    short = dataclasses.replace(t, epochs=(_epoch(2, 0.2, 0.1, 0.15, 3),))
    assert project_trials([short], full=105, cut_at=5)[0].epochs[0].wall_s == 0.2


def test_full_length_comes_from_epoch_samples_or_the_loaders_len() -> None:
    (p, _) = make_pair([1.0, 1.0], [1.0, 1.0])
    assert full_batches([p], epoch_samples=1000, batch_size=32) == 32
    assert full_batches([dataclasses.replace(p, full_batches=64)], None, 32) == 64
    assert full_batches([p], None, 32) is None


def test_min_gain_applies_to_the_projected_full_epoch() -> None:
    # Cut epochs: persistence saves 0.3 s of 0.4 s (75 %). Projected to 2,000 batches of
    # 10 ms, the same 0.3 s is 1.5 % of a 20 s epoch: below --min-gain 5 %.
    def trial(arm: str, walls: list[float]) -> object:
        (p, n) = make_pair(walls, walls)
        base = p if arm == "persistent" else n
        epochs = tuple(_epoch(i + 1, w, w - 0.04, w, 5) for i, w in enumerate(walls))
        return dataclasses.replace(base, epochs=epochs, full_batches=2000)

    p = trial("persistent", [0.5, 0.10, 0.101, 0.099, 0.1])
    n = trial("non_persistent", [0.5, 0.40, 0.401, 0.399, 0.4])
    cfg = RunConfig(dataset="a:B", epochs=5, trials=1, max_batches=5)
    report = build_report(cfg, [p, n], imported={})  # type: ignore[list-item]
    assert report.projection is not None and report.projection.full_batches == 2000
    c = report.comparison
    assert c is not None and c.steady_epoch_ratio is not None
    assert 0.98 < c.steady_epoch_ratio.value < 1.0
    assert report.verdict is not None and report.verdict.recommendation != "enable"
    cut = build_report(RunConfig(dataset="a:B", epochs=5, trials=1), [p, n], imported={})  # type: ignore[list-item]
    assert cut.comparison is not None and cut.comparison.steady_epoch_ratio is not None
    assert cut.comparison.steady_epoch_ratio.value < 0.3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-batches", "0"], "--max-batches must be ≥ 2"),
        (["--epoch-samples", "1000"], "it needs --max-batches"),
    ],
)
def test_bad_short_epoch_options_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["compare", "loaderprof.examples:CheapDataset", *args], debug=False)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in line
