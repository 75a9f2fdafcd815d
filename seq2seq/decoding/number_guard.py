"""The number guard: the numbers of a translation are the source's numbers, each whole, each
used as often as the source has it, none left out unless the model cannot place it.

A model that writes a number one digit piece at a time can drop or repeat a digit: "876-7714"
becomes "876-714" when it loses count of the two 7s (docs/experiments.md). With the guard, the
search lets a number into the output only as one of the source's numbers, in the form the source
writes it or the form the target language does ("19.99" in English is "19,99" in French:
seq2seq.data.entities.written_in). A number grouped in thousands is one number ("2 500 000" or
"1 250,00" in French), written as the target groups it ("2,500,000" and "1,250.00" in English),
or not grouped when it has four digits ("1250.00": `number_forms`).
A number the source writes in words is one of its numbers ("vingt-cinq" is 25: text2num reads
it), and a source number may be written in the target's words ("twenty-five": num2words writes
them). The guard forbids pieces; the model's probabilities of the pieces it allows are
unchanged, but for the EOS's before every number is written. Its rules:

- a digit only as part of one of the source's numbers that is not used up: each source number
  is written at most as often as the source has it ("11:58 ... 11:58 dollars" is refused when the
  source has one 11:58), in digits or in words;
- a number written in digits is whole before anything else comes, and nothing glues it to the
  next one: "12" then ":" then "34" is refused ("06 12 34" must not become "06 12:34"), while a
  separator after a whole number is punctuation ("... le 876-7714.");
- a number in words that has gone past a hyphen on the way to a source number is finished:
  "twenty-" goes on to "five" when the source has 25 ("twenty-for" is refused); so is one whose
  words so far are a number of another value: "vingt" goes on to "-trois" when the source has 23
  and not 20 ("Il y a vingt étudiants" is refused);
- the EOS costs `EOS_COST` more (its log-probability lowered by that much) until every source
  number is written, in digits or in words: the search prefers the outputs that write them
  all, but an output that leaves out a number it cannot place ends, where under a ban it wrote
  on, often to its length limit ("Elle est née le 1975 février de 1neuf-cent-cent-cinq." for
  "She was born on 1 February 1975."; docs/experiments.md, "The EOS's cost");
- a character that the vocabulary writes in bytes (sentencepiece's byte pieces: "ị" is
  "<0xE1>", "<0xBB>", "<0x8B>") is whole before anything else comes, and no byte comes that
  UTF-8 does not allow there: "Lê Th<0xE1><0xBB>" then "▁Ánh" is refused (it decodes to
  "Lê Th�"), and so is the EOS (the narrower range of the byte after E0, ED, F0 or F4 is not
  checked).

Other words are never refused ("un", "one" are articles too), but for the first words of a
source number's words where they are a number of their own ("vingt" of "vingt-trois"): a word
that writes a source number only counts as writing it. Numbers are read from words and written
in words from `WORDS_FROM` to `WORDS_BELOW`.

A sentence's automaton is a trie of every form of its numbers (`_Trie`): digit forms ("25") and
word forms ("▁twenty-five", "▁Twenty-five"; "▁" is sentencepiece's mark of a word start). A
state is a node of the trie (the empty node meaning "outside a number"), the set of source
numbers already used, and the continuation bytes that the last character still needs.
`NumberGuard` holds the tries of a batch as tables over the pieces that can write a form, its
*columns* (the run pieces: digits and separators alone, "▁" allowed first, and "▁" alone, the
space of "1▁500"; the pieces of the batch's word forms; and two for every other piece: one that
starts a word or is punctuation, one that goes on with a word), so that one step masks and
advances every row at once. N nodes, C columns, M numbers per sentence (a sentence with fewer
has its extra ones used from the start):

    next_node  (N, C)  the node after each column, or -1 where the piece is refused
    closer     (N, C)  the node whose number the piece ends (the number is then used), or -1
    whole      (N, M)  the numbers a node's form writes whole
    reach      (N, M)  the numbers a node is on the way to
    free       (N,)    whether a node may be entered whatever is used (outside, or in words
                       before a hyphen)
    ends       (N,)    whether a node may be left by any piece (it is not inside a number)
"""

import re
from collections import defaultdict
from dataclasses import dataclass
from math import inf

import torch
from num2words import num2words
from text_to_num import alpha2digit, text2num
from torch import Tensor

from seq2seq.data.entities import DECIMAL_COMMA, NUMBER, written_in
from seq2seq.data.specials import EOS_PIECE

SEPARATORS = ".,:-"
WORD_START = "▁"  # sentencepiece's mark of a piece that begins a word
RUN_PIECE = re.compile(rf"{WORD_START}|{WORD_START}?[\d{re.escape(SEPARATORS)}]+")
COMMA_DECIMAL = re.compile(r"(\d+),(\d+)")
# a number grouped in thousands, with its decimals if any: "1 500" and "1 250,00" (French, with
# a space or a no-break space, and no other group of digits beside it: "91 555 0142" is a phone
# number), "1,500" and "1,250.00" (English), "1.500" (German)
SPACE = "[ \u00a0\u202f]"
SPACE_GROUPED = re.compile(
    rf"(?<![\d.,:-])(?<!\d{SPACE})\d{{1,3}}(?:{SPACE}\d{{3}})+(?:,\d+)?(?![\d.,:-]|{SPACE}\d)"
)
COMMA_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
DOT_GROUPED = re.compile(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?")
# Numbers in words: from 3 (text2num's threshold: "one", "un", "two", "deux" alone are not read
# as numbers) to 999 (a year or a larger number is written in digits, and its words are long).
WORDS_FROM, WORDS_BELOW = 3, 1000
IN_WORDS = re.compile(r"(?<![\w.,:-])\d+(?![\w]|[.,:-]\d)")  # a number text2num wrote, whole
ROOT = 0  # every trie's node 0: outside a number
BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")  # sentencepiece's piece of one byte
OTHER_BOUNDARY, OTHER_INSIDE = 0, 1  # the columns of every piece that writes no form
# What the EOS costs while a source number is not written: e^6, about 400 times less likely.
# Chosen on lines 1-100 of the en-fr realistic test: the largest cost tried with no output there
# running past 1.6 times its source (docs/experiments.md).
EOS_COST = 6.0


def words_to_digits(line: str, language: str) -> list[str]:
    """The numbers that `line` writes in words, in digits ("vingt-cinq élèves" -> ["25"]).
    text2num reads them; a number is kept only where num2words writes it back as the line does
    ("Hundreds of people" is not 100) and it is no ordinal ("the fifth" -> "5th")."""
    numbers = []
    for part in re.split(r"\d+", line):
        try:
            digits = alpha2digit(part, language, threshold=WORDS_FROM)
        except (NotImplementedError, KeyError, ValueError):
            return []  # a language text2num does not read
        text = re.sub(r"[\s-]+", " ", part.casefold())
        for number in IN_WORDS.findall(digits):
            words = in_words(number, language)
            if words and re.sub(r"[\s-]+", " ", words.casefold()) in text:
                numbers.append(number)
    return numbers


def in_words(number: str, language: str) -> str | None:
    """`number` (digits) in the words of `language` ("71" -> "soixante et onze"), or None where
    it is out of [WORDS_FROM, WORDS_BELOW) or num2words does not write that language."""
    small = number.isdecimal() and len(number) <= 3 and number[0] != "0"
    if not (small and WORDS_FROM <= int(number) < WORDS_BELOW):
        return None
    try:
        return num2words(int(number), lang=language)
    except NotImplementedError:
        return None


def is_number_word(text: str, language: str) -> bool:
    """Whether `text` ("▁vingt", "▁one▁hundred") is a number in the words of `language`, at
    least `WORDS_FROM` ("▁one" and "▁un" are articles too)."""
    try:
        return text2num(text.replace(WORD_START, " ").strip(), language) >= WORDS_FROM
    except (ValueError, NotImplementedError, KeyError):
        return False


def source_numbers(line: str, src: str) -> list[str]:
    """The numbers of a source `line`, each as often as it has it; in French or German a number
    grouped in thousands with spaces ("2 500 000") is one number, not three; numbers in words
    come last, in digits."""
    grouped = SPACE_GROUPED.findall(line) if src in DECIMAL_COMMA else []
    rest = SPACE_GROUPED.sub(" ", line) if grouped else line
    return grouped + NUMBER.findall(rest) + words_to_digits(line, src)


def thousands(number: str, src: str) -> tuple[str, str] | None:
    """The digits of `number` and its decimals ("" for none) where the source language groups
    it in thousands ("1,500" or "1,250.00" in English, "1 500", "1.500" or "1 250,00" in
    French: ("1500", "") or ("1250", "00")), else None."""
    grouping = DOT_GROUPED if src in DECIMAL_COMMA else COMMA_GROUPED
    if not (SPACE_GROUPED.fullmatch(number) or grouping.fullmatch(number)):
        return None
    whole, _, decimals = number.partition("," if src in DECIMAL_COMMA else ".")
    return re.sub(r"\D", "", whole), decimals


def grouped_in_thousands(digits: str, tgt: str = "en") -> str:
    """`digits` grouped in thousands as `tgt` writes them: by commas in English ("2500000" ->
    "2,500,000"), by spaces in French and German ("2▁500▁000", with sentencepiece's word start
    for each space); with no conversion to int (which refuses more than 4,300 digits)."""
    head = len(digits) % 3 or 3
    groups = [digits[:head], *(digits[i : i + 3] for i in range(head, len(digits), 3))]
    return (WORD_START if tgt in DECIMAL_COMMA else ",").join(groups)


def number_forms(number: str, src: str, tgt: str) -> set[str]:
    """The forms of a source number that a translation into `tgt` may hold: as the source
    writes it, as the target language does ("12,22" in French is "12.22" in English), and in the
    target's words ("▁twenty-five" and "▁Twenty-five", with "▁" for every space). A number
    grouped in thousands is written as the target groups it, and one of four digits may also
    be written whole: "1,250.00" or "1250.00" in English, "1▁250,00" or "1250,00" in French
    (never "1,250.00", which means 1.25 there), but only "52▁000" for "52,000"."""
    if (grouped := thousands(number, src)) is not None:
        digits, decimals = grouped
        forms = {grouped_in_thousands(digits, tgt)} | ({digits} if len(digits) == 4 else set())
        if decimals:
            point = "," if tgt in DECIMAL_COMMA else "."
            forms = {form + point + decimals for form in forms}
    else:
        english = number
        if src in DECIMAL_COMMA and (decimal := COMMA_DECIMAL.fullmatch(number)) is not None:
            english = f"{decimal[1]}.{decimal[2]}"
        forms = {number, written_in(english, tgt)}
        digits = number
    if (words := in_words(digits, tgt)) is not None:
        word_form = WORD_START + words.replace(" ", WORD_START)
        forms |= {word_form, WORD_START + word_form[1:].capitalize()}
    return forms


def allowed_numbers(line: str, src: str, tgt: str) -> list[set[str]]:
    """The forms (`number_forms`) of each number of the source `line` (`source_numbers`) that
    its translation may hold, one set per number, as often as the line has it."""
    return [number_forms(number, src, tgt) for number in source_numbers(line, src)]


@dataclass(frozen=True)
class GuardVocabulary:
    """What the guard needs of the target vocabulary: its pieces by text, its run pieces (digits
    and separators alone, "▁" allowed first, and "▁" alone: the space inside "1▁500"), which
    pieces go on with a word (a letter first), and the EOS."""

    ids: dict[str, int]
    runs: dict[int, str]
    inside: Tensor  # (V,) True where a piece goes on with a word (its first character a letter)
    eos: int
    bytes: "BytePieces"

    @classmethod
    def of(cls, pieces: list[str]) -> "GuardVocabulary":
        """From `pieces`, the vocabulary's pieces in id order."""
        runs = {i: p for i, p in enumerate(pieces) if RUN_PIECE.fullmatch(p)}
        inside = torch.tensor([p[:1].isalpha() for p in pieces], dtype=torch.bool)
        ids = {p: i for i, p in enumerate(pieces)}
        return cls(ids, runs, inside, ids[EOS_PIECE], BytePieces.of(pieces))


@dataclass(frozen=True)
class BytePieces:
    """Sentencepiece's byte pieces ("<0xE1>") of a vocabulary, which write a character its
    other pieces do not have, as the guard's rule on bytes needs them."""

    opens: Tensor  # (V,) the continuation bytes that each piece's lead byte calls for, or 0
    ids: Tensor  # (B,) the ids of the byte pieces
    continues: Tensor  # (B,) True where a byte piece is a continuation byte (0x80 to 0xBF)
    never: Tensor  # (B,) True where a byte piece is one no UTF-8 text holds (0xC0, 0xC1, 0xF5 on)

    @classmethod
    def of(cls, pieces: list[str]) -> "BytePieces":
        """From `pieces`, the vocabulary's pieces in id order."""
        values = torch.tensor([_byte_value(p) for p in pieces])  # -1: no byte piece
        opens = (values >= 0xC2).long() + (values >= 0xE0).long() + (values >= 0xF0).long()
        ids = (values >= 0).nonzero().view(-1)
        byte = values[ids]
        return cls(
            opens=opens.masked_fill(values > 0xF4, 0),
            ids=ids,
            continues=(byte >= 0x80) & (byte < 0xC0),
            never=((byte >= 0xC0) & (byte < 0xC2)) | (byte > 0xF4),
        )

    def to(self, device: torch.device) -> "BytePieces":
        return BytePieces(*(t.to(device) for t in vars(self).values()))


def _byte_value(piece: str) -> int:
    """The byte a byte piece writes ("<0xE1>" -> 225), or -1 for any other piece."""
    byte = BYTE_PIECE.fullmatch(piece)
    return int(byte[1], 16) if byte is not None else -1


class _Trie:
    """One sentence's forms as a trie of characters, each node with the numbers it writes whole
    and those it is on the way to. A node is *bound* where the output must go on to a whole
    number: inside digits, or in words past a hyphen ("▁twenty-" goes on to "five" when the
    source has 25) or past first words that are a number of their own ("▁vingt" goes on to
    "-trois" for 23, unless it writes a source number whole). Every whole node of digits has a
    *punctuation* node: the number followed by separators, after which no digit may come."""

    def __init__(self, numbers: list[set[str]], language: str) -> None:
        self.children: list[dict[str, int]] = [{}]
        self.whole: list[set[int]] = [set()]
        self.reach: list[set[int]] = [set()]
        self.digits = [False]  # a node inside a number written in digits
        self.bound = [False]
        self.punct: dict[int, int] = {}
        for index, forms in enumerate(numbers):
            for form in forms:
                self._add(form, index, language)
        for node in range(len(self.digits)):
            if self.digits[node] and self.whole[node]:
                self.punct[node] = punct = self._node(True, True)
                self.whole[punct], self.reach[punct] = set(self.whole[node]), set(self.whole[node])
                self.children[punct] = dict.fromkeys(SEPARATORS, punct)
            for char in (*SEPARATORS, WORD_START) if self.whole[node] else ():
                if (after := self.children[node].get(char)) is not None:
                    self.whole[after] |= self.whole[node]  # "12," has written 12 too

    def _node(self, digits: bool, bound: bool) -> int:
        self.children.append({})
        self.whole.append(set())
        self.reach.append(set())
        self.digits.append(digits)
        self.bound.append(bound)
        return len(self.digits) - 1

    def _add(self, form: str, index: int, language: str) -> None:
        node, digits, bound = ROOT, form[0] != WORD_START, False
        for at, char in enumerate(form):
            bound = bound or digits or char == "-"
            if char not in self.children[node]:
                self.children[node][char] = self._node(digits, bound)
            node = self.children[node][char]
            self.reach[node].add(index)
            if not bound and form[at + 1 : at + 2] in ("-", WORD_START):
                # "▁vingt" of "▁vingt▁et▁un" is 20, no number of the source unless whole
                bound = is_number_word(form[: at + 1], language)
            self.bound[node] |= bound
        self.whole[node].add(index)

    def follow(self, node: int, text: str) -> tuple[int, int] | None:
        """(the node after the piece `text`, the node whose number it ends or -1), or None where
        the piece is refused at `node`."""
        closer = -1
        for char in text:
            if (child := self.children[node].get(char)) is not None:
                node = child
                continue
            if self.bound[node] and not self.whole[node]:
                return None  # a number left unfinished
            if self.digits[node] and char.isdecimal():
                return None  # a number glued to the next
            if self.digits[node] and char in SEPARATORS:
                node = self.punct[node]
                continue
            if closer < 0 and self.whole[node] and (self.bound[node] or not char.isalpha()):
                closer = node  # the run ends ("▁six" going on with a letter is no number)
            node = self.children[ROOT].get(char, ROOT)
            if node == ROOT and char.isdecimal():
                return None  # no number of the source begins so
        return node, closer


@dataclass
class NumberGuard:
    """The automata of a batch of sentences; see the module docstring for the tables. A row's
    state is a (2 + M,) vector: its node, 1 for each of its sentence's numbers used, and the
    continuation bytes its last character still needs."""

    column: Tensor  # (V,) each vocabulary id's column
    # (C',) the ids of the pieces of columns 2 .. 1 + C': the run pieces and the pieces of the
    # batch's word forms; the others are refused or not as the two columns of other pieces
    ids: Tensor
    next_node: Tensor  # (N, C)
    closer: Tensor  # (N, C)
    whole: Tensor  # (N, M)
    reach: Tensor  # (N, M)
    free: Tensor  # (N,)
    ends: Tensor  # (N,)
    root: Tensor  # (N,) the root node of each node's sentence
    starts: Tensor  # (B, 2 + M) each sentence's first state
    eos: int
    bytes: BytePieces

    @classmethod
    def build(
        cls, numbers: list[list[set[str]]], vocabulary: GuardVocabulary, tgt: str
    ) -> "NumberGuard":
        """The guard of B sentences: `numbers[b]`, the forms of each number sentence b's
        translation into `tgt` may hold (`allowed_numbers`)."""
        tries = [_Trie(forms, tgt) for forms in numbers]
        words = _word_pieces(numbers, vocabulary)
        texts = [*vocabulary.runs.values(), *words]
        ids = [*vocabulary.runs, *(vocabulary.ids[text] for text in words)]
        column = torch.where(vocabulary.inside, OTHER_INSIDE, OTHER_BOUNDARY)
        column[ids] = torch.arange(2, 2 + len(ids))
        width = max((len(forms) for forms in numbers), default=0)
        tables, offset, starts = [], 0, []
        for trie, forms in zip(tries, numbers, strict=True):
            tables.append(_tables(trie, ["", "", *texts], offset, width))
            starts.append([offset] + [0] * len(forms) + [1] * (width - len(forms)) + [0])
            offset += len(trie.digits)
        return cls(
            column,
            torch.tensor(ids, dtype=torch.long),
            *(torch.cat(parts) for parts in zip(*tables, strict=True)),
            torch.tensor(starts, dtype=torch.long).view(len(numbers), 2 + width),
            vocabulary.eos,
            vocabulary.bytes,
        )

    def to(self, device: torch.device) -> "NumberGuard":
        return NumberGuard(
            *(
                t.to(device) if isinstance(t, Tensor | BytePieces) else t
                for t in vars(self).values()
            )
        )

    def _ending(self, closer: Tensor, used: Tensor) -> Tensor:
        """The number (one-hot, (..., M)) that a run ended at `closer` (..., or -1: none) uses:
        the first that its node writes whole and `used` (..., M) has not."""
        can = self.whole[closer.clamp(min=0)] & ~used & (closer >= 0)[..., None]
        return can & (can.cumsum(-1) == 1)

    def mask(self, log_probs: Tensor, states: Tensor, free: Tensor) -> Tensor:
        """Set to -inf, in place, the log-probabilities (R, V) of the pieces that rows in
        `states` (R, 2 + M) may not write next, and lower the EOS's by `EOS_COST` where a source
        number is not yet written; rows where `free` (R,) is True are left alone (a row at its
        maximum length, which must end now)."""
        node, used, owed = states[:, 0], states[:, 1:-1].bool(), states[:, -1]
        columns = slice(2, 2 + len(self.ids))
        after = self.next_node[node, columns]  # (R, C')
        ending = self._ending(self.closer[node, columns], used[:, None, :])  # (R, C', M)
        ahead = self.reach[after.clamp(min=0)] & ~(used[:, None, :] | ending)  # still to write
        allowed = (after >= 0) & (self.free[after.clamp(min=0)] | ahead.any(-1))
        written = (used | self._ending(node, used)).all(-1)  # every number, if the run ends
        ids = torch.cat([self.ids, self.ids.new_tensor([self.eos])])
        mid_character = (owed > 0) & ~free  # (R,) a character in bytes that needs more
        kept = torch.cat([allowed, self.ends[node][:, None]], dim=1) | free[:, None]
        forms = log_probs[:, ids].masked_fill_(~kept | mid_character[:, None], -inf)
        forms[:, -1] -= EOS_COST * ~(written | free)  # the EOS before every number is written
        inside = (self.next_node[node, OTHER_BOUNDARY] < 0) & ~free  # (R,) inside a number
        # a character in bytes is whole before anything else comes: only its continuation
        # bytes while it needs them, and none at any other place
        byte = self.bytes
        bytes_kept = (byte.continues == (owed > 0)[:, None]) & ~byte.never & ~inside[:, None]
        byte_pieces = log_probs[:, byte.ids].masked_fill_(~(bytes_kept | free[:, None]), -inf)
        # every other piece: adding -inf is faster than masked_fill_ over (R, V)
        refused = log_probs.new_zeros(len(node)).masked_fill_(inside | mid_character, -inf)
        log_probs.add_(refused[:, None])
        log_probs[:, ids] = forms
        log_probs[:, byte.ids] = byte_pieces
        return log_probs

    def advance(self, states: Tensor, tokens: Tensor) -> Tensor:
        """The states (R, 2 + M) after rows in `states` (R, 2 + M) write `tokens` (R,)."""
        node, used, owed = states[:, 0], states[:, 1:-1].bool(), states[:, -1]
        column = self.column[tokens]
        used = used | self._ending(self.closer[node, column], used)
        after = self.next_node[node, column]
        node = torch.where(after >= 0, after, self.root[node])
        owed = torch.where(owed > 0, owed - 1, self.bytes.opens[tokens])
        return torch.cat([node[:, None], used.long(), owed[:, None]], dim=1)


def _word_pieces(numbers: list[list[set[str]]], vocabulary: GuardVocabulary) -> list[str]:
    """The vocabulary's pieces, run pieces aside, that write part of a word form of the batch
    (its substrings: "▁twenty", "-", "five" of "▁twenty-five"), each a column of its own."""
    forms = {form for sentence in numbers for each in sentence for form in each}
    words = {form for form in forms if form.startswith(WORD_START)}
    pieces = {w[i:j] for w in words for i in range(len(w)) for j in range(i + 1, len(w) + 1)}
    return sorted({p for p in pieces if p in vocabulary.ids} - set(vocabulary.runs.values()))


def _tables(trie: _Trie, texts: list[str], offset: int, width: int) -> tuple[Tensor, ...]:
    """One sentence's rows of the guard's tables (see the module docstring), its nodes numbered
    from `offset`; `texts`: each column's piece ("" for the two columns of other pieces).

    A piece whose first character does not go on from a node ends the node's run there, if it
    may end, and goes on as from outside; only the pieces that go on are followed one by one."""
    n = len(trie.digits)
    bound = torch.tensor(trie.bound)
    whole, reach = (_one_hot(sets, width) for sets in (trie.whole, trie.reach))
    ends = ~bound | whole.any(1)
    boundary = torch.tensor([not text[:1].isalpha() for text in texts])
    boundary[OTHER_INSIDE] = False
    outside = [
        trie.follow(ROOT, text) or (-1, -1)
        if text[:1] in trie.children[ROOT] or any(char.isdecimal() for char in text)
        else (ROOT, -1)
        for text in texts
    ]
    root_next, root_closer = torch.tensor(outside, dtype=torch.long).unbind(1)
    next_node = torch.where(ends[:, None], root_next, -1)
    nodes = torch.arange(n)[:, None]
    closer = torch.where(whole.any(1)[:, None] & (bound[:, None] | boundary), nodes, root_closer)
    by_first = defaultdict(list)
    for col, text in enumerate(texts[2:], start=2):
        by_first[text[0]].append(col)
    in_runs = {char for char in by_first if char.isdecimal() or char in SEPARATORS}
    followed = [
        (node, col, *(trie.follow(node, texts[col]) or (-1, -1)))
        for node in range(1, n)
        for char in trie.children[node].keys() | (in_runs if trie.digits[node] else set())
        for col in by_first.get(char, ())
    ]
    if followed:
        rows, cols, after, ended = torch.tensor(followed, dtype=torch.long).unbind(1)
        next_node[rows, cols], closer[rows, cols] = after, ended
    shift = (
        next_node.where(next_node < 0, next_node + offset),
        closer.where(closer < 0, closer + offset),
    )
    return *shift, whole, reach, ~bound, ends, torch.full((n,), offset)


def _one_hot(sets: list[set[int]], width: int) -> Tensor:
    """(len(sets), width): True at [i, j] where j is in sets[i]."""
    table = torch.zeros(len(sets), width, dtype=torch.bool)
    pairs = [(row, index) for row, each in enumerate(sets) for index in each]
    if pairs:
        table[tuple(torch.tensor(pairs).T)] = True
    return table
