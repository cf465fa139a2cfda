"""The worker-level checks' arithmetic and option checks, without processes."""

from __future__ import annotations

import pytest

from loaderprof.config import LoaderOptions
from loaderprof.errors import UsageError
from loaderprof.loader_findings import in_order_wait


def test_in_order_waits_for_the_slowest_worker() -> None:
    # 2 workers, 8 batches: in order, worker 0's 4 batches of 80 ms set the pace.
    ordered, unordered = in_order_wait({0: 0.08, 1: 0.001}, 8, prefetch=2, step_s=0.0)
    assert ordered == pytest.approx(0.32)
    # Out of order, worker 1 takes the rest; worker 0 still owes its 2 prefetched.
    assert unordered == pytest.approx(0.16)


def test_equal_workers_lose_nothing_to_order() -> None:
    ordered, unordered = in_order_wait({0: 0.01, 1: 0.01, 2: 0.01}, 30, prefetch=2, step_s=0.0)
    assert ordered == pytest.approx(unordered)


def test_a_slow_main_loop_bounds_both() -> None:
    ordered, unordered = in_order_wait({0: 0.02, 1: 0.01}, 10, prefetch=2, step_s=0.05)
    assert ordered == unordered == pytest.approx(0.5)


def test_in_order_on_a_torch_without_it_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only an older torch lacks the argument; stand one in for the check.
    import torch.utils.data

    from loaderprof import trial

    class OldLoader:
        def __init__(self, dataset: object, batch_size: int = 1) -> None: ...

    monkeypatch.setattr(torch.utils.data, "DataLoader", OldLoader)
    with pytest.raises(UsageError, match=r"--no-in-order needs torch ≥ 2.6"):
        trial._check_in_order(LoaderOptions(in_order=False))
