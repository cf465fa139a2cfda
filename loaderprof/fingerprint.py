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
  head and tail sample when they are long;
* what cannot be pickled is named in `skipped` and left out.

Memory shared with the workers (a tensor after `share_memory_()`, a
`multiprocessing.Value`) digests the same in every process that maps it, so an
update in place shows on both sides and is never mistaken for stale state.
"""

from __future__ import annotations

import hashlib
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


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=6).hexdigest()


def _pickled(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=4)


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


def _array_text(obj: Any) -> str | None:
    """Tensors (torch) and arrays (numpy): shape, dtype and a digest of their content."""
    is_tensor = hasattr(obj, "detach") and hasattr(obj, "numel")
    if not is_tensor and not (hasattr(obj, "dtype") and hasattr(obj, "tobytes")):
        return None
    if is_tensor:
        flat = obj.detach().cpu().reshape(-1)
        count, itemsize = int(flat.numel()), int(flat.element_size())
    else:
        flat = obj.reshape(-1)
        count, itemsize = int(flat.size), int(flat.itemsize)
    if count * itemsize > SMALL_ARRAY_BYTES:
        flat = flat[:: max(1, count // SAMPLE_ELEMENTS)]
    data = flat.contiguous().numpy().tobytes() if is_tensor else flat.tobytes()
    kind = "Tensor" if is_tensor else "ndarray"
    return f"{kind}({tuple(obj.shape)}, {obj.dtype})#{_digest(data)}"


def _container_text(obj: Any) -> str:
    name = type(obj).__name__
    if isinstance(obj, (dict, list, tuple)) and len(obj) > 2 * SAMPLE_ITEMS:
        items = list(obj.items()) if isinstance(obj, dict) else obj
        sample = (len(obj), list(items[:SAMPLE_ITEMS]), list(items[-SAMPLE_ITEMS:]))
        return f"{name}(len={len(obj)})#{_digest(_pickled(sample))}"
    if isinstance(obj, (set, frozenset)):
        obj = sorted(obj, key=repr)
    return f"{name}#{_digest(_pickled(obj))}"


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
