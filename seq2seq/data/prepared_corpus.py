"""A prepared folder (written by `seq2seq.data.prepare`, in the format of `seq2seq.data.manifest`),
loaded for training and evaluation.

`PreparedData.load(folder)` gives the tokenizers, the text of each split and its token ids as a
`ParallelDataset` over the folder's arrays, read from the files as batches need them: nothing
is tokenised again when a run starts or resumes, and the processes of one machine share the
pages through the page cache.

A folder is checked before use, cheaply every time: `load` compares every file's size with the
one the manifest records, and `dataset` checks a split's arrays (the offsets start at 0, never
decrease and end at the length of the ids; the ids are below the vocabulary size) in one pass
over them. `verify` compares every file's SHA256 with the manifest's (seq2seq train
--verify). A damaged folder is one `UserError` naming the file and how to rebuild it.
"""

import json
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seq2seq.config import Config, DataConfig
from seq2seq.data.align_teacher import TEACHERS
from seq2seq.data.augment import AUGMENT_VERSION
from seq2seq.data.corpora import BOTH_SIDES, OLDER_SPLIT_RULE, SPLITS, USER_CORPUS, Pairs, Tatoeba
from seq2seq.data.manifest import (
    FORMAT_VERSION,
    LINKS_DTYPE,
    MANIFEST,
    OFFSETS_DTYPE,
    TEACHER_LINKS,
    array_files,
)
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.errors import UserError
from seq2seq.files import read_lines, sha256_file

if TYPE_CHECKING:  # imports torch, which reading a split's lines (evaluate) does not need
    from seq2seq.data.batching import ParallelDataset

HINT = "prepare it with `make data` or seq2seq prepare"  # when no configuration names it
TEACHER_HINT = "prepare it again with seq2seq prepare --align-teacher eflomal and its other options"
CHECK_CHUNK = 1 << 22  # array elements read at a time by the checks


def teacher_of(config: Config) -> str:
    """The alignment teacher whose links `config` trains on (train.alignment_weight > 0), or
    "" (none)."""
    return TEACHERS[0] if config.train.alignment_weight > 0 else ""


def prepare_command(config: Config) -> str:
    """The `seq2seq prepare` command that writes the folder `config.data.prepared` as
    `seq2seq train --prepare` would with `config`: the options whose values differ from the
    defaults (DataConfig's are prepare's), copy-teaching's seed (train.seed) when it is on, and
    the alignment teacher when the run trains an alignment head (`teacher_of`). A corpus of
    your own ("files") needs its files too: DIR stands for them."""
    data, default = config.data, DataConfig()
    words = ["seq2seq prepare", f"--corpus {data.corpus}", f"--src {data.src}", f"--tgt {data.tgt}"]
    if data.corpus == USER_CORPUS:
        words.append("--data-dir DIR")
    if data.vocab_size != default.vocab_size:
        words.append(f"--vocab-size {data.vocab_size}")
    flags = {
        "--separate-vocab": not data.joint_vocab,
        "--no-split-digits": not data.split_digits,
        "--no-byte-fallback": not data.byte_fallback,
    }
    words += [flag for flag, given in flags.items() if given]
    if data.corpus == Tatoeba.name and data.split_rule != BOTH_SIDES:
        words.append(f"--split-rule {data.split_rule}")
    augmentation = {key: value for key, value in data.augmentation.items() if value}
    words += [f"--{key.replace('_', '-')} {value:g}" for key, value in augmentation.items()]
    if augmentation:
        words.append(f"--seed {config.train.seed}")
    if teacher_of(config):
        words.append(f"--align-teacher {teacher_of(config)}")
    return " ".join([*words, f"--out {data.prepared}"])


def prepare_hint(config: Config) -> str:
    """How to prepare the folder of `config` (`prepare_command`), for the errors of `load`."""
    return f"prepare it with `{prepare_command(config)}`"


class FileArray:
    """A read-only 1-D array in a binary file, read with `os.pread` at each slice.

    Not memory-mapped, on purpose: when a process faults in a page of a mapped file, Linux also
    maps the neighbouring pages already in the page cache (fault-around, 64 KiB), so drawing
    sentences at random from a mapped corpus of millions grows the process by tens of MB per
    batch. `pread` copies only the bytes asked for; the file's pages stay in the page cache,
    read from disk once and shared by every process of the machine.
    """

    def __init__(self, path: Path, dtype: str):
        self.path, self.dtype = path, np.dtype(dtype)
        self._open()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)
        self._len = os.fstat(self._fd).st_size // self.dtype.itemsize

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: slice) -> np.ndarray:
        start, stop, step = key.indices(self._len)
        if step != 1:
            raise IndexError("a FileArray reads contiguous slices only")
        size = max(stop - start, 0) * self.dtype.itemsize
        data = os.pread(self._fd, size, start * self.dtype.itemsize)
        if len(data) != size:
            raise UserError(f"{self.path}: shorter than when it was opened; {HINT}")
        return np.frombuffer(data, dtype=self.dtype)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (DataLoader workers started by spawn) as its path: the copy opens the file."""
        return {"path": self.path, "dtype": self.dtype}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.dtype = state["path"], state["dtype"]
        self._open()


def damaged(folder: Path, name: str, problem: str) -> UserError:
    """The error for a damaged file `name` of a prepared folder: what is wrong, how to rebuild."""
    return UserError(
        f"{folder / name}: {problem}; the prepared folder is damaged: rebuild it with "
        f"seq2seq prepare --out {folder} and the settings in its {MANIFEST}"
    )


def _check_sizes(folder: Path, sizes: dict[str, int]) -> None:
    """Every file the size the manifest records (folders prepared before sizes were recorded
    have their arrays checked by `PreparedData.dataset` only)."""
    for name, size in sizes.items():
        path = folder / name
        found = path.stat().st_size if path.is_file() else 0
        if found != size:
            raise damaged(folder, name, f"{found:,} bytes, but {size:,} when it was prepared")


@dataclass
class PreparedData:
    """A prepared folder: its manifest, its tokenizers and its splits.

    `src_tokenizer` and `tgt_tokenizer` are the same object when the vocabulary is joint.
    """

    folder: Path
    manifest: dict[str, Any]
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer

    @classmethod
    def load(cls, folder: str | Path, hint: str = HINT) -> "PreparedData":
        """The prepared folder `folder`, its file sizes checked; a folder missing or damaged is
        a `UserError` ending with `hint`, how to prepare it (`prepare_hint`)."""
        folder = Path(folder)
        path = folder / MANIFEST
        if not path.is_file():
            raise UserError(f"{folder}: not a prepared corpus (no {MANIFEST}); {hint}")
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            version, names = manifest["format_version"], list(manifest["files"])
            tokenizer = manifest["tokenizer"]
            if not {"lines", "ids", "settings"} <= manifest.keys():
                raise KeyError("lines, ids or settings")
            models = (tokenizer["src_model"], tokenizer["tgt_model"], tokenizer["joint"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(f"{path}: damaged manifest ({err!r}); {hint}") from None
        if version != FORMAT_VERSION:
            raise UserError(
                f"{folder}: prepared by an older version (format {version}, now "
                f"{FORMAT_VERSION}: token ids as arrays); rebuild it with the same command as "
                f"before (`make data`, seq2seq prepare --out {folder}, or "
                "seq2seq train --prepare after removing it)"
            )
        missing = [name for name in names if not (folder / name).is_file()]
        if missing:
            raise UserError(f"{folder}: missing {', '.join(missing)}; {hint}")
        _check_sizes(folder, manifest.get("sizes", {}))
        src_model, tgt_model, joint = models
        src_tokenizer = Tokenizer.load(folder / src_model)
        tgt_tokenizer = src_tokenizer if joint else Tokenizer.load(folder / tgt_model)
        return cls(folder, manifest, src_tokenizer, tgt_tokenizer)

    def verify(self) -> None:
        """Compare every file's SHA256 with the one the manifest records (reads everything)."""
        for name, sha256 in self.manifest["files"].items():
            if sha256_file(self.folder / name) != sha256:
                raise damaged(self.folder, name, "its SHA256 differs from the one in the manifest")

    def check_vocabulary(self, vocab_size: int, joint: bool) -> None:
        """`UserError` unless the folder was prepared with this vocabulary (a configuration's
        `data.vocab_size` and `data.joint_vocab`)."""
        settings = self.manifest["settings"]
        if settings["vocab_size"] != vocab_size:
            raise UserError(
                f"data.vocab_size {vocab_size}: {self.folder} was prepared with "
                f"--vocab-size {settings['vocab_size']}; set data.vocab_size="
                f"{settings['vocab_size']} or prepare another folder with --vocab-size {vocab_size}"
            )
        if settings["joint_vocab"] != joint:
            kind = "a joint" if settings["joint_vocab"] else "separate"
            raise UserError(
                f"data.joint_vocab {str(joint).lower()}: {self.folder} was prepared with "
                f"{kind} vocabulary; set data.joint_vocab={str(not joint).lower()}"
            )

    def check_augmentation(self, wanted_settings: Mapping[str, float]) -> None:
        """`UserError` unless the folder was prepared with these copy-teaching settings (a
        configuration's `data.augment_entities`, `data.augment_numbers` and
        `data.augment_repeated_digits`, keyed by those names; see `seq2seq.data.augment`) and,
        where they are on, by today's copy-teaching."""
        for key, wanted in wanted_settings.items():
            prepared = self.manifest["settings"].get(key, 0.0)
            if prepared != wanted:
                option = "--" + key.replace("_", "-")
                raise UserError(
                    f"data.{key} {wanted}: {self.folder} was prepared with {option} {prepared}; "
                    f"set data.{key}={prepared} or give data.prepared another folder, which "
                    "--prepare writes"
                )
        version = self.manifest["settings"].get("augment_version", 1)
        if any(wanted_settings.values()) and version != AUGMENT_VERSION:
            raise UserError(
                f"data.prepared: {self.folder} was prepared by copy-teaching version {version}, "
                f"not {AUGMENT_VERSION}; run seq2seq prepare with its options again (it rebuilds "
                "the folder), or delete it and pass --prepare"
            )

    def check_split_rule(self, config: Config) -> None:
        """`UserError` unless a Tatoeba folder was split by `config`'s data.split_rule (a model
        is scored on the test split of the rule it was trained on)."""
        if self.manifest["corpus"] != Tatoeba.name:
            return
        prepared = self.manifest["settings"].get("split_rule", OLDER_SPLIT_RULE)
        if prepared != config.data.split_rule:
            raise UserError(
                f"data.split_rule {config.data.split_rule}: {self.folder} was split by "
                f"--split-rule {prepared}, whose test pairs may be training pairs of this model; "
                f"prepare the folder with `{prepare_command(config)}`"
            )

    @property
    def src(self) -> str:
        return self.manifest["src"]

    @property
    def tgt(self) -> str:
        return self.manifest["tgt"]

    @property
    def joint(self) -> bool:
        return self.src_tokenizer is self.tgt_tokenizer

    def lines(self, split: str) -> Pairs:
        """The (source, target) text lines of `split`: "train", "valid" or "test"."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        return tuple(read_lines(self.folder / f"{split}.{lang}") for lang in (self.src, self.tgt))

    def dataset(
        self, split: str, links: bool = False, hint: str = TEACHER_HINT
    ) -> "ParallelDataset":
        """The token ids of `split`, read from the folder's arrays (nothing is tokenised
        again), ready for `seq2seq.data.batching`; with `links`, the training split's teacher
        links too (`teacher_links`, refused with `hint` when the folder has none)."""
        from seq2seq.data.batching import ParallelDataset

        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        dtypes = self.manifest["ids"]
        arrays = []
        for lang, tokenizer in ((self.src, self.src_tokenizer), (self.tgt, self.tgt_tokenizer)):
            name = f"{split}.{lang}"
            ids_file, offsets_file = array_files(name)
            ids = FileArray(self.folder / ids_file, dtypes["dtype"])
            offsets = FileArray(self.folder / offsets_file, dtypes["offsets_dtype"])
            self._check_arrays(name, ids, offsets, self.manifest["lines"][split])
            self._check_ids(ids_file, ids, tokenizer.vocab_size)
            arrays += [ids, offsets]
        return ParallelDataset(*arrays, links=self.teacher_links(hint) if links else None)

    def teacher_links(self, hint: str = TEACHER_HINT) -> tuple[FileArray, FileArray]:
        """The training split's piece links (seq2seq.data.align_teacher): flat pairs and
        offsets counted in links; a UserError ending with `hint`, how to prepare the folder
        again (`prepare_hint`), when it has none."""
        if "align_teacher" not in self.manifest:
            raise UserError(f"train.alignment_weight: {self.folder} has no teacher links; {hint}")
        flat, offsets = (
            FileArray(self.folder / name, dtype)
            for name, dtype in zip(TEACHER_LINKS, (LINKS_DTYPE, OFFSETS_DTYPE), strict=True)
        )
        if len(offsets) != self.manifest["lines"]["train"] + 1 or 2 * offsets[-1:][0] != len(flat):
            raise damaged(self.folder, TEACHER_LINKS[1], "does not fit the training split")
        return flat, offsets

    def _check_arrays(self, name: str, ids: FileArray, offsets: FileArray, lines: int) -> None:
        """The offsets of `lines` lines: lines + 1 of them, from 0, never decreasing, ending at
        the number of ids; each file a whole number of elements."""
        for array in (ids, offsets):
            if array.path.stat().st_size != len(array) * array.dtype.itemsize:
                raise damaged(self.folder, array.path.name, "cut off in the middle of a number")
        if len(offsets) != lines + 1:
            problem = f"holds {len(offsets) - 1:,} lines, but the split has {lines:,}"
            raise damaged(self.folder, array_files(name)[1], problem)
        previous = 0
        for start in range(0, len(offsets), CHECK_CHUNK):
            chunk = offsets[start : start + CHECK_CHUNK]
            if chunk[0] < previous or (np.diff(chunk) < 0).any() or (start == 0 and chunk[0]):
                raise damaged(self.folder, array_files(name)[1], "offsets out of order")
            previous = chunk[-1]
        if previous != len(ids):
            problem = f"{len(ids):,} token ids, but the offsets end at {previous:,}"
            raise damaged(self.folder, array_files(name)[0], problem)

    def _check_ids(self, name: str, ids: FileArray, vocab_size: int) -> None:
        """Every token id in [0, vocab_size)."""
        for start in range(0, len(ids), CHECK_CHUNK):
            chunk = ids[start : start + CHECK_CHUNK]
            if chunk.max() >= vocab_size or chunk.min() < 0:
                bad = int(chunk[(chunk >= vocab_size) | (chunk < 0)][0])
                problem = f"token id {bad} is outside the vocabulary of {vocab_size}"
                raise damaged(self.folder, name, problem)
