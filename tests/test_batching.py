"""Datasets, token-budget batches (coverage, budget, shuffling, resuming, ranks), padding."""

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from seq2seq.config_file import load_config
from seq2seq.data.batching import (
    Batch,
    BucketCollate,
    ParallelDataset,
    TokenBatchSampler,
    bucket_lengths,
    collate,
    make_loader,
)
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID

GPU_RECIPE = Path(__file__).parents[1] / "configs" / "transformer.multi30k.en-de.gpu.toml"

MAX_TOKENS = 200


def _random_lengths(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 60, size=n)
    tgt = np.clip(src + rng.integers(-5, 6, size=n), 2, None)
    src[:3] = [250, 400, 201]  # longer than the budget: a batch each
    return src, tgt


def _cost(batch: list[int], src: np.ndarray, tgt: np.ndarray) -> int:
    return len(batch) * int(max(src[batch].max(), tgt[batch].max()))


def _epoch(sampler: TokenBatchSampler, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


def test_dataset_adds_specials_and_keeps_long_lines() -> None:
    src_ids = [[5, 6, 7], [], [8] * 1000]
    tgt_ids = [[9], [10, 11], []]
    dataset = ParallelDataset.from_ids(src_ids, tgt_ids)
    assert len(dataset) == 3
    assert dataset.src_lens.tolist() == [4, 1, 1001]
    assert dataset.tgt_lens.tolist() == [3, 4, 2]
    example = dataset[0]
    assert example.index == 0
    assert example.src.tolist() == [5, 6, 7, EOS_ID]
    assert example.tgt.tolist() == [BOS_ID, 9, EOS_ID]
    assert dataset[1].src.tolist() == [EOS_ID]
    assert dataset[1].tgt.tolist() == [BOS_ID, 10, 11, EOS_ID]
    assert dataset[2].src.tolist() == [8] * 1000 + [EOS_ID]
    assert dataset[2].tgt.tolist() == [BOS_ID, EOS_ID]
    assert dataset[2].src.dtype == np.int32


def test_collate_pads_and_keeps_indices() -> None:
    dataset = ParallelDataset.from_ids([[5, 6, 7], [8]], [[9], [10, 11, 12]])
    batch = collate([dataset[1], dataset[0]])
    assert batch.src.dtype == batch.tgt.dtype == batch.indices.dtype == torch.long
    assert batch.src.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [5, 6, 7, EOS_ID]]
    assert batch.src_lens.tolist() == [2, 4]
    assert batch.tgt.tolist() == [
        [BOS_ID, 10, 11, 12, EOS_ID],
        [BOS_ID, 9, EOS_ID, PAD_ID, PAD_ID],
    ]
    assert batch.tgt_lens.tolist() == [5, 3]
    assert batch.tgt_in.tolist() == [[BOS_ID, 10, 11, 12], [BOS_ID, 9, EOS_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[10, 11, 12, EOS_ID], [9, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.num_tgt_tokens == int((batch.tgt_out != PAD_ID).sum()) == 6
    assert batch.num_src_tokens == int((batch.src != PAD_ID).sum()) == 6
    assert batch.indices.tolist() == [1, 0]
    assert len(batch) == 2
    moved = batch.to("cpu")
    assert isinstance(moved, Batch) and moved.num_tgt_tokens == 6
    assert torch.equal(moved.tgt, batch.tgt)


def test_batches_respect_the_budget_and_cover_every_sentence_once() -> None:
    src, tgt = _random_lengths()
    sampler = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=1)
    for epoch in range(3):
        batches = _epoch(sampler, epoch)
        assert len(batches) == len(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(len(src)))
        for batch in batches:
            assert _cost(batch, src, tgt) <= MAX_TOKENS or len(batch) == 1
        assert sorted(i for batch in batches if len(batch) == 1 for i in batch)[:3] == [0, 1, 2]
    # Sentences this short fill the budget well: on average over 75% of it.
    costs = [_cost(batch, src, tgt) for batch in _epoch(sampler, 0)[3:]]
    assert np.mean(costs) > 0.75 * MAX_TOKENS


def test_batches_are_as_large_as_the_budget_allows() -> None:
    src, tgt = _random_lengths()
    batches = list(TokenBatchSampler(src, tgt, MAX_TOKENS, shuffle=False))
    for batch, following in itertools.pairwise(batches):
        assert _cost([*batch, following[0]], src, tgt) > MAX_TOKENS


def test_shuffling_depends_on_seed_and_epoch_only() -> None:
    src, tgt = _random_lengths()
    first = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=1)
    again = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=1)
    other_seed = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=2)
    assert _epoch(first, 0) == _epoch(again, 0)
    assert _epoch(first, 1) == _epoch(again, 1)
    assert _epoch(first, 0) != _epoch(first, 1)
    assert _epoch(first, 0) != _epoch(other_seed, 0)
    assert len(first) == len(other_seed)


def test_without_shuffling_batches_come_in_length_order() -> None:
    src, tgt = _random_lengths()
    sampler = TokenBatchSampler(src, tgt, MAX_TOKENS, shuffle=False)
    batches = _epoch(sampler, 0)
    assert batches == _epoch(sampler, 5) == list(sampler)
    order = [i for batch in batches for i in batch]
    lengths = np.maximum(src, tgt)[order]
    assert (np.diff(lengths) >= 0).all()


def test_resume_continues_at_the_next_batch() -> None:
    src, tgt = _random_lengths()
    sampler = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=3)
    sampler.set_epoch(2)
    full = list(sampler)
    iterator = iter(sampler)
    seen = [next(iterator) for _ in range(7)]
    state = sampler.state_dict()
    assert state == {"epoch": 2, "position": 7}

    resumed = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=3)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # a training loop may set the restored epoch again
    rest = list(resumed)
    assert seen + rest == full
    assert resumed.state_dict() == {"epoch": 2, "position": len(full)}
    assert list(resumed) == full  # a later pass over the epoch starts from its beginning
    resumed.set_epoch(3)
    assert list(resumed) == _epoch(TokenBatchSampler(src, tgt, MAX_TOKENS, seed=3), 3)
    with pytest.raises(ValueError, match="position"):
        resumed.load_state_dict({"epoch": 0, "position": len(full) + 1})


@pytest.mark.parametrize("num_replicas", [2, 3])
def test_ranks_partition_the_batches(num_replicas: int) -> None:
    src, tgt = _random_lengths()
    full = _epoch(TokenBatchSampler(src, tgt, MAX_TOKENS, seed=4), 1)
    shares = [
        _epoch(
            TokenBatchSampler(src, tgt, MAX_TOKENS, seed=4, num_replicas=num_replicas, rank=r), 1
        )
        for r in range(num_replicas)
    ]
    per_rank = len(full) // num_replicas
    assert [len(share) for share in shares] == [per_rank] * num_replicas
    for rank, share in enumerate(shares):
        assert share == full[rank : per_rank * num_replicas : num_replicas]


def test_loader_yields_every_example() -> None:
    rng = np.random.default_rng(0)
    ids = [rng.integers(4, 50, size=rng.integers(0, 12)).tolist() for _ in range(300)]
    dataset = ParallelDataset.from_ids(ids, ids[::-1])
    sampler = TokenBatchSampler(dataset.src_lens, dataset.tgt_lens, max_tokens=64, seed=0)
    rows = {}
    for batch in make_loader(dataset, sampler):
        assert batch.src.numel() <= 64 and batch.tgt.numel() <= 64
        for row, index in enumerate(batch.indices.tolist()):
            rows[index] = batch.src[row, : batch.src_lens[row]].tolist()
    assert rows == {i: [*ids[i], EOS_ID] for i in range(300)}


def test_bucket_lengths_rounds_up_to_the_next_bucket() -> None:
    buckets = (4, 8, 16)
    lengths = np.array([1, 4, 5, 8, 9, 16])
    assert bucket_lengths(lengths, buckets).tolist() == [4, 4, 8, 8, 16, 16]
    with pytest.raises(ValueError, match="17 tokens is longer than every bucket"):
        bucket_lengths(np.array([3, 17]), buckets)


def _bucketed_epoch(dataset: ParallelDataset, buckets: tuple[int, ...], max_tokens: int) -> list:
    """One epoch of the GPU recipe's batches (as seq2seq.training.loop.training_batches)."""
    lens = bucket_lengths(np.maximum(dataset.src_lens, dataset.tgt_lens), buckets)
    sampler = TokenBatchSampler(lens, lens, max_tokens, seed=0)
    return list(make_loader(dataset, sampler, collate_fn=BucketCollate(buckets, max_tokens)))


def test_bucketed_batches_take_only_the_bucket_shapes_and_keep_every_token() -> None:
    rng = np.random.default_rng(0)
    ids = [rng.integers(4, 50, size=rng.integers(0, 30)).tolist() for _ in range(1000)]
    dataset = ParallelDataset.from_ids(ids, [[*row[::-1], 7] for row in ids])
    buckets, max_tokens = (8, 16, 32), 256
    rows = {}
    shapes = set()
    for batch in _bucketed_epoch(dataset, buckets, max_tokens):
        shapes.add((*batch.src.shape, *batch.tgt.shape))
        real = batch.indices >= 0
        plain = collate([dataset[i] for i in batch.indices[real].tolist()])
        assert batch.num_tgt_tokens == plain.num_tgt_tokens
        assert batch.num_src_tokens == plain.num_src_tokens
        assert (batch.tgt_out[~real] == PAD_ID).all()  # filler rows: nothing to predict
        assert batch.src[~real, 0].eq(EOS_ID).all() and batch.tgt[~real, 0].eq(BOS_ID).all()
        for row, index in enumerate(batch.indices[real].tolist()):  # real rows come first
            rows[index] = batch.src[row, : batch.src_lens[row]].tolist()
    assert shapes == {(max_tokens // b, b) * 2 for b in buckets}
    assert rows == {i: [*ids[i], EOS_ID] for i in range(1000)}


@pytest.mark.slow  # prepares Multi30k (session fixture)
def test_an_epoch_of_multi30k_in_the_gpu_recipes_buckets(multi30k_en_de: Path) -> None:
    """A real epoch of the recipe's batches (configs/transformer.multi30k.en-de.gpu.toml) has
    one (rows, length) shape per bucket used, and so one compiled graph each."""
    cfg = load_config(GPU_RECIPE)
    dataset = PreparedData.load(multi30k_en_de).dataset("train")
    batches = _bucketed_epoch(dataset, cfg.train.length_buckets, cfg.train.max_tokens)
    shapes = {batch.src.shape for batch in batches} | {batch.tgt.shape for batch in batches}
    assert shapes <= {(cfg.train.max_tokens // b, b) for b in cfg.train.length_buckets}
    assert sum(batch.num_tgt_tokens for batch in batches) == int(dataset.tgt_lens.sum()) - len(
        dataset
    )
