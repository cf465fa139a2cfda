"""Run one trial in its own child process and watch it from outside.

Each trial is a process of its own, forked from a warm template that has
imported torch once (NOTE [template]) or, with --fresh-interpreter, a new
interpreter (`python -m loaderprof.inside.trial`); never a fork of this one, so one
arm's leftovers (memory, allocator state, live workers, imported user modules)
cannot bias the other. The child leads its own process session; every process
of the trial (workers, forkserver, resource tracker) inherits its process
group, so one `killpg` ends them all and none is left behind, whatever happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from loaderprof.config.refs import ObjectRef
from loaderprof.config.run import RunConfig
from loaderprof.errors import INTERRUPTS, Interrupted
from loaderprof.inside import procfs
from loaderprof.inside.clock import NS
from loaderprof.inside.events import Ev, EventReader
from loaderprof.inside.spec import EXIT_HANDLERS_S, SPEC_SUFFIX, TrialSpec
from loaderprof.measure import contention
from loaderprof.measure.assemble import assemble_trial
from loaderprof.measure.sampler import Sample, TreeSampler
from loaderprof.measure.template import Template, TemplateError
from loaderprof.model.trials import SamplerStats, TrialError, TrialResult
from loaderprof.units import fmt_bytes

EventCallback = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True)
class TrialSlot:
    """Which trial to run: its arm, its place in the order, its role. Not a plan: the
    plan is the schedule of trials (adaptive or fixed) that these make up."""

    arm: str
    persistent: bool
    index: int
    warmup: bool = False
    # See NOTE [timing and memory trials]. "timing", "memory" or "both".
    role: str = "both"

    @property
    def timed(self) -> bool:
        """Its epoch times feed the statistics, so nothing may sample inside them."""
        return self.role != "memory"

    @property
    def deep(self) -> bool:
        """Its memory is sampled deeply inside epochs too (peaks, first batches)."""
        return self.role != "timing"


# runner(cfg, slot, workdir, on_event) runs one trial and returns it measured (on_event
# gets each event as it comes): a TemplateRunner, or a fake assembling tests' events.
TrialRunner = Callable[[RunConfig, "TrialSlot", Path, "EventCallback | None"], TrialResult]


def child_pythonpath(cfg: RunConfig, cwd: str) -> str:
    """PYTHONPATH for the trial child, inherited by spawn/forkserver workers.

    The forkserver process is started without the parent's sys.path, so the
    current directory and the directories of `file.py:attr` references must
    travel through the environment.
    """
    entries = [cwd]
    refs = [cfg.dataset, cfg.loader.collate_fn, cfg.loader.worker_init_fn, cfg.epoch_hook]
    for text in refs:
        if text:
            ref = ObjectRef.parse(text)
            if ref.search_dir:
                entries.append(ref.search_dir)
    existing = os.environ.get("PYTHONPATH")
    if existing:
        entries.append(existing)
    return os.pathsep.join(dict.fromkeys(entries))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# After the child's own cut of its exit handlers (EXIT_HANDLERS_S), the parent's.
_CUT_LATE_S = 2.0

# How long a killed trial's processes may take to be gone before the next starts.
_GONE_WAIT_S = 5.0


def _wait_until_gone(pgid: int) -> None:
    """See NOTE [template]. The next trial starts only once every process of this one has
    exited: a killed process keeps its pages mapped until its exit completes (slow on
    a busy machine), and any it still shares with the template would be split with
    the next trial, which the template's share does not account for."""
    deadline = time.monotonic() + _GONE_WAIT_S
    while procfs.group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:]


@dataclass
class _Watch:
    """What the parent saw of one trial process."""

    events: list[Mapping[str, Any]]
    t0: int
    t_end: int = 0
    timed_out: bool = False
    interrupted: BaseException | None = None


def _files(slot: TrialSlot, workdir: Path) -> dict[str, Path]:
    prefix = "w" if slot.warmup else "m" if slot.role == "memory" else ""
    tag = f"{prefix}{slot.index:02d}-{slot.arm}"
    return {
        k: workdir / f"{tag}.{k}"
        for k in ("events.jsonl", SPEC_SUFFIX, "stdout.log", "stderr.log", "paused")
    }


class ChildProcess(Protocol):
    """The trial's process: a fresh interpreter (`subprocess.Popen`) or a child forked
    by the template (`template.ForkedTrial`)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


def _start(
    files: Mapping[str, Path], env: Mapping[str, str], cwd: str, template: Template | None
) -> ChildProcess:
    """Start the trial: forked by the template (NOTE [template]), or a fresh
    interpreter that leads its own session."""
    if template is not None:
        return template.fork(files[SPEC_SUFFIX], files["stdout.log"], files["stderr.log"], env, cwd)
    with open(files["stdout.log"], "wb") as out, open(files["stderr.log"], "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "loaderprof.inside.trial", str(files[SPEC_SUFFIX])],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def _start_held(
    files: Mapping[str, Path],
    env: Mapping[str, str],
    cwd: str,
    template: Template | None,
    watch: _Watch,
) -> ChildProcess:
    """Start the trial with signals held until the runner knows its pid: one that came
    meanwhile is kept in `watch.interrupted`, and the trial is torn down as any other
    interrupted one."""
    proc: ChildProcess | None = None
    try:
        with INTERRUPTS.held():
            proc = _start(files, env, cwd, template)
    except Interrupted as exc:
        if proc is None:
            raise  # nothing started
        watch.interrupted = exc
    return proc


def run_trial(
    cfg: RunConfig,
    slot: TrialSlot,
    workdir: Path,
    *,
    on_event: EventCallback | None = None,
    template: Template | None = None,
) -> TrialResult:
    files = _files(slot, workdir)
    events_path = files["events.jsonl"]
    if slot.role == "timing":
        # See NOTE [timing and memory trials]. The pause after each epoch is where idle
        # memory is sampled; a timing trial samples nothing, so it needs none.
        cfg = dataclasses.replace(cfg, idle_ms=0.0)
    TrialSpec(
        events_path=str(events_path),
        persistent=slot.persistent,
        pause_ack_path=str(files["paused"]) if slot.deep and cfg.sample_interval_ms > 0 else None,
        config=cfg.to_dict(),
    ).write(files[SPEC_SUFFIX])
    cwd = os.getcwd()
    env = dict(os.environ)
    env["PYTHONPATH"] = child_pythonpath(cfg, cwd)
    # Output from the user's code goes to the logs, not over the tables.
    env.setdefault("PYTHONUNBUFFERED", "1")
    reader = EventReader(str(events_path))
    sampler: TreeSampler | None = None
    watch = _Watch([], time.monotonic_ns())
    proc = _start_held(files, env, cwd, template, watch)
    try:
        # A signal that came as it started goes straight to the teardown.
        if cfg.sample_interval_ms > 0 and watch.interrupted is None:
            sampler = TreeSampler(
                proc.pid,
                cfg.sample_interval_ms / 1000,
                cfg.uss_interval_ms / 1000,
                ignore_files=frozenset({str(events_path), os.path.realpath(events_path)}),
                template_pid=template.pid if template is not None else None,
            )
            sampler.start()
        if watch.interrupted is None:
            pauses = _Pauses(files["paused"]) if sampler is not None and slot.deep else None
            _follow(proc, reader, sampler, cfg, slot, watch, on_event, pauses)
    except BaseException as exc:  # KeyboardInterrupt / our signal exception
        watch.interrupted = exc
    finally:
        watch.t_end = time.monotonic_ns()
        # The teardown is not cut short: a signal in it waits for its end.
        with INTERRUPTS.held():
            if sampler is not None:
                sampler.stop()
            _kill_group(proc.pid)
            proc.wait()
            _wait_until_gone(proc.pid)
    for ev in reader.read_new():
        watch.events.append(ev)
        if on_event is not None:
            on_event(ev)
    # See NOTE [no teardown]. The trial ends at its last event (a failed one's exit); the
    # exit handlers after it are the user's teardown, in no figure.
    ended = [ev for ev in watch.events if ev["ev"] in (Ev.TRIAL_END, Ev.EXITING)]
    watch.t_end = min([watch.t_end, *(ev["t"] for ev in ended)])
    contention.count_unreaped(contention.unreaped_cpu_s(ended))
    result = _result(cfg, slot, proc, watch, sampler, files["stderr.log"])
    if watch.interrupted is not None:
        # Hand the partial trial to the scheduler with the interrupt.
        raise TrialInterrupted(result) from watch.interrupted
    return result


class _Pauses:
    """NOTE [sampled pauses]: the pause after an epoch is where a memory trial's idle
    memory and handles are read, and the lifecycle checks need one reading in every
    pause. A sleep of `--idle-ms` guarantees none on a machine busy enough to delay a
    tick past it, so the trial's pause lasts until the sampler has read every
    process inside it too: the runner writes the epoch's number to `path` once a
    tick that began after the pause's start has read them all (the trial waits a
    bounded time for it, then goes on)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._waiting: tuple[int, int] | None = None

    def began(self, epoch: int, t_ns: int) -> None:
        self._waiting = (epoch, t_ns)

    def answer(self, last_read_ns: int) -> None:
        if self._waiting is None or last_read_ns < self._waiting[1]:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(str(self._waiting[0]))
        # Atomic: the trial never reads half a number.
        os.replace(tmp, self.path)
        self._waiting = None


def _steer(sampler: TreeSampler, ev: Mapping[str, Any], cfg: RunConfig) -> None:
    """See NOTE [timing and memory trials]. In a timing trial the sampler holds still from
    just before the loader is built until the loader is closed. Were there a pause
    after each epoch (the runner gives timing trials none), it would sample there,
    stopping two ticks before the pause ends so that no sample overlaps the next
    epoch's start."""
    kind = ev["ev"]
    if kind in (Ev.LOADER_BUILDING, Ev.EPOCH_START):
        sampler.hold()
    elif kind == Ev.EPOCH_END:
        sampler.release(cfg.effective_idle_ms / 1000 - 2 * sampler.interval_s)
    elif kind in (Ev.LOADER_CLOSED, Ev.ERROR):
        sampler.release(None)


def _follow(
    proc: ChildProcess,
    reader: EventReader,
    sampler: TreeSampler | None,
    cfg: RunConfig,
    slot: TrialSlot,
    watch: _Watch,
    on_event: EventCallback | None,
    pauses: _Pauses | None = None,
) -> None:
    """Tail the events until the process ends or the timeout passes."""
    deadline = time.monotonic() + cfg.trial_timeout_s
    delivered: set[int] = set()
    epoch = 0
    ended = False
    while proc.poll() is None:
        for ev in reader.read_new():
            watch.events.append(ev)
            if ev["ev"] == Ev.EXITING:
                # Its exit handlers run now (NOTE [no teardown]); one that blocks the
                # child's own cut (holding the GIL) is cut here.
                ended = True
                deadline = min(deadline, time.monotonic() + EXIT_HANDLERS_S + _CUT_LATE_S)
            if sampler is not None and not slot.deep:
                _steer(sampler, ev, cfg)
            elif sampler is not None:
                if ev["ev"] == Ev.EPOCH_START:
                    epoch = ev["epoch"]
                    sampler.epoch_started()
                elif ev["ev"] in (Ev.EPOCH_END, Ev.ERROR):
                    sampler.epoch_ended()
                elif ev["ev"] == Ev.BATCH and epoch == 1 and ev["pid"] not in delivered:
                    # Epoch 1 only, where both arms start their workers: a deep
                    # sample in later epochs would slow only the non-persistent arm.
                    delivered.add(ev["pid"])
                    sampler.request_deep()
                elif ev["ev"] == Ev.VAL_START:
                    # A walk inside the pass, before a short one ends (NOTE [validation pass]).
                    sampler.request_deep()
                elif ev["ev"] == Ev.IDLE_START and pauses is not None:
                    pauses.began(ev["epoch"], ev["t"])
                elif ev["ev"] == Ev.SETUP_READ and pauses is not None:
                    pauses.began(0, ev["t"])
            if on_event is not None:
                on_event(ev)
        if pauses is not None and sampler is not None:
            # A sampler that stopped on an error will read no pause: do not make
            # the trial wait for it.
            pauses.answer(sampler.last_pause_read_ns if sampler.error is None else sys.maxsize)
        if time.monotonic() > deadline:
            watch.timed_out = not ended
            return
        # Short poll: the sampler learns of epoch boundaries from here.
        time.sleep(0.01)


def _result(
    cfg: RunConfig,
    slot: TrialSlot,
    proc: ChildProcess,
    watch: _Watch,
    sampler: TreeSampler | None,
    stderr_path: Path,
) -> TrialResult:
    samples = sampler.samples if sampler else []
    error = _trial_error(
        watch.events,
        proc.returncode,
        watch.timed_out,
        watch.interrupted,
        cfg,
        stderr_path,
        samples,
        watch.t_end,
    )
    result = assemble_trial(
        arm=slot.arm,
        index=slot.index,
        t0_ns=watch.t0,
        t_end_ns=watch.t_end,
        main_pid=proc.pid,
        returncode=proc.returncode,
        events=watch.events,
        samples=samples,
        gone_ns=sampler.gone_ns if sampler else None,
        error=error,
        shm_size=sampler.shm_size if sampler else None,
        shm_used=sampler.shm_used if sampler else (),
    )
    stats = None
    if sampler is not None:
        wall = (watch.t_end - watch.t0) / NS
        stats = SamplerStats(
            interval_s=sampler.interval_s,
            ticks=sampler.ticks,
            deep_ticks=sampler.deep_ticks,
            busy_s=sampler.busy_s,
            duty_cycle=sampler.busy_s / wall if wall > 0 else 0.0,
            targeted_ticks=sampler.targeted_ticks,
            tick_gap_p95_s=_p95(sampler.tick_gaps),
        )
    warnings = result.warnings
    if sampler is not None and sampler.error is not None:
        warnings = (
            *warnings,
            f"the memory sampler stopped early ({sampler.error}): memory figures after "
            "that moment are missing",
        )
    return dataclasses.replace(
        result, sampler=stats, warmup=slot.warmup, role=slot.role, warnings=warnings
    )


class TemplateRunner:
    """The default runner: trials forked by one warm template (NOTE [template]),
    started at the first trial; fresh interpreters with --fresh-interpreter, or when
    the template cannot start (the trial says so in its warnings)."""

    def __init__(self) -> None:
        self._template: Template | None = None
        self._failed: str | None = None

    def __call__(
        self,
        cfg: RunConfig,
        slot: TrialSlot,
        workdir: Path,
        on_event: EventCallback | None = None,
    ) -> TrialResult:
        template = None if cfg.fresh_interpreter else self._start(cfg, workdir)
        try:
            result = run_trial(cfg, slot, workdir, on_event=on_event, template=template)
        except TemplateError as exc:
            # Raised before the trial started: run it in a fresh interpreter instead.
            self.close()
            self._failed = str(exc)
            result = run_trial(cfg, slot, workdir, on_event=on_event)
        if self._failed is not None and not cfg.fresh_interpreter:
            note = f"trials ran in fresh interpreters: the trial template failed ({self._failed})"
            result = dataclasses.replace(result, warnings=(*result.warnings, note))
        return result

    def _start(self, cfg: RunConfig, workdir: Path) -> Template | None:
        if self._template is None and self._failed is None:
            env = dict(os.environ)
            env["PYTHONPATH"] = child_pythonpath(cfg, os.getcwd())
            try:
                self._template = Template(env, os.getcwd(), workdir / "template.log")
            except (TemplateError, OSError) as exc:
                self._failed = str(exc)
        return self._template

    def close(self) -> None:
        if self._template is not None:
            self._template.close()
            self._template = None


def _p95(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


class TrialInterrupted(Exception):
    def __init__(self, partial: TrialResult) -> None:
        super().__init__("trial interrupted")
        self.partial = partial


def _trial_error(
    events: list[Mapping[str, Any]],
    returncode: int | None,
    timed_out: bool,
    interrupted: BaseException | None,
    cfg: RunConfig,
    stderr_path: Path,
    samples: Sequence[Sample] = (),
    t_timeout_ns: int | None = None,
) -> TrialError | None:
    if interrupted is not None:
        return TrialError("interrupted", "interrupted", "stopped by an interrupt")
    last_epoch = max((ev["epoch"] for ev in events if ev["ev"] == Ev.EPOCH_START), default=None)
    worker_of = {ev["pid"]: ev["worker_id"] for ev in events if ev["ev"] == Ev.WORKER_INIT}
    if timed_out:
        stalled = _stalled_worker(events, worker_of, t_timeout_ns)
        return TrialError(
            "run",
            "timeout",
            f"trial did not finish within --trial-timeout {cfg.trial_timeout_s:g} s"
            + (f", stalled in epoch {last_epoch}" if last_epoch else "")
            + (f": {stalled[1]}" if stalled else ""),
            epoch=last_epoch,
            worker_id=stalled[0] if stalled else None,
        )
    for ev in events:
        if ev["ev"] == Ev.ERROR:
            message = ev.get("message", "unknown error")
            kind = ev.get("kind", "error")
            if kind == "worker_exception":
                failed = [
                    e
                    for e in events
                    if e["ev"] == Ev.GETITEM_ERROR and e.get("worker_id") == ev.get("worker_id")
                ]
                where = f" at index {failed[-1]['index']}" if failed else ""
                # The Dataset's own message may name the index already.
                if where and where not in message:
                    message += where
            elif kind == "worker_died":
                message = _died_message(ev, worker_of, samples)
            return TrialError(
                category=ev.get("category", "run"),
                kind=kind,
                message=message,
                epoch=ev.get("epoch"),
                worker_id=ev.get("worker_id"),
                detail=ev.get("detail"),
            )
    if any(ev["ev"] == Ev.TRIAL_END for ev in events):
        return None  # however its exit handlers ended it (NOTE [no teardown])
    if returncode is not None and returncode < 0:
        how = f"was killed by {signal.Signals(-returncode).name}"
    else:
        how = f"exited with status {returncode}"
    where = f" in epoch {last_epoch}" if last_epoch else ""
    return TrialError(
        "run",
        "child_crashed",
        f"the trial process {how}{where} before it finished",
        epoch=last_epoch,
        detail=_tail(stderr_path),
    )


def _stalled_worker(
    events: Sequence[Mapping[str, Any]], worker_of: Mapping[int, int], now_ns: int | None
) -> tuple[int, str] | None:
    """The worker of the last epoch whose last batch is oldest: the one the loader waits on."""
    starts = [ev["t"] for ev in events if ev["ev"] == Ev.EPOCH_START]
    if not starts or not worker_of:
        return None
    epoch_start = starts[-1]
    exited = {ev["pid"] for ev in events if ev["ev"] == Ev.WORKER_EXIT}
    last: dict[int, int] = {pid: epoch_start for pid in worker_of if pid not in exited}
    for ev in events:
        if ev["ev"] == Ev.BATCH and ev["pid"] in last and ev["t"] >= epoch_start:
            last[ev["pid"]] = max(last[ev["pid"]], ev["t"])
    if not last:
        return None
    pid = min(last, key=lambda p: last[p])
    end = now_ns if now_ns is not None else max(ev["t"] for ev in events)
    idle = (end - last[pid]) / NS
    produced = any(
        ev["ev"] == Ev.BATCH and ev["pid"] == pid and ev["t"] >= epoch_start for ev in events
    )
    if produced:
        text = f"produced no batch in its last {idle:.1f} s"
    else:
        text = f"produced no batch in the {idle:.1f} s since the epoch started"
    return worker_of[pid], f"worker {worker_of[pid]} (pid {pid}) {text}"


def _died_message(
    ev: Mapping[str, Any], worker_of: Mapping[int, int], samples: Sequence[Sample]
) -> str:
    """Name the dead worker, how it died (its exit code, read by the trial child),
    and the memory it had at its last sample."""
    codes = {int(k): int(v) for k, v in (ev.get("exitcodes") or {}).items()}
    pids = [int(p) for p in ev.get("pids") or []] or list(codes)
    parts = []
    for pid in pids:
        who = (
            f"DataLoader worker {worker_of[pid]} (pid {pid})"
            if pid in worker_of
            else f"DataLoader worker (pid {pid})"
        )
        code = codes.get(pid)
        if code is not None and code < 0:
            who += f" was killed by {signal.Signals(-code).name}"
            if -code == signal.SIGKILL:
                who += " (the kernel's OOM killer sends SIGKILL when memory runs out)"
        elif ev.get("signal"):
            who += f" was killed by signal {ev['signal']}"
        elif code is not None:
            who += f" exited with status {code}"
        else:
            who += " exited unexpectedly"
        mine = [s for s in samples if s.pid == pid]
        if mine:
            uss = next((s.uss for s in reversed(mine) if s.uss is not None), None)
            mem = f"RSS {fmt_bytes(mine[-1].rss)}"
            mem += f", USS {fmt_bytes(uss)}" if uss is not None else ""
            who += f"; at its last sample it had {mem}"
        parts.append(who)
    return "; ".join(parts) or str(ev.get("message", "a DataLoader worker died"))
