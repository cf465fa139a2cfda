"""A warm template process that forks each trial (NOTE [template]).

NOTE [template]: a fresh interpreter per trial pays its start and `import torch`
(about 2.5 s on the 2-core machine, more with a CUDA build) before the user's
Dataset is even built, every trial. The template is one interpreter per run
that imports torch and loaderprof's trial code once, then forks a child per
trial. The child leads its own session and process group (so one `killpg`
ends the trial and everything it started, and nothing of the template or of
another trial is in it), points its stdout/stderr at the trial's logs, takes
the trial's environment and runs `loaderprof.inside.trial` as a fresh child would.
The user's modules are never imported in the template: each trial imports
them itself, after the fork.

Memory stays honest: the child shares the pages of the imports with the
template, so their PSS is split with a process that is not the trial's. The
sampler reads the template's shared share (PSS − USS) at every deep sample and
counts it in the trial main's PSS, where a fresh interpreter holds those pages,
and counts the template's file pages that the child does not map (a fork leaves
them out of its page tables) in its RSS, so that its PSS stays below its RSS
(see `sampler._TemplateShare`). Exact when only the run maps those pages; a file
page also mapped by m processes outside the run counts 2/(m+2) of a page where
a fresh interpreter holds 1/(m+1), so the main alone leans high: by 1.0 %, and
1.4 % beside a process that imported torch, as measured (README, "A warm
template"). `--fresh-interpreter` keeps the old way.

Protocol (one JSON object per line): the parent writes a request
(`inside.spec.ForkRequest`) on the template's stdin; the template replies
{"pid": P} once the child leads its own session, then {"exit": P, "code": C}
when it has reaped it, with C as subprocess reports it (negative: killed by that
signal).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from loaderprof.errors import INTERRUPTS
from loaderprof.inside.spec import ForkRequest


class TemplateError(RuntimeError):
    """The template could not start or fork a trial: the caller falls back to a fresh
    interpreter."""


class ForkedTrial:
    """A trial forked by the template, with the parts of `subprocess.Popen` the runner
    uses: its pid (the leader of its process group), poll, wait and returncode."""

    def __init__(self, template: Template, pid: int) -> None:
        self._template = template
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._template.exit_code(self.pid, block=False)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self.returncode = self._template.exit_code(self.pid, block=True)
        return self.returncode


class Template:
    """The parent's handle on the template process."""

    def __init__(self, env: Mapping[str, str], cwd: str, log: Path) -> None:
        with open(log, "wb") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "loaderprof.measure.template", str(os.getpid())],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                # Its own group: a trial's killpg never reaches it, Ctrl-C neither.
                start_new_session=True,
            )
        self._log = log
        self._buffer = b""
        self._exits: dict[int, int] = {}
        # The trials forked and not yet reaped: each leads its own process group.
        self._live: set[int] = set()
        try:
            ready = self._read(block=True)
        except BaseException:  # a signal while torch imports: nothing may outlive it
            self.close()
            raise
        if ready is None or ready.get("ready") is not True:
            self.close()
            raise TemplateError(f"the trial template did not start: {_tail(log)}")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def fork(
        self, spec_path: Path, stdout: Path, stderr: Path, env: Mapping[str, str], cwd: str
    ) -> ForkedTrial:
        request: ForkRequest = {
            "spec": str(spec_path),
            "stdout": str(stdout),
            "stderr": str(stderr),
            "env": dict(env),
            "cwd": cwd,
        }
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
        except OSError as exc:
            raise TemplateError(f"the trial template is gone: {exc}") from None
        reply = self._read(block=True)
        if reply is None or "pid" not in reply:
            raise TemplateError(f"the trial template did not fork a trial: {_tail(self._log)}")
        pid = int(reply["pid"])
        self._live.add(pid)
        return ForkedTrial(self, pid)

    def exit_code(self, pid: int, *, block: bool) -> int | None:
        while pid not in self._exits:
            msg = self._read(block=block)
            if msg is None:
                if self._proc.poll() is not None and not _alive(pid):
                    # The template died: the exit status is lost, and nothing is left.
                    return 255
                if not block:
                    return None
                continue
            if "exit" in msg:
                self._exits[int(msg["exit"])] = int(msg["code"])
        self._live.discard(pid)
        return self._exits.pop(pid)

    def _read(self, *, block: bool) -> dict[str, Any] | None:
        out = self._proc.stdout
        assert out is not None
        fd = out.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], 1.0 if block else 0)
            if not ready:
                if block and self._proc.poll() is None:
                    continue
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def close(self) -> None:
        """The template and every trial it forked, gone; a signal waits for the end."""
        with INTERRUPTS.held():
            with contextlib.suppress(OSError):
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
            kill_groups([self._proc.pid, *self._live])
            self._live.clear()
            self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()


def kill_groups(pgids: list[int]) -> None:
    """Stop every group first, then kill: a stopped process forks nothing and
    respawns nothing (a pool restarting a worker) between the two."""
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pgid in pgids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, limit: int = 600) -> str:
    try:
        return path.read_text(errors="replace")[-limit:].strip() or "no output"
    except OSError:
        return "no output"


# -- the template process ------------------------------------------------------------


def _warm_up() -> None:
    """What every trial imports before the user's code: the expensive part."""
    import torch
    import torch.utils.data  # noqa: F401

    # A full collection now, as any process has had one by the time it builds a
    # DataLoader. Without it the import's objects are still pending for the next
    # full collection, and every worker's first one writes to all of them: about
    # 2.5 MiB of copy-on-write pages per worker that a fresh interpreter, whose
    # imports interleave with its collections differently, does not pay.
    gc.collect()

    import loaderprof.inside.trial  # noqa: F401


def die_with(parent: int | None, sig: int) -> None:
    """PR_SET_PDEATHSIG (Linux): `sig` comes when the parent dies, even by SIGKILL, so
    no part of a run outlives loaderprof. `parent`: the pid it had, to catch a parent
    that died before the request took."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)


_PR_SET_PDEATHSIG = 1
# The trial the template is waiting for, if any: it goes with the template.
_current: list[int] = []


def _end(signum: int, frame: Any) -> None:
    """loaderprof is gone (SIGTERM, by PDEATHSIG) or ends the template: so does the trial."""
    kill_groups(list(_current))
    os._exit(128 + signum)


def _child(request: ForkRequest, ready_w: int, template: int) -> None:
    """In the forked child: become the trial's own session, then run it. Never returns."""
    try:
        os.setsid()
        # The template's SIGKILL would otherwise leave this trial running.
        die_with(template, signal.SIGKILL)
        os.write(ready_w, b"1")
        os.close(ready_w)
        os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        env = request["env"]
        os.environ.clear()
        os.environ.update(env)
        # What `python -m` would have put on sys.path from PYTHONPATH and the cwd.
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [p for p in [request["cwd"], *extra] if p not in sys.path]
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from loaderprof.inside import trial

        trial.main([request["spec"]])
    finally:
        os._exit(70)


def _reply(out: IO[bytes], msg: Mapping[str, Any]) -> None:
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


def main() -> None:
    signal.signal(signal.SIGTERM, _end)
    die_with(int(sys.argv[1]) if len(sys.argv) > 1 else None, signal.SIGTERM)
    out = sys.stdout.buffer
    _warm_up()
    _reply(out, {"ready": True})
    for line in sys.stdin.buffer:
        request: ForkRequest = json.loads(line)
        ready_r, ready_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        template = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            _child(request, ready_w, template)
        _current[:] = [pid]
        os.close(ready_w)
        os.read(ready_r, 1)
        os.close(ready_r)
        _reply(out, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _current.clear()
        _reply(out, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    main()
