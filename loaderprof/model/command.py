"""What `loaderprof compare -- COMMAND` measured: the user's own command run as both
arms (see NOTE [command arms]). Times are seconds; a trial's are from the moment
loaderprof started the command."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from loaderprof.model.datawait import WaitSplit
from loaderprof.model.metrics import Ratio, Stat
from loaderprof.model.results import BaselineInfo, Finding, GateResult, PlanOutcome, Verdict

Arm = Literal["persistent", "non_persistent"]


@dataclass(frozen=True)
class CommandEpoch:
    """One epoch of the training (see NOTE [epoch of the training]): its main loader's
    iter() to the end of the other switched loaders' passes before the next, the
    training step inside; the wait for its main loader's first batch within it."""

    index: int
    wall_s: float
    first_batch_s: float | None
    batches: int
    # Its waits for data, from the hook's clock (NOTE [data wait]).
    wait: WaitSplit | None = None
    # Ended by --max-batches, not by the script's loop (NOTE [cut epochs]).
    cut: bool = False
    # The batches the loader's len() says a whole epoch has, where it knows.
    planned_batches: int | None = None
    # From its iter() to its last batch, where the hook stamped it (a cut epoch).
    last_batch_s: float | None = None
    # See NOTE [epoch of the training]. The other switched loaders' passes inside it (a
    # validation pass), each iter() to end, summed; and that projected to their len()
    # where --max-batches cut them (their own per-batch time), else None.
    others_s: float = 0.0
    others_full_s: float | None = None


@dataclass(frozen=True)
class MainLoader:
    """The loader that ran the most batches in a trial (a pass run once after the
    training left out), as the hook saw it built."""

    site: str
    num_workers: int
    # What the script asked for, and what the arm set (NOTE [command arms]).
    persistent_asked: bool
    persistent_workers: bool
    # Loaders built at its site in the trial: more than one, each iterated once,
    # is a loader rebuilt every epoch.
    built: int
    # The most epochs any one loader built there ran.
    epochs_per_loader: int
    # Under torchrun: the ranks that built it (NOTE [ranks in a command]); None without.
    ranks: int | None = None
    prefetch_factor: int | None = None
    # The sites of the other loaders whose passes its epochs hold (see NOTE [epoch of
    # the training]).
    others: tuple[str, ...] = ()
    # What the user turns persistence on with where a framework builds the loader from
    # a setting of its own (inside/frameworks.py); None: the DataLoader's own flag.
    setting: str | None = None


@dataclass(frozen=True)
class CommandTrial:
    index: int
    arm: Arm
    epochs: tuple[CommandEpoch, ...]
    # The command's start to its main loader's construction (imports, model, data
    # set-up), and to the iter() of its first epoch.
    built_s: float | None
    before_first_s: float | None
    main: MainLoader | None
    # True: loaderprof stopped the command after --epochs epochs of its main loader.
    stopped: bool
    # The command's own status where it ended by itself (None: stopped by loaderprof).
    returncode: int | None
    wall_s: float
    # What the watch checks found in this run (NOTE [command findings]).
    findings: tuple[Finding, ...] = ()

    @property
    def steady(self) -> tuple[float, ...]:
        return tuple(e.wall_s for e in self.epochs[1:])


@dataclass(frozen=True)
class ArmFigures:
    """One arm's figures over its trials (each trial one value: NOTE [trial is the unit])."""

    trials: int
    built_s: Stat | None
    before_first_s: Stat | None
    cold_epoch_s: Stat | None
    steady_epoch_s: Stat | None
    # Each trial's waits (its steady epochs' medians), then their median over trials.
    cold_wait: WaitSplit | None = None
    steady_wait: WaitSplit | None = None
    # With --max-batches: the steady epoch at the loader's len() (NOTE [cut epochs]).
    projected_steady_epoch_s: Stat | None = None


@dataclass(frozen=True)
class SavingEstimate:
    """Persistence's saving per steady epoch, non-persistent minus persistent, in
    seconds: the steady ratio's interval times the non-persistent arm's steady epoch.
    `interval` only where earned (NOTE [earned intervals])."""

    saved_s: float
    low_s: float | None
    high_s: float | None
    ratio: Ratio
    p: float | None
    confidence: float
    # "trial" (≥ 2 per arm) or "epoch" (one trial: no interval is earned).
    unit: str
    # The ratio's t: its degrees of freedom (None: no interval, or an older report).
    df: float | None = None
    # The non-persistent arm's steady epoch the saving is a share of: the geometric
    # mean of its trials' medians, as the ratio's centre is (times the ratio: the
    # persistent arm's). None in reports before it was kept.
    non_persistent_s: float | None = None


@dataclass(frozen=True)
class CommandReport:
    kind: Literal["compare-command"]
    schema_version: int
    command: tuple[str, ...]
    epochs: int
    loader_site: str | None
    trials: tuple[CommandTrial, ...]
    persistent: ArmFigures | None
    non_persistent: ArmFigures | None
    saving: SavingEstimate | None
    verdict: Verdict | None
    # Persistence cannot change this command's epochs: why, and the line to change.
    nothing_to_compare: str | None
    site: str | None
    complete: bool
    interrupted: bool
    wall_s: float
    # Added later; a report written before them loads with these defaults.
    # The plan that ran (compare's PlanOutcome); None where there was nothing to compare.
    plan: PlanOutcome | None = None
    # --fail-on, judged as compare judges it (loaderprof.analysis.gates).
    gates: tuple[GateResult, ...] = ()
    gate_status: str | None = None
    tool: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    # Each arm's findings, each tagged with its arm and the trials it was seen in
    # (NOTE [command findings]).
    findings: tuple[Finding, ...] = ()
    # --max-batches: each epoch of the switched loaders ended after this many batches.
    max_batches: int | None = None
    # When the run ended (UTC, ISO 8601): a saved report names itself as a baseline.
    created: str = ""
    # --baseline: the saved report the relative gates were judged against, and what
    # differs in its environment (see NOTE [command baseline]).
    baseline: BaselineInfo | None = None
    # What may make its figures noisy (another process busy on the machine), as
    # compare's `warnings` say it.
    warnings: tuple[str, ...] = ()
    # The line of the trial whose command failed, ending the run after the trials
    # measured before it (they are kept: `complete` is false).
    error: str | None = None
