"""What every command shares: consoles, outputs, the progress bar, signals, exit codes."""

from __future__ import annotations

import io
import os
import sys
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from loaderprof.errors import INTERRUPTS, ExitCode
from loaderprof.inside.events import Ev

if TYPE_CHECKING:
    from rich.console import Console

    from loaderprof.config.options import GateOptions, OutputOptions
    from loaderprof.config.run import RunConfig
    from loaderprof.model.command import CommandReport
    from loaderprof.model.results import Report
    from loaderprof.report.exporters import AnyReport, ReportKind, Target


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def say(line: str, style: str | None = None) -> None:
    """One `loaderprof:` line on stderr: whole in a CI log or a pipe (a grep for it, a
    path in it); on a terminal wrapped between words, not by the terminal mid-word."""
    console = stderr_console()
    console.print(
        line, style=style, markup=False, highlight=False, soft_wrap=not console.is_terminal
    )


def stdout_console(json_to_stdout: bool) -> Console:
    """With the JSON on stdout, the tables move to stderr so stdout stays parseable.
    Piped or redirected, lines lose the spaces rich pads them with to the table's
    width (a diff or a CI log reads them as changes)."""
    from rich.console import Console

    if json_to_stdout:
        return stderr_console()
    if sys.stdout.isatty():
        return Console()
    return Console(file=typing.cast(TextIO, _Trimmed(sys.stdout)))


class _Trimmed(io.TextIOBase):
    """A text stream that drops each line's trailing spaces before it passes it on."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._line = ""

    def write(self, text: str) -> int:
        *whole, self._line = (self._line + text).split("\n")
        if whole:
            self._out.write("".join(f"{line.rstrip(' ')}\n" for line in whole))
        return len(text)

    def flush(self) -> None:
        if self._line:
            self._out.write(self._line)
            self._line = ""
        self._out.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._out.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._out, "encoding", "utf-8")


class Outputs:
    """The files a command writes; every path is checked before any trial runs."""

    def __init__(
        self,
        kind: ReportKind,
        outputs: OutputOptions | None,
        gates: GateOptions | None = None,
        *,
        what: str = "",
    ) -> None:
        from loaderprof.report.exporters import EXPORTERS, check_targets

        self.targets: list[Target] = []
        for group in (outputs, gates):
            if group is None:
                continue
            # The registry names every output once; each group holds its own fields.
            for name in EXPORTERS:
                path = getattr(group, name, None)
                if path is not None:  # "" too: check_targets refuses an empty path
                    self.targets.append((name, path))
        check_targets(kind, self.targets, what)
        self.json_to_stdout = bool(outputs and outputs.json == "-")
        self.json_path = outputs.json if outputs and outputs.json != "-" else None
        self.step_summary = os.environ.get("GITHUB_STEP_SUMMARY") or None
        # The outputs a write failed for, and those written, as given.
        self.failed: list[str] = []
        self.written: list[str] = []
        # When the first signal came, against the writing: "before", "writing" or
        # "after" (None: none yet), so the closing line says what is true.
        self.signalled: str | None = None

    @property
    def unwritten(self) -> list[str]:
        """Asked for but neither written nor failed (each failure has its own line):
        nothing was measured to write."""
        done = ("-", *self.written, *self.failed)
        return [str(p) for _, p in self.targets if str(p) not in done]

    def write(self, report: AnyReport, *, strict: bool = False) -> bool:
        """Write every output; one that fails is one line naming it and why, and the
        others are still written. False when any failed (exit 4, NOT_SAVED)."""
        from loaderprof.report.exporters import append_text, export, kind_of

        before = INTERRUPTS.signum is not None
        failures = dict(export(report, self.targets, strict=strict))
        for path, reason in failures.items():
            self.failed.append(path)
            sys.stderr.write(f"loaderprof: error: cannot write {path}: {reason}\n")
        self.written += [str(p) for _, p in self.targets if str(p) not in failures]
        if self.step_summary and kind_of(report) == "compare":
            from loaderprof.report.markdown import to_markdown

            try:
                append_text(self.step_summary, to_markdown(report) + "\n")  # type: ignore[arg-type]
            except OSError as exc:
                sys.stderr.write(
                    f"loaderprof: warning: cannot append to GITHUB_STEP_SUMMARY: {exc}\n"
                )
        if INTERRUPTS.signum is not None:
            self.signalled = "before" if before else "writing"
        return not self.failed


STAGES = {
    Ev.CHILD_START: "starting interpreter",
    Ev.IMPORTED: "building dataset",
    Ev.DATASET_BUILT: "building loader",
    Ev.LOADER_BUILT: "running",
}


@contextmanager
def trial_progress(
    cfg: RunConfig, console: Console, enabled: bool
) -> Iterator[Callable[[Any, Any], None] | None]:
    """A rich progress bar on stderr fed by trial events (None when off or not a terminal)."""
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from loaderprof.model.results import ARM_LABEL

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("epochs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    trials = cfg.planned_trials + cfg.memory_pairs
    task = progress.add_task("starting", total=trials * 2 * cfg.epochs)
    # An adaptive plan may stop at any look: its total is the cap.
    of = f" (≤{cfg.max_trials}, adaptive)" if cfg.adaptive else f"/{cfg.fixed_trials}"

    def on_progress(plan: Any, ev: Any) -> None:
        head = f"trial {plan.index + 1}{of} {ARM_LABEL[plan.arm]}"
        if plan.role == "memory":
            head = f"memory trial {ARM_LABEL[plan.arm]}"
        kind = None if ev is None else ev.get("ev")
        if ev is None:
            progress.update(task, description=f"{head}: starting")
        elif kind in STAGES:
            progress.update(task, description=f"{head}: {STAGES[kind]}")
        elif kind == Ev.EPOCH_START:
            progress.update(task, description=f"{head}: epoch {ev['epoch']}/{cfg.epochs}")
        elif kind == Ev.EPOCH_END:
            progress.advance(task)

    with progress:
        yield on_progress


def run_exit_code(report: Report) -> int:
    """The exit code a compare run earned before any gate: interrupted, usage, failed, ok."""
    interrupted = INTERRUPTS.exit_code()
    if interrupted is not None:
        return interrupted
    categories = {e.category for e in report.errors}
    if "usage" in categories:
        return int(ExitCode.USAGE)
    if categories or not report.complete:
        return int(ExitCode.RUN_FAILED)
    return int(ExitCode.OK)


def saved_code(saved: bool) -> int:
    """OK, or NOT_SAVED when an output could not be written (each named already)."""
    return int(ExitCode.OK if saved else ExitCode.NOT_SAVED)


def nothing_written(outputs: Outputs, why: str = "nothing measured") -> str:
    """'; nothing measured: no report written (r.json)' for a run that ended before it
    had anything to write, where files were asked for; else ''."""
    if not outputs.unwritten:
        return ""
    return f"; {why}: no report written ({', '.join(outputs.unwritten)})"


def interrupted_line(outputs: Outputs, *, complete: bool) -> str:
    """The closing line of a run a signal ended (see `interrupted_words`)."""
    import signal

    name = signal.Signals(INTERRUPTS.signum or signal.SIGINT).name
    if outputs.signalled is None and INTERRUPTS.signum is not None:
        outputs.signalled = "after"  # the writes were over when it came
    return interrupted_words(name, complete, outputs.written, outputs.signalled, outputs.unwritten)


def interrupted_words(
    name: str,
    complete: bool,
    written: list[str],
    when: str | None,
    unwritten: Sequence[str] = (),
) -> str:
    """What a signal ended, and what is true of the files: a report that every trial
    went into is complete, whenever the signal came (the writing holds it, NOTE
    [measuring]); only one the signal cut short is partial. `when` is when the signal
    came against the writing: "before", "writing", "after" (or None: not known)."""
    head = f"loaderprof: interrupted by {name}"
    files = ", ".join(written)
    if not complete:
        if written:
            return f"{head}; partial report written to {files}"
        if unwritten:
            return (
                f"{head} before anything was measured: no report written ({', '.join(unwritten)})"
            )
        return head
    if not written:
        return f"{head} after the report was printed"
    if when == "after":
        return f"{head} after the report was written ({files})"
    if when == "writing":
        return f"{head} while the report was written; it is complete ({files})"
    return f"{head}; the complete report was written first ({files})"


def error_detail(report: Report) -> str | None:
    return next((e.detail for e in report.errors if e.detail), None)


def failed_gates(report: Report | CommandReport, strict: bool) -> list[str]:
    return [
        g.gate
        for g in report.gates
        if g.status == "fail" or (strict and g.status == "inconclusive")
    ]


def warn_inconclusive(report: Report | CommandReport) -> None:
    for g in report.gates:
        if g.status == "inconclusive":
            say(f"loaderprof: warning: {g.message}", "yellow")


def findings_hit(gates: Sequence[str], found: Iterable[str]) -> int:
    """1 with one line naming the gated findings that were found, else 0."""
    from loaderprof.analysis.gates import watch_gates_hit

    hit = watch_gates_hit(gates, tuple(found))
    if hit:
        say(f"loaderprof: watch found: {', '.join(hit)}")
    return 1 if hit else 0
