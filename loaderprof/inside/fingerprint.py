"""A Dataset's instance state, attribute by attribute, cheaply enough for every epoch.

Runs in the trial's main process at each epoch start and in every worker at its
first fetch of each epoch (see NOTE [stale worker state] in trial.py). Both sides
must give the same text for the same content, whatever process holds it, so
nothing here depends on object identity or addresses:

* small values (numbers, short strings, None) keep a short repr;
* random generators (numpy Generator / RandomState, random.Random,
  torch.Generator) become "rng:<kind>#<digest of their state>";
* tensors and arrays become "<kind>(shape, dtype)#<digest>", of every byte when
  small and of a strided sample of their elements when large;
* containers and other objects become "<type>#<digest of their pickle>", of a
  head and tail sample of every long container in them, to MAX_DEPTH levels deep
  and inside instances that pickle as their attributes (`_canonical`: reading an
  object writes its reference count, copying its page into a forked worker); an
  object whose pickle passes 1 MiB
  (a DataFrame, a whole inner Dataset) is named with its length, not digested,
  so fingerprinting costs little and copies nothing large;
* what cannot be pickled is named in `skipped` and left out.

Memory shared with the workers (a tensor after `share_memory_()`, a
`multiprocessing.Value`) digests the same in every process that maps it, so an
update in place shows on both sides and is never mistaken for stale state.
"""

from __future__ import annotations

import copyreg
import hashlib
import itertools
import pickle
import random
import types
from typing import Any

# More than this many attributes are not fingerprinted (the event stays small).
MAX_ATTRS = 64
SHORT = 60
# Elements digested from a long container (head and tail) or a large array.
SAMPLE_ITEMS = 32
SMALL_ARRAY_BYTES = 64 * 1024
SAMPLE_ELEMENTS = 4096

_RNG_KINDS = {
    "numpy.random._generator.Generator": "numpy.Generator",
    "numpy.random.mtrand.RandomState": "numpy.RandomState",
    "torch.Generator": "torch.Generator",
    "torch._C.Generator": "torch.Generator",
}


# Code, not state: a function or class on the instance does not change with epochs.
_NOT_STATE = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
)


# Pickled bytes digested from one value at the most: pickling walks the object
# (and under fork writes the refcounts of what it walks, copying pages), so a
# large one is named, not digested.
MAX_PICKLE_BYTES = 1 << 20


class _TooLarge(Exception):
    pass


class _HashWriter:
    """Feeds pickled bytes to a hash, and stops the pickler past MAX_PICKLE_BYTES."""

    def __init__(self) -> None:
        self.hash = hashlib.blake2b(digest_size=6)
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > MAX_PICKLE_BYTES:
            raise _TooLarge
        self.hash.update(data)
        return len(data)


def _ends(items: Any, n: int) -> list[Any]:
    """A long sequence's head and tail (SAMPLE_ITEMS each); a short one whole."""
    if n <= 2 * SAMPLE_ITEMS:
        return list(items)
    if isinstance(items, (list, tuple)):
        return [*items[:SAMPLE_ITEMS], *items[-SAMPLE_ITEMS:]]
    return [
        *itertools.islice(items, SAMPLE_ITEMS),
        *reversed(list(itertools.islice(reversed(items), SAMPLE_ITEMS))),
    ]


# Containers and objects read this many levels deep; deeper ones are named, not read.
MAX_DEPTH = 4


def _canonical(obj: Any, depth: int = 0) -> Any:
    """What is digested of a container, to MAX_DEPTH levels: a long one's length, head
    and tail, so that a digest reads a bounded number of objects. Reading an object
    writes its reference count, and under fork that copies the page it lives on into
    the worker (NOTE [copy-on-read]): a whole walk of a list of millions made each
    worker tens of MiB larger than the user's training would. An instance that pickles
    as its attributes (`_plain_state`) is read as they are; a container or such an
    instance deeper than MAX_DEPTH (a back-pointer's cycle reaches it) is named by its
    type alone. Sets in sorted order: a set's iteration order follows the hash seed,
    which differs between the main process and spawned workers (pickle's own hooks are
    not called for sets); a long one by its length alone (no order to sample)."""
    name = type(obj).__name__
    deep = depth > MAX_DEPTH
    if isinstance(obj, (set, frozenset)):
        if deep or len(obj) > 2 * SAMPLE_ITEMS:
            return (name, len(obj))
        return (name, sorted((_canonical(v, depth + 1) for v in obj), key=repr))
    if isinstance(obj, dict):
        if deep:
            return (name, len(obj))
        pairs = _ends(obj.items(), len(obj))
        return (name, len(obj), [(k, _canonical(v, depth + 1)) for k, v in pairs])
    if isinstance(obj, (list, tuple)):
        if deep:
            return (name, len(obj))
        return (name, len(obj), [_canonical(v, depth + 1) for v in _ends(obj, len(obj))])
    state = _plain_state(obj)
    if state is None:
        return obj
    return (type(obj).__qualname__,) if deep else (type(obj).__qualname__, _canonical(state, depth))


def _plain_state(obj: Any) -> dict[str, Any] | None:
    """The attributes of an instance that pickles as them, as pickle itself would take
    them (`__reduce_ex__(4)` is `copyreg.__newobj__` with a state dict: no pickling
    hooks of its own; slots and `__getstate__` give their state): what its pickle
    would walk, to be sampled as a dict is. None for anything else (a tensor, an
    array, a file), which pickle takes its own way."""
    cls = type(obj)
    if getattr(cls, "__reduce_ex__", None) is not object.__reduce_ex__ or (
        getattr(cls, "__reduce__", None) is not object.__reduce__
    ):
        return None
    try:
        reduced = obj.__reduce_ex__(4)
    except Exception:  # an object pickle cannot take (its C layout), skipped there too
        return None
    newobj = copyreg.__newobj__  # type: ignore[attr-defined]
    if not isinstance(reduced, tuple) or len(reduced) < 3 or reduced[0] is not newobj:
        return None
    if any(part is not None for part in reduced[3:]):  # list or dict items of its own
        return None
    state = reduced[2]
    if isinstance(state, tuple) and len(state) == 2:  # (its __dict__, its slots)
        own, slots = state
        state = {**(own or {}), **(slots or {})}
    return state if isinstance(state, dict) else None


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=6).hexdigest()


def _pickled(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=4)


def _pickle_digest(obj: Any) -> str | None:
    """A digest of the object's pickle; None when it is larger than MAX_PICKLE_BYTES."""
    writer = _HashWriter()
    try:
        pickle.Pickler(writer, protocol=4).dump(_canonical(obj))
    except _TooLarge:
        return None
    return writer.hash.hexdigest()


def _rng_state(obj: Any) -> tuple[str, bytes] | None:
    """(kind, state bytes) for a random generator; None for anything else."""
    if isinstance(obj, random.Random):
        return "random.Random", _pickled(obj.getstate())
    cls = type(obj)
    kind = _RNG_KINDS.get(f"{cls.__module__}.{cls.__qualname__}")
    if kind is None:
        return None
    if kind == "numpy.Generator":
        return kind, repr(obj.bit_generator.state).encode()
    if kind == "numpy.RandomState":
        return kind, _pickled(obj.get_state())
    return kind, bytes(obj.get_state().numpy().tobytes())


def _sampled(flat: Any, count: int) -> Any:
    return flat[:: max(1, count // SAMPLE_ELEMENTS)] if count > SAMPLE_ELEMENTS else flat


def _array_text(obj: Any) -> str | None:
    """Tensors (torch) and arrays (numpy): shape, dtype and a digest of their content,
    of every byte when small and of a strided sample of their elements when large."""
    is_tensor = hasattr(obj, "detach") and hasattr(obj, "numel")
    if not is_tensor and not (hasattr(obj, "dtype") and hasattr(obj, "tobytes")):
        return None
    kind = "Tensor" if is_tensor else "ndarray"
    head = f"{kind}({tuple(obj.shape)}, {obj.dtype})"
    if is_tensor:
        t = obj.detach().cpu()
        count, large = int(t.numel()), int(t.numel()) * int(t.element_size()) > SMALL_ARRAY_BYTES
        if large and not t.is_contiguous() and t.dim() > 0 and t.shape[0] > 0:
            # Sample whole rows first, so a strided view is never copied in full.
            t = t[:: max(1, t.shape[0] // SAMPLE_ELEMENTS)]
            count = int(t.numel())
        flat = t.reshape(-1)
        flat = _sampled(flat, count) if large else flat
        return f"{head}#{_digest(flat.contiguous().numpy().tobytes())}"
    flat = obj.reshape(-1)
    count = int(flat.size)
    if count * int(flat.itemsize) > SMALL_ARRAY_BYTES:
        flat = _sampled(flat, count)
    if obj.dtype == object:
        # Object arrays hold pointers: digest what they point to.
        digest = _pickle_digest(flat.tolist())
        return f"{head}#{digest}" if digest else f"{head}(too large to digest)"
    return f"{head}#{_digest(flat.tobytes())}"


def _container_text(obj: Any) -> str:
    name = type(obj).__name__
    if isinstance(obj, (set, frozenset)) and len(obj) > 2 * SAMPLE_ITEMS:
        return f"{name}(len={len(obj)})"  # no order to sample a head and tail from
    if isinstance(obj, (dict, list, tuple)) and len(obj) > 2 * SAMPLE_ITEMS:
        digest = _pickle_digest(obj)
        return f"{name}(len={len(obj)}" + (f")#{digest}" if digest else ", too large to digest)")
    digest = _pickle_digest(obj)
    if digest is None:
        size = f"len={len(obj)}, " if hasattr(obj, "__len__") else ""
        return f"{name}({size}too large to digest)"
    return f"{name}#{digest}"


def describe(value: Any) -> str | None:
    """The text of one attribute's value; None when it is not state (a function, a
    module, a class). Raises when the value cannot be read or pickled."""
    if isinstance(value, _NOT_STATE):
        return None
    if value is None or isinstance(value, (bool, int, float, complex)):
        return repr(value)[:SHORT]
    if isinstance(value, str):
        return (
            repr(value)
            if len(value) <= SHORT
            else f"str(len={len(value)})#{_digest(value.encode())}"
        )
    rng = _rng_state(value)
    if rng is not None:
        return f"rng:{rng[0]}#{_digest(rng[1])}"
    if hasattr(value, "get_obj") and hasattr(value, "value"):  # multiprocessing.Value
        return f"shared({value.value!r})"[:SHORT]
    array = _array_text(value)
    if array is not None:
        return array
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value[:4096]) + bytes(value[-4096:])
        return f"{type(value).__name__}(len={len(value)})#{_digest(data)}"
    return _container_text(value)


def fingerprint(obj: Any) -> tuple[dict[str, str], list[str]]:
    """({attribute: text}, [attributes skipped because they cannot be read or pickled])."""
    try:
        attrs = dict(vars(obj))
    except TypeError:
        return {}, []
    values: dict[str, str] = {}
    skipped: list[str] = []
    for name in sorted(attrs)[:MAX_ATTRS]:
        try:
            text = describe(attrs[name])
        except Exception:
            skipped.append(name)
            continue
        if text is not None:
            values[name] = text
    return values, skipped


def unwrap(dataset: Any) -> Any:
    """The user's Dataset behind loaderprof's index probe."""
    inner = getattr(type(dataset), "__loaderprof_inner__", None)
    return getattr(dataset, inner) if inner else dataset


def timed_fingerprint(dataset: Any) -> dict[str, Any]:
    """A `main_state` / `worker_state` event's fields: the user's Dataset's fingerprint
    and what taking it cost (seconds; inside the timed epoch where a worker takes it)."""
    import time

    start = time.perf_counter()
    values, skipped = fingerprint(unwrap(dataset))
    return {"values": values, "skipped": skipped, "took_s": round(time.perf_counter() - start, 6)}
