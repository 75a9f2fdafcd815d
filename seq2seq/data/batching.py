"""Token-id datasets, length-bucketed batches under a token budget, and padding into tensors.

    ParallelDataset     all sentence pairs of a split as two flat id arrays plus offsets
                        (files written by `seq2seq.data.prepare`, or packed lists)
    TokenBatchSampler   which sentences go together: similar lengths, at most `max_tokens`
                        tokens per batch counting padding; shuffled per epoch, resumable,
                        split across ranks for distributed training
    collate -> Batch    pad a list of examples into (B, S) and (B, T) tensors
    BucketCollate       the GPU recipe's padding (train.length_buckets): every batch padded
                        to one of a few fixed shapes, so a compiled model compiles each once
    DeviceCorpus        the GPU recipe's batches (train.data_on_device): the id arrays copied
                        to the device once, each batch gathered and padded there

Shapes: B = batch, S = source length, T = target length (both include the special tokens).
A source row is `ids + [EOS]`, a target row `[BOS] + ids + [EOS]` (see `seq2seq.models.base`).
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import chain
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID


def _offsets(lens: np.ndarray) -> np.ndarray:
    """(N + 1,) int64 offsets of sequences of `lens` laid end to end: row i is [o[i], o[i + 1])."""
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return offsets


def pack(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate id sequences into one flat int32 array; returns (flat, offsets)."""
    lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    flat = np.fromiter(chain.from_iterable(seqs), dtype=np.int32, count=int(lens.sum()))
    return flat, _offsets(lens)


class Example(NamedTuple):
    """One sentence pair: its row number in the dataset, its source and target ids, and the
    teacher's piece links when the dataset has them."""

    index: int
    src: np.ndarray  # (S,) ids + [EOS]
    tgt: np.ndarray  # (T,) [BOS] + ids + [EOS]
    links: np.ndarray | None = None  # (K, 2) source piece, target piece (from 0, no specials)


class Array1D(Protocol):
    """A 1-D array read by slices: a numpy array, or a `seq2seq.data.prepared_corpus.FileArray`."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice) -> np.ndarray: ...


def _row(flat: Array1D, start: int, end: int, bos: bool) -> np.ndarray:
    """`[BOS]? + flat[start:end] + [EOS]` as a new int32 array."""
    row = np.empty(end - start + 1 + int(bos), dtype=np.int32)
    if bos:
        row[0] = BOS_ID
    row[int(bos) : -1] = flat[start:end]
    row[-1] = EOS_ID
    return row


def _lengths(offsets: Array1D, specials: int, chunk: int = 1 << 16) -> np.ndarray:
    """(N,) int32 row lengths from (N + 1,) offsets, plus `specials` tokens each. The offsets
    are read `chunk` at a time: on a corpus of millions of sentences, a copy is tens of MB."""
    lens = np.empty(len(offsets) - 1, dtype=np.int32)
    for start in range(0, len(lens), chunk):
        bounds = np.asarray(offsets[start : start + chunk + 1])
        np.subtract(bounds[1:], bounds[:-1], out=lens[start : start + chunk], casting="unsafe")
    lens += specials
    return lens


class ParallelDataset:
    """The token ids of one split, each side one flat array of ids plus (N + 1,) offsets.

    The flat arrays hold the subword ids only (any integer dtype; `seq2seq.data.prepare` writes
    uint16 or int32 files, read by `FileArray`); `dataset[i]` adds the special tokens.
    `src_lens[i]` and `tgt_lens[i]` are the lengths of the rows `dataset[i]` returns, special
    tokens included, computed from the offsets when asked for (not kept: a batch sampler
    needs them once). Nothing is truncated: a long validation sentence is kept whole.
    `links`: the teacher's piece links (seq2seq.data.align_teacher), flat pairs and (N + 1,)
    offsets counted in links, or None.
    """

    def __init__(
        self,
        src_flat: Array1D,
        src_offsets: Array1D,
        tgt_flat: Array1D,
        tgt_offsets: Array1D,
        links: tuple[Array1D, Array1D] | None = None,
    ):
        if len(src_offsets) != len(tgt_offsets):
            raise ValueError(
                f"{len(src_offsets) - 1} source but {len(tgt_offsets) - 1} target sequences"
            )
        self._src, self._src_offsets = src_flat, src_offsets
        self._tgt, self._tgt_offsets = tgt_flat, tgt_offsets
        self._links = links

    @property
    def src_lens(self) -> np.ndarray:
        """(N,) int32 source row lengths: ids + EOS."""
        return _lengths(self._src_offsets, specials=1)

    @property
    def tgt_lens(self) -> np.ndarray:
        """(N,) int32 target row lengths: BOS + ids + EOS."""
        return _lengths(self._tgt_offsets, specials=2)

    @classmethod
    def from_ids(cls, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> "ParallelDataset":
        """A dataset of id lists (e.g. `Tokenizer.encode`'s output), packed in memory."""
        return cls(*pack(src_ids), *pack(tgt_ids))

    def __len__(self) -> int:
        return len(self._src_offsets) - 1

    def __getitem__(self, index: int) -> Example:
        src_start, src_end = (int(i) for i in self._src_offsets[index : index + 2])
        tgt_start, tgt_end = (int(i) for i in self._tgt_offsets[index : index + 2])
        links = None
        if self._links is not None:
            flat, offsets = self._links
            start, end = (2 * int(i) for i in offsets[index : index + 2])
            links = np.asarray(flat[start:end], dtype=np.int64).reshape(-1, 2)
        return Example(
            index=int(index),
            src=_row(self._src, src_start, src_end, bos=False),
            tgt=_row(self._tgt, tgt_start, tgt_end, bos=True),
            links=links,
        )


def _batch_sizes(sorted_lens: np.ndarray, max_tokens: int) -> list[int]:
    """Greedy batch sizes over lengths sorted ascending: each batch takes as many sentences as
    fit `count * longest <= max_tokens`; a sentence longer than the budget is a batch alone.

    One numpy step per batch: within a batch starting at `start`, the cost of the first k
    sentences, `k * sorted_lens[start + k - 1]`, only grows with k, so the sentences that fit
    are a prefix of the window.
    """
    sizes = []
    start = 0
    while start < len(sorted_lens):
        window = sorted_lens[start : start + max(1, max_tokens // sorted_lens[start])]
        fits = np.arange(1, len(window) + 1) * window <= max_tokens
        size = max(1, int(fits.sum()))
        sizes.append(size)
        start += size
    return sizes


def _sort_by_length(
    src_lens: np.ndarray, tgt_lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sentences sorted by (max(source, target) length, source length, target length).

    Returns the (N,) order, the (N,) sorted lengths max(source, target), and the (R + 1,)
    starts of the runs of sentences whose three lengths are equal, plus N: run r is
    order[starts[r] : starts[r + 1]]. Temporary arrays are made one at a time: on a corpus
    of millions of sentences each is tens of MB.
    """
    lens = np.maximum(src_lens, tgt_lens)
    order = np.lexsort((tgt_lens, src_lens, lens))  # np.lexsort: the last key is the primary
    changes = np.zeros(max(len(order) - 1, 0), dtype=bool)
    for key in (tgt_lens, src_lens):
        sorted_key = np.take(key, order)
        changes |= sorted_key[1:] != sorted_key[:-1]
    del sorted_key
    sorted_lens = np.take(lens, order)
    changes |= sorted_lens[1:] != sorted_lens[:-1]
    run_starts = np.concatenate(([0], np.flatnonzero(changes) + 1, [len(order)]))
    return order, sorted_lens, run_starts


class TokenBatchSampler:
    """Batches of dataset indices with at most `max_tokens` tokens each, padding included.

    A batch costs `B * max(longest source, longest target)` tokens, which is what its padded
    (B, S) and (B, T) tensors hold. Sentences are sorted once by that length, then by source
    and target length, and cut greedily into batches, so a batch holds sentences of similar
    length and little padding; a single sentence over the budget gets a batch of its own. The
    batch sizes depend only on the lengths, so every epoch has the same number of batches.

    shuffle=True (training): each epoch shuffles the sentences of equal lengths among
        themselves, then the order of the batches, as a function of (seed, epoch) only, so
        every rank and every resumed run sees the same batches.
    shuffle=False (validation, decoding): batches in length order, the same every time.
    num_replicas, rank: batch i goes to rank i % num_replicas; the last batches are dropped
        so every rank gets the same number (at most num_replicas - 1 per epoch, different ones
        each epoch when shuffling). Evaluate with one replica so no sentence is dropped.

    Resuming: `state_dict()` is {"epoch", "position"}, position being the batches already
    handed out this epoch; after `load_state_dict(state)` iteration continues with the next
    batch. `set_epoch(epoch)` starts an epoch from its first batch, unless it is the epoch
    just restored. With DataLoader worker processes, batches are fetched ahead of the
    training loop, so save the number of batches the loop consumed as "position" instead.

    Memory: the sorted order (4 bytes a sentence) is kept, and one shuffled copy of it per
    epoch; shuffling loops over the runs of equal lengths (hundreds to thousands), not over
    the sentences.
    """

    def __init__(
        self,
        src_lens: np.ndarray,
        tgt_lens: np.ndarray,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not in [0, {num_replicas})")
        if len(src_lens) and min(np.min(src_lens), np.min(tgt_lens)) < 1:
            raise ValueError("every sentence needs a length >= 1")
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.position = 0
        self._resume_at = 0
        by_length, sorted_lens, self._runs = _sort_by_length(src_lens, tgt_lens)
        sizes = _batch_sizes(sorted_lens, max_tokens)
        self._num_batches = len(sizes)  # over all ranks
        self._split_points = np.cumsum(sizes)[:-1]
        # int32 indices: half the memory of numpy's int64, and enough below 2**31 sentences
        self._by_length = by_length.astype(np.int32 if len(by_length) < 2**31 else np.int64)

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return self._num_batches // self.num_replicas

    def _epoch_batches(self) -> list[np.ndarray]:
        """This rank's batches for `self.epoch`."""
        if self.shuffle:
            rng = np.random.default_rng((self.seed, self.epoch))
            order = self._by_length.copy()
            for start, end in zip(self._runs[:-1], self._runs[1:], strict=True):
                rng.shuffle(order[start:end])
            batches = np.split(order, self._split_points)
            batches = [batches[i] for i in rng.permutation(len(batches))]
        else:
            batches = np.split(self._by_length, self._split_points)
        kept = len(self) * self.num_replicas
        return batches[self.rank : kept : self.num_replicas]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._epoch_batches()
        start, self._resume_at = self._resume_at, 0
        self.position = start
        for batch in batches[start:]:
            self.position += 1
            yield batch.tolist()

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.position = self._resume_at = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if not 0 <= state["position"] <= len(self):
            raise ValueError(f"position {state['position']} is not in [0, {len(self)}]")
        self.epoch = state["epoch"]
        self.position = self._resume_at = state["position"]


@dataclass
class Batch:
    """A padded batch. Rows are in the sampler's order; `indices` gives their dataset rows.

    src: (B, S) long, source ids + EOS, padded with PAD_ID; src_lens: (B,) long
    tgt: (B, T) long, BOS + target ids + EOS, padded with PAD_ID; tgt_lens: (B,) long
    indices: (B,) long, each row's index in the dataset (to restore the input order)
    num_tgt_tokens: the number of non-pad tokens in `tgt_out`, the tokens the loss is over
    num_src_tokens: the number of non-pad tokens in `src`
    (the counts are plain ints, known without reading a GPU tensor back)
    links: (K, 3) long, the teacher's piece links as (row, target piece, source piece), the
    target piece t being the one `tgt_out[:, t]` predicts; None when the dataset has none
    """

    src: Tensor
    src_lens: Tensor
    tgt: Tensor
    tgt_lens: Tensor
    indices: Tensor
    num_tgt_tokens: int
    num_src_tokens: int
    links: Tensor | None = None

    @property
    def tgt_in(self) -> Tensor:
        """(B, T-1) the decoder's input: BOS + ids."""
        return self.tgt[:, :-1]

    @property
    def tgt_out(self) -> Tensor:
        """(B, T-1) what the decoder predicts: ids + EOS."""
        return self.tgt[:, 1:]

    def __len__(self) -> int:
        return self.src.size(0)

    def _map(self, fn: Callable[[Tensor], Tensor]) -> "Batch":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{k: fn(v) if isinstance(v, Tensor) else v for k, v in values.items()})

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "Batch":
        """Page-locked copies, for fast asynchronous copies to a GPU (DataLoader pin_memory)."""
        return self._map(Tensor.pin_memory)


def _pad(seqs: list[np.ndarray], length: int = 0) -> tuple[Tensor, Tensor]:
    """(B, L) long tensor of the sequences padded with PAD_ID, and their (B,) lengths; L is the
    longest sequence, or `length` when that is longer."""
    lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    width = max(int(lens.max()), length)
    padded = np.full((len(seqs), width), PAD_ID, dtype=np.int64)
    padded[np.arange(width) < lens[:, None]] = np.concatenate(seqs)
    return torch.from_numpy(padded), torch.from_numpy(lens)


def collate(samples: list[Example], length: int = 0) -> Batch:
    """Pad a list of examples into a `Batch` (both sides to at least `length` tokens)."""
    src, src_lens = _pad([sample.src for sample in samples], length)
    tgt, tgt_lens = _pad([sample.tgt for sample in samples], length)
    indices = torch.tensor([sample.index for sample in samples], dtype=torch.long)
    # counted on the host's arrays: reading a sum back from a tensor is a wait on a GPU
    num_tgt_tokens = sum(len(sample.tgt) - 1 for sample in samples)
    num_src_tokens = sum(len(sample.src) for sample in samples)
    links = None
    if samples[0].links is not None:  # each link as (row, target piece, source piece)
        linked = [(row, s.links) for row, s in enumerate(samples) if s.links is not None]
        rows = np.concatenate([np.full(len(pairs), row) for row, pairs in linked])
        pairs = np.concatenate([pairs for _, pairs in linked])
        links = torch.from_numpy(np.stack([rows, pairs[:, 1], pairs[:, 0]], axis=1))
    return Batch(src, src_lens, tgt, tgt_lens, indices, num_tgt_tokens, num_src_tokens, links)


def bucket_lengths(lengths: np.ndarray, buckets: Sequence[int]) -> np.ndarray:
    """(N,) the smallest of the increasing `buckets` at least each length; a length over the
    largest bucket is a ValueError."""
    if len(lengths) and lengths.max() > buckets[-1]:
        raise ValueError(f"a row of {lengths.max()} tokens is longer than every bucket {buckets}")
    return np.asarray(buckets)[np.searchsorted(buckets, lengths)]


@dataclass(frozen=True)
class BucketCollate:
    """`collate` for the GPU recipe: a batch whose longest row (source or target) has L tokens
    becomes (max_tokens // L', L') on both sides, L' the smallest bucket >= L. The missing
    rows are filler: source [EOS], target [BOS] (nothing to predict), index -1; the token
    counts are those of the real rows. Training then sees len(buckets) shapes in all.

    With a `TokenBatchSampler` over `bucket_lengths` of max(source, target), a batch of
    bucket L' holds at most max_tokens // L' rows, so none is cut."""

    buckets: tuple[int, ...]
    max_tokens: int

    def __call__(self, samples: list[Example]) -> Batch:
        longest = max(max(len(sample.src), len(sample.tgt)) for sample in samples)
        length = int(bucket_lengths(np.array([longest]), self.buckets)[0])
        rows = self.max_tokens // length
        if len(samples) > rows:
            raise ValueError(f"{len(samples)} rows of {length} tokens exceed max_tokens")
        filler = Example(-1, np.array([EOS_ID], np.int32), np.array([BOS_ID], np.int32))
        batch = collate([*samples, *[filler] * (rows - len(samples))], length)
        batch.num_src_tokens -= rows - len(samples)  # a filler target adds no token to predict
        return batch


class DeviceCorpus:
    """A `ParallelDataset` resident on a device (train.data_on_device): its flat id arrays and
    offsets are copied there once, and each batch of dataset indices is gathered and padded
    there by indexing, as `collate` pads it on the host (with `buckets`, as `BucketCollate`
    does). Only the batch's indices cross from the host; the padded widths and token counts
    come from the lengths the host keeps, so nothing is read back from the device.

    Memory on the device: the ids as int32 and the offsets as int64 (Multi30k en-de: 4 MB).
    """

    def __init__(
        self,
        dataset: ParallelDataset,
        device: torch.device,
        buckets: tuple[int, ...] = (),
        max_tokens: int = 0,
    ):
        self.device, self.buckets, self.max_tokens = device, buckets, max_tokens
        self.src_lens, self.tgt_lens = dataset.src_lens, dataset.tgt_lens  # (N,) on the host
        self.src, self.src_offsets = _to_device(dataset._src, dataset._src_offsets, device)
        self.tgt, self.tgt_offsets = _to_device(dataset._tgt, dataset._tgt_offsets, device)

    def batch(self, indices: Sequence[int]) -> Batch:
        """The `Batch` of these dataset rows, on the device: that of `collate`, or with
        `buckets` that of `BucketCollate` (filler rows, index -1, after the real ones)."""
        rows = np.asarray(indices, dtype=np.int64)
        src_lens, tgt_lens = self.src_lens[rows], self.tgt_lens[rows]
        src_width, tgt_width = int(src_lens.max()), int(tgt_lens.max())
        if self.buckets:
            src_width = tgt_width = int(
                bucket_lengths(np.array([max(src_width, tgt_width)]), self.buckets)[0]
            )
            fillers = self.max_tokens // src_width - len(rows)
            if fillers < 0:
                raise ValueError(f"{len(rows)} rows of {src_width} tokens exceed max_tokens")
            rows = np.concatenate([rows, np.full(fillers, -1)])
        index = torch.from_numpy(rows).to(self.device, non_blocking=True)  # (B,)
        real = index >= 0
        at = index.clamp(min=0)
        src_start, src_end = self.src_offsets[at], self.src_offsets[at + 1]
        tgt_start, tgt_end = self.tgt_offsets[at], self.tgt_offsets[at + 1]
        # a filler row: source [EOS] (no piece), target [BOS] alone (-1 pieces: no EOS either)
        src_pieces = torch.where(real, src_end - src_start, 0)
        tgt_pieces = torch.where(real, tgt_end - tgt_start, -1)
        return Batch(
            src=_padded_rows(self.src, src_start, src_pieces, src_width, bos=False),
            src_lens=src_pieces + 1,
            tgt=_padded_rows(self.tgt, tgt_start, tgt_pieces, tgt_width, bos=True),
            tgt_lens=tgt_pieces + 2,
            indices=index,
            num_tgt_tokens=int(tgt_lens.sum()) - len(tgt_lens),
            num_src_tokens=int(src_lens.sum()),
        )


def _to_device(flat: Array1D, offsets: Array1D, device: torch.device) -> tuple[Tensor, Tensor]:
    """One side's (M + 1,) int32 ids, a PAD_ID after the last one (so that a row's gather never
    reads past the end), and (N + 1,) int64 offsets, on `device`."""
    ids = np.append(np.asarray(flat[0 : len(flat)], dtype=np.int32), np.int32(PAD_ID))
    starts = np.array(offsets[0 : len(offsets)], dtype=np.int64)  # a copy: a file is read-only
    return torch.from_numpy(ids).to(device), torch.from_numpy(starts).to(device)


def _padded_rows(flat: Tensor, starts: Tensor, pieces: Tensor, width: int, bos: bool) -> Tensor:
    """(B, width) long rows `[BOS]? + flat[start : start + pieces] + [EOS]`, padded with PAD_ID,
    gathered on flat's device; starts, pieces: (B,) long. A row of -1 pieces (with `bos`) is
    [BOS] alone."""
    position = torch.arange(width, device=flat.device) - int(bos)  # (W,) piece index, BOS at -1
    piece = position[None, :]  # (1, W)
    ids = flat[(starts[:, None] + piece).clamp(0, len(flat) - 1)].long()  # (B, W)
    rows = torch.where((piece >= 0) & (piece < pieces[:, None]), ids, PAD_ID)
    rows = torch.where(piece == pieces[:, None], EOS_ID, rows)
    return torch.where(piece == -1, BOS_ID, rows)


def make_loader(
    dataset: ParallelDataset,
    sampler: TokenBatchSampler,
    num_workers: int = 0,
    pin_memory: bool = False,
    collate_fn: Callable[[list[Example]], Batch] = collate,
) -> DataLoader:
    """A DataLoader yielding `Batch`es in the sampler's order, padded by `collate_fn`.

    It gets a generator of its own: each `iter()` of a DataLoader draws a seed from its generator,
    and drawing from the global one would shift dropout's random numbers whenever a resumed run
    starts an iterator mid-epoch.
    """
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        pin_memory=pin_memory,
        generator=torch.Generator(),
    )
