"""An alignment head (Garg et al. 2019): the teacher's links (eflomal, as piece links stored with
a prepared corpus)."""

from pathlib import Path

import numpy as np
import pytest

from seq2seq.data.align_teacher import eflomal_links
from seq2seq.data.batching import Example, collate
from seq2seq.data.corpora import UserFiles
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.data.word_links import piece_links
from seq2seq.errors import UserError

NO_FILES = {
    f"{split}_{kind}": None
    for split in ("train", "valid", "test")
    for kind in ["src", "tgt", "tsv"]
}


def test_eflomal_links_the_words_that_always_go_together() -> None:
    # every English word has one German word, the same in every sentence, in the same place
    words = {"red": "rot", "dog": "hund", "cat": "katze", "big": "groß", "old": "alt"}
    rng = np.random.default_rng(0)
    pairs = [list(rng.permutation(list(words))[: rng.integers(2, 5)]) for _ in range(300)]
    src = [" ".join(pair) + "\n" for pair in pairs]
    tgt = [" ".join(words[word] for word in pair) + "\n" for pair in pairs]
    links = eflomal_links(src, tgt)
    right = sum(
        found == {(i, i) for i in range(len(pair))}
        for found, pair in zip(links, pairs, strict=True)
    )
    assert right >= 290


def test_word_links_become_links_of_every_piece_of_both_words() -> None:
    # source words: pieces 0 1 | 2 | EOS; target words: piece 0 | pieces 1 2 | EOS
    src_words, tgt_words = [0, 0, 1], [0, 1, 1]
    assert piece_links({(0, 1), (1, 0)}, src_words, tgt_words) == [
        (0, 1),
        (0, 2),
        (1, 1),
        (1, 2),
        (2, 0),
    ]
    assert piece_links(set(), src_words, tgt_words) == []


def batch_with_links():
    """Two pairs of the tiny vocabulary, each target piece linked to the source piece at its
    place read backwards (the reversal task's alignment)."""
    src = [np.array([5, 6, 7, 3], np.int32), np.array([8, 9, 3], np.int32)]
    tgt = [np.array([2, 7, 6, 5, 3], np.int32), np.array([2, 9, 8, 3], np.int32)]
    links = [np.array([[2, 0], [1, 1], [0, 2]]), np.array([[1, 0], [0, 1]])]

    return collate(
        [Example(i, s, t, k) for i, (s, t, k) in enumerate(zip(src, tgt, links, strict=True))]
    )


def test_a_batch_carries_its_links_by_row_and_target_piece() -> None:
    batch = batch_with_links()
    assert batch.links.tolist() == [[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1], [1, 1, 0]]


def test_prepare_stores_the_teachers_piece_links(small_corpus: Path, tmp_path: Path) -> None:
    files = UserFiles.from_options("en", "de", str(small_corpus), NO_FILES)
    out = prepare(
        "files", "en", "de", tmp_path / "p", vocab_size=40, byte_fallback=False, files=files,
        align_teacher="eflomal",
    )  # fmt: skip
    data = PreparedData.load(out)
    record = data.manifest["align_teacher"]
    assert data.manifest["settings"]["align_teacher"] == "eflomal"
    assert record["combine"] == "intersection" and record["aligner"].startswith("eflomal ")
    assert {"train.links", "train.links.offsets"} <= set(data.manifest["files"])
    dataset = data.dataset("train", links=True)
    examples = [dataset[i] for i in range(len(dataset))]
    assert sum(len(example.links) for example in examples) == record["links"]
    for example in examples:  # every link inside its pair's pieces (no EOS, no BOS)
        if len(example.links):
            assert example.links[:, 0].max() < len(example.src) - 1
            assert example.links[:, 1].max() < len(example.tgt) - 2
    with pytest.raises(UserError, match="has no teacher links; prepare it again"):
        PreparedData.load(
            prepare("files", "en", "de", tmp_path / "q", vocab_size=40, byte_fallback=False,
                    files=files)
        ).dataset("train", links=True)  # fmt: skip
