"""Checking HTML that the markup tests get back: well-formed, its tags and its text."""

from html.parser import HTMLParser

from seq2seq.decoding.markup import VOID


class StrictParser(HTMLParser):
    """Checks that every end tag closes the innermost open element; collects the start tags
    as written and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.start_tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.start_tags.append(self.get_starttag_text())
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        if not self.open or self.open[-1] not in ("script", "style"):
            self.text.append(data)


def well_formed(html: str) -> tuple[list[str], str]:
    """The start tags and the text of `html`, which must be well-formed."""
    parser = StrictParser()
    parser.feed(html)
    parser.close()
    assert parser.open == [], f"unclosed {parser.open} in {html!r}"
    return sorted(parser.start_tags), "".join(parser.text)
