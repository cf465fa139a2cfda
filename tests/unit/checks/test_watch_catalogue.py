"""watch's finding ids are declared once (checks/catalogue.py): every id its checks
write is declared, and every declared id is one a check writes, so a `--fail-on
finding:ID` gate the catalogue accepts can fail."""

from __future__ import annotations

import re
from pathlib import Path

import loaderprof
from loaderprof.checks.catalogue import ATTACH_FINDING_IDS, FINDING_IDS, WATCH_FINDING_IDS

PACKAGE = Path(loaderprof.__file__).parent


def _written(module: str) -> set[str]:
    """The finding ids a module writes literally (`id="..."`)."""
    return set(re.findall(r'\bid="([a-z-]+)"', (PACKAGE / module).read_text()))


def test_watch_declares_what_its_checks_write() -> None:
    own = _written("watching/findings.py")
    assert own <= set(WATCH_FINDING_IDS)
    # The rest are compare's checks, which watch runs through the shared rules.
    assert set(WATCH_FINDING_IDS) - own <= set(FINDING_IDS)


def test_watch_pid_declares_exactly_what_its_checks_write() -> None:
    assert _written("watching/attach_findings.py") == set(ATTACH_FINDING_IDS)
