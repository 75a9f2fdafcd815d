"""The number guard (seq2seq.decoding.number_guard): which pieces it allows after which, and
what it changes in the shipped en-fr model's translations."""

import pytest
import torch

import seq2seq
from seq2seq.decoding.number_guard import NumberGuard, allowed_numbers, run_pieces

# A vocabulary with digits split (as the Tatoeba models') and two pieces that are not ("▁19", "90")
PIECES = ["<pad>", "<s>", "</s>", "<unk>", "▁le", "▁", ".", ",", "-", ":", "▁dollars"]
PIECES += [*"0123456789", "▁19", "90", "h"]
ID = {piece: i for i, piece in enumerate(PIECES)}


def first_banned(numbers: set[str], pieces: list[str]) -> str | None:
    """The first of `pieces` that the guard of one sentence allowing `numbers` bans, or None."""
    guard = NumberGuard.build([numbers], run_pieces(PIECES), len(PIECES))
    state = guard.roots
    for piece in pieces:
        log_probs = guard.mask(torch.zeros(1, len(PIECES)), state, torch.tensor([False]))
        if log_probs[0, ID[piece]] == float("-inf"):
            return piece
        state = guard.advance(state, torch.tensor([ID[piece]]))
    return None


def test_allowed_numbers_in_the_source_and_the_target_form():
    assert allowed_numbers("Uta paid 12.22 dollars at 14:30.", "en", "fr") == {
        "12.22",
        "12,22",
        "14:30",
    }
    assert allowed_numbers("Uta a payé 12,22 dollars.", "fr", "en") == {"12,22", "12.22"}
    assert allowed_numbers("No numbers here.", "en", "fr") == set()


def test_a_number_grouped_in_thousands_is_one_number_written_as_the_target_groups_it():
    # French groups with spaces (or a no-break space): one number, not "2", "500" and "000",
    # which the guard would let the model write alone ("500 people")
    assert allowed_numbers("Environ 2 500 000 personnes et 1\u00a0500 chats.", "fr", "en") == {
        "2500000",
        "2,500,000",
        "1500",
        "1,500",
    }
    assert allowed_numbers("Il a 1.500 euros.", "fr", "en") == {"1500", "1,500"}
    # "1,500" in French is one and a half
    assert allowed_numbers("About 1,500 people.", "en", "fr") == {"1500"}
    # numbers side by side that are no thousands stay apart: a phone number, a date
    assert allowed_numbers("Le 06 12 34 56, le 11 novembre 2022.", "fr", "en") == {
        "06",
        "12",
        "34",
        "56",
        "11",
        "2022",
    }
    assert allowed_numbers("About 1 500 people.", "en", "fr") == {"1", "500"}


def test_run_pieces_are_digits_and_separators_alone():
    assert sorted(run_pieces(PIECES).values()) == sorted(
        [".", ",", "-", ":", *"0123456789", "▁19", "90"]
    )


@pytest.mark.parametrize(
    ("pieces", "banned"),
    [
        (["▁le", "▁", *"876-7714", ".", "</s>"], None),  # the number, then punctuation
        (["▁le", "▁", *"876-71"], "1"),  # a repeated digit dropped
        (["▁le", "▁", *"876-7714", "1"], "1"),  # or one too many
        (["▁le", "▁", *"876-77", "</s>"], "</s>"),  # no ending inside a number
        (["▁le", "▁", *"876-77", "▁dollars"], "▁dollars"),  # nor a word
        (["▁", "5"], "5"),  # a number the source does not have
    ],
)
def test_a_number_is_written_whole_or_not_at_all(pieces, banned):
    assert first_banned({"876-7714"}, pieces) == banned


def test_a_source_without_numbers_allows_none():
    assert first_banned(set(), ["▁le", ".", "</s>"]) is None
    assert first_banned(set(), ["▁le", "▁", "1"]) == "1"


def test_pieces_of_several_digits_and_word_starts():
    assert first_banned({"1990"}, ["▁19", "90", ",", "▁le", "</s>"]) is None
    assert first_banned({"1990"}, ["▁19", "▁le"]) == "▁le"  # "19" is not whole
    assert first_banned({"1990"}, ["▁", *"1990", ",", "▁le"]) is None


def test_a_separator_after_a_whole_number_is_punctuation():
    assert first_banned({"12", "12,22"}, ["▁", "1", "2", ",", "▁le"]) is None
    assert first_banned({"12,22"}, ["▁", "1", "2", ",", "▁le"]) == "▁le"
    assert first_banned({"12,22"}, ["▁", *"12,22", "▁dollars", "</s>"]) is None


def test_rows_at_their_maximum_length_are_left_alone():
    guard = NumberGuard.build([{"876-7714"}], run_pieces(PIECES), len(PIECES))
    state = guard.advance(guard.roots, torch.tensor([ID["8"]]))
    log_probs = guard.mask(
        torch.zeros(2, len(PIECES)), state.repeat(2), torch.tensor([False, True])
    )
    assert log_probs[0, ID["</s>"]] == float("-inf") and log_probs[1, ID["</s>"]] == 0


def test_the_guard_keeps_the_numbers_the_shipped_en_fr_model_changes():
    """The guard is the Tatoeba models' default (their decode.keep_numbers)."""
    model = seq2seq.load("transformer-small.tatoeba.en-fr", device="cpu", precision="fp32")
    lines = [
        "My phone number is 876-7714.",
        "The door code is 38884.",
        "The train leaves at 22:11.",
    ]
    alone = model.translate(lines, beam=5, keep_numbers=False)
    guarded = model.translate(lines, beam=5)
    assert "876-7714." in guarded[0] and "38884." in guarded[1] and "22:11." in guarded[2]
    assert "876-714." in alone[0] and "3884." in alone[1] and "22:111." in alone[2]


@pytest.mark.parametrize("beam_size", [1, 5])
def test_the_gpu_searches_guard_as_the_textbook_ones(beam_size):
    from seq2seq.data.entity_copy import load_entity_test
    from seq2seq.data.specials import EOS_ID, PAD_ID
    from seq2seq.decoding import search
    from seq2seq.decoding.search import BatchedReads, max_output_lengths

    model = seq2seq.load("transformer-small.tatoeba.en-fr", device="cpu", precision="fp32")
    translator = model.translator
    lines = [pair.source for pair in load_entity_test("en-fr")[:40]]
    sources = translator.src_tokenizer.encode(lines)
    src_lens = torch.tensor([len(ids) + 1 for ids in sources])
    src = torch.full((len(sources), int(src_lens.max())), PAD_ID)
    for row, ids in enumerate(sources):
        src[row, : len(ids) + 1] = torch.tensor([*ids, EOS_ID])
    max_lens = max_output_lengths(src_lens, 1.5, 10)
    guard = translator._guard(sources)
    if beam_size == 1:
        args = (translator.model, src, src_lens, max_lens)
        plain = [[h] for h in search.greedy_search(*args, guard=guard)]
        fast = [[h] for h in search.greedy_search(*args, guard=guard, reads=BatchedReads(4))]
    else:
        args = (translator.model, src, src_lens, beam_size, max_lens)
        plain = search.beam_search(*args, nbest=2, guard=guard)
        fast = search.beam_search(*args, nbest=2, guard=guard, reads=BatchedReads(4))
    assert [[h.tokens for h in n] for n in fast] == [[h.tokens for h in n] for n in plain]
    scores = torch.tensor([[h.score for h in n] for n in plain])
    assert torch.allclose(torch.tensor([[h.score for h in n] for n in fast]), scores, atol=1e-5)
