"""Word alignment read off cross-attention, two directions combined, and scored against gold.

A sentence pair is teacher-forced through the model (`attention_maps.teacher_forced_maps`), and
every target word is linked to the source word it attends to most. Words are the
whitespace-separated words of each side; sentencepiece marks the first piece of a word with
"▁", and the EOS piece is a word of its own (`word_of_piece`). With cross(l, h, t, s) the
weight that target piece t gives source piece s in decoder layer l, head h:

    A(t, s) = the rule's weights (`AlignmentRule`):
              mean       the mean over every layer l and head h (the explorer's rule)
              layer:L    the mean over the heads of layer L
              head:L.H   the one head H of layer L
              alignment-head   the head trained to align (train.alignment_head, with
                         train.alignment_weight > 0; Garg et al. 2019), head:L.H of the
                         layer and head the model's configuration names
    W(u, v) = mean over the pieces t of target word u of sum over the pieces s of source word v
              of A(t, s)
    target word u is linked to the source word v with the largest W(u, v)

The row of piece t is the one that predicts it (decoder input: the piece before it); with the
`shifted:` prefix it is the next row, where piece t is the decoder's input. The EOS piece of
either side is no word: its row and its column are left out (a target word that attends to
the source EOS most is linked to the source word it attends to most after it). Punctuation
marks are words like any other. Links are (i, j) pairs, i a source word and j a target word,
both from 0: in Pharaoh form `i-j`.

Two directions combined (Koehn, Och and Marcu 2003; Koehn et al. 2007, Moses' `symal`):
`forward` are the links of the model source -> target (one per target word), `reverse` those of
the opposite model, turned round into (source, target) pairs (one per source word):

    intersection     forward ∩ reverse: precise, few links
    union            forward ∪ reverse: many links, less precise
    grow-diag        from the intersection, add the union's neighbours (the 8 around an
                     alignment point) of alignment points while they link a word not yet aligned
    grow-diag-final  grow-diag, then every link of either direction whose source or target
                     word is still unaligned
    grow-diag-final-and  the same, for links whose source and target word are both unaligned

Scored against human gold of sure links S and possible links P (S ⊆ P) (Och and Ney 2003):

    precision = |A ∩ P| / |A|      recall = |A ∩ S| / |S|
    AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

summed over every sentence of a test set before dividing. A gold file (the Hansards format)
has one line per sentence pair: `i-j` a sure link and `ipj` a possible one, counted from 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seq2seq.data.specials import EOS_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.data.word_links import COMBINATIONS, Link, word_of_piece
from seq2seq.decoding.attention_maps import source_attention, teacher_forced_maps
from seq2seq.errors import UserError
from seq2seq.models.base import Seq2SeqModel
from seq2seq.models.transformer import TransformerSeq2Seq

if TYPE_CHECKING:
    from seq2seq.decoding.torch_translator import Translator

RULES_HELP = (
    "mean, layer:L, head:L.H or alignment-head, each optionally after shifted: "
    "(e.g. shifted:head:1.2)"
)
TRAINED = "alignment-head"
RULE = re.compile(rf"mean|{TRAINED}|layer:(?P<layer>\d+)|head:(?P<head_layer>\d+)\.(?P<head>\d+)")


# --- From pieces to words --------------------------------------------------------------------


def word_weights(attention: Tensor, src_words: list[int], tgt_words: list[int]) -> Tensor:
    """W(u, v): the weights `attention` (rows, S) of the pieces, summed over the pieces of each
    source word and averaged over the rows of each target word; src_words: the word index of
    every source piece (S), tgt_words: of every row. (U, V), one row per target word and one
    column per source word, as many as the indexes name."""
    src_index, tgt_index = torch.tensor(src_words), torch.tensor(tgt_words)
    num_src, num_tgt = src_words[-1] + 1, max(tgt_words) + 1
    summed = torch.zeros(attention.shape[0], num_src).index_add_(1, src_index, attention)
    per_word = torch.zeros(num_tgt, num_src).index_add_(0, tgt_index, summed)
    return per_word / torch.bincount(tgt_index, minlength=num_tgt)[:, None]


def words_of(tokenizer: Tokenizer, ids: list[int]) -> tuple[list[str], list[int]]:
    """The words of `ids` (no EOS) as text, each decoded from its pieces, and the word index of
    every piece, EOS included (the last word, left out of the words)."""
    _, index = word_of_piece([tokenizer.id_to_piece(i) for i in ids] + [EOS_PIECE])
    grouped: list[list[int]] = [[] for _ in range(index[-1])]
    for piece_id, word in zip(ids, index[:-1], strict=True):
        grouped[word].append(piece_id)
    return tokenizer.decode(grouped) if grouped else [], index


# --- Which attention -------------------------------------------------------------------------


@dataclass(frozen=True)
class AlignmentRule:
    """Which cross-attention aligns (see the module docstring): layer None, head None is the mean
    of every layer and head; layer L alone the mean of its heads; shifted: the row where the
    word is the decoder's input; trained: the alignment head, whose layer and head
    `for_model` reads from the translator."""

    layer: int | None = None
    head: int | None = None
    shifted: bool = False
    trained: bool = False

    @classmethod
    def parse(cls, text: str, option: str = "--rule") -> AlignmentRule:
        """The rule `text` names (RULES_HELP); a UserError naming `option` for another text."""
        shifted = text == "shifted" or text.startswith("shifted:")
        found = RULE.fullmatch("mean" if text == "shifted" else text.removeprefix("shifted:"))
        if found is None:
            raise UserError(f"{option} {text!r}: one of {RULES_HELP}")
        layer = found["layer"] or found["head_layer"]
        return cls(
            layer=None if layer is None else int(layer),
            head=None if found["head"] is None else int(found["head"]),
            shifted=shifted,
            trained=found[0] == TRAINED,
        )

    def for_model(self, translator: Translator, option: str = "rule") -> AlignmentRule:
        """The rule with the trained head's layer and head when it is alignment-head; a
        UserError naming `option` when the model was trained without one."""
        if not self.trained:
            return self
        if translator.alignment_head is None:
            raise UserError(
                f"{option} {self}: the model was trained without an alignment head "
                "(train.alignment_weight 0); see docs/align.md"
            )
        layer, head = translator.alignment_head
        return AlignmentRule(layer, head, self.shifted, trained=True)

    def __str__(self) -> str:
        if self.trained:
            return f"shifted:{TRAINED}" if self.shifted else TRAINED
        named = "mean" if self.layer is None else f"layer:{self.layer}"
        if self.head is not None:
            named = f"head:{self.layer}.{self.head}"
        return f"shifted:{named}" if self.shifted else named

    def check(self, model: Seq2SeqModel, option: str = "rule") -> None:
        """A UserError naming `option` for a layer or head that `model` does not have (the GRU
        has one map: the mean rule only)."""
        if self.layer is None:
            return
        if not isinstance(model, TransformerSeq2Seq):
            raise UserError(f"{option} {self}: the GRU has one attention map; use the rule mean")
        layers = len(model.decoder_layers)
        heads = model.decoder_layers[0].cross_attn.num_heads
        if self.layer >= layers or (self.head is not None and self.head >= heads):
            shape = f"layers 0-{layers - 1}, heads 0-{heads - 1}"
            raise UserError(f"{option} {self}: the model has {shape}")

    def attention(self, maps: dict[str, Tensor]) -> Tensor:
        """A(t, s) (T, S) of teacher-forced `maps` of a model the rule fits (`check`)."""
        if self.layer is None:
            return source_attention(maps)
        cross = maps["cross"][self.layer]
        return cross.mean(dim=0) if self.head is None else cross[self.head]

    def piece_rows(self, attention: Tensor) -> Tensor:
        """The row of every target piece but EOS: the one that predicts it, or (shifted) the
        next one, where the piece is the decoder's input."""
        return attention[1:] if self.shifted else attention[:-1]


def rules_of(maps: dict[str, Tensor], shifted: bool = False) -> list[AlignmentRule]:
    """Every rule a grid scores for `maps`: each head of each layer, each layer's mean, and the
    mean of all (in that order, the mean last)."""
    layers, heads = maps["cross"].shape[:2] if "cross" in maps else (0, 0)
    rules = [
        AlignmentRule(layer, head, shifted)
        for layer in range(layers)
        for head in [*range(heads), None]
    ]
    return [*rules, AlignmentRule(shifted=shifted)]


def attention_links(
    maps: dict[str, Tensor], rule: AlignmentRule, src_words: list[int], tgt_words: list[int]
) -> set[Link]:
    """Each target word linked to the source word with the largest W(u, v) under `rule`;
    src_words, tgt_words: the word index of every piece, EOS included."""
    rows = rule.piece_rows(rule.attention(maps))
    weights = word_weights(rows, src_words, tgt_words[:-1])[:, :-1]  # no source EOS column
    return {(source, target) for target, source in enumerate(weights.argmax(dim=1).tolist())}


def turned(links: set[Link]) -> set[Link]:
    """`links` with source and target swapped: (j, i) for each (i, j)."""
    return {(j, i) for i, j in links}


def pharaoh(links: set[Link]) -> str:
    """`links` in Pharaoh form, `i-j` sorted by source then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


# --- One sentence pair -----------------------------------------------------------------------


@dataclass
class WordAlignment:
    """The links of one sentence pair: (source word, target word), from 0."""

    src_words: list[str]
    tgt_words: list[str]
    links: set[Link]

    def pharaoh(self) -> str:
        return pharaoh(self.links)

    def reversed(self) -> WordAlignment:
        """The same links with source and target swapped."""
        return WordAlignment(self.tgt_words, self.src_words, turned(self.links))


@dataclass
class PairMaps:
    """A sentence pair as ids (no EOS), its words, and the maps of teacher-forcing it."""

    src_words: list[str]
    tgt_words: list[str]
    src_index: list[int]  # the word of every source piece, EOS included
    tgt_index: list[int]
    maps: dict[str, Tensor]

    def align(self, rule: AlignmentRule) -> WordAlignment:
        links = attention_links(self.maps, rule, self.src_index, self.tgt_index)
        return WordAlignment(self.src_words, self.tgt_words, links)


def pair_maps(
    model: Seq2SeqModel,
    tokenizers: tuple[Tokenizer, Tokenizer],
    ids: tuple[list[int], list[int]],
    device: torch.device,
) -> PairMaps:
    """Teacher-force the pair `ids` (source and target ids, no EOS) through `model`, whose
    source and target `tokenizers` name the words."""
    (src_tokenizer, tgt_tokenizer), (src_ids, tgt_ids) = tokenizers, ids
    src_words, src_index = words_of(src_tokenizer, src_ids)
    tgt_words, tgt_index = words_of(tgt_tokenizer, tgt_ids)
    maps = teacher_forced_maps(model, src_ids, tgt_ids, device)
    return PairMaps(src_words, tgt_words, src_index, tgt_index, maps)


@dataclass
class Aligner:
    """A model that aligns with `rule`: its translator gives the model, its tokenizers and its
    device."""

    translator: Translator
    rule: AlignmentRule = AlignmentRule()
    option: str = "rule"  # what names the rule in errors, e.g. --rule

    def __post_init__(self) -> None:
        self.rule = self.rule.for_model(self.translator, self.option)
        self.rule.check(self.translator.model, self.option)

    def ids(self, src: str, tgt: str) -> tuple[list[int], list[int]]:
        """The ids (no EOS) of the pair `src`, `tgt`."""
        translator = self.translator
        src_ids = translator.src_tokenizer.encode([src])[0]
        return src_ids, translator.tgt_tokenizer.encode([tgt])[0]

    def maps(self, src_ids: list[int], tgt_ids: list[int]) -> PairMaps:
        translator = self.translator
        tokenizers = translator.src_tokenizer, translator.tgt_tokenizer
        return pair_maps(translator.model, tokenizers, (src_ids, tgt_ids), translator.device)


def check_sides(ids: tuple[list[int], list[int]]) -> None:
    """A ValueError for a side of the pair `ids` with no words."""
    for side, side_ids in zip(("source", "target"), ids, strict=True):
        if not side_ids:
            raise ValueError(f"the {side} has no words")


def align_ids(
    forward: Aligner,
    ids: tuple[list[int], list[int]],
    reverse: Aligner | None = None,
    combine: str = "grow-diag-final",
) -> WordAlignment:
    """The word alignment of the pair `ids` (forward's source and target ids, no EOS) by
    `forward`; with the opposite model `reverse`, both directions combined by `combine` (one of
    COMBINATIONS), the reverse one teacher-forced on the same words. A ValueError for a side
    with no words."""
    check_sides(ids)
    aligned = forward.maps(*ids).align(forward.rule)
    if reverse is None:
        return aligned
    backward = turned_maps(aligned, reverse).align(reverse.rule).reversed()
    return combined(aligned, backward, combine)


def turned_maps(aligned: WordAlignment, reverse: Aligner) -> PairMaps:
    """The maps of the opposite model `reverse` teacher-forced on the words of `aligned` turned
    round (its target words as the source)."""
    return reverse.maps(*reverse.ids(" ".join(aligned.tgt_words), " ".join(aligned.src_words)))


def combined(aligned: WordAlignment, backward: WordAlignment, combine: str) -> WordAlignment:
    """The links `aligned` of one direction combined by `combine` (one of COMBINATIONS) with
    `backward`, those of the opposite direction on the same words, turned back (`reversed`)."""
    links = COMBINATIONS[combine](aligned.links, backward.links)
    return WordAlignment(aligned.src_words, aligned.tgt_words, links)


# --- Gold links and the alignment error rate (Och and Ney 2003) ------------------------------

GOLD_LINK = re.compile(r"([1-9]\d*)([-p])([1-9]\d*)")


@dataclass
class GoldLinks:
    """One sentence pair's gold: sure links, and possible links (the sure ones among them)."""

    sure: set[Link] = field(default_factory=set)
    possible: set[Link] = field(default_factory=set)

    def reversed(self) -> GoldLinks:
        """The same links with source and target swapped."""
        return GoldLinks(turned(self.sure), turned(self.possible))


@dataclass
class GoldFile:
    """Sentence pairs (source, target) and the gold of each, from the gold file `name`."""

    name: str
    pairs: list[tuple[str, str]]
    gold: list[GoldLinks]


def parse_gold(line: str) -> GoldLinks:
    """The links of one gold line (`i-j` sure, `ipj` possible, from 1) as links from 0; a
    ValueError naming the first item that is neither."""
    gold = GoldLinks()
    for item in line.split():
        found = GOLD_LINK.fullmatch(item)
        if found is None:
            raise ValueError(f"{item!r} is not a link i-j (sure) or ipj (possible), from 1")
        link = (int(found[1]) - 1, int(found[3]) - 1)
        gold.possible.add(link)
        if found[2] == "-":
            gold.sure.add(link)
    return gold


def read_gold(path: Path, lines: Iterable[str]) -> list[GoldLinks]:
    """The gold of every line of `lines` (the file at `path`'s), each a UserError naming the
    file and line if it is not gold links."""
    gold = []
    for number, line in enumerate(lines, start=1):
        try:
            gold.append(parse_gold(line))
        except ValueError as err:
            raise UserError(f"{path}:{number}: {err}") from None
    return gold


def check_gold(gold: GoldLinks, num_src: int, num_tgt: int) -> None:
    """A ValueError naming the first gold link past a pair of `num_src` and `num_tgt` words."""
    for i, j in sorted(gold.possible):
        if i >= num_src or j >= num_tgt:
            raise ValueError(
                f"link {i + 1}-{j + 1} is past the pair's {num_src} source and {num_tgt} "
                "target words"
            )


@dataclass
class AlignmentScore:
    """Link counts summed over sentence pairs: predicted |A|, sure |S|, |A ∩ S| and |A ∩ P|."""

    predicted: int = 0
    sure: int = 0
    sure_found: int = 0
    possible_found: int = 0

    def add_pair(self, found: WordAlignment, gold: GoldLinks) -> None:
        """Add the links `found` of one pair; a ValueError for a gold link past its words."""
        check_gold(gold, len(found.src_words), len(found.tgt_words))
        self.add(found.links, gold)

    def add(self, links: set[Link], gold: GoldLinks) -> None:
        self.predicted += len(links)
        self.sure += len(gold.sure)
        self.sure_found += len(links & gold.sure)
        self.possible_found += len(links & gold.possible)

    @property
    def precision(self) -> float:
        return self.possible_found / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.sure_found / self.sure if self.sure else 0.0

    @property
    def aer(self) -> float:
        total = self.predicted + self.sure
        return 1 - (self.sure_found + self.possible_found) / total if total else 0.0

    def summary(self) -> dict[str, float | int]:
        """AER, precision and recall in percent (one decimal) and the counts."""
        return {
            "aer": round(100 * self.aer, 1),
            "precision": round(100 * self.precision, 1),
            "recall": round(100 * self.recall, 1),
            "links": self.predicted,
            "sure": self.sure,
        }


def add_to_grid(
    scores: dict[str, AlignmentScore], maps: PairMaps, gold: GoldLinks, shifted: bool = False
) -> None:
    """Add the links of one pair's `maps` under every rule of the grid (`rules_of`) against its
    `gold` to `scores`, by the rule's name; a ValueError for a gold link past the pair's words."""
    check_gold(gold, len(maps.src_words), len(maps.tgt_words))
    for rule in rules_of(maps.maps, shifted):
        scores.setdefault(str(rule), AlignmentScore()).add(maps.align(rule).links, gold)
