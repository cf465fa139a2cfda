"""The JSON form of every result dataclass (compare, sweep and watch reports): to plain
data and back."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from loaderprof.model.metrics import Ratio, Stat


def to_dict(obj: Any) -> Any:
    """Plain JSON-ready data; properties such as Stat.iqr are added for readers."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, Stat):
            out["iqr"] = obj.iqr
        if isinstance(obj, Ratio):
            out["informative"] = obj.informative
        return out
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


T = TypeVar("T")


def from_dict(cls: type[T], data: Any) -> T:
    """Rebuild a result dataclass from `to_dict` output (unknown keys ignored)."""
    return typing.cast(T, _convert(cls, data))


def _convert(tp: Any, data: Any) -> Any:
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        if data is None:
            return None
        inner = [a for a in get_args(tp) if a is not type(None)]
        return _convert(inner[0], data)
    if origin is Literal:
        return data
    if origin in (tuple, Sequence):
        (item, *_) = get_args(tp)
        return tuple(_convert(item, v) for v in data)
    if origin in (dict, Mapping):
        _, value_tp = get_args(tp)
        return {k: _convert(value_tp, v) for k, v in data.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _convert(hints[f.name], data[f.name])
        return tp(**kwargs)
    if tp is float and isinstance(data, int):
        return float(data)
    return data
