"""The golden-text check every screen test shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def check_golden(path: Path, text: str) -> None:
    """`text` is the committed golden file's, to the letter. With LOADERPROF_UPDATE_GOLDEN=1
    the file is rewritten and the test reported as a skip, never a pass: comparing the
    file just written with itself would pass whatever the text was."""
    if os.environ.get("LOADERPROF_UPDATE_GOLDEN"):
        old = path.read_text() if path.exists() else None
        path.write_text(text)
        pytest.skip(f"{path.name} {'unchanged' if old == text else 'rewritten'}: review the diff")
    assert text == path.read_text()
