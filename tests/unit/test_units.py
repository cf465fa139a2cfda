import pytest

from loaderprof.units import fmt_bytes, fmt_seconds, listing, noun, parse_size, plural


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("512MiB", 512 * 1024**2),
        ("8GiB", 8 * 1024**3),
        ("1.5G", int(1.5 * 1024**3)),
        ("1024", 1024),
        ("4 kb", 4096),
    ],
)
def test_parse_size(text: str, n: int) -> None:
    assert parse_size(text) == n


def test_parse_size_rejects() -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_formatting() -> None:
    assert fmt_bytes(0) == "0 B"
    assert fmt_bytes(1536) == "1.5 KiB"
    assert fmt_bytes(-2 * 1024**2, signed=True) == "−2.0 MiB"
    assert fmt_bytes(None) == "–"
    # A value that rounds up to the next unit is shown in it.
    assert fmt_bytes(1023.7) == "1.0 KiB"
    assert fmt_bytes(1024**2 - 10) == "1.0 MiB"
    assert fmt_bytes(-(1024**3 - 1), signed=True) == "−1.0 GiB"
    assert fmt_seconds(0.2) == "200.0 ms"
    assert fmt_seconds(2.5) == "2.50 s"
    assert fmt_seconds(0.00005) == "50 µs"
    # Each unit from its threshold on, as the one unit table says (and the tables use).
    assert [fmt_seconds(s) for s in (0.001, 1.0, 120.0)] == ["1.0 ms", "1.00 s", "2.0 min"]
    assert fmt_seconds(float("inf")) == "inf min"
    assert [fmt_bytes(n) for n in (1023, 1024, 1024**4 * 2048)] == [
        "1023 B",
        "1.0 KiB",
        "2048.0 TiB",
    ]


@pytest.mark.parametrize(
    ("n", "word", "text"),
    [
        (1, "open file", "1 open file"),
        (2, "open file", "2 open files"),
        (0, "worker", "0 workers"),
        (1, "child process", "1 child process"),
        (3, "child process", "3 child processes"),
        (2, "batch", "2 batches"),
        (1, "batch", "1 batch"),
        (10, "epoch", "10 epochs"),
        (4, "DataLoader", "4 DataLoaders"),
    ],
)
def test_plural_agrees_with_its_count(n: int, word: str, text: str) -> None:
    assert plural(n, word) == text


def test_noun_and_listing() -> None:
    assert noun(1, "loader") + " L2 runs" == "loader L2 runs"
    assert f"{noun(3, 'loader')} {listing(['L2', 'L3', 'L4'])}" == "loaders L2, L3 and L4"
    assert plural(2, "index", many="indices") == "2 indices"
    assert listing(["a"]) == "a" and listing(["a", "b"]) == "a and b"


def test_a_small_ratio_keeps_two_significant_digits() -> None:
    """Both ends of an interval read alike: "0.040–0.074", not "0.04–0.074"."""
    from loaderprof.units import fmt_ratio

    assert [fmt_ratio(v) for v in (0.04, 0.054, 0.0091, 0.5)] == [
        "0.040",
        "0.054",
        "0.0091",
        "0.50",
    ]
