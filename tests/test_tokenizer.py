"""The sentencepiece wrapper: exact round trips, special ids, determinism, errors."""

import gzip
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
    first = Tokenizer.train(SMALL_TEXT, tmp_path / "a.model", vocab_size=60, model_type="unigram")
    second = Tokenizer.train(SMALL_TEXT, tmp_path / "b.model", vocab_size=60, model_type="unigram")
    assert first.sha256 == second.sha256
    assert (tmp_path / "a.model").read_bytes() == first.model_bytes
    vocab = (tmp_path / "a.vocab").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == first.vocab_size
    assert vocab[:4] == ["<pad>\t0", "<unk>\t0", "<s>\t0", "</s>\t0"]
    copy = Tokenizer.from_bytes(first.model_bytes)
    assert copy.encode(SMALL_TEXT[:4]) == first.encode(SMALL_TEXT[:4])
    assert copy.decode(copy.encode(SMALL_TEXT[:4])) == SMALL_TEXT[:4]
    bpe = Tokenizer.train(SMALL_TEXT, tmp_path / "c.model", vocab_size=60, model_type="bpe")
    assert bpe.sha256 != first.sha256 and bpe.vocab_size <= 60


def test_vocabulary_too_small_for_the_characters(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--vocab-size 20 is too small: .* at least \d+ pieces"):
        Tokenizer.train(SMALL_TEXT, tmp_path / "spm.model", vocab_size=20)


def test_damaged_model_file(tmp_path: Path) -> None:
    (tmp_path / "spm.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match=r"spm\.model: cannot load the sentencepiece model"):
        Tokenizer.load(tmp_path / "spm.model")
    with pytest.raises(UserError, match=r"missing\.model: cannot load"):
        Tokenizer.load(tmp_path / "missing.model")
