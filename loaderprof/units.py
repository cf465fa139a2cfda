"""Human formatting and parsing of sizes and durations."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

# The one definition of the binary mebibyte, for thresholds written in MiB.
MiB = 1024 * 1024
_BINARY = {"": 1, "b": 1, "k": 1024, "m": MiB, "g": 1024**3, "t": 1024**4}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Parse '512MiB', '8GiB', '1.5G', '1048576' into bytes (binary units).

    Raises ValueError with a message naming the accepted forms.
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 512MiB, 8GiB or a number of bytes)")
    number, prefix, _ = m.groups()
    return int(float(number) * _BINARY[prefix.lower()])


def _sign(n: float, signed: bool) -> str:
    """'+' / '−' / '±' with `signed`; else only '−' for a negative value."""
    if signed:
        return "+" if n > 0 else ("−" if n < 0 else "±")
    return "−" if n < 0 else ""


# The units every figure is shown in, one table each, for the formatters below and
# for a table's column that shows all its figures in one unit (report/console.unit_of).
TIME_UNITS = ((1e-3, "µs", 1e6), (1.0, "ms", 1e3), (120.0, "s", 1.0), (math.inf, "min", 1 / 60))
BYTE_UNITS = (("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40))
_TIME_DIGITS = {"µs": 0, "ms": 1, "s": 2, "min": 1}


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit `seconds` (≥ 0) reads best in, and the factor from seconds to it
    (minutes from 120 s on, an infinite time included)."""
    return next(((name, k) for limit, name, k in TIME_UNITS if seconds < limit), ("min", 1 / 60))


def byte_unit(n: float) -> tuple[str, int]:
    """The largest unit `n` bytes (≥ 0) fills at least one of, and its size in bytes."""
    return next(((name, b) for name, b in reversed(BYTE_UNITS) if n >= b), BYTE_UNITS[0])


def fmt_bytes(n: float | None, *, signed: bool = False) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "–"
    value = abs(float(n))
    name, size = byte_unit(value)
    digits = 0 if size == 1 else 1
    if round(value / size, digits) >= 1024 and size < BYTE_UNITS[-1][1]:
        # 1023.97 KiB would print as "1024.0 KiB": it reads as the next unit's 1.0.
        name, size = byte_unit(size * 1024)
        digits = 1
    return f"{_sign(n, signed)}{value / size:.{digits}f} {name}"


def fmt_seconds(s: float | None, *, signed: bool = False) -> str:
    if s is None or math.isnan(s):
        return "–"
    value = abs(s)
    name, k = time_unit(value)
    return f"{_sign(s, signed)}{value * k:.{_TIME_DIGITS[name]}f} {name}"


def fmt_ratio(v: float) -> str:
    """A ratio with two significant digits where two decimals would show 0.00."""
    return f"{v:.2f}" if abs(v) >= 0.1 else f"{v:#.2g}"


def fmt_bounds(
    low: float,
    high: float,
    fmt: Callable[[float], str],
    fmt_half: Callable[[float], str] = lambda v: f"{v:.2g}",
) -> str:
    """An interval as "[low–high]"; as "[±half-width]" where it is narrower than the
    digits `fmt` prints (ends that read alike would look like no interval at all)."""
    shown_low, shown_high = fmt(low), fmt(high)
    if shown_low != shown_high:
        return f"[{shown_low}–{shown_high}]"
    return f"[±{fmt_half((high - low) / 2)}]"


def fmt_change(ratio: float) -> str:
    """The steady epoch's change in words a time ratio allows: "11 % shorter" or
    "19.6× faster" (an epoch at 0.051 of the time is not "95 % faster"), "8 % longer"
    or "2.5× slower"."""
    if ratio <= 0:
        return "unmeasurably short"
    if ratio <= 0.5:
        n = 1 / ratio
        return f"{n:.0f}× faster" if n >= 10 else f"{n:.1f}× faster"
    if ratio < 1:
        return f"{(1 - ratio) * 100:.0f} % shorter"
    if ratio < 2:
        return f"{(ratio - 1) * 100:.0f} % longer"
    return f"{ratio:.0f}× slower" if ratio >= 10 else f"{ratio:.1f}× slower"


def fmt_pct(share: float, digits: int = 0) -> str:
    """A share as the screens write it: "76 %", a space before the sign."""
    return f"{share * 100:.{digits}f} %"


def elapsed(start: float | None, end: float | None) -> float | None:
    """Seconds from `start` to `end`, where both were stamped; None where either was not."""
    return None if start is None or end is None else end - start


def plural(n: int | None, word: str, many: str | None = None) -> str:
    """A count and its noun, agreeing: '1 open file', '3 batches', '0 workers'. Every
    count loaderprof words goes through here (or `noun`); `many`: an irregular plural."""
    return f"{n} {noun(n, word, many)}"


def noun(n: int | None, word: str, many: str | None = None) -> str:
    """The noun alone, agreeing with `n` where the count is worded apart from it
    ('3 of 4 workers', 'loaders L2 and L3 run')."""
    if n == 1:
        return word
    if many is not None:
        return many
    # "batches", "processes"; but "epochs": a hard "ch" takes a plain "s".
    return word + ("es" if word.endswith(("s", "x", "sh", "tch")) else "s")


def listing(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
