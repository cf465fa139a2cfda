"""Every file output behind one interface, and the one place files are written.

An exporter says which option asks for it, which report kinds it can write
(a compare report, a sweep report, a watched run's) and renders a report to text or
bytes.
`check_targets` refuses, before any trial runs, what could not be written;
`export` renders and writes each file atomically (a temp file in the same
directory, then a rename: a reader never sees a half-written report), a device
or a FIFO in place, and names each write that failed without stopping the others.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from loaderprof.errors import UsageError
from loaderprof.model.attached import AttachReport
from loaderprof.model.command import CommandReport
from loaderprof.model.results import Report, SweepReport
from loaderprof.model.watch import WatchReport

ReportKind = Literal["compare", "sweep", "watch", "attach", "compare-command"]
AnyReport = Report | SweepReport | WatchReport | AttachReport | CommandReport


class Exporter(Protocol):
    @property
    def flag(self) -> str:
        """The option that asks for it, e.g. "--json"."""

    @property
    def kinds(self) -> frozenset[ReportKind]:
        """The report kinds it can write."""

    @property
    def binary(self) -> bool:
        """Bytes, not text: never to standard output."""

    def render(self, report: Any, *, suffix: str, strict: bool) -> str | bytes: ...


@dataclass(frozen=True)
class _Text:
    flag: str
    kinds: frozenset[ReportKind]
    to_text: Callable[[Any, bool], str]
    binary: bool = False

    def render(self, report: Any, *, suffix: str, strict: bool) -> str | bytes:
        return self.to_text(report, strict)


@dataclass(frozen=True)
class _Plot:
    flag: str = "--plot"
    kinds: frozenset[ReportKind] = frozenset({"compare", "sweep"})
    binary: bool = True

    def render(self, report: Any, *, suffix: str, strict: bool) -> str | bytes:
        from loaderprof.report import plot

        buf = io.BytesIO()
        draw = plot.render_sweep if isinstance(report, SweepReport) else plot.render
        draw(report, buf, fmt=suffix.lstrip(".").lower())
        return buf.getvalue()


def _json(report: Any, strict: bool) -> str:
    from loaderprof.report.json_report import to_json

    return to_json(report)


def _csv(report: Any, strict: bool) -> str:
    from loaderprof.report import csv_report

    if isinstance(report, SweepReport):
        return csv_report.sweep_csv(report)
    return csv_report.to_csv(report)


def _markdown(report: Any, strict: bool) -> str:
    from loaderprof.report.markdown import to_markdown, watch_markdown

    if isinstance(report, AttachReport):
        from loaderprof.report.attach_console import attach_markdown

        return attach_markdown(report)
    if isinstance(report, CommandReport):
        from loaderprof.report.command_text import command_markdown

        return command_markdown(report)

    return watch_markdown(report) if isinstance(report, WatchReport) else to_markdown(report)


def _html(report: Any, strict: bool) -> str:
    from loaderprof.report.html import render_html

    return render_html(report)


def _junit(report: Any, strict: bool) -> str:
    from loaderprof.report.junit import to_junit

    return to_junit(report, strict=strict)


def _trace(report: Any, strict: bool) -> str:
    if isinstance(report, AttachReport):
        from loaderprof.report.attach_trace import to_attach_trace_json

        return to_attach_trace_json(report)
    if isinstance(report, WatchReport):
        from loaderprof.report.watch_trace import to_watch_trace_json

        return to_watch_trace_json(report)
    from loaderprof.report.trace import to_trace_json

    return to_trace_json(report)


_ALL: frozenset[ReportKind] = frozenset({"compare", "sweep", "watch", "attach", "compare-command"})
_BOTH: frozenset[ReportKind] = frozenset({"compare", "sweep"})
_COMPARE: frozenset[ReportKind] = frozenset({"compare"})
_COMPARE_WATCH: frozenset[ReportKind] = frozenset({"compare", "watch"})

# Keyed by the OutputOptions / GateOptions field that asks for it.
EXPORTERS: dict[str, Exporter] = {
    "json": _Text("--json", _ALL, _json),
    "save_baseline": _Text("--save-baseline", _COMPARE | {"compare-command"}, _json),
    "csv": _Text("--csv", _BOTH, _csv),
    "markdown": _Text("--markdown", _COMPARE_WATCH | {"attach", "compare-command"}, _markdown),
    "junit": _Text("--junit", _COMPARE, _junit),
    "html": _Text("--html", _COMPARE, _html),
    "trace": _Text("--trace", _COMPARE_WATCH | {"attach"}, _trace),
    "plot": _Plot(),
}

Target = tuple[str, "str | Path"]


def kind_of(report: AnyReport) -> ReportKind:
    if isinstance(report, CommandReport):
        return "compare-command"
    if isinstance(report, AttachReport):
        return "attach"
    if isinstance(report, WatchReport):
        return "watch"
    return "sweep" if isinstance(report, SweepReport) else "compare"


def check_targets(kind: ReportKind, targets: Sequence[Target], what: str = "") -> None:
    """Refuse, before any trial runs, an output that cannot be made or written."""
    unsupported = [EXPORTERS[name].flag for name, _ in targets if kind not in EXPORTERS[name].kinds]
    if unsupported:
        able = [e.flag for e in EXPORTERS.values() if kind in e.kinds]
        raise UsageError(
            f"{what or 'a ' + kind + ' report'} exports only {', '.join(able)} "
            f"(not {', '.join(unsupported)})"
        )
    for name, path in targets:
        exporter = EXPORTERS[name]
        # `--json=` (an unset shell variable): str options keep "", Path options turn it
        # into "." before we see it; neither names a file, and a silent skip loses the
        # output the user asked for.
        if str(path) in ("", "."):
            raise UsageError(f"{exporter.flag}: empty path")
        if str(path) == "-":
            if exporter.binary:
                raise UsageError(f"{exporter.flag} cannot write to standard output")
            continue
        check_writable(path)
        if name == "plot":
            if Path(path).suffix.lower() not in (".png", ".svg"):
                raise UsageError(f"--plot {path}: use a .png or .svg file name")
            from loaderprof.report.plot import require_matplotlib

            require_matplotlib()


def export(report: AnyReport, targets: Sequence[Target], *, strict: bool) -> list[tuple[str, str]]:
    """Write every target; (path, reason) for each that could not be written, the
    others written all the same."""
    failed: list[tuple[str, str]] = []
    for name, path in targets:
        data = EXPORTERS[name].render(report, suffix=Path(str(path)).suffix, strict=strict)
        try:
            if str(path) == "-":
                sys.stdout.write(data if isinstance(data, str) else data.decode())
                sys.stdout.flush()
            else:
                write_file(path, data)
        except BrokenPipeError:
            raise  # the reader of stdout went away (`| head`): cli says nothing more
        except OSError as exc:
            failed.append((str(path), exc.strerror or str(exc)))
    return failed


def append_text(path: str | Path, text: str) -> None:
    """Append (a CI job summary collects the output of every step)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def _special(path: Path) -> bool:
    """A character device or a FIFO (/dev/stdout, /dev/full, a pipe): written in
    place, as a temp file cannot be renamed over it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


# Kernel filesystems: a file there is not a file (and writing one fails after the run).
_PSEUDO = (Path("/proc"), Path("/sys"))


def check_writable(path: str | Path) -> None:
    """Fail before any trial runs when an output could not be written."""
    target = Path(path)
    if _special(target):
        return
    parent = target.parent if str(target.parent) else Path(".")
    real = Path(os.path.realpath(parent))
    if any(real == p or p in real.parents for p in _PSEUDO):
        raise UsageError(f"cannot write {target}: {real} is a kernel filesystem, not a disk")
    if not parent.is_dir():
        # The nearest ancestor that exists says why: a regular file (`ds.py/x.json`)
        # is not a directory; otherwise the directory is missing.
        there = next((a for a in (parent, *parent.parents) if a.exists()), None)
        if there is not None and not there.is_dir():
            raise UsageError(f"cannot write {target}: {there} is not a directory")
        raise UsageError(f"cannot write {target}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {target}: directory {parent} is not writable")
    if target.is_dir():
        raise UsageError(f"cannot write {target}: it is a directory")
    try:
        fs = os.statvfs(parent)
    except OSError:
        return
    # Root may write into the blocks a filesystem keeps back from everyone else.
    free = fs.f_bfree if os.geteuid() == 0 else fs.f_bavail
    if free * fs.f_frsize == 0:
        raise UsageError(f"cannot write {target}: the filesystem of {parent} is full")


def write_file(path: str | Path, data: str | bytes) -> None:
    """A device or FIFO in place, a file atomically."""
    target = Path(path)
    if not _special(target):
        write_atomic(target, data)
        return
    with open(target, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write via a temp file in the same directory + rename: never a truncated file."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; give the report the permissions open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
