"""The corpora this project knows by name, and the user's own corpus (`files`).

Each named corpus says where its files live upstream, what a mirror holds (`<mirror>/<folder>/`),
their SHA256 checksums, its languages and licence, and how to read its files into aligned
`train` / `valid` / `test` line pairs. Fetching the files is `seq2seq.data.download`'s job; cleaning
and tokenising them is done later by `seq2seq.data.prepare`.

    multi30k  Multi30k task 1 (Flickr30k image descriptions): en, de, fr, cs; 29000/1014/1000 pairs
    tatoeba   Tatoeba English-French pairs (manythings.org, d2l version), split here by a hash
              (`SPLIT_RULES`)
    files     your own parallel text: two aligned files or one TSV per split
"""

import hashlib
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import ClassVar

from seq2seq.errors import UserError
from seq2seq.files import iter_lines

SPLITS = ("train", "valid", "test")
# How a corpus with no split of its own (Tatoeba) is split (`Tatoeba.pairs`): by both sides, the
# default, or by the English side, the rule the shipped Tatoeba models were trained on and are
# scored on. A prepared folder or a saved configuration that names no rule used the older one.
BOTH_SIDES, ENGLISH_SIDE = "both-sides", "english-side"
SPLIT_RULES = (BOTH_SIDES, ENGLISH_SIDE)
OLDER_SPLIT_RULE = ENGLISH_SIDE
USER_CORPUS = "files"

Pairs = tuple[list[str], list[str]]  # (source lines, target lines), aligned line by line
Pair = tuple[str, str, str]  # (split, source line, target line)


@dataclass(frozen=True)
class RemoteFile:
    """One file of a named corpus.

    `name` is the file's name in a mirror (`<mirror>/<corpus folder>/<name>`) and in the download
    cache, and `sha256` its checksum. Upstream publishes it at `url`; when that is a zip archive,
    `zip_member` is the member holding the file's text and `member_sha256` the checksum of the
    member's uncompressed bytes (the archive itself is not byte-stable, its text is).
    """

    name: str
    sha256: str
    url: str
    zip_member: str | None = None
    member_sha256: str | None = None


def _parse_sha256sums(text: str) -> dict[str, str]:
    """File name -> SHA256 from `sha256sum` output ("<hex>  <name>" per line)."""
    return {name: digest for digest, name in (line.split() for line in text.strip().splitlines())}


class Corpus(ABC):
    """A corpus known by name: its files, where they come from, and how to read them."""

    name: str
    languages: tuple[str, ...]
    base_url: str  # upstream location
    mirror_folder: str  # folder in a mirror and in the download cache
    licence: str  # terms of use and attribution, one line
    domain: str  # what text it holds, so what its models translate well, and its size; one line

    def check_pair(self, src: str, tgt: str) -> None:
        """Raise `UserError` unless `src` and `tgt` are two different languages of the corpus."""
        for option, lang in (("--src", src), ("--tgt", tgt)):
            if lang not in self.languages:
                raise UserError(
                    f"{option} {lang}: corpus {self.name} has no language {lang!r} "
                    f"(it has {', '.join(self.languages)})"
                )
        if src == tgt:
            raise UserError(f"--src and --tgt are both {src!r}; give two different languages")

    @abstractmethod
    def remote_files(self, src: str, tgt: str) -> list[RemoteFile]:
        """The files needed for the language pair."""

    @abstractmethod
    def pairs(
        self, src: str, tgt: str, paths: Mapping[str, Path], split_rule: str = BOTH_SIDES
    ) -> Iterator[Pair]:
        """The raw line pairs of every split, one at a time, from local copies
        (`RemoteFile.name` -> path); a corpus split here splits them by `split_rule`."""


class Multi30k(Corpus):
    """Multi30k task 1: one gzip file per (split, language), all line-aligned."""

    name = "multi30k"
    languages = ("en", "de", "fr", "cs")
    base_url = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
    mirror_folder = "multi30k"
    domain = "Flickr image captions (Multi30k: 29,000 training pairs describing photos)"
    licence = (
        "Multi30K (derived from Flickr30K): non-commercial research and educational use only, "
        "images under the Flickr Terms of Use; cite Elliott et al. (2016), "
        "'Multi30K: Multilingual English-German Image Descriptions'"
    )
    split_prefixes: ClassVar = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    # Upstream's files, byte for byte (the format of `sha256sum`, as in the mirror's SHA256SUMS).
    sha256: ClassVar = _parse_sha256sums(
        """
        200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1  test_2016_flickr.cs.gz
        9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8  test_2016_flickr.de.gz
        611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9  test_2016_flickr.en.gz
        6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90  test_2016_flickr.fr.gz
        a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077  train.cs.gz
        726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6  train.de.gz
        d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f  train.en.gz
        622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c  train.fr.gz
        b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc  val.cs.gz
        f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a  val.de.gz
        14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28  val.en.gz
        ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9  val.fr.gz
        """
    )

    def _file_name(self, split: str, lang: str) -> str:
        return f"{self.split_prefixes[split]}.{lang}.gz"

    def remote_files(self, src: str, tgt: str) -> list[RemoteFile]:
        names = [self._file_name(split, lang) for split in SPLITS for lang in (src, tgt)]
        return [RemoteFile(name, self.sha256[name], self.base_url + name) for name in names]

    def pairs(
        self, src: str, tgt: str, paths: Mapping[str, Path], split_rule: str = BOTH_SIDES
    ) -> Iterator[Pair]:
        for split in SPLITS:
            src_path, tgt_path = (paths[self._file_name(split, lang)] for lang in (src, tgt))
            for src_line, tgt_line in _iter_aligned(split, src_path, tgt_path):
                yield split, src_line, tgt_line


class Tatoeba(Corpus):
    """Tatoeba English-French pairs, one `English<TAB>French` file with no official split.

    The split is a pure function of the text, so it is the same on every machine. By both sides
    (`BOTH_SIDES`, the default), pairs that share an English or a French sentence, exactly or
    once lowercased and without punctuation ("Va !" and "va"), are one group, and a group goes
    wholly to one split by a hash of its smallest English sentence so written: no test source
    and no test target is a training sentence, in either direction. By the English side
    (`ENGLISH_SIDE`), the hash of the English sentence alone decides: an English test sentence is
    never a training one, but 297 of the 3,346 French test sentences are.
    """

    name = "tatoeba"
    languages = ("en", "fr")
    base_url = "http://d2l-data.s3-accelerate.amazonaws.com/"
    mirror_folder = "tatoeba-eng-fra"
    domain = "everyday sentences (Tatoeba: 160,302 training pairs of short conversational text)"
    licence = (
        "Tatoeba sentences, CC BY 2.0 FR (https://creativecommons.org/licenses/by/2.0/fr/); "
        "attribution: Tatoeba Project (tatoeba.org) and www.manythings.org/anki"
    )
    file = RemoteFile(
        name="fra.txt.gz",
        sha256="3f7ce9b82d57439edff14f487e2ef9fd52ad72757a838857f153fa4668dd6066",
        url=base_url + "fra-eng.zip",
        zip_member="fra-eng/fra.txt",
        member_sha256="0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104",
    )
    valid_percent = 2
    test_percent = 2
    group_seed = 1  # both sides: hashed with each group's sentence

    def remote_files(self, src: str, tgt: str) -> list[RemoteFile]:
        return [self.file]

    def split_of(self, text: str) -> str:
        """The split of a hashed text: an English sentence, or a group's seed and sentence."""
        bucket = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:4], "big") % 100
        if bucket < self.valid_percent:
            return "valid"
        if bucket < self.valid_percent + self.test_percent:
            return "test"
        return "train"

    def pairs(
        self, src: str, tgt: str, paths: Mapping[str, Path], split_rule: str = BOTH_SIDES
    ) -> Iterator[Pair]:
        rows = list(_iter_tsv(paths[self.file.name]))
        if split_rule == ENGLISH_SIDE:
            splits = [self.split_of(en.strip()) for en, _ in rows]
        else:
            english, french = zip(*rows, strict=True)
            loose = list(zip(_loose(english), _loose(french), strict=True))
            groups = _groups_sharing_a_side(loose)
            smallest: dict[int, str] = {}
            for group, (en, _) in zip(groups, loose, strict=True):
                smallest[group] = min(smallest.get(group, en), en)
            splits = [self.split_of(f"{self.group_seed} {smallest[group]}") for group in groups]
        for split, (en, fr) in zip(splits, rows, strict=True):
            by_lang = {"en": en, "fr": fr}
            yield split, by_lang[src], by_lang[tgt]


_PUNCTUATION = re.compile(r"[^\w\s]|_")


def _loose(sentences: Iterable[str]) -> list[str]:
    """Sentences (lines: no line breaks) as the split compares them: NFC, lowercased, without
    punctuation, their words one space apart; equal when `seq2seq.data.clean.normalize` makes
    them equal. Done on all of them at once, which is several times faster than one by one."""
    text = unicodedata.normalize("NFC", "\n".join(sentences)).lower()
    return [" ".join(line.split()) for line in _PUNCTUATION.sub("", text).split("\n")]


def _groups_sharing_a_side(rows: list[tuple[str, str]]) -> list[int]:
    """For every pair of sentences, its group: the first of the pairs linked to it by a side
    they share, found by union-find."""
    parent = list(range(len(rows)))
    first: dict[tuple[int, str], int] = {}
    for i, row in enumerate(rows):
        for side, sentence in enumerate(row):
            a, b = _root(parent, i), _root(parent, first.setdefault((side, sentence), i))
            parent[max(a, b)] = min(a, b)
    return [_root(parent, i) for i in range(len(rows))]


def _root(parent: list[int], i: int) -> int:
    """The root of `i` in the union-find forest `parent`, halving the path on the way."""
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


CORPORA: dict[str, Corpus] = {corpus.name: corpus for corpus in (Multi30k(), Tatoeba())}


def domain_of(corpus: str) -> str:
    """One line on the text a model trained on `corpus` (`data.corpus`) knows, and how much."""
    known = CORPORA.get(corpus)
    return known.domain if known else "your own parallel text"


def get_corpus(name: str) -> Corpus:
    """The named corpus; `UserError` listing the known names otherwise."""
    if name not in CORPORA:
        known = ", ".join([*CORPORA, USER_CORPUS])
        raise UserError(f"--corpus {name}: unknown corpus; known: {known}")
    return CORPORA[name]


def _iter_aligned(split: str, src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """The line pairs of two files that must be line-aligned (the two sides of `split`)."""
    src_lines, tgt_lines = iter_lines(src_path), iter_lines(tgt_path)
    for number, (src_line, tgt_line) in enumerate(zip_longest(src_lines, tgt_lines), start=1):
        if src_line is None or tgt_line is None:
            src_count = number - (src_line is None) + sum(1 for _ in src_lines)
            tgt_count = number - (tgt_line is None) + sum(1 for _ in tgt_lines)
            raise UserError(
                f"{split}: {src_path} has {src_count} lines but {tgt_path} has "
                f"{tgt_count}; the two sides of a parallel corpus must be line-aligned"
            )
        yield src_line, tgt_line


def _iter_tsv(path: Path) -> Iterator[tuple[str, str]]:
    """The two columns of a `source<TAB>target` file; any other number of tabs is an error."""
    for number, line in enumerate(iter_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise UserError(
                f"{path}:{number}: expected 2 tab-separated columns (source<TAB>target), "
                f"got {len(columns)}"
            )
        yield columns[0], columns[1]


_LANGUAGE_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


@dataclass(frozen=True)
class SplitFiles:
    """Where one split of the user's corpus lives: two aligned files, or one TSV (`tgt` None)."""

    src: Path
    tgt: Path | None = None

    def paths(self) -> list[Path]:
        return [self.src] if self.tgt is None else [self.src, self.tgt]


@dataclass(frozen=True)
class UserFiles:
    """The user's own parallel corpus (`--corpus files`): a `SplitFiles` for every split."""

    splits: dict[str, SplitFiles]

    @classmethod
    def from_options(
        cls, src: str, tgt: str, data_dir: str | None, options: Mapping[str, str | None]
    ) -> "UserFiles":
        """Resolve the command line's file options into one `SplitFiles` per split.

        `options` holds `<split>_src`, `<split>_tgt` and `<split>_tsv` for every split (None when
        not given). Without them, `data_dir` supplies `<split>.<lang>` (or `<split>.<lang>.gz`).
        """
        for option, lang in (("--src", src), ("--tgt", tgt)):
            if not _LANGUAGE_CODE.fullmatch(lang):
                raise UserError(f"{option} {lang!r}: a language code is letters, digits, - or _")
        if src == tgt:
            raise UserError(f"--src and --tgt are both {src!r}; give two different languages")
        explicit = {key: value for key, value in options.items() if value}
        if data_dir and explicit:
            raise UserError("give either --data-dir or the --<split>-src/-tgt/-tsv files, not both")
        if not data_dir and not explicit:
            raise UserError(
                "--corpus files needs its files: --data-dir DIR (with train.SRC, train.TGT, "
                "valid.*, test.*), or --train-src/--train-tgt/--valid-src/... for each split, "
                "or --train-tsv/--valid-tsv/--test-tsv"
            )
        splits = {}
        for split in SPLITS:
            if data_dir:
                sides = (_find_in_dir(Path(data_dir), split, lang) for lang in (src, tgt))
                splits[split] = SplitFiles(*sides)
            else:
                splits[split] = _split_from_options(split, options)
        return cls(splits)

    def paths(self) -> list[Path]:
        return [path for files in self.splits.values() for path in files.paths()]

    def pairs(self) -> Iterator[Pair]:
        """The raw line pairs of every split, one at a time; `UserError` when the two sides do
        not align."""
        for split, files in self.splits.items():
            if files.tgt is None:
                lines = _iter_tsv(files.src)
            else:
                lines = _iter_aligned(split, files.src, files.tgt)
            for src_line, tgt_line in lines:
                yield split, src_line, tgt_line


def _find_in_dir(data_dir: Path, split: str, lang: str) -> Path:
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: no such folder")
    for name in (f"{split}.{lang}", f"{split}.{lang}.gz"):
        if (data_dir / name).is_file():
            return data_dir / name
    raise UserError(f"--data-dir {data_dir}: missing {split}.{lang} (or {split}.{lang}.gz)")


def _split_from_options(split: str, options: Mapping[str, str | None]) -> SplitFiles:
    src, tgt, tsv = (options.get(f"{split}_{kind}") for kind in ("src", "tgt", "tsv"))
    if tsv and (src or tgt):
        raise UserError(f"--{split}-tsv cannot be combined with --{split}-src/--{split}-tgt")
    if tsv:
        files = SplitFiles(Path(tsv))
    elif src and tgt:
        files = SplitFiles(Path(src), Path(tgt))
    else:
        raise UserError(
            f"the {split} split needs --{split}-src and --{split}-tgt, or --{split}-tsv"
        )
    for path in files.paths():
        if not path.is_file():
            raise UserError(f"{path}: no such file (given for the {split} split)")
    return files
