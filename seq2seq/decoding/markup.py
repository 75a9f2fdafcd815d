"""Markup through translation: an HTML text's tags taken out, its text translated, and each tag
put back around the output words aligned to the source words it enclosed (docs/translate.md).

The text is parsed with the standard library's html.parser, which takes broken HTML too;
character references (&amp;, &eacute;) are unescaped before translation, and &, < and > of the
output escaped again. The text is cut into sentences as a line is (`LineTranslator.split`),
each sentence translated, and the model's own translation of it aligned word by word
(seq2seq.decoding.alignment: the mean of every cross-attention head, each output word linked to
one source word). Words are the text's whitespace-separated words, as the tokenizer splits
them. Then, from the outermost element in:

    an element spanning source words i..k wraps the smallest span of output words covering
    the output words linked to them, clipped inside its parent's span (nested tags stay
    nested); of two sister elements whose spans cross, the later one starts where the earlier
    one ends, so the output is well-formed
    punctuation: unless the element's own source text ends with punctuation, its end tag goes
    before the punctuation that ends its last output word, and before its last output words
    that are punctuation alone (French `ici !`); likewise its start tag at its start
    a void element (<br>, <img>), a comment, and an element none of whose words is linked
    sit just before the first output word linked to the source words after them (at the end
    of the parent if none is): no tag is dropped
    attributes are kept verbatim (the start tag as written); the content of <script> and
    <style> is kept verbatim, untranslated
    broken HTML: an unclosed element ends where the text ends (or where a closing tag of an
    element around it closes it), a closing tag with no open element is dropped

The output text is the translations' words with the text's own whitespace around and between
its sentences: no text is lost, and no tag.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from seq2seq.decoding.alignment import Aligner, WordAlignment, align_ids
from seq2seq.decoding.line_translator import (
    LineTranslator,
    SourceTooLong,
    Translation,
    join_translations,
)
from seq2seq.decoding.sentences import Sentences
from seq2seq.errors import UserError

if TYPE_CHECKING:
    from seq2seq.decoding.torch_translator import Translator

VOID = frozenset(  # HTML's elements that have no content and no end tag
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param"}
    | {"source", "track", "wbr"}
)
RAW = frozenset({"script", "style"})  # elements whose content is kept verbatim
WORD = re.compile(r"[^ \t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")  # as clean.normalize splits


@dataclass
class Element:
    """An element of the parsed text: its tags as written, and the characters of the text it
    encloses, [start, end). Void elements, comments and declarations have no end tag."""

    name: str
    start_tag: str
    end_tag: str
    start: int
    end: int
    children: list[Element] = field(default_factory=list)


@dataclass
class Markup:
    """An HTML text parsed: its text (character references unescaped), its elements under
    `root` (no tags of its own), and the characters [start, end) of each of its sentences
    (set by `cut`)."""

    text: str
    root: Element
    spans: list[tuple[int, int]] = field(default_factory=list)


class TagParser(HTMLParser):
    """Collects the text and the element tree of one HTML text (`parse_html`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.length = 0
        self.open = [Element("", "", "", 0, 0)]

    def handle_data(self, data: str) -> None:
        if self.open[-1].name in RAW:
            self.open[-1].start_tag += data
            return
        self.parts.append(data)
        self.length += len(data)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        written = self.get_starttag_text() or f"<{tag}>"
        if tag in VOID:
            self.add_void(written, tag)
            return
        element = Element(tag, written, f"</{tag}>", self.length, self.length)
        self.open[-1].children.append(element)
        self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.add_void(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if tag not in (element.name for element in self.open[1:]):
            return  # a stray closing tag: dropped
        while (element := self.open.pop()).name != tag:
            element.end = self.length
        element.end = self.length

    def handle_comment(self, data: str) -> None:
        self.add_void(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self.add_void(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self.add_void(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self.add_void(f"<![{data}]>")

    def add_void(self, written: str, name: str = "") -> None:
        self.open[-1].children.append(Element(name, written, "", self.length, self.length))


def parse_html(text: str) -> Markup:
    """The text and elements of the HTML `text`; unclosed elements end with the text."""
    parser = TagParser()
    parser.feed(text)
    parser.close()
    for element in parser.open:
        element.end = parser.length
    return Markup("".join(parser.parts), parser.open[0])


def cut(
    markups: Sequence[Markup],
    split: Callable[[Sequence[str], bool], Sentences],
    split_sentences: bool = True,
) -> Sentences:
    """The sentences of every text of `markups` (`split`: `LineTranslator.split`), one line a
    text; sets each markup's `spans`."""
    sentences = split([markup.text.strip() for markup in markups], split_sentences)
    cursors = [0] * len(markups)
    for sentence, line in zip(sentences.sentences, sentences.line_of, strict=True):
        start = markups[line].text.index(sentence, cursors[line])
        markups[line].spans.append((start, start + len(sentence)))
        cursors[line] = start + len(sentence)
    return sentences


def align_translation(aligner: Aligner, best: Translation) -> WordAlignment:
    """The word alignment of a sentence and its translation `best`; no links when either side
    has no words."""
    try:
        return align_ids(aligner, (best.src_tokens, best.tokens))
    except ValueError:
        return WordAlignment([], best.text.split(), set())


@dataclass
class Layout:
    """A text's words and links for `render`: the source text, where every source word starts
    and ends in it, the output as pieces (for each of N output words the separator before it,
    its leading punctuation, the rest of it and its trailing punctuation, then what follows
    the last word: 4N + 1 pieces, escaped; `edges`), and each source word's output words."""

    text: str = ""
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    links: dict[int, list[int]] = field(default_factory=dict)

    @property
    def num_words(self) -> int:
        return len(self.items) // 4

    def bare(self, word: int) -> bool:
        """Whether output word `word` is punctuation alone (`edges`)."""
        return not self.items[4 * word + 2]

    def punctuated(self, element: Element) -> tuple[bool, bool]:
        """Whether the source text of `element` starts, ends with punctuation."""
        text = self.text[element.start : element.end].strip() or " "
        return is_punctuation(text[0]), is_punctuation(text[-1])

    def span(self, element: Element) -> tuple[int, int]:
        """The output words [a, b) that `element` wraps, or a == b, where it sits when none of
        its words is linked (and for a void or empty element): before the first output word
        linked to a source word after it, else at the end. Output words of punctuation alone
        at an edge where the element's source text has none are left out of a longer span."""
        if element.end_tag and element.start < element.end:
            words = range(
                bisect_right(self.ends, element.start), bisect_left(self.starts, element.end)
            )
            linked = [j for i in words for j in self.links.get(i, [])]
            if linked:
                a, b = min(linked), max(linked) + 1
                starts, ends = self.punctuated(element)
                while b - a > 1 and not ends and self.bare(b - 1):
                    b -= 1
                while b - a > 1 and not starts and self.bare(a):
                    a += 1
                return a, b
        after = range(bisect_left(self.starts, element.end), len(self.starts))
        word = next((i for i in after if i in self.links), None)
        where = self.num_words if word is None else min(self.links[word])
        return where, where


def is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def edges(word: str) -> tuple[str, str, str]:
    """`word` as its leading punctuation, the rest and its trailing punctuation; a word of
    punctuation alone is all leading punctuation."""
    kept = [i for i, char in enumerate(word) if not is_punctuation(char)]
    if not kept:
        return word, "", ""
    return word[: kept[0]], word[kept[0] : kept[-1] + 1], word[kept[-1] + 1 :]


def layout(markup: Markup, alignments: Sequence[WordAlignment]) -> Layout:
    """The `Layout` of `markup` translated sentence by sentence (`alignments`, one a span)."""
    text, laid = markup.text, Layout(markup.text)
    pending, cursor = "", 0
    for (start, end), found in zip(markup.spans, alignments, strict=True):
        words = [match.span() for match in WORD.finditer(text, start, end)]
        if len(words) == len(found.src_words):  # else the tokenizer's words are other ones
            for i, j in sorted(found.links):
                laid.links.setdefault(len(laid.starts) + i, []).append(laid.num_words + j)
        laid.starts += [word_start for word_start, _ in words]
        laid.ends += [word_end for _, word_end in words]
        pending += text[cursor:start]
        for word in found.tgt_words:
            laid.items += [html.escape(piece, quote=False) for piece in (pending, *edges(word))]
            pending = " "
        pending = "" if found.tgt_words else pending
        cursor = end
    laid.items.append(html.escape(pending + text[cursor:], quote=False))
    return laid


def place(
    laid: Layout, parent: Element, words: tuple[int, int], items: tuple[int, int], out: list[str]
) -> None:
    """Write the output pieces `items` [first, last) of `parent`, which wraps output `words`
    [lo, hi), with its children's tags among them: each child's span clipped inside [lo, hi),
    and moved past its earlier sisters' where they cross; its punctuation at an edge inside
    it only where its source text has punctuation there. A child that wraps no words sits
    after the separator before the word it precedes (at the parent's end: before its end)."""
    lo, hi = words
    spans = []
    for order, child in enumerate(parent.children):
        a, b = (min(max(bound, lo), hi) for bound in laid.span(child))
        spans.append((a, b, order))
    end, cursor = lo, items[0]
    for a, b, order in sorted(spans):
        a = max(a, end)
        b = end = max(b, a)
        child = parent.children[order]
        if a < b:
            starts, ends = laid.punctuated(child)
            first, last = 4 * a + (1 if starts else 2), 4 * b - (0 if ends else 1)
        else:
            first = last = 4 * a + 1 if a < hi else 4 * a
        first, last = (min(max(piece, items[0]), items[1]) for piece in (first, last))
        out += laid.items[cursor:first]
        out.append(child.start_tag)
        place(laid, child, (a, b), (first, last), out)
        out.append(child.end_tag)
        cursor = last
    out += laid.items[cursor : items[1]]


def render(markup: Markup, alignments: Sequence[WordAlignment]) -> str:
    """The translated HTML of `markup`, each sentence's `alignments` (`align_translation`)."""
    laid = layout(markup, alignments)
    out: list[str] = []
    place(laid, markup.root, (0, laid.num_words), (0, len(laid.items)), out)
    return "".join(out)


def restore(
    aligner: Aligner,
    markups: Sequence[Markup],
    sentences: Sentences,
    results: list[list[Translation]],
) -> list[Translation]:
    """The best translation of each text of `markups`, its tags put back: `results` are the
    n-best lists of its `sentences` (`cut`), each aligned by `aligner`; the score, ids and
    pieces those of its sentences (`join_translations`)."""
    found = [align_translation(aligner, nbest[0]) for nbest in results]
    texts = sentences.by_line(found)
    best = join_translations(sentences, [nbest[:1] for nbest in results])
    return [
        replace(nbest[0], text=render(markup, alignments))
        for markup, alignments, nbest in zip(markups, texts, best, strict=True)
    ]


def pytorch_translator(translator: LineTranslator, option: str) -> Translator:
    """The PyTorch translator that aligns for `translator`: itself, or the one a CTranslate2
    translator asks for attention maps; a UserError naming `option` when there is none."""
    pytorch = getattr(translator, "attention_translator", translator)
    if not hasattr(pytorch, "model"):
        raise UserError(
            f"{option} html: word alignments come from the PyTorch engine, and this model is "
            "translated by CTranslate2 alone; translate it on the PyTorch engine"
        )
    return pytorch


def translate_html(
    translator: LineTranslator,
    texts: list[str],
    beam_size: int | None = None,
    split_sentences: bool = True,
    option: str = "format",
) -> list[Translation]:
    """Each HTML text of `texts` translated with its tags kept (see the module docstring); a
    sentence over the source length limit is a `SourceTooLong` naming its text, a translator
    without a PyTorch model (`pytorch_translator`) a UserError naming `option`."""
    aligner = Aligner(pytorch_translator(translator, option))
    markups = [parse_html(text) for text in texts]
    sentences = cut(markups, translator.split, split_sentences)
    try:
        results = translator.translate(sentences.sentences, beam_size, split_sentences=False)
    except SourceTooLong as err:
        line, sentence = sentences.where(err.index)
        raise SourceTooLong(line, sentence + err.problem) from None
    return restore(aligner, markups, sentences, results)
