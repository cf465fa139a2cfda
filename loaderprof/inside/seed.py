"""Which iterator started a worker, from inside it.

Each iterator of a DataLoader with workers draws one base seed and gives its worker
`i` the seed `base + i` (torch's `_MultiProcessingDataLoaderIter`): the base seed is
the pool's name, the same in all of its workers and new with every iterator. Stamps
alone cannot say it: a worker of an iterator left alive (`it = iter(loader)`) may
begin after the next iterator's `iter()` on a busy machine.
"""

from __future__ import annotations


def pool_seed(worker_id: int) -> int | None:
    """This worker's iterator's base seed; None outside a DataLoader worker."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    return None if info is None else int(info.seed) - worker_id
