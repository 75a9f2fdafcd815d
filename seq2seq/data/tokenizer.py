"""Subword tokenisation: a small wrapper over a trained sentencepiece model.

Training settings that matter for translation:

- the special ids come from `seq2seq.data.specials` (pad 0, unk 1, bos 2, eos 3) in every model;
- `character_coverage=1.0`: every character seen in training gets a piece (no rare-char UNKs);
- normalisation rule `identity`: sentencepiece leaves the text alone; `encode` applies this
  project's own normalisation (`seq2seq.data.clean.normalize`: NFC, single spaces), so
  `decode(encode([s])) == [s]` for every normalised line made of known characters;
- `hard_vocab_limit=False`: a corpus too small for the requested size gets a smaller vocabulary
  instead of an error;
- `split_digits` (on by default): every digit is a piece of its own, so "48213" is five pieces,
  never a piece "48" the model could swap for "42";
- `byte_fallback` (on by default): 256 pieces `<0x00>` ... `<0xFF>`, right after the special
  ids, stand for the UTF-8 bytes of a character the vocabulary lacks (an emoji, a CJK or
  Cyrillic letter never seen in training), so no input becomes `<unk>`; `decode` turns those
  byte pieces back into the character (a byte sequence that is not UTF-8 becomes U+FFFD);
- one training thread and a fixed sampling seed, so the same text gives the same model.
"""

import hashlib
import io
import re
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from seq2seq.data.clean import normalize, normalize_lines
from seq2seq.data.specials import (
    BOS_ID,
    BOS_PIECE,
    EOS_ID,
    EOS_PIECE,
    PAD_ID,
    PAD_PIECE,
    UNK_ID,
    UNK_PIECE,
)
from seq2seq.errors import UserError

MODEL_TYPES = ("unigram", "bpe")
SETTINGS = {
    "character_coverage": 1.0,
    "normalization_rule_name": "identity",
    "hard_vocab_limit": False,
    "shuffle_input_sentence": True,  # train on a random sample of `sample` sentences
    "num_threads": 1,
}
SEED = 1
BYTE_PIECES = 256  # byte fallback's pieces, one per byte value, right after the special ids
# The smallest vocabulary with byte fallback: the special pieces, the byte pieces and one more.
MIN_BYTE_FALLBACK_VOCAB = len((PAD_ID, UNK_ID, BOS_ID, EOS_ID)) + BYTE_PIECES + 1
SAMPLE = 1_000_000  # sentences sentencepiece trains on (a random sample of larger corpora;
# its memory grows with the sample: about 0.86 GB peak for 1M sentences, 1.6 GB for 2M)
SMALL_CALL_LINES = 256  # fewer lines are encoded and decoded on one thread (threads_for)


def threads_for(lines: int) -> int:
    """sentencepiece's threads for a call of `lines` lines: one below SMALL_CALL_LINES, where
    starting its threads (one per core, at every call) costs more than they save; else one
    per core (-1)."""
    return 1 if lines < SMALL_CALL_LINES else -1


class Tokenizer:
    """A sentencepiece model: text <-> subword ids.

    Built from the bytes of a `.model` file: `Tokenizer.load(path)` reads one, and a checkpoint
    stores `model_bytes` so that it carries its own tokenizers (`Tokenizer.from_bytes`).
    """

    def __init__(self, model_bytes: bytes):
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        except RuntimeError as err:
            raise UserError(f"not a sentencepiece model: {err}") from None
        self.model_bytes = model_bytes
        self.sha256 = hashlib.sha256(model_bytes).hexdigest()

    @classmethod
    def from_bytes(cls, model_bytes: bytes) -> "Tokenizer":
        return cls(model_bytes)

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        try:
            return cls(Path(path).read_bytes())
        except (OSError, UserError) as err:
            raise UserError(f"{path}: cannot load the sentencepiece model: {err}") from None

    @classmethod
    def train(
        cls,
        lines: Iterable[str],
        path: Path,
        vocab_size: int,
        model_type: str = "unigram",
        sample: int = SAMPLE,
        split_digits: bool = True,
        byte_fallback: bool = True,
    ) -> "Tokenizer":
        """Train on a random sample of `sample` sentences of `lines` (all of them when fewer;
        memory grows with the sample, not with the corpus), with digit splitting and byte
        fallback (see the module docstring) unless turned off. Writes the model to `path` and its
        pieces and scores, one a line, to `path` with the suffix `.vocab`. The model file depends
        on nothing but the text and the settings (no paths inside), so the same text gives the
        same bytes."""
        spm.set_random_generator_seed(SEED)
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                pad_piece=PAD_PIECE,
                unk_piece=UNK_PIECE,
                bos_piece=BOS_PIECE,
                eos_piece=EOS_PIECE,
                minloglevel=2,
                input_sentence_size=sample,
                split_digits=split_digits,
                byte_fallback=byte_fallback,
                **SETTINGS,
            )
        except RuntimeError as err:
            too_small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(err))
            if too_small:
                bytes_too = f", plus {BYTE_PIECES} for byte fallback" if byte_fallback else ""
                raise UserError(
                    f"--vocab-size {vocab_size} is too small: the training text needs at least "
                    f"{too_small.group(2)} pieces (one per distinct character, plus 4 special"
                    f"{bytes_too})"
                ) from None
            raise UserError(f"sentencepiece training failed: {err}") from None
        tokenizer = cls(model.getvalue())
        path.write_bytes(tokenizer.model_bytes)
        sp = tokenizer._sp
        scores = (f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n" for i in range(sp.get_piece_size()))
        path.with_suffix(".vocab").write_text("".join(scores), encoding="utf-8")
        return tokenizer

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, lines: list[str], normalized: bool = False) -> list[list[int]]:
        """Subword ids of each line (no BOS/EOS; `seq2seq.data.batching` adds them).

        Lines are first normalised as the prepared text was (`seq2seq.data.clean.normalize`), so raw
        input, e.g. typed in decomposed Unicode, is tokenised like the training data; lines
        that already are (`normalized=True`, the prepared text) skip that step.
        """
        lines = lines if normalized else normalize_lines(lines)
        return self._sp.encode(lines, out_type=int, num_threads=threads_for(len(lines)))

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence; pad/bos/eos ids are dropped, byte pieces become the
        characters they spell."""
        return self._sp.decode(ids, num_threads=threads_for(len(ids)))

    def pieces(self, line: str) -> list[str]:
        """The subword pieces of one (normalised) line, e.g. ['▁Zwei', '▁junge', '▁Männer', '.']."""
        return self._sp.encode(normalize(line), out_type=str)

    def id_to_piece(self, piece_id: int) -> str:
        return self._sp.id_to_piece(piece_id)

    def vocabulary(self) -> list[str]:
        """Every piece, in id order."""
        return [self._sp.id_to_piece(i) for i in range(self.vocab_size)]
