"""A worker's own memory counts while its pool is whole (measure/readings.py
`pool_whole_until`): compare's per-worker peak and `peak USS / worker`, from samples
built here."""

from __future__ import annotations

from loaderprof.measure.memory import window_memory
from loaderprof.measure.sampler import Sample

S = 1_000_000_000
MiB = 1 << 20


def _read(tick: int, t: float, pid: int, uss_mib: int) -> Sample:
    ns = int(t * S)
    return Sample(tick, ns, pid, 100, 2 * uss_mib * MiB, uss_mib * MiB, uss_mib * MiB, read_ns=ns)


def test_a_survivors_reading_after_its_sibling_exited_is_not_its_peak() -> None:
    # Under spawn, the pages two workers shared became the survivor's once the other
    # exited: 370 MiB each while both lived, 498 MiB for the last one alone.
    samples = [_read(1, 1.0, 100, 50), _read(1, 1.0, 201, 370), _read(1, 1.0, 202, 370)]
    samples += [_read(2, 2.0, 100, 50), _read(2, 2.0, 202, 498)]
    workers = {201, 202}
    assert window_memory(samples, 100, workers, ()).peak_worker_uss_bytes == 498 * MiB
    until = {201: int(1.5 * S), 202: int(1.5 * S)}  # 201 began to exit at 1.5 s
    memory = window_memory(samples, 100, workers, (), until)
    assert memory.peak_worker_uss_bytes == 370 * MiB
