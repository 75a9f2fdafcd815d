"""A CTranslate2 folder (seq2seq export --format ctranslate2): its files, its format and the
checks it passes before CTranslate2 reads anything.

An exported folder holds CTranslate2's files (model.bin, config.json, the vocabulary), our
model.json and sentencepiece model(s), card.json when the model has one, and MANIFEST, the
SHA-256 of every file. seq2seq.decoding.ct2_convert writes it (`write_ctranslate2`);
`check_folder` verifies all of it. Nothing here imports torch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from seq2seq.config import Config
from seq2seq.data.specials import BOS_PIECE, EOS_PIECE, UNK_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.model_folder import (
    CARD,
    MAX_DESCRIPTION_BYTES,
    MAX_TOKENIZER_BYTES,
    MAX_WEIGHTS_BYTES,
    read_description,
)
from seq2seq.decoding.model_result import read_card
from seq2seq.errors import UserError
from seq2seq.files import check_regular_file, parse_json, read_small_file, sha256_file

MANIFEST = "ctranslate2.json"  # {"format": FORMAT, "parameters": N, "sha256": {file: digest}}
FORMAT = "seq2seq-ctranslate2/1"
POSITIONS = 1024  # positions of the stored encoding table: source and output lengths below it
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's
# what the card of a folder exported without the model's number guard says (its number_guard)
GUARD_DROPPED = (
    "not in this folder: CTranslate2 has no number guard (exported with --no-keep-numbers), so "
    "it can change numbers and break a character written in bytes; the scores and limits above "
    "were decoded with the guard"
)


def is_ctranslate2_folder(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def check_folder(folder: Path) -> tuple[Config, Tokenizer, Tokenizer]:
    """Verify a CTranslate2 folder written by `write_ctranslate2` before CTranslate2 reads it:
    MANIFEST names every file but card.json, each a plain file (no link) with its SHA-256;
    nothing else is there; config.json is the one we write, and the vocabulary is the
    tokenizer's. Each file over the cap of its kind (model_folder's: the vocabularies as
    tokenizers, the other JSON files as model.json, model.bin as weights) is refused unread.
    Returns the model's configuration and its source and target tokenizers."""
    manifest = _read_json(folder / MANIFEST)
    digests = manifest.get("sha256") if isinstance(manifest, dict) else None
    if (
        not isinstance(digests, dict)
        or manifest.get("format") != FORMAT
        or not all(isinstance(name, str) and _plain_name(name) for name in digests)
    ):
        raise UserError(f"{folder / MANIFEST}: not a {FORMAT} manifest")
    present = {path.name for path in folder.iterdir()}
    unexpected = present - set(digests) - {CARD, MANIFEST}
    if unexpected or not set(digests) <= present:
        what = f"unexpected {sorted(unexpected)}" if unexpected else "files missing"
        raise UserError(f"{folder}: its files do not match {MANIFEST} ({what})")
    for name, digest in digests.items():
        path = folder / name
        if path.is_symlink() or not path.is_file():
            raise UserError(f"{path}: not a plain file")
        check_regular_file(path, MAX_WEIGHTS_BYTES)
        if sha256_file(path) != digest:
            raise UserError(f"{path}: damaged (its SHA-256 differs from {MANIFEST})")
    description = read_description(folder)
    src, tgt = description.src_tokenizer, description.tgt_tokenizer
    src_pieces, tgt_pieces = src.vocabulary(), tgt.vocabulary()
    vocabularies = {"shared_vocabulary.json": src_pieces}
    if src_pieces != tgt_pieces:
        vocabularies = {"source_vocabulary.json": src_pieces, "target_vocabulary.json": tgt_pieces}
    for name, pieces in vocabularies.items():
        if _read_json(folder / name, MAX_TOKENIZER_BYTES) != pieces:
            raise UserError(f"{folder / name}: not the vocabulary of the sentencepiece model")
    if _read_json(folder / "config.json") != EXPECTED_CONFIG:
        raise UserError(f"{folder / 'config.json'}: not a configuration seq2seq export writes")
    return description.config, src, tgt


def folder_parameters(folder: Path) -> int | None:
    """The model's number of parameters, which MANIFEST records (None in a folder written
    before it did)."""
    parameters = _read_json(folder / MANIFEST).get("parameters")
    return parameters if isinstance(parameters, int) else None


EXPECTED_CONFIG = {
    "add_source_bos": False,
    "add_source_eos": False,
    "bos_token": BOS_PIECE,
    "decoder_start_token": BOS_PIECE,
    "eos_token": EOS_PIECE,
    "layer_norm_epsilon": LAYER_NORM_EPSILON,
    "multi_query_attention": False,
    "unk_token": UNK_PIECE,
}


def write_card(card: Path, to: Path, guard_dropped: bool) -> None:
    """Copy the model card `card` to `to`; for a model exported without the number guard it
    decodes with, the card says so: keep_numbers false, and number_guard (GUARD_DROPPED)."""
    if not guard_dropped:
        shutil.copyfile(card, to)
        return
    values = read_card(card) | {"keep_numbers": False, "number_guard": GUARD_DROPPED}
    to.write_text(json.dumps(values, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _plain_name(name: str) -> bool:
    """A file name in the folder itself: no folder part, not hidden."""
    return name == Path(name).name and not name.startswith(".")


def _read_json(path: Path, max_bytes: int = MAX_DESCRIPTION_BYTES) -> Any:
    data = read_small_file(path, max_bytes)
    try:
        return parse_json(data)
    except ValueError as err:
        raise UserError(f"{path}: unreadable ({err})") from None
