"""An HTML page read as markup (stdlib html.parser): what the --html tests check it by."""

from __future__ import annotations

from html.parser import HTMLParser

# Elements that never close (HTML void elements).
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}


class Page(HTMLParser):
    """Tags, attributes and text of a page; fails on a tag closed out of order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, f"</{tag}> closes nothing"
        assert self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1]}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.tags if t == tag]


def check_self_contained(text: str) -> Page:
    """The page parsed, after checking it opens anywhere: well formed, nothing to fetch."""
    parsed = Page(text)
    assert parsed.stack == [], f"unclosed: {parsed.stack}"
    assert text.startswith("<!DOCTYPE html>")
    # Nothing to fetch: no script at all, no external stylesheet, frame, image or object.
    for tag in ("script", "link", "iframe", "img", "object", "embed"):
        assert not parsed.named(tag), tag
    for tag, attrs in parsed.tags:
        for key in ("src", "href", "xlink:href", "action"):
            value = (attrs.get(key) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//")), (tag, key, value)
    assert "http://" not in text and "https://" not in text
    assert "@import" not in text
    return parsed
