"""A prepared folder (written by `seq2seq.prepare`), loaded for training and evaluation.

`PreparedData.load(folder)` gives the tokenizers, the text of each split and its token ids as a
`ParallelDataset` over the folder's arrays, read from the files as batches need them: nothing
is tokenised again when a run starts or resumes, and the processes of one machine share the
pages through the page cache.
"""

import json
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.batching import ParallelDataset
from seq2seq.corpora import SPLITS, Pairs
from seq2seq.errors import UserError
from seq2seq.files import read_lines
from seq2seq.prepare import FORMAT_VERSION, MANIFEST
from seq2seq.tokenizer import Tokenizer

HINT = "prepare it with `make data` or scripts/prepare_data.py"


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
    def load(cls, folder: str | Path) -> "PreparedData":
        folder = Path(folder)
        path = folder / MANIFEST
        if not path.is_file():
            raise UserError(f"{folder}: not a prepared corpus (no {MANIFEST}); {HINT}")
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            version, names = manifest["format_version"], list(manifest["files"])
            tokenizer = manifest["tokenizer"]
            models = (tokenizer["src_model"], tokenizer["tgt_model"], tokenizer["joint"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(f"{path}: damaged manifest ({err!r}); {HINT}") from None
        if version != FORMAT_VERSION:
            raise UserError(
                f"{folder}: prepared by an older version (format {version}, now "
                f"{FORMAT_VERSION}: token ids as arrays); rebuild it with the same command as "
                f"before (`make data`, scripts/prepare_data.py --out {folder}, or "
                "scripts/train.py --prepare after removing it)"
            )
        missing = [name for name in names if not (folder / name).is_file()]
        if missing:
            raise UserError(f"{folder}: missing {', '.join(missing)}; {HINT}")
        src_model, tgt_model, joint = models
        src_tokenizer = Tokenizer.load(folder / src_model)
        tgt_tokenizer = src_tokenizer if joint else Tokenizer.load(folder / tgt_model)
        return cls(folder, manifest, src_tokenizer, tgt_tokenizer)

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

    def dataset(self, split: str) -> ParallelDataset:
        """The token ids of `split`, read from the folder's arrays (nothing is tokenised
        again), ready for `seq2seq.batching`."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        dtypes = self.manifest["ids"]
        arrays = [
            FileArray(self.folder / f"{split}.{lang}.{kind}", dtypes[key])
            for lang in (self.src, self.tgt)
            for kind, key in (("ids", "dtype"), ("offsets", "offsets_dtype"))
        ]
        return ParallelDataset(*arrays)
