"""The README's pointers into the repository stay true: every test, benchmark and
module file it names exists (a moved file would leave the manual pointing nowhere)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A user's own test file in the pytest example, not one of ours.
EXAMPLES = {"tests/test_dataloader.py"}


def test_every_file_the_readme_names_exists() -> None:
    text = (ROOT / "README.md").read_text()
    named = set(
        re.findall(r"(?<![\w.])((?:tests|benchmarks|loaderprof)/[\w/.-]+\.(?:py|json))\b", text)
    )
    missing = sorted(p for p in named - EXAMPLES if not (ROOT / p).exists())
    assert named and not missing, missing
