"""The event channel between the trial child, its workers and the parent.

Every process appends JSON lines to one file with O_APPEND. Each event is a
single `write(2)` far below PIPE_BUF, so lines from concurrent processes never
interleave, and events written before a crash survive it. Stamps are
`time.monotonic_ns()`: CLOCK_MONOTONIC is system-wide on Linux, so stamps from
the parent, the trial child and its workers share one time base.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

# Per-process cache of open descriptors: a forked worker inherits the parent's
# cache, so it is keyed by pid as well.
_fds: dict[tuple[int, str], int] = {}


def emit(path: str, ev: str, **fields: Any) -> None:
    pid = os.getpid()
    key = (pid, path)
    fd = _fds.get(key)
    if fd is None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        _fds[key] = fd
    record = {"ev": ev, "t": time.monotonic_ns(), "pid": pid, **fields}
    os.write(fd, (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode())


class EventReader:
    """Reads whole lines appended to an event file since the last call."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return list(_decode(lines))


def _decode(lines: list[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            # A process killed mid-write can leave a torn line; skip it.
            continue
