"""Text normalisation (every split) and filtering of the training pairs (the train split only).

Every line of every split is normalised the same way: Unicode NFC; tabs and line-break
characters inside a line become spaces; runs of spaces become one; no outer whitespace. This is
what the sentencepiece models see and what they give back, so decoding a training, validation
or test line's ids reproduces it exactly.

Only the training pairs are filtered, in the style of Moses' `clean-corpus-n.perl` (used by
fairseq's recipes): a pair is dropped when a side is empty, when a side has more than
`max_words` whitespace-separated words, or when one side has more than `max_ratio` times as many
words as the other. Validation and test pairs are never dropped: they are what the model is
scored on.
"""

import re
import unicodedata
from dataclasses import asdict, dataclass

MAX_WORDS = 250
MAX_RATIO = 9.0

_BREAKS = re.compile("[\t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_SPACES = re.compile(" {2,}")


def normalize(line: str) -> str:
    """NFC, tabs and line breaks to spaces, runs of spaces to one, stripped."""
    line = unicodedata.normalize("NFC", line)
    return _SPACES.sub(" ", _BREAKS.sub(" ", line)).strip()


def normalize_lines(lines: list[str]) -> list[str]:
    return [normalize(line) for line in lines]


@dataclass
class CleanReport:
    """How many training pairs were read, kept, and dropped for each reason.

    A pair is counted once, under the first reason that applies, in this order.
    `keep(src, tgt)` decides for one pair and counts it.
    """

    max_words: int = MAX_WORDS
    max_ratio: float = MAX_RATIO
    pairs: int = 0
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    length_ratio: int = 0

    def keep(self, src: str, tgt: str) -> bool:
        """Whether a normalised training pair is kept; counts it under its reason."""
        self.pairs += 1
        src_words, tgt_words = len(src.split()), len(tgt.split())
        if src_words == 0 or tgt_words == 0:
            self.empty += 1
        elif max(src_words, tgt_words) > self.max_words:
            self.too_long += 1
        elif max(src_words, tgt_words) > self.max_ratio * min(src_words, tgt_words):
            self.length_ratio += 1
        else:
            self.kept += 1
            return True
        return False

    def to_dict(self) -> dict[str, int | float]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"kept {self.kept} of {self.pairs} training pairs; dropped {self.empty} with an "
            f"empty side, {self.too_long} over {self.max_words} words, {self.length_ratio} "
            f"with a length ratio over {self.max_ratio:g}"
        )
