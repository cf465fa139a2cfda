import pytest

from loaderprof.model.units import fmt_bytes, fmt_seconds, parse_size


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
    assert fmt_seconds(0.2) == "200.0 ms"
    assert fmt_seconds(2.5) == "2.50 s"
    assert fmt_seconds(0.00005) == "50 µs"
