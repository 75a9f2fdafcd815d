"""Cutting input lines into sentences before translation, and joining the outputs back.

Our models are taught single sentences (Tatoeba's are a few words long): given a paragraph,
they translate its first sentence or two and drop the rest. So each input line is cut into its
sentences, the sentences of every line are translated together, and each line's outputs are
joined with the line's own whitespace between its sentences. A line of one sentence is
translated as it is, exactly as without segmentation.

The segmenter is sentencex (Wikimedia's, from PyPI): rules and abbreviation lists for English,
French, German, Czech and many more languages, and the fastest and among the most accurate of
the four compared in docs/benchmarks.md ("Sentence segmentation").
"""

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

import sentencex

T = TypeVar("T")


# Titles before a name after which sentencex (1.0) wrongly ends a sentence: "M. Dupont" is cut
# after "M." in French. A sentence ending in one of them is joined to the next.
TITLES = {"fr": frozenset({"M.", "Mme.", "Mmes.", "Mlle.", "Mlles.", "Me.", "Pr.", "Dr.", "Mgr."})}


def split_line(line: str, language: str) -> tuple[list[str], list[str]]:
    """The sentences of `line` (in `language`, e.g. "en") and the whitespace between each two
    of them, as the line has it. A line of fewer than two sentences is one sentence, itself."""
    titles = TITLES.get(language, frozenset())
    spans: list[tuple[int, int]] = []  # each sentence's (start, end) in `line`
    after_title = False  # whether the last piece ends in a title
    for piece in sentencex.segment(language, line):
        piece = piece.strip()
        if not piece:
            continue
        start = line.index(piece, spans[-1][1] if spans else 0)
        if after_title:
            spans[-1] = (spans[-1][0], start + len(piece))
        else:
            spans.append((start, start + len(piece)))
        after_title = piece.rsplit(maxsplit=1)[-1] in titles
    if len(spans) < 2:
        return [line], []
    gaps = [line[end:start] for (_, end), (start, _) in pairwise(spans)]
    return [line[start:end] for start, end in spans], gaps


def join_line(texts: Sequence[str], gaps: Sequence[str]) -> str:
    """One line again: `texts` (its sentences' outputs) with the `gaps` between them."""
    return "".join(gap + text for gap, text in zip(["", *gaps], texts, strict=True))


@dataclass
class Sentences:
    """Lines cut into sentences (`split_lines`).

    sentences: every line's sentences, in order; line_of: the line of each sentence (its index
    in the lines given); gaps: for each line, the whitespace between its sentences.
    """

    sentences: list[str]
    line_of: list[int]
    gaps: list[list[str]]

    def by_line(self, outputs: Sequence[T]) -> list[list[T]]:
        """`outputs`, one per sentence, grouped by line."""
        grouped: list[list[T]] = [[] for _ in self.gaps]
        for line, output in zip(self.line_of, outputs, strict=True):
            grouped[line].append(output)
        return grouped

    def where(self, index: int) -> tuple[int, str]:
        """The line of sentence `index`, and how a message names the sentence within it:
        "sentence N: " in a line of several sentences, "" in a line of one."""
        line = self.line_of[index]
        if not self.gaps[line]:
            return line, ""
        return line, f"sentence {self.line_of[:index].count(line) + 1}: "


def split_lines(lines: Sequence[str], language: str, split: bool = True) -> Sentences:
    """`lines` cut into their sentences (`split_line`); with `split` False each line is one
    sentence."""
    sentences, line_of, gaps = [], [], []
    for number, line in enumerate(lines):
        line_sentences, line_gaps = split_line(line, language) if split else ([line], [])
        sentences += line_sentences
        line_of += [number] * len(line_sentences)
        gaps.append(line_gaps)
    return Sentences(sentences, line_of, gaps)
