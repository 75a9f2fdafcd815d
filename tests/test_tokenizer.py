"""The sentencepiece wrapper: exact round trips, special ids, determinism, errors."""

import gzip
import random
import unicodedata
from pathlib import Path

import pytest

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
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError

SMALL_TEXT = [
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "Two young, White males are outside near many bushes.",
    "Ein Mann schläft in einem grünen Raum auf einem Sofa.",
    "A man sleeping in a green room on a couch.",
] * 50


def _nfc_lines(path: Path) -> list[str]:
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    return [unicodedata.normalize("NFC", line) for line in text.split("\n")[:-1]]


@pytest.mark.slow  # prepares a whole corpus
@pytest.mark.parametrize("lang", ["en", "de"])
def test_round_trip_every_multi30k_valid_sentence(
    multi30k_en_de: Path, shared_data: Path, lang: str
) -> None:
    tokenizer = Tokenizer.load(multi30k_en_de / "spm.model")
    lines = _nfc_lines(shared_data / "multi30k" / f"val.{lang}.gz")
    assert len(lines) == 1014
    ids = tokenizer.encode(lines)
    assert all(UNK_ID not in row and row for row in ids)
    assert tokenizer.decode(ids) == lines


@pytest.mark.slow  # prepares a whole corpus
def test_special_pieces_and_ids(multi30k_en_de: Path) -> None:
    tokenizer = Tokenizer.load(multi30k_en_de / "spm.model")
    assert tokenizer.vocab_size == 8000
    specials = {PAD_ID: PAD_PIECE, UNK_ID: UNK_PIECE, BOS_ID: BOS_PIECE, EOS_ID: EOS_PIECE}
    assert {i: tokenizer.id_to_piece(i) for i in specials} == specials
    ids = tokenizer.encode(["Ein Hund läuft."])[0]
    assert not {PAD_ID, BOS_ID, EOS_ID} & set(ids)
    assert tokenizer.decode([[BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]]) == ["Ein Hund läuft."]
    pieces = tokenizer.pieces("Ein Hund läuft.")
    assert "".join(pieces).replace("▁", " ").strip() == "Ein Hund läuft."
    assert pieces == [tokenizer.id_to_piece(i) for i in ids]
    # Raw input is normalised like the prepared text: decomposed Unicode, tabs, extra spaces.
    assert tokenizer.encode(["  Ein\tHund  la\u0308uft. "]) == [ids]


def test_training_is_deterministic_and_bytes_reload(tmp_path: Path) -> None:
    first = Tokenizer.train(
        SMALL_TEXT, tmp_path / "a.model", vocab_size=60, byte_fallback=False, model_type="unigram"
    )
    second = Tokenizer.train(
        SMALL_TEXT, tmp_path / "b.model", vocab_size=60, byte_fallback=False, model_type="unigram"
    )
    assert first.sha256 == second.sha256
    assert (tmp_path / "a.model").read_bytes() == first.model_bytes
    vocab = (tmp_path / "a.vocab").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == first.vocab_size
    assert vocab[:4] == ["<pad>\t0", "<unk>\t0", "<s>\t0", "</s>\t0"]
    copy = Tokenizer.from_bytes(first.model_bytes)
    assert copy.encode(SMALL_TEXT[:4]) == first.encode(SMALL_TEXT[:4])
    assert copy.decode(copy.encode(SMALL_TEXT[:4])) == SMALL_TEXT[:4]
    bpe = Tokenizer.train(
        SMALL_TEXT, tmp_path / "c.model", vocab_size=60, byte_fallback=False, model_type="bpe"
    )
    assert bpe.sha256 != first.sha256 and bpe.vocab_size <= 60


def test_vocabulary_too_small_for_the_characters(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--vocab-size 20 is too small: .* at least \d+ pieces"):
        Tokenizer.train(SMALL_TEXT, tmp_path / "spm.model", vocab_size=20, byte_fallback=False)


def test_damaged_model_file(tmp_path: Path) -> None:
    (tmp_path / "spm.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match=r"spm\.model: cannot load the sentencepiece model"):
        Tokenizer.load(tmp_path / "spm.model")
    with pytest.raises(UserError, match=r"missing\.model: cannot load"):
        Tokenizer.load(tmp_path / "missing.model")


_RANDOM = random.Random(0)
# Prices and years: 2015 in half the lines, so that a tokenizer free to merge digits does.
NUMBERS_TEXT = SMALL_TEXT + [
    f"Sie kamen {year} an und zahlten {_RANDOM.randint(1, 99)}.99 Euro."
    for year in [2015] * 100 + [_RANDOM.randint(1000, 9999) for _ in range(100)]
]
# Characters the training text lacks: emoji, CJK, Cyrillic, Greek, a combining mark no
# precomposed character absorbs (q + dot above), mathematical letters, a zero-width joiner.
UNSEEN = [
    "Ein Hund 🐕 läuft 😀.",
    "日本語の文です。",
    "Привет, мир!",
    "Καλημέρα",
    "q\u0307 x\u0323\u0307",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ℵ₀ ½ ™",
    "👩\u200d💻 arbeitet.",
]


def test_byte_fallback_leaves_no_unknown_piece(tmp_path: Path) -> None:
    """With byte fallback, a character the vocabulary lacks is spelled as its UTF-8 bytes, one
    piece each, right after the special ids, and decoding spells it back; without, it is <unk>."""
    tokenizer = Tokenizer.train(SMALL_TEXT, tmp_path / "bytes.model", vocab_size=300)
    assert [tokenizer.id_to_piece(i) for i in (0, 1, 2, 3)] == [
        PAD_PIECE,
        UNK_PIECE,
        BOS_PIECE,
        EOS_PIECE,
    ]
    assert [tokenizer.id_to_piece(i) for i in (4, 5, 259)] == ["<0x00>", "<0x01>", "<0xFF>"]
    ids = tokenizer.encode(UNSEEN)
    assert all(UNK_ID not in row for row in ids)
    assert tokenizer.decode(ids) == [unicodedata.normalize("NFC", line) for line in UNSEEN]
    assert tokenizer.pieces("😀") == ["▁", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert tokenizer.decode([[4 + 0xF0, 4 + 0x9F]]) == ["\ufffd\ufffd"]  # a cut-off emoji

    plain = Tokenizer.train(
        SMALL_TEXT, tmp_path / "plain.model", vocab_size=60, byte_fallback=False
    )
    assert all(UNK_ID in row for row in plain.encode(UNSEEN))


def test_split_digits_makes_every_digit_a_piece(tmp_path: Path) -> None:
    split = Tokenizer.train(NUMBERS_TEXT, tmp_path / "split.model", vocab_size=400)
    line = "They paid 19.99 euros in 2015, and 48213 in 2016."
    ids = split.encode([line])[0]
    texts = split.decode([[piece_id] for piece_id in ids])  # a byte piece: its character
    assert all(sum(char.isdigit() for char in text) <= 1 for text in texts)
    assert "".join(char for text in texts for char in text if char.isdigit()) == (
        "19992015482132016"
    )
    assert split.decode(split.encode([line])) == [line]

    whole = Tokenizer.train(
        NUMBERS_TEXT, tmp_path / "whole.model", vocab_size=400, split_digits=False
    )
    assert {"▁20", "15", "99"} <= set(whole.pieces(line))  # without, digits merge


def test_byte_fallback_needs_room_in_the_vocabulary(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--vocab-size 100 is too small: .* plus 256 for byte"):
        Tokenizer.train(SMALL_TEXT, tmp_path / "spm.model", vocab_size=100)
