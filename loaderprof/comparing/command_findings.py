"""Findings for `compare -- COMMAND`.

NOTE [command findings]: each trial runs as `watch` runs a command: its process tree
sampled (USS, RSS, open files) by the same sampler, and its events and samples read
by watch's own assembly and checks, so a trial's findings are the ones `watch` would
report for that run, but for one difference: the epochs are timed, so the sampler is
held while an epoch runs (as far as the events read every 20 ms tell) and walks in
the pauses between epochs, where the growth and leak checks read their series. A
loop with no pause between its epochs gets no such reading, and no such finding.
comparing/ and watching/ are siblings, so the caller (the CLI, the API) hands the
checks in as `Inspect`. A trial stopped by loaderprof has no
exit of its own: leaked workers are looked for only where the command ended by
itself. An arm's finding is its first trial's, named by its arm, with the trials
that showed it; a warning only the persistent arm shows is a cost of persistence,
which the verdict names (analysis/verdict.decide_command, as compare's does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from loaderprof.analysis.verdict import finding_key
from loaderprof.measure.hooked import HookedRun
from loaderprof.model.command import CommandTrial
from loaderprof.model.results import Finding

# watch's advice to run `compare` on a loader: this is that comparison.
_ANSWERED = frozenset({"persistence-candidate"})

Inspect = Callable[[HookedRun], tuple[Finding, ...]]


def arm_findings(trials: Sequence[CommandTrial]) -> tuple[Finding, ...]:
    """Each arm's findings over its trials, tagged with the arm and the trials."""
    out: dict[tuple[str, str, str], tuple[Finding, list[int]]] = {}
    for t in trials:
        for f in t.findings:
            if f.id in _ANSWERED:
                continue
            key = (t.arm, *finding_key(f))
            first, seen = out.get(key, (f, []))
            # A trial that shows it twice (one loader idle beside two) is one trial.
            out[key] = (first, seen if t.index in seen else [*seen, t.index])
    return tuple(
        dataclasses.replace(f, arm=arm, evidence={**f.evidence, "trials": seen})
        for (arm, _, _), (f, seen) in out.items()
    )
