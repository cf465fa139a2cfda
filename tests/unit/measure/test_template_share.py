"""See NOTE [template]. A forked trial's main counts the template's pages where a fresh
interpreter holds them, in its RSS as in its PSS, so no reading of it shows a PSS
above its RSS. This process stands in for the template: it maps a file and reads it
(what the import faults in), then forks the "trial", which does not touch it."""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from loaderprof.inside import procfs
from loaderprof.measure.sampler import TreeSampler
from loaderprof.units import MiB

pytestmark = pytest.mark.skipif(
    not os.path.exists(f"/proc/{os.getpid()}/pagemap") or not procfs._HAS_ROLLUP,
    reason="no /proc/PID/pagemap or smaps_rollup here",
)

FILE_MIB = 32


@dataclass
class Forked:
    pid: int
    # The mapped file's pages, as runs for procfs.absent_pages.
    runs: list[tuple[int, int]]
    ask: int
    ack: int

    def touch(self) -> None:
        """The child reads every page of the file once."""
        os.write(self.ask, b"t")
        assert os.read(self.ack, 1) == b"k"


def _read_every_page(view: mmap.mmap) -> None:
    for i in range(0, len(view), procfs.PAGE):
        view[i]


def _mapped_range(path: Path) -> tuple[int, int]:
    with open(f"/proc/{os.getpid()}/maps") as f:
        for line in f:
            if line.rstrip().endswith(str(path)):
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                return lo, hi
    raise AssertionError(f"{path} is not mapped")


@pytest.fixture
def forked(tmp_path: Path) -> Iterator[Forked]:
    path = tmp_path / "lib.bin"
    with open(path, "wb") as out:
        out.write(os.urandom(FILE_MIB * MiB))
        # Written back, its pages are clean, as a library's code is.
        out.flush()
        os.fsync(out.fileno())
    with open(path, "rb") as f:
        view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    _read_every_page(view)
    lo, hi = _mapped_range(path)
    ask_r, ask_w = os.pipe()
    ack_r, ack_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            while os.read(ask_r, 1) == b"t":
                _read_every_page(view)
                os.write(ack_w, b"k")
        finally:
            os._exit(0)
    try:
        yield Forked(pid, [(lo // procfs.PAGE, (hi - lo) // procfs.PAGE)], ask_w, ack_r)
    finally:
        os.write(ask_w, b"q")
        os.waitpid(pid, 0)
        view.close()
        for fd in (ask_r, ask_w, ack_r, ack_w):
            os.close(fd)


def test_pagemap_finds_the_file_pages_a_fork_left_out(forked: Forked) -> None:
    pages = FILE_MIB * MiB // procfs.PAGE
    template = procfs.resident_file_pages(os.getpid())
    assert template is not None
    (first, count) = forked.runs[0]
    held = sum(
        min(a + n, first + count) - max(a, first)
        for a, n in template
        if a < first + count and a + n > first
    )
    assert held == pages
    assert procfs.absent_pages(os.getpid(), forked.runs) == 0
    # A fork copies no page table of a file mapping: the child maps none of them...
    assert procfs.absent_pages(forked.pid, forked.runs) == pages
    # ...until it reads them itself.
    forked.touch()
    assert procfs.absent_pages(forked.pid, forked.runs) == 0


def _sample(forked: Forked) -> TreeSampler:
    sampler = TreeSampler(forked.pid, 0.02, 0.02, template_pid=os.getpid())
    sampler.start()
    deadline = time.monotonic() + 20
    while sampler.deep_ticks < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert sampler.deep_ticks >= 3 and sampler.error is None
    return sampler


@pytest.mark.parametrize("pagemap", [True, False], ids=["pagemap", "without-pagemap"])
def test_the_forked_main_never_reads_a_pss_above_its_rss(
    forked: Forked, pagemap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pagemap:
        monkeypatch.setattr(procfs, "resident_file_pages", lambda pid: None)
    raw = procfs.rss(forked.pid)
    assert raw is not None
    samples = _sample(forked).samples
    walked = [s for s in samples if s.pss is not None]
    assert walked and len(walked) < len(samples)
    # The template's share (its private file pages, 32 MiB, above all) is in the
    # main's PSS, and the pages themselves in its RSS: ticks (statm) and walks alike.
    for s in walked:
        assert s.pss is not None and s.pss <= s.rss, (s.pss / MiB, s.rss / MiB)
    for s in samples:
        assert s.rss >= raw + FILE_MIB * MiB, (s.rss / MiB, raw / MiB)
