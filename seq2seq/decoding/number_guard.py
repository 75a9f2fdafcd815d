"""The number guard: the numbers of a translation are the source's numbers, each whole.

A model that writes a number one digit piece at a time can drop or repeat a digit: "876-7714"
becomes "876-714" when it loses count of the two 7s (docs/experiments.md). With the guard, the
search lets a number into the output only as one of the source's numbers, in the form the source
writes it or the form the target language does ("19.99" in English is "19,99" in French:
seq2seq.data.entities.written_in). A number grouped in thousands is one number ("2 500 000" in
French), written as the target groups it ("2,500,000" or "2500000" in English: `number_forms`).
The guard only forbids pieces; the model's probabilities of the pieces it allows are unchanged.

A *run* is a stretch of output pieces that write a number: pieces made of digits and the
separators ". , : -" alone. The guard follows each beam's run with a small automaton whose states
are the prefixes of the allowed numbers, the empty prefix meaning "outside a number":

    ""          any piece may come, but a digit only if some allowed number begins with it
    "876-77"    a run piece only if it extends the prefix ("876-7714" allows "1"); any other
                piece (a word, a space, the EOS) only once the prefix is a whole number
    "876-7714"  a whole number: what follows may end it; a separator is then punctuation
                ("... le 876-7714.")

A piece that begins a word ("▁" first, as "▁1990" in a vocabulary that does not split digits)
ends the run before it, so it needs a whole number there too. A source line without numbers
allows none.

`NumberGuard` holds the automata of a batch of sentences as tables over the vocabulary's run
pieces (C of them: 14 in a vocabulary that splits digits), so that one step of the search masks
and advances every beam at once:

    next_state  (N, C)  the state after each run piece, or -1 where the piece is not allowed
    closed      (N,)    whether a piece that is not a run piece may come (the run is whole)
    root        (N,)    the sentence's "" state, where any other piece leads
"""

import re
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.data.entities import DECIMAL_COMMA, NUMBER, written_in

SEPARATORS = ".,:-"
WORD_START = "▁"  # sentencepiece's mark of a piece that begins a word
RUN_PIECE = re.compile(rf"{WORD_START}?[\d{re.escape(SEPARATORS)}]+")
COMMA_DECIMAL = re.compile(r"(\d+),(\d+)")
# a number grouped in thousands: "1 500" (French, with a space or a no-break space), "1,500"
# (English), "1.500" (German)
SPACE_GROUPED = re.compile(r"(?<![\d.,:-])\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?![\d.,:-])")
COMMA_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+")
DOT_GROUPED = re.compile(r"\d{1,3}(?:\.\d{3})+")


def source_numbers(line: str, src: str) -> list[str]:
    """The numbers of a source `line`; in French or German a number grouped in thousands with
    spaces ("2 500 000") is one number, not three."""
    grouped = SPACE_GROUPED.findall(line) if src in DECIMAL_COMMA else []
    rest = SPACE_GROUPED.sub(" ", line) if grouped else line
    return grouped + NUMBER.findall(rest)


def thousands(number: str, src: str) -> str | None:
    """The digits of `number` where the source language groups them in thousands ("1,500" in
    English, "1 500" or "1.500" in French), else None."""
    grouping = DOT_GROUPED if src in DECIMAL_COMMA else COMMA_GROUPED
    if SPACE_GROUPED.fullmatch(number) or grouping.fullmatch(number):
        return re.sub(r"\D", "", number)
    return None


def number_forms(number: str, src: str, tgt: str) -> set[str]:
    """The forms of a source number that a translation into `tgt` may hold: as the source
    writes it, and as the target language does ("12,22" in French is "12.22" in English). A
    number grouped in thousands may only be written as the target groups it in one run of
    pieces: "1,500" or "1500" in English, "1500" in French (its "1 500" would be two numbers
    to the guard, and its "1,500" means 1.5)."""
    if (digits := thousands(number, src)) is not None:
        return {digits} if tgt in DECIMAL_COMMA else {digits, f"{int(digits):,}"}
    english = number
    if src in DECIMAL_COMMA and (decimal := COMMA_DECIMAL.fullmatch(number)) is not None:
        english = f"{decimal[1]}.{decimal[2]}"
    return {number, written_in(english, tgt)}


def allowed_numbers(line: str, src: str, tgt: str) -> set[str]:
    """Every form of every number in the source `line` that its translation may hold."""
    numbers = source_numbers(line, src)
    return {form for number in numbers for form in number_forms(number, src, tgt)}


def run_pieces(pieces: list[str]) -> dict[int, str]:
    """{id: text} of the vocabulary's run pieces (digits and separators alone, "▁" allowed
    first), from `pieces`, the vocabulary's pieces in id order."""
    return {i: p for i, p in enumerate(pieces) if RUN_PIECE.fullmatch(p) and p != WORD_START}


def _is_whole(prefix: str, numbers: set[str]) -> bool:
    """Whether a run that has written `prefix` may end: it is empty, a whole allowed number, or
    one followed by a separator (punctuation)."""
    return (
        prefix == "" or prefix in numbers or (prefix[-1] in SEPARATORS and prefix[:-1] in numbers)
    )


def _follow(prefix: str, text: str, numbers: set[str], prefixes: set[str]) -> str | None:
    """The prefix after a run piece `text` follows `prefix`, or None where it is not allowed."""
    if text.startswith(WORD_START):
        if not _is_whole(prefix, numbers):
            return None
        prefix, text = "", text[len(WORD_START) :]
    for char in text:
        if prefix == "" and char in SEPARATORS:
            continue  # punctuation outside a number
        if prefix + char in prefixes:
            prefix += char
        elif char in SEPARATORS and _is_whole(prefix, numbers):
            prefix = ""  # punctuation right after a whole number
        else:
            return None
    return prefix


@dataclass
class NumberGuard:
    """The automata of a batch of sentences; see the module docstring for the tables."""

    column: Tensor  # (V,) each vocabulary id's column among the run pieces, or -1
    run_ids: Tensor  # (C,) the run pieces' ids
    next_state: Tensor  # (N, C)
    closed: Tensor  # (N,)
    root: Tensor  # (N,)
    roots: Tensor  # (B,) each sentence's "" state

    @classmethod
    def build(cls, numbers: list[set[str]], runs: dict[int, str], vocab_size: int) -> "NumberGuard":
        """The guard of B sentences: `numbers[b]`, the numbers sentence b's translation may
        hold (`allowed_numbers`); `runs`, the vocabulary's run pieces (`run_pieces`)."""
        run_ids = sorted(runs)
        next_rows, closed, root, roots = [], [], [], []
        for allowed in numbers:
            prefixes = {""} | {n[:i] for n in allowed for i in range(len(n) + 1)}
            states = {p: len(closed) + i for i, p in enumerate(sorted(prefixes))}
            roots.append(states[""])
            for prefix in sorted(prefixes):
                after = [_follow(prefix, runs[i], allowed, prefixes) for i in run_ids]
                next_rows.append([-1 if p is None else states[p] for p in after])
                closed.append(_is_whole(prefix, allowed))
                root.append(states[""])
        column = torch.full((vocab_size,), -1, dtype=torch.long)
        column[run_ids] = torch.arange(len(run_ids))
        return cls(
            column=column,
            run_ids=torch.tensor(run_ids, dtype=torch.long),
            next_state=torch.tensor(next_rows, dtype=torch.long).view(-1, len(run_ids)),
            closed=torch.tensor(closed, dtype=torch.bool),
            root=torch.tensor(root, dtype=torch.long),
            roots=torch.tensor(roots, dtype=torch.long),
        )

    def to(self, device: torch.device) -> "NumberGuard":
        return NumberGuard(*(t.to(device) for t in vars(self).values()))

    def mask(self, log_probs: Tensor, states: Tensor, free: Tensor) -> Tensor:
        """Set to -inf, in place, the log-probabilities (R, V) of the pieces that rows in
        `states` (R,) may not write next; rows where `free` (R,) is True are left alone (a row
        at its maximum length, which must end now)."""
        inside = ~self.closed[states] & ~free  # (R,) rows that must go on with their number
        banned = inside[:, None].expand_as(log_probs).clone()  # (R, V): every piece but a run's
        banned[:, self.run_ids] = (self.next_state[states] < 0) & ~free[:, None]  # (R, C)
        return log_probs.masked_fill_(banned, float("-inf"))

    def advance(self, states: Tensor, tokens: Tensor) -> Tensor:
        """The states (R,) after rows in `states` (R,) write `tokens` (R,)."""
        column = self.column[tokens]
        after_run = self.next_state[states, column.clamp(min=0)]
        return torch.where((column >= 0) & (after_run >= 0), after_run, self.root[states])
