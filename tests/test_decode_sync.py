"""How often a decoding step reads the device. On a GPU each read of a device tensor to the host
(the size of a `nonzero`, `bool(t)`, an index by a boolean mask, `.tolist()`, `.cpu()`) makes
the host wait for the GPU, which then idles while the host prepares the next step. The textbook
searches (seq2seq.decoding.search, `EVERY_STEP`) read after every step, to drop the finished
sentences and set the ended hypotheses aside; with a GPU's `BatchedReads`, once every
`check_every` steps.

Counted on a CPU as tests/test_host_sync.py counts training's reads: a dispatch mode counts the
operators that hand a value to the host, and the methods that read a tensor's values without an
operator are patched to count their calls. A step's reads are those from its `decode_step` call
to the next one's; the last step, which also assembles the outputs, is left out."""

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
import torch
from test_host_sync import HOST_READING_METHODS, ReadCounter
from test_search import held_out, new_model

from seq2seq.decoding import search
from seq2seq.decoding.search import BatchedReads, max_output_lengths
from seq2seq.models.base import Seq2SeqModel

aten = torch.ops.aten
MASK_INDEXING = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default}
# a tensor made from Python data (an index by a list, `torch.tensor`): on a GPU it is copied
# to the device from the host's memory, and the host waits for the copy
FROM_HOST_DATA = {aten.lift_fresh.default}


class StepReadCounter(ReadCounter):
    """`ReadCounter` for decoding: an index by a boolean mask counts too (its size is read),
    and `reads_before_update` marks the count at each decoding step's start."""

    def counts(self, func: Any, args: tuple) -> bool:
        boolean_index = func in MASK_INDEXING and any(
            index is not None and index.dtype == torch.bool for index in args[1]
        )
        return super().counts(func, args) or boolean_index

    def reads_of_each_step(self) -> list[int]:
        return [b - a for a, b in pairwise(self.reads_before_update)]


class HostDataCounter(StepReadCounter):
    """Counts the tensors made from Python data instead of the reads."""

    def counts(self, func: Any, args: tuple) -> bool:
        return func in FROM_HOST_DATA


def count_reads(
    run_search: Callable[[Seq2SeqModel], object],
    monkeypatch: pytest.MonkeyPatch,
    counter_class: type[StepReadCounter] = StepReadCounter,
) -> list[int]:
    """The reads (or what `counter_class` counts) of each step but the last of
    `run_search(model)` on a tiny Transformer."""
    counter = counter_class()
    model = new_model("transformer")
    decode_step = model.decode_step

    def marked_step(*args: object, **kwargs: object) -> object:
        counter.reads_before_update.append(counter.reads)
        return decode_step(*args, **kwargs)

    monkeypatch.setattr(model, "decode_step", marked_step)
    for name in HOST_READING_METHODS:
        monkeypatch.setattr(torch.Tensor, name, counter.counting(getattr(torch.Tensor, name)))
    with counter:
        run_search(model)
    monkeypatch.undo()
    assert len(counter.reads_before_update) > 8
    return counter.reads_of_each_step()


SRC, SRC_LENS, _ = held_out(size=6, seed=2)
MAX_LENS = max_output_lengths(SRC_LENS, 2.0, 6)  # an untrained model: most run to the limit


def test_textbook_beam_search_reads_four_times_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows with a repeated piece, the rows at their maximum length, the hypotheses that
    ended and the sentences still running: a nonzero each (the first from the third step on,
    with two pieces to compare)."""
    reads = count_reads(
        lambda model: search.beam_search(model, SRC, SRC_LENS, 5, MAX_LENS, max_piece_repeat=2),
        monkeypatch,
    )
    assert reads == [3, 3] + [4] * (len(reads) - 2)


def test_textbook_greedy_search_reads_twice_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows at their maximum length and the rows still running."""
    reads = count_reads(
        lambda model: search.greedy_search(model, SRC, SRC_LENS, MAX_LENS), monkeypatch
    )
    assert reads == [2] * len(reads)


@pytest.mark.parametrize("check_every", [1, 4, 8])
def test_batched_reads_beam_search_reads_once_every_check(
    monkeypatch: pytest.MonkeyPatch, check_every: int
) -> None:
    reads = count_reads(
        lambda model: search.beam_search(
            model, SRC, SRC_LENS, 5, MAX_LENS, max_piece_repeat=2, reads=BatchedReads(check_every)
        ),
        monkeypatch,
    )
    assert reads == [int(step % check_every == 0) for step in range(1, len(reads) + 1)]


@pytest.mark.parametrize("check_every", [1, 4, 8])
def test_batched_reads_greedy_search_reads_once_every_check(
    monkeypatch: pytest.MonkeyPatch, check_every: int
) -> None:
    reads = count_reads(
        lambda model: search.greedy_search(
            model, SRC, SRC_LENS, MAX_LENS, no_repeat_ngram=2, reads=BatchedReads(check_every)
        ),
        monkeypatch,
    )
    assert reads == [int(step % check_every == 0) for step in range(1, len(reads) + 1)]


GPU_SEARCHES = {
    "greedy": lambda model: search.greedy_search(
        model, SRC, SRC_LENS, MAX_LENS, reads=BatchedReads()
    ),
    "beam": lambda model: search.beam_search(
        model, SRC, SRC_LENS, 5, MAX_LENS, reads=BatchedReads()
    ),
}


@pytest.mark.parametrize("search_name", GPU_SEARCHES)
def test_batched_reads_copy_nothing_from_the_host_in_a_step(
    monkeypatch: pytest.MonkeyPatch, search_name: str
) -> None:
    """No tensor made from Python data within a step (a copy to the device that the host
    waits for, as an index by a list is): the tokens banned at every step are set by integer
    indices."""
    copies = count_reads(GPU_SEARCHES[search_name], monkeypatch, HostDataCounter)
    assert copies == [0] * len(copies)
