"""`loaderprof compare -- COMMAND`: the user's own command, unchanged, as both arms.

NOTE [command arms]: each trial is a fresh run of the command through the watch hook
(NOTE [watch hook]) in its own session. The hook sets persistent_workers on every
DataLoader the command builds with num_workers > 0 (only at --loader-site's line
when given) to the arm's value, once the loader's own __init__ has checked the
script's settings; what the script asked for is recorded. Nothing else of the
command changes, so the two arms differ in persistence alone. A trial ends once the
command's main loader (the one that ran the most batches, a pass run once after the
training left out) has run --epochs epochs: loaderprof then stops it as a Ctrl-C
would (NOTE [stopping a command]) and kills what is left of its tree, so no worker
outlives the trial. Its epochs are
timed from the hook's stamps in the command's own process: an epoch is its main
loader's iter() to the end of the validation passes before the next (NOTE [epoch of
the training]), with the training step inside, as the script's own clock around its
epoch loop sees it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loaderprof.analysis.gates import Gate
from loaderprof.analysis.stats import CONFIDENCE, estimate_ratio, plan_confidence, plan_ends
from loaderprof.analysis.verdict import decide_command
from loaderprof.comparing.command_events import CommandTrace
from loaderprof.comparing.command_figures import arm_projected, arm_waits, project_trials
from loaderprof.comparing.command_findings import Inspect, arm_findings
from loaderprof.comparing.scheduler import at_look, trial_order
from loaderprof.comparing.session import plan_outcome
from loaderprof.config.build import check_epochs
from loaderprof.config.run import AUTO, RunConfig, Schedule
from loaderprof.errors import INTERRUPTS, Interrupted, LoaderprofError, UsageError
from loaderprof.inside import procfs
from loaderprof.inside.clock import NS
from loaderprof.inside.cut import ENV_MAX_BATCHES
from loaderprof.inside.events import Ev, EventReader
from loaderprof.inside.hook import ENV_LOADER_SITE, ENV_PERSIST
from loaderprof.measure import contention
from loaderprof.measure.contention import busy_warning, unreaped_cpu_s
from loaderprof.measure.hooked import HookedRun, ProcessTree, check_command, hooked_env, launch
from loaderprof.measure.sampler import TreeSampler
from loaderprof.measure.scratch import scratch_dir
from loaderprof.model.command import (
    Arm,
    ArmFigures,
    CommandReport,
    CommandTrial,
    SavingEstimate,
)
from loaderprof.model.environment import SCHEMA_VERSION
from loaderprof.model.metrics import Stat
from loaderprof.model.results import BaselineInfo, Finding, Verdict
from loaderprof.report.partial import cut_words

_POLL_S = 0.02
# The command's own output, kept per trial: its last lines are shown when it fails.
_TAIL_LINES = 15


class CommandFailed(LoaderprofError):
    """The user's command ended by itself, with an error, inside a trial (exit 3), or
    a later trial's run was unlike the first's (fewer epochs, no loader). `report`:
    the trials measured before it, where there were some (nothing measured is lost:
    it is still shown and written)."""

    def __init__(
        self, message: str, *, detail: str | None = None, report: CommandReport | None = None
    ) -> None:
        super().__init__(message, detail=detail)
        self.report = report


@dataclass(frozen=True)
class CommandPlan:
    command: tuple[str, ...]
    epochs: int
    # Per arm: "auto" (the adaptive plan, NOTE [sequential looks]) or a fixed number.
    trials: int | str = AUTO
    seed: int = 0
    loader_site: str | None = None
    min_gain: float = 0.05
    max_trials: int = 6
    gates: tuple[Gate, ...] = ()
    strict: bool = False
    # Each epoch of the switched loaders ends after this many (see NOTE [cut epochs]).
    max_batches: int | None = None
    # --baseline: a saved command report, and its path as given (see NOTE [command
    # baseline]).
    baseline: CommandReport | None = None
    baseline_path: str | None = None

    @property
    def schedule(self) -> Schedule:
        """compare's rule (`Schedule.of`); loaderprof is no torchrun rank here (a torchrun
        is inside the command), so nothing holds it to a fixed plan."""
        return Schedule.of(self.trials, self.max_trials)


def check_plan(plan: CommandPlan) -> None:
    if not plan.command:
        raise UsageError("no command after --: loaderprof compare [OPTIONS] -- COMMAND [ARGS...]")
    check_epochs(plan.epochs)
    if not plan.schedule.adaptive and (not isinstance(plan.trials, int) or plan.trials < 1):
        raise UsageError(f"--trials {plan.trials}: use ≥ 1 per arm (or auto)")
    if plan.max_trials < 1:
        raise UsageError(f"--max-trials {plan.max_trials}: use ≥ 1 per arm")
    if plan.max_batches is not None and plan.max_batches < 2:
        raise UsageError(
            f"--max-batches must be ≥ 2 (a per-batch time needs two batches), got "
            f"{plan.max_batches}"
        )
    check_command(plan.command)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = f.read().decode(errors="replace").rstrip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_TAIL_LINES:])


class CommandRunner:
    """One trial: one run of the command in one arm, stopped after its epochs."""

    def __init__(self, plan: CommandPlan, inspect: Inspect | None = None) -> None:
        self.plan = plan
        # Watch's checks (see NOTE [command findings]); without them, no sampling.
        self.inspect = inspect

    def run(self, index: int, arm: Arm) -> CommandTrial:
        with scratch_dir("loaderprof-command-") as tmp:
            path, log = os.path.join(tmp, "events.jsonl"), os.path.join(tmp, "output.log")
            extra = {ENV_PERSIST: "1" if arm == "persistent" else "0"}
            if self.plan.loader_site:
                extra[ENV_LOADER_SITE] = self.plan.loader_site
            if self.plan.max_batches:
                extra[ENV_MAX_BATCHES] = str(self.plan.max_batches)
            env = hooked_env(path, tmp, extra)
            trace = CommandTrace(time.monotonic_ns(), self.plan.loader_site)
            proc = _start(self.plan.command, env, log)
            sampler = self._sampler(proc.pid, path)
            returncode, stopped, leaked, t_end = self._follow(
                proc, trace, EventReader(path), ProcessTree(proc.pid, sampler)
            )
            wall = (t_end - trace.t0) / NS
            done = trace.epochs_done()
            # Ended by itself: its own failure whenever it failed, and too short to
            # compare with fewer than two epochs (a cold one and a steady one).
            if not stopped and (returncode or done < 2):
                self._failed(index, arm, returncode, trace, _tail(log))
            findings = self._findings(sampler, trace, t_end, leaked)
        return CommandTrial(
            index=index,
            arm=arm,
            epochs=trace.epochs(self.plan.epochs),
            built_s=trace.built_s(),
            before_first_s=trace.before_first_s(),
            main=trace.main(),
            stopped=stopped,
            returncode=None if stopped else returncode,
            wall_s=wall,
            findings=findings,
        )

    def _sampler(self, pid: int, events_path: str) -> TreeSampler | None:
        """The command's tree sampled as `watch` samples it (NOTE [command findings])."""
        if self.inspect is None:
            return None
        sampler = TreeSampler(
            pid,
            RunConfig.sample_interval_ms / 1000,
            RunConfig.uss_interval_ms / 1000,
            ignore_files=frozenset({events_path}),
            handles_always=True,
        )
        sampler.epoch_started()
        sampler.start()
        return sampler

    def _findings(
        self,
        sampler: TreeSampler | None,
        trace: CommandTrace,
        t_end: int,
        leaked: tuple[int, ...],
    ) -> tuple[Finding, ...]:
        if self.inspect is None or sampler is None:
            return ()
        run = HookedRun(
            events=trace.events,
            samples=list(sampler.samples),
            gone_ns=dict(sampler.gone_ns),
            t0_ns=trace.t0,
            t_end_ns=t_end,
            leaked_pids=leaked,
        )
        return self.inspect(run)

    def _follow(
        self,
        proc: subprocess.Popen[bytes],
        trace: CommandTrace,
        reader: EventReader,
        tree: ProcessTree,
    ) -> tuple[int | None, bool, tuple[int, ...], int]:
        """Until the command ends or its main loader ran its epochs; then nothing of it
        is left alive (an interrupt included). Also what outlived a command that ended
        by itself (its leaked workers, once its helpers had a moment), and when the
        trial ended: its stop (NOTE [stopping a command]) is in no figure."""
        returncode: int | None = None
        stopped = False
        leaked: tuple[int, ...] = ()
        t_end = 0
        try:
            while True:
                try:
                    returncode = proc.wait(timeout=_POLL_S)
                    # Its last epoch is whole (see NOTE [epoch of the training]).
                    trace.ended = True
                    break
                except subprocess.TimeoutExpired:
                    pass
                trace.feed(reader.read_new())
                _steer(tree.sampler, trace.in_epoch())
                if trace.epochs_done() >= self.plan.epochs:
                    stopped = True
                    break
            if returncode is not None and self.inspect is not None:
                tree.reaped = True
                leaked = tree.survivors()
        finally:
            t_end = time.monotonic_ns()
            # The teardown is not cut short: a signal in it waits for its end.
            with INTERRUPTS.held():
                # Nothing read while the command winds down belongs to its epochs.
                if tree.sampler is not None:
                    tree.sampler.stop()
                mains = {ev["pid"] for ev in trace.events if ev["ev"] == Ev.LOADER_CREATED}
                late = [*_stop(proc, tree, reader, mains), *reader.read_new()]
            contention.count_unreaped(unreaped_cpu_s([*trace.events, *late]))
            trace.feed([ev for ev in late if ev["t"] <= t_end])
        return returncode, stopped, leaked, t_end

    def _failed(
        self, index: int, arm: Arm, returncode: int | None, trace: CommandTrace, tail: str
    ) -> None:
        where = f"in trial {index} ({arm.replace('_', '-')})"
        if returncode:
            detail = f"its last lines:\n{tail}" if tail else None
            raise CommandFailed(
                f"the command exited with status {returncode} {where}, "
                f"after {trace.epochs_done()} of {self.plan.epochs} epochs",
                detail=detail,
            )
        if not trace.built_any():
            raise UsageError(f"the command never built a DataLoader {where}: nothing to compare")
        if trace.main_id() is None and self.plan.loader_site:
            raise UsageError(f"no DataLoader built at --loader-site {self.plan.loader_site} ran")
        raise UsageError(
            f"the command ended after {trace.epochs_done()} epoch(s) of its main loader "
            f"{where}: it needs ≥ 2 (use --epochs ≤ the epochs it runs)"
        )


def _steer(sampler: TreeSampler | None, in_epoch: bool) -> None:
    """The sampler held while an epoch runs (see NOTE [command findings]), as compare's
    timing trials hold it (its walks compete with the workers on a small machine:
    measured, non-persistent epochs ran about 0.1 s longer of 0.5 s sampled), and
    walking in the pauses between epochs, where the checks read it."""
    if sampler is None or in_epoch == (not sampler.between):
        return
    if in_epoch:
        sampler.epoch_started()
        sampler.hold()
    else:
        sampler.epoch_ended()
        sampler.release(None)


def _start(command: Sequence[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return launch(command, env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


# NOTE [stopping a command]: a trial's epochs are measured once its training ran
# them; the command is then stopped as a Ctrl-C in its terminal stops it, SIGINT to
# its process group, so that its own clean-up runs (atexit handlers, `finally`, a
# framework's interrupt handling): mosaicml-streaming's /dev/shm segments, temporary
# files and locks would otherwise outlive every trial on the user's machine. What has
# not ended within STOP_GRACE_S (a command that ignores SIGINT) is killed, with every
# process of its tree. The stop comes as the next epoch begins (NOTE [epoch of the
# training]), when a non-persistent loader forks its next workers, so two races are
# met. A worker still starting, before torch makes it ignore SIGINT, would die of it,
# and the main process would wait for its batch until torch's 5 s status check: the
# DataLoader processes' own workers are spared (they end with their loader). And a
# SIGINT that lands in the fork itself raises inside an at-fork handler, where Python
# prints and drops it, and the loop trains on: where the main loader starts another
# epoch or batch after the signal, it is sent again (as a user presses Ctrl-C again).
# The trial ends, for every figure, when the stop began.
STOP_GRACE_S = 5.0
_LOOP_WENT_ON = frozenset({Ev.ITER_START, Ev.ITER_FIRST_BATCH})


def _stop(
    proc: subprocess.Popen[bytes], tree: ProcessTree, reader: EventReader, mains: set[int]
) -> list[dict[str, Any]]:
    """The command stopped as NOTE [stopping a command] says; nothing of it left. The
    events read meanwhile. `mains`: the processes that built a DataLoader."""
    read: list[dict[str, Any]] = []
    deadline = time.monotonic() + STOP_GRACE_S
    sent = 0
    while proc.poll() is None and time.monotonic() < deadline:
        if sent == 0 or any(ev["ev"] in _LOOP_WENT_ON and ev["t"] > sent for ev in read):
            sent = time.monotonic_ns()
            _interrupt(proc.pid, mains)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_POLL_S * 5)
        read += reader.read_new()
    # Reaped: its pid, and an empty group's, may be anyone's now.
    tree.reaped = proc.poll() is not None
    tree.kill_all()
    with contextlib.suppress(ProcessLookupError):
        proc.wait()
    tree.reaped = True
    for pid in tree.survivors():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return read


def _interrupt(root: int, mains: set[int]) -> None:
    """SIGINT to the command's group, as a terminal's Ctrl-C, but for the workers of
    the processes that built a DataLoader (NOTE [stopping a command])."""
    for pid in procfs.group_members(root):
        if procfs.ppid(pid) in mains:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGINT)


def _arm(trials: Sequence[CommandTrial], max_batches: int | None = None) -> ArmFigures:
    cold_wait, steady_wait = arm_waits(trials)
    return ArmFigures(
        trials=len(trials),
        built_s=Stat.of([t.built_s for t in trials if t.built_s is not None]),
        before_first_s=Stat.of([t.before_first_s for t in trials if t.before_first_s is not None]),
        cold_epoch_s=Stat.of([t.epochs[0].wall_s for t in trials if t.epochs]),
        steady_epoch_s=Stat.of([float(_median(t.steady)) for t in trials if t.steady]),
        cold_wait=cold_wait,
        steady_wait=steady_wait,
        projected_steady_epoch_s=arm_projected(trials, max_batches),
    )


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def saving(
    persistent: Sequence[CommandTrial],
    non_persistent: Sequence[CommandTrial],
    seed: int,
    confidence: float = CONFIDENCE,
) -> SavingEstimate | None:
    """Seconds saved per steady epoch, from the steady ratio compare computes (NOTE
    [trial is the unit]): its value and interval times the non-persistent arm's
    steady epoch: the geometric mean of its trials' medians, or of its epochs where
    they are the units, as the ratio's centre is (so that the saving is the
    difference of the two arms' geometric means).
    `confidence`: the level of the look the adaptive plan took (NOTE [sequential
    looks])."""
    a = [list(t.steady) for t in persistent if t.steady]
    b = [list(t.steady) for t in non_persistent if t.steady]
    est = estimate_ratio(a, b, seed=seed, confidence=confidence)
    if est is None:
        return None
    units = [_median(g) for g in b] if est.unit == "trial" else [v for g in b for v in g]
    base = math.exp(sum(math.log(v) for v in units) / len(units))
    r = est.ratio
    # See NOTE [earned intervals]. From trials as units only (two or more per arm).
    earned = est.unit == "trial" and r.has_interval and r.informative
    return SavingEstimate(
        saved_s=base * (1 - r.value),
        low_s=base * (1 - r.ci_high) if earned else None,
        high_s=base * (1 - r.ci_low) if earned else None,
        ratio=r,
        p=est.p,
        confidence=confidence,
        unit=est.unit,
        df=est.df,
        non_persistent_s=base,
    )


def nothing_to_compare(trial: CommandTrial) -> str | None:
    """Why persistence cannot change this command's epochs, or None."""
    main = trial.main
    if main is None:
        return None
    if main.num_workers == 0:
        return "its main loader has num_workers=0: there are no workers to keep"
    if main.built > 1 and main.epochs_per_loader <= 1:
        return (
            f"its main loader is built anew every epoch ({main.built} loaders, one epoch "
            "each): persistent workers live as long as their loader; build it once, "
            "before the epoch loop"
        )
    return None


def compare_command(
    plan: CommandPlan,
    *,
    on_trial: Callable[[int, int, Arm], None] | None = None,
    inspect: Inspect | None = None,
) -> CommandReport:
    """Run the plan's trials interleaved (A B B A ...) and summarise them; an adaptive
    plan stops at the first look whose verdict is decided (compare's rule, NOTE
    [sequential looks]). An interrupt ends the run with the trials measured so far
    (the report says it is partial).
    `inspect`: watch's checks, run on each trial (NOTE [command findings])."""
    check_plan(plan)
    runner = CommandRunner(plan, inspect)
    order = [s.arm for s in trial_order(plan.schedule.per_arm, plan.seed)]
    trials: list[CommandTrial] = []
    interrupted, why = False, None
    failed: LoaderprofError | None = None
    t0, cpu = time.monotonic(), contention.mark()
    try:
        for i, arm in enumerate(order):
            if on_trial is not None:
                on_trial(i + 1, len(order), arm)  # type: ignore[arg-type]
            try:
                trials.append(runner.run(i + 1, arm))  # type: ignore[arg-type]
            except LoaderprofError as exc:
                # A later trial's failure (its own error, or a run unlike the first:
                # fewer epochs, no loader) ends the run with the trials before it.
                if not trials:
                    raise
                failed = exc
                break
            why = nothing_to_compare(trials[0])
            if why is not None or settled(plan, trials):
                break
    except Interrupted:
        interrupted = True
    INTERRUPTS.finishing()
    error = None if failed is None else failed.message
    report = summarise(plan, tuple(trials), why, interrupted, time.monotonic() - t0, error)
    from loaderprof.model.environment import created_now, environment, tool

    # As every report carries them; the command's own imports are not seen from here.
    env = environment(None)
    busy = busy_warning(env, contention.other_cores(cpu, contention.mark()))
    warnings = (busy,) if busy else ()
    report = dataclasses.replace(
        report, tool=tool(), environment=env, created=created_now(), warnings=warnings
    )
    report = dataclasses.replace(report, baseline=baseline_info(plan, report))
    if failed is not None:
        raise CommandFailed(failed.message, detail=failed.detail, report=report)
    return report


def baseline_info(plan: CommandPlan, report: CommandReport) -> BaselineInfo | None:
    """The baseline named, and flagged where its environment differs: its timings may
    not transfer (compare's rule, model/environment.py)."""
    if plan.baseline is None:
        return None
    from loaderprof.model.environment import environment_differences

    old = plan.baseline
    diffs = environment_differences(old.environment, report.environment)
    # Another command, or other epochs, time other work: named as a machine is.
    for key, a, b in (
        ("command", shlex.join(old.command), shlex.join(report.command)),
        ("epochs", old.epochs, report.epochs),
        ("max_batches", old.max_batches, report.max_batches),
    ):
        if a != b:
            diffs.append(f"{key}: {a!r} → {b!r}")
    path = plan.baseline_path or "(in memory)"
    return BaselineInfo(path, plan.baseline.created, tuple(diffs))


def _split(trials: Sequence[CommandTrial]) -> tuple[list[CommandTrial], list[CommandTrial]]:
    return (
        [t for t in trials if t.arm == "persistent"],
        [t for t in trials if t.arm == "non_persistent"],
    )


def _verdict(
    plan: CommandPlan,
    p: Sequence[CommandTrial],
    n: Sequence[CommandTrial],
    findings: Sequence[Finding] = (),
) -> tuple[SavingEstimate | None, Verdict]:
    """(saving, verdict) at the look these trials make (NOTE [one verdict]), of whole
    epochs (NOTE [cut epochs]), naming the persistent arm's own warnings."""
    per_arm = min(len(p), len(n))
    level = plan_confidence(plan.schedule, per_arm)
    cut = plan.max_batches
    s = saving(project_trials(p, cut), project_trials(n, cut), plan.seed, level)
    return s, decide_command(s, per_arm, plan.min_gain, plan.schedule.cap, findings)


def settled(plan: CommandPlan, trials: Sequence[CommandTrial]) -> bool:
    """The adaptive plan's stop rule, compare's: at a look, the verdict is decided."""
    p, n = _split(trials)
    if not plan.schedule.adaptive or not at_look(len(p), len(n), plan.max_trials):
        return False
    return _verdict(plan, p, n)[1].decided


def summarise(
    plan: CommandPlan,
    trials: tuple[CommandTrial, ...],
    why: str | None,
    interrupted: bool,
    wall_s: float,
    error: str | None = None,
) -> CommandReport:
    """`error`: the line of a trial whose command failed, ending the run after the
    trials measured before it."""
    p, n = _split(trials)
    findings = arm_findings(trials)
    s, v = _verdict(plan, p, n, findings) if why is None and p and n else (None, None)
    per_arm = min(len(p), len(n))
    planned = plan_ends(plan.schedule)
    complete = not interrupted and error is None and len(p) == len(n) and per_arm in planned
    cut_short = interrupted or error is not None
    stopped = (
        None
        if complete or why or not cut_short
        else cut_words(
            error is not None,
            {"persistent": len(p), "non_persistent": len(n)},
            plan.schedule.per_arm,
        )
    )
    # The saving and the verdict are of whole epochs (see NOTE [cut epochs]).
    cut = plan.max_batches
    report = CommandReport(
        kind="compare-command",
        schema_version=SCHEMA_VERSION,
        command=plan.command,
        epochs=plan.epochs,
        loader_site=plan.loader_site,
        trials=trials,
        persistent=_arm(p, cut) if p else None,
        non_persistent=_arm(n, cut) if n else None,
        saving=s,
        verdict=v,
        nothing_to_compare=why,
        site=trials[0].main.site if trials and trials[0].main else None,
        complete=complete,
        interrupted=interrupted,
        wall_s=wall_s,
        plan=None if why else plan_outcome(plan.schedule, per_arm, v, stopped),
        findings=findings,
        max_batches=cut,
        error=error,
    )
    if not plan.gates or v is None or not complete:
        # A run a failure or a signal cut short is reported, not gated (compare's rule).
        return report
    from loaderprof.analysis.gates import evaluate_command

    results, status = evaluate_command(
        report, plan.gates, strict=plan.strict, seed=plan.seed, baseline=plan.baseline
    )
    return dataclasses.replace(report, gates=results, gate_status=status)
