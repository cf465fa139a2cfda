"""The check catalogue: finding ids declared once, and the checks that ran read back
from a report's `findings_checked`."""

from __future__ import annotations

from loaderprof.checks.catalogue import CATALOGUE, FINDING_IDS, checked, ran


def test_each_check_that_ran_is_named_back_and_no_other() -> None:
    for cid, check in CATALOGUE.items():
        assert ran(checked([cid])) == [check.name], cid
    # repeated-randomness is in both the state and the content check: the state check
    # running alone does not make the content check look as if it ran.
    assert ran(checked(["state"])) == ["stale worker state and repeated randomness"]
    assert ran(checked(["state", "content"])) == [
        "stale worker state and repeated randomness",
        "content digests",
    ]
    assert ran(()) == []


def test_every_finding_id_is_declared_once() -> None:
    assert len(FINDING_IDS) == len(set(FINDING_IDS))
    assert set(FINDING_IDS) == {f for c in CATALOGUE.values() for f in c.findings}
    assert "memory-grows-every-epoch" in FINDING_IDS and "copy-on-read" in FINDING_IDS


def test_a_checks_name_is_one_item_of_a_list() -> None:
    from loaderprof.checks.catalogue import CATALOGUE

    assert not [c.name for c in CATALOGUE.values() if "," in c.name]
