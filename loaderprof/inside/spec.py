"""What the parent hands each trial child, written and read here only.

NOTE [trial spec]: the parent (measure/runner.py) writes one `TrialSpec` as
`<trial>.spec.json` in the trial's work folder and starts the child on it:
`python -m loaderprof.inside.trial SPEC.json`, or the warm template forks a
child that runs the same on a `ForkRequest` (see NOTE [template]). Everything else
the child learns it learns from the run's config; everything it says goes back
through the event file (inside/events.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from loaderprof.config.run import RunConfig

SPEC_SUFFIX = "spec.json"

# See NOTE [no teardown]. The most seconds the child gives the user's exit handlers
# after its last event; the parent cuts them soon after if the child cannot.
EXIT_HANDLERS_S = 10.0


@dataclass(frozen=True)
class TrialSpec:
    # The event file every process of the trial appends to.
    events_path: str
    # The arm: the loader's persistent_workers.
    persistent: bool
    # Where the parent writes the number of the last pause its sampler has read; None
    # when no one samples the pauses, and the child does not wait (see NOTE [sampled
    # pauses]).
    pause_ack_path: str | None
    # The run's config, `RunConfig.to_dict()` (its idle_ms the effective one): parsed
    # by `run_config()` after the child's first event, as part of its imports.
    config: Mapping[str, Any]

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: str | Path) -> TrialSpec:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return cls(
            events_path=str(data["events_path"]),
            persistent=bool(data["persistent"]),
            pause_ack_path=data.get("pause_ack_path"),
            config=data["config"],
        )

    def run_config(self) -> RunConfig:
        from loaderprof.config.run import RunConfig

        return RunConfig.from_dict(dict(self.config))


class ForkRequest(TypedDict):
    """One line on the template's stdin (measure/template.py): fork a child that runs
    the trial of `spec` in `cwd` with `env`, its output into `stdout` and `stderr`."""

    spec: str
    stdout: str
    stderr: str
    env: dict[str, str]
    cwd: str
