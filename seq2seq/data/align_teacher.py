"""The alignment teacher: word alignments of a prepared training split, stored as piece links
beside it (`seq2seq prepare --align-teacher eflomal`), for training an alignment head
(train.alignment_weight; Garg et al. 2019).

The words are those `seq2seq align` reads (seq2seq.data.word_links.word_of_piece: a piece
starting with "▁" starts a word), lowercased. eflomal (Östling and Tiedemann 2016; PyPI
`eflomal`, GPLv3, the extra `seq2seq[align]`) aligns them in both directions, and the two are
combined by their intersection, the heuristic with the lowest AER on the Hansards gold
(benchmarks/alignment_eflomal.py: 10.1 inside Tatoeba). Each link (source word i, target word
j) becomes a link of every piece of j to every piece of i. Every training pair is aligned,
copy-teaching's and concatenated pairs too; a target word left unaligned gives its pieces no
link. eflomal samples at random, with no seed: two preparations give links that differ a
little.

The links are written as `train.links` (uint16, a source piece then a target piece per link,
counted from 0 without the special tokens) and `train.links.offsets` (int64, where each pair's
links start; lines + 1), named in the manifest with every other file.
"""

import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np

from seq2seq.data.manifest import LINKS_DTYPE, OFFSETS_DTYPE, TEACHER_LINKS, array_files
from seq2seq.data.specials import EOS_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.data.word_links import COMBINATIONS, WORD_START, Link, piece_links, word_of_piece
from seq2seq.errors import UserError

TEACHERS = ("eflomal",)
COMBINE = "intersection"


def check_teacher(teacher: str) -> None:
    """A UserError unless `teacher` is one of TEACHERS and installed."""
    if teacher not in TEACHERS:
        raise UserError(f"--align-teacher {teacher}: one of {', '.join(TEACHERS)}")
    try:
        import eflomal  # noqa: F401
    except ImportError:
        raise UserError(
            f"--align-teacher {teacher}: eflomal is not installed; pip install 'seq2seq[align]'"
        ) from None


def teacher_words(tokenizer: Tokenizer, ids: np.ndarray) -> tuple[str, list[int]]:
    """The words of the pieces `ids` (no EOS) as one lowercased line, and each piece's word."""
    words, index = word_of_piece([tokenizer.id_to_piece(int(i)) for i in ids] + [EOS_PIECE])
    return " ".join(word.lower() or WORD_START for word in words[:-1]), index[:-1]


def eflomal_links(src_lines: list[str], tgt_lines: list[str]) -> list[set[Link]]:
    """eflomal's word links of each pair of lines, both directions combined by COMBINE."""
    import eflomal

    with tempfile.TemporaryDirectory() as folder:
        forward, reverse = Path(folder, "forward"), Path(folder, "reverse")
        eflomal.Aligner().align(src_lines, tgt_lines, str(forward), str(reverse))
        both = [read_pharaoh(path) for path in (forward, reverse)]
    return [COMBINATIONS[COMBINE](f, r) for f, r in zip(*both, strict=True)]


def read_pharaoh(path: Path) -> list[set[Link]]:
    """The links of each Pharaoh line (`i-j`, from 0) of `path`."""
    return [
        {(int(i), int(j)) for i, _, j in (link.partition("-") for link in line.split())}
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def split_ids(folder: Path, name: str, dtype: str) -> list[np.ndarray]:
    """The token ids of every line of the text file `name` of a prepared folder."""
    ids_file, offsets_file = array_files(name)
    ids = np.fromfile(folder / ids_file, dtype=dtype)
    offsets = np.fromfile(folder / offsets_file, dtype=OFFSETS_DTYPE)
    return np.split(ids, offsets[1:-1])


def write_teacher_links(
    folder: Path, langs: tuple[str, str], tokenizers: tuple[Tokenizer, Tokenizer], dtype: str
) -> dict:
    """Align the training split of the prepared `folder` (its token arrays, of `dtype`) and
    write its piece links (the module docstring); returns the manifest's record of them."""
    sides = [
        [teacher_words(tokenizer, ids) for ids in split_ids(folder, f"train.{lang}", dtype)]
        for lang, tokenizer in zip(langs, tokenizers, strict=True)
    ]
    print(f"aligning {len(sides[0]):,} training pairs with eflomal ({COMBINE} of both ways)")
    word_links = eflomal_links(*([line for line, _ in side] for side in sides))
    pairs = [
        piece_links(links, src[1], tgt[1])
        for links, src, tgt in zip(word_links, *sides, strict=True)
    ]
    counts = np.fromiter(map(len, pairs), dtype=OFFSETS_DTYPE, count=len(pairs))
    flat = np.array([piece for links in pairs for link in links for piece in link], LINKS_DTYPE)
    links_file, offsets_file = TEACHER_LINKS
    flat.tofile(folder / links_file)
    np.concatenate([[0], np.cumsum(counts)]).astype(OFFSETS_DTYPE).tofile(folder / offsets_file)
    return {
        "aligner": f"eflomal {version('eflomal')}",
        "combine": COMBINE,
        "links": int(counts.sum()),
        "pairs_with_links": int((counts > 0).sum()),
    }
