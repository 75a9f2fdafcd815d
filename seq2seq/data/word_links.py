"""Words of a sentencepiece sequence, and word links of two directions combined: what reading
alignments off attention (seq2seq.decoding.alignment) and the alignment teacher
(seq2seq.data.align_teacher) share. No torch.

Words: a piece starting with "▁" starts a word; the EOS piece is a word of its own
(`word_of_piece`). Links are (i, j) pairs, i a source word and j a target word, both from 0.
The combinations of a forward and a reverse direction (Koehn, Och and Marcu 2003; Moses'
`symal`) are described in seq2seq.decoding.alignment's docstring.
"""

from collections.abc import Callable
from functools import partial

WORD_START = "▁"
Link = tuple[int, int]  # (source word, target word), both from 0


def word_of_piece(pieces: list[str]) -> tuple[list[str], list[int]]:
    """The words of a piece sequence ending with EOS, and the word index of every piece.

    A piece starting with "▁" starts a word; the EOS piece is a word of its own.
    """
    words: list[str] = []
    index: list[int] = []
    for position, piece in enumerate(pieces):
        if position == len(pieces) - 1 or piece.startswith(WORD_START) or not words:
            words.append(piece.removeprefix(WORD_START))
        else:
            words[-1] += piece
        index.append(len(words) - 1)
    return words, index


def piece_links(links: set[Link], src_words: list[int], tgt_words: list[int]) -> list[Link]:
    """Word links as piece links: each piece of target word j linked to every piece of source
    word i, for each link (i, j); src_words, tgt_words: the word index of every piece (as
    `word_of_piece` gives them). (source piece, target piece) pairs, sorted."""
    src_pieces: dict[int, list[int]] = {}
    for piece, word in enumerate(src_words):
        src_pieces.setdefault(word, []).append(piece)
    return sorted(
        (src_piece, tgt_piece)
        for tgt_piece, tgt_word in enumerate(tgt_words)
        for src_word, linked in sorted(links)
        if linked == tgt_word
        for src_piece in src_pieces.get(src_word, [])
    )


NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: set[Link], reverse: set[Link]) -> set[Link]:
    return forward & reverse


def union(forward: set[Link], reverse: set[Link]) -> set[Link]:
    return forward | reverse


def unaligned(alignment: set[Link], link: Link) -> bool:
    """Whether the source word or the target word of `link` has no link in `alignment`."""
    source, target = link
    return all(i != source for i, _ in alignment) or all(j != target for _, j in alignment)


def grow_diag(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """GROW-DIAG: start from the intersection; while a pass adds a link, visit the alignment
    points in order (source word, then target word) and add each neighbour that is in the union
    and links a word not yet aligned."""
    candidates, alignment = forward | reverse, forward & reverse
    grown = True
    while grown:
        grown = False
        for point in sorted(candidates):
            if point not in alignment:
                continue
            for di, dj in NEIGHBOURS:
                new = (point[0] + di, point[1] + dj)
                if new in candidates and new not in alignment and unaligned(alignment, new):
                    alignment.add(new)
                    grown = True
    return alignment


def grow_diag_final(forward: set[Link], reverse: set[Link], final_and: bool = False) -> set[Link]:
    """GROW-DIAG, then FINAL for each direction in turn: add, in order, each of its links whose
    source word or target word is still unaligned (FINAL-AND, with `final_and`: whose source
    word and target word both are)."""
    alignment = grow_diag(forward, reverse)
    for direction in (forward, reverse):
        for source, target in sorted(direction):
            free = [all(i != source for i, _ in alignment), all(j != target for _, j in alignment)]
            if (source, target) not in alignment and (all(free) if final_and else any(free)):
                alignment.add((source, target))
    return alignment


COMBINATIONS: dict[str, Callable[[set[Link], set[Link]], set[Link]]] = {
    "intersection": intersection,
    "union": union,
    "grow-diag": grow_diag,
    "grow-diag-final": grow_diag_final,
    "grow-diag-final-and": partial(grow_diag_final, final_and=True),
}
