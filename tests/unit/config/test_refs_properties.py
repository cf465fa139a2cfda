"""Property tests: any input parses to the documented value or raises the tool's own
usage error, never another exception."""

from __future__ import annotations

import ast
import contextlib
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from loaderprof.config.build import build_config, load_config_file
from loaderprof.config.refs import ObjectRef, parse_arg
from loaderprof.errors import UsageError

keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
literals = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner),
    max_leaves=6,
)


@given(keys, literals)
def test_arg_round_trips_python_literals(key: str, value: Any) -> None:
    text = f"{key}={value!r}"
    assert parse_arg(text) == (key, ast.literal_eval(repr(value)))


def test_words_that_are_not_literals_stay_strings() -> None:
    # repr(float("inf")) is "inf", not a Python literal: it is documented to stay a string.
    assert parse_arg("x=inf") == ("x", "inf")
    assert parse_arg("path=/data/train") == ("path", "/data/train")


@given(st.text(max_size=40))
def test_arg_never_raises_anything_else(text: str) -> None:
    try:
        key, _ = parse_arg(text)
    except UsageError:
        return
    # The documented value: the key is the (stripped) text before the first '='.
    assert key.isidentifier()
    assert key == text.partition("=")[0].strip()


@given(st.text(max_size=40))
def test_object_ref_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(UsageError):
        ref = ObjectRef.parse(text)
        assert ref.attr and ref.module


toml_values = st.one_of(
    st.integers(-5, 100), st.booleans(), st.text(max_size=6), st.floats(-1, 100, allow_nan=False)
)
config_keys = st.sampled_from(
    [
        "epochs",
        "num_workers",
        "batch_size",
        "trials",
        "seed",
        "pin_memory",
        "mp_context",
        "timeout",
        "step_ms",
        "shuffle",
        "memory_budget",
        "min_gain",
        "nonsense_key",
        "sample_interval_ms",
    ]
)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\\\", "").replace('"', "") + '"'
    return repr(value)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(config_keys, toml_values, max_size=5))
# str.isdigit() takes "²", which int() refuses: a traceback where a usage error was due
# (found by this test on one run in a full suite).
@example({"trials": "²"})
@example({"batch_size": "²"})
def test_config_file_parses_or_usage_error(values: dict[str, Any]) -> None:
    body = 'dataset = "loaderprof.examples:CheapDataset"\n' + "".join(
        f"{k} = {_toml(v)}\n" for k, v in values.items()
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "c.toml")
        path.write_text(body, encoding="utf-8")
        try:
            cfg = build_config({}, load_config_file(path))
        except UsageError:
            return
    for k, v in values.items():
        if k == "epochs":
            assert cfg.epochs == v
        elif k == "num_workers":
            assert cfg.loader.num_workers == v
