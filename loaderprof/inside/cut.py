"""`compare -- COMMAND --max-batches N` in the user's process (inside/hook.py).

NOTE [cut epochs]: `--max-batches N` ends each epoch of the loaders the arm switches
once N batches were taken: the iterator raises StopIteration as an exhausted one does,
so the user's loop (a `for`, Lightning's fetcher) sees a shorter epoch and goes on to
its next one. Such a loader's len() says N too: a framework that schedules by it
(Lightning validates once an epoch's len() batches were taken, so a cut it was not
told of dropped every validation pass; the HF Trainer counts its steps by it) runs
the cut epoch as a whole one, validation included. A persistent pool drops the
batches it had in flight when its next iter() resets it, as torch does for a loop that
breaks; a non-persistent one ends with its iterator. The epoch ends `cut` at the
StopIteration (the step after its last batch is in it, as an exhausted one's would
be), or, where the loop stopped at len() by itself, at its last batch (as any loop
that leaves its epoch does: the next iter() closes it); with its last batch's stamp
and the loader's own len() (`planned`) for the projection to whole epochs
(analysis/projection.py). Every later __next__ of the iterator raises too.
"""

from __future__ import annotations

import contextvars
import functools
import os
from typing import Any

ENV_MAX_BATCHES = "LOADERPROF_MAX_BATCHES"
# len() as the loader itself answers it, while `planned` reads it (this thread's).
_own_len = contextvars.ContextVar("lp_own_len", default=False)


def cut_after(loader: Any) -> None:
    """Cut `loader` (one the arm switches) after --max-batches batches, if asked."""
    cut = os.environ.get(ENV_MAX_BATCHES, "")
    if not (cut.isdecimal() and int(cut) > 0):
        return
    object.__setattr__(loader, "_lp_cut", int(cut))
    owner = next((k for k in type(loader).__mro__ if "__len__" in k.__dict__), None)
    if owner is not None and not getattr(owner.__dict__["__len__"], "_lp_cut_len", False):
        setattr(owner, "__len__", _cut_len(owner.__dict__["__len__"]))  # noqa: B010


def _cut_len(original: Any) -> Any:
    @functools.wraps(original)
    def __len__(self: Any) -> int:
        n = original(self)
        cut = self.__dict__.get("_lp_cut")
        return n if cut is None or _own_len.get() else min(n, cut)

    __len__._lp_cut_len = True  # type: ignore[attr-defined]
    return __len__


def planned(loader: Any) -> int | None:
    """The batches the epoch would serve to its StopIteration uncut, where the loader
    knows."""
    token = _own_len.set(True)
    try:
        return len(loader)
    except Exception:
        return None
    finally:
        _own_len.reset(token)
