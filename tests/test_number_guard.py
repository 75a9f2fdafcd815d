"""The number guard (seq2seq.decoding.number_guard): which pieces it allows after which, and
what it changes in the shipped en-fr model's translations."""

import pytest
import torch

import seq2seq
from seq2seq.decoding.number_guard import (
    EOS_COST,
    GuardVocabulary,
    NumberGuard,
    allowed_numbers,
    grouped_in_thousands,
    number_forms,
)

# A vocabulary with digits split (as the Tatoeba models') and two pieces that are not ("▁19",
# "90"), and the pieces of a few numbers in words
PIECES = ["<pad>", "<s>", "</s>", "<unk>", "▁le", "▁", ".", ",", "-", ":", "▁dollars", "▁there"]
PIECES += [*"0123456789", "▁19", "90", "h", "▁twenty", "five", "for", "f", "ive", "▁students"]
PIECES += ["▁vingt", "cinq", "cin", "u", "▁soixante", "▁et", "▁onze", "▁ans", "▁sixty", "▁and"]
PIECES += ["▁Lê", "▁Th", "▁Ánh", "<0xE1>", "<0xBB>", "<0x8B>", "<0xC0>"]  # "ị" in bytes: E1 BB 8B
ID = {piece: i for i, piece in enumerate(PIECES)}
VOCABULARY = GuardVocabulary.of(PIECES)


def first_banned(numbers: list[set[str]], pieces: list[str], tgt: str = "fr") -> str | None:
    """The first of `pieces` that the guard of one sentence whose numbers have the forms
    `numbers` (one set a number) in `tgt` bans, or None."""
    guard = NumberGuard.build([numbers], VOCABULARY, tgt)
    state = guard.starts
    for piece in pieces:
        log_probs = guard.mask(torch.zeros(1, len(PIECES)), state, torch.tensor([False]))
        if log_probs[0, ID[piece]] == float("-inf"):
            return piece
        state = guard.advance(state, torch.tensor([ID[piece]]))
    return None


def digit_forms(line: str, src: str, tgt: str) -> list[set[str]]:
    """The forms in digits of each number of `line` (`allowed_numbers` without words)."""
    numbers = allowed_numbers(line, src, tgt)
    return [{form for form in forms if not form.startswith("▁")} for forms in numbers]


def test_allowed_numbers_in_the_source_and_the_target_form():
    assert digit_forms("Uta paid 12.22 dollars at 14:30.", "en", "fr") == [
        {"12.22", "12,22"},
        {"14:30"},
    ]
    assert digit_forms("Uta a payé 12,22 dollars.", "fr", "en") == [{"12,22", "12.22"}]
    assert allowed_numbers("No numbers here.", "en", "fr") == []


def test_a_number_grouped_in_thousands_is_one_number_written_as_the_target_groups_it():
    # French groups with spaces (or a no-break space): one number, not "2", "500" and "000",
    # which the guard would let the model write alone ("500 people")
    # the target's grouping, or none for four digits ("1500"; "2500000" would be hard to read)
    line = "Environ 2 500 000 personnes et 1\u00a0500 chats."
    assert digit_forms(line, "fr", "en") == [{"2,500,000"}, {"1500", "1,500"}]
    assert digit_forms("About 52,000 people.", "en", "fr") == [{"52▁000"}]
    assert digit_forms("Il a 1.500 euros.", "fr", "en") == [{"1500", "1,500"}]
    # "1,500" in French is one and a half: French writes "1 500" (a space: "▁" in pieces)
    assert digit_forms("About 1,500 people.", "en", "fr") == [{"1500", "1▁500"}]
    # and the decimals of a grouped number after the target's decimal mark
    assert digit_forms("It costs 1,250.00 euros.", "en", "fr") == [{"1250,00", "1▁250,00"}]
    assert digit_forms("Il coûte 1 250,00 euros.", "fr", "en") == [{"1250.00", "1,250.00"}]
    # numbers side by side that are no thousands stay apart: phone numbers, a date
    assert digit_forms("Au +34 91 555 0142.", "fr", "en") == [{"34"}, {"91"}, {"555"}, {"0142"}]
    assert digit_forms("Le 06 12 34 56, le 11 novembre 2022.", "fr", "en") == [
        {"06"},
        {"12"},
        {"34"},
        {"56"},
        {"11"},
        {"2022"},
    ]
    assert digit_forms("About 1 500 people.", "en", "fr") == [{"1"}, {"500"}]


def test_numbers_in_words_are_the_sources_numbers_and_may_be_written_in_words():
    assert allowed_numbers("Il y a vingt-cinq élèves.", "fr", "en") == [
        {"25", "▁twenty-five", "▁Twenty-five"}
    ]
    assert allowed_numbers("Il a quatre-vingt-dix-sept ans.", "fr", "en") == [
        {"97", "▁ninety-seven", "▁Ninety-seven"}
    ]
    assert allowed_numbers("She is 71.", "en", "fr") == [
        {"71", "▁soixante▁et▁onze", "▁Soixante▁et▁onze"}
    ]
    # not numbers: a magnitude in the plural, an ordinal, "one" and "two" alone (articles,
    # pronouns); a number with a leading zero has no words
    for line in ("Hundreds of people came.", "The fifth time.", "One of the two cats."):
        assert allowed_numbers(line, "en", "fr") == [], line
    assert allowed_numbers("Room 07.", "en", "fr") == [{"07"}]


def test_numbers_of_any_length():
    """More digits than int() converts (4,300) are grouped and followed all the same."""
    digits = "7" * 4301
    assert grouped_in_thousands("2500000") == "2,500,000"
    assert grouped_in_thousands(digits).replace(",", "") == digits
    spaced = " ".join(["1", *["000"] * 1700])
    assert number_forms(spaced, "fr", "en") == {"1" + ",000" * 1700}
    numbers = allowed_numbers(f"Le code est {digits}.", "fr", "en")
    assert numbers == [{digits}]
    assert first_banned(numbers, ["▁le", "▁", "7", "7", "8"]) == "8"


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
    assert first_banned([{"876-7714"}], pieces) == banned


def test_a_source_without_numbers_allows_none():
    assert first_banned([], ["▁le", ".", "</s>"]) is None
    assert first_banned([], ["▁le", "▁", "1"]) == "1"


def test_pieces_of_several_digits_and_word_starts():
    assert first_banned([{"1990"}], ["▁19", "90", ",", "▁le", "</s>"]) is None
    assert first_banned([{"1990"}], ["▁19", "▁le"]) == "▁le"  # "19" is not whole
    assert first_banned([{"1990"}], ["▁", *"1990", ",", "▁le"]) is None


def test_a_number_grouped_by_spaces_is_written_whole():
    numbers = allowed_numbers("About 1,500 people.", "en", "fr")
    assert first_banned(numbers, ["▁", "1", "▁", *"500", "▁le", "</s>"]) is None
    assert first_banned(numbers, ["▁", *"1500", "▁le", "</s>"]) is None
    assert first_banned(numbers, ["▁", "1", "▁le"]) == "▁le"  # "1" alone is no source number
    assert first_banned(numbers, ["▁", "1", "▁", *"50", "▁le"]) == "▁le"
    assert first_banned(numbers, ["▁", *"1500", "▁", "5"]) == "5"  # used up


def test_a_separator_after_a_whole_number_is_punctuation():
    assert first_banned([{"12"}, {"12,22"}], ["▁", "1", "2", ",", "▁le"]) is None
    assert first_banned([{"12,22"}], ["▁", "1", "2", ",", "▁le"]) == "▁le"
    assert first_banned([{"12,22"}], ["▁", *"12,22", "▁dollars", "</s>"]) is None


def test_rows_at_their_maximum_length_are_left_alone():
    guard = NumberGuard.build([[{"876-7714"}]], VOCABULARY, "fr")
    state = guard.advance(guard.starts, torch.tensor([ID["8"]]))
    log_probs = guard.mask(
        torch.zeros(2, len(PIECES)), state.repeat(2, 1), torch.tensor([False, True])
    )
    assert log_probs[0, ID["</s>"]] == float("-inf") and log_probs[1, ID["</s>"]] == 0


def eos_log_prob(numbers: list[set[str]], pieces: list[str]) -> float:
    """The EOS's log-probability, from 0, after `pieces` under the guard of `numbers`."""
    guard = NumberGuard.build([numbers], VOCABULARY, "fr")
    state = guard.starts
    for piece in pieces:
        state = guard.advance(state, torch.tensor([ID[piece]]))
    log_probs = guard.mask(torch.zeros(1, len(PIECES)), state, torch.tensor([False]))
    return log_probs[0, ID["</s>"]].item()


def test_each_number_is_used_as_often_as_the_source_has_it_and_the_eos_waits_for_all():
    # "at 11:58 and left a tip of 20 dollars" -> "... à 11:58 ... 11:58 dollars"
    numbers = allowed_numbers("He came at 11:58 and left a tip of 20 dollars.", "en", "fr")
    assert first_banned(numbers, ["▁le", "▁", *"11:58", "▁le", "▁", *"11:5"]) == "1"
    assert eos_log_prob(numbers, ["▁le", "▁", *"11:58", "."]) == -EOS_COST  # 20 left out
    assert eos_log_prob(numbers, ["▁le", "▁", *"20", "▁dollars", "▁", *"11:58"]) == 0
    assert eos_log_prob(numbers, ["▁le", "▁", *"11:58", "▁vingt", "▁dollars"]) == 0  # in words
    assert eos_log_prob([], ["▁le"]) == 0 and EOS_COST > 0
    assert first_banned([{"20"}, {"20"}], ["▁", *"20", "▁le", "▁", *"20", "▁le", "▁", "2"]) == "2"


def test_a_number_is_never_glued_to_another():
    # "06 12 34 56 78" -> "06 12:34 56 78"; "3 March 1994" -> "March 3994"
    numbers = allowed_numbers("Call 06 12 34 56 78.", "en", "fr")
    phone = ["▁", *"06", "▁", *"12", "▁", *"34", "▁", *"56", "▁", *"78", ".", "</s>"]
    assert first_banned(numbers, phone) is None
    assert first_banned(numbers, ["▁", *"06", "▁", *"12", ":", "3"]) == "3"
    numbers = allowed_numbers("Priya was born on 3 March 1994.", "en", "fr")
    assert first_banned(numbers, ["▁le", "▁", "3", "9"]) == "9"
    assert first_banned(numbers, ["▁le", "▁", "3", ",", "▁", *"1994", ".", "</s>"]) is None


def test_a_number_in_words_is_the_sources_value_whole():
    # "Il y a vingt-cinq élèves" -> "There are twenty-for students" (the guard refused "25")
    numbers = allowed_numbers("Il y a vingt-cinq élèves.", "fr", "en")
    assert first_banned(numbers, ["▁there", "▁", "2", "5", "▁students", ".", "</s>"], "en") is None
    words = ["▁there", "▁twenty", "-", "five", "▁students", ".", "</s>"]
    assert first_banned(numbers, words, "en") is None
    assert first_banned(numbers, ["▁there", "▁twenty", "-", "f", "ive", "</s>"], "en") is None
    assert first_banned(numbers, ["▁there", "▁twenty", "-", "for"], "en") == "for"
    # "twenty" alone is 20, no number of the source: it goes on to 25
    assert first_banned(numbers, ["▁twenty", "▁students"], "en") == "▁students"
    assert first_banned(numbers, ["▁twenty", "-", "five", "▁twenty"], "en") == "▁twenty"  # used up
    # "soixante et onze" is 71, in three words; "soixante" alone is 60; "vingt-cinu" no number
    numbers = allowed_numbers("She is 71.", "en", "fr")
    assert first_banned(numbers, ["▁le", "▁soixante", "▁et", "▁onze", "▁ans", "</s>"]) is None
    assert first_banned(numbers, ["▁le", "▁soixante", "▁ans"]) == "▁ans"
    numbers = allowed_numbers("There are twenty-five students.", "en", "fr")
    assert first_banned(numbers, ["▁vingt", "▁le"]) == "▁le"
    assert first_banned(numbers, ["▁vingt", "-", "cin", "u"]) == "u"
    assert first_banned(numbers, ["▁vingt", "-", "cinq", "▁le", "</s>"]) is None
    assert first_banned(numbers, ["▁vingt", "-", "cinq", ".", "</s>"]) is None
    # "vingt" is whole where the source has 20 too
    numbers = allowed_numbers("Twenty or twenty-five students.", "en", "fr")
    assert first_banned(numbers, ["▁vingt", "▁le", "▁vingt", "-", "cinq", "</s>"]) is None
    # a source without numbers in words refuses no word: "sixty" is a word like another
    assert first_banned([], ["▁sixty", "▁and", "▁twenty", "▁le", "</s>"], "en") is None


@pytest.mark.parametrize(
    ("pieces", "banned"),
    [
        (["▁Lê", "▁Th", "<0xE1>", "<0xBB>", "<0x8B>", "▁Ánh", "</s>"], None),  # "Lê Thị Ánh"
        (["▁Lê", "▁Th", "<0xE1>", "<0xBB>", "▁Ánh"], "▁Ánh"),  # "Lê Th� Ánh"
        (["▁Th", "<0xE1>", "<0xBB>", "</s>"], "</s>"),
        (["▁Th", "<0xE1>", "."], "."),  # nor punctuation
        (["▁Th", "<0xE1>", "<0xBB>", "<0x8B>", "<0x8B>"], "<0x8B>"),  # one byte too many
        (["▁Th", "<0xBB>"], "<0xBB>"),  # a continuation byte without its lead
        (["▁le", "<0xC0>"], "<0xC0>"),  # a byte no UTF-8 text holds
    ],
)
def test_a_character_written_in_bytes_is_whole(pieces, banned):
    assert first_banned([], pieces) == banned


def test_the_guard_keeps_the_characters_the_shipped_en_fr_model_breaks():
    """Real output: the en-fr model alone writes "Lê Th�� Ánh", two bytes of the three of "ị"
    and one that no character starts with; with the guard, a whole character (not "ị")."""
    model = seq2seq.load("transformer-small.tatoeba.en-fr", device="cpu", precision="fp32")
    line = (
        "The new intern, Lê Thị Ánh, will share office 12 with Ramón Gutiérrez until the second"
        " office is ready in May."
    )
    [alone] = model.translate([line], beam=5, keep_numbers=False)
    [guarded] = model.translate([line], beam=5)
    assert "Lê Th\ufffd" in alone
    assert "\ufffd" not in guarded and "Ánh" in guarded and "bureau 12" in guarded


def test_the_guard_keeps_the_numbers_the_shipped_en_fr_model_changes():
    """The guard is the Tatoeba models' default (their decode.keep_numbers)."""
    model = seq2seq.load("transformer-small.tatoeba.en-fr", device="cpu", precision="fp32")
    lines = [
        "My phone number is 876-7714.",
        "The door code is 38884.",
        "The train leaves at 22:15.",
    ]
    alone = model.translate(lines, beam=5, keep_numbers=False)
    guarded = model.translate(lines, beam=5)
    assert "876-7714." in guarded[0] and "38884." in guarded[1] and "22:15." in guarded[2]
    assert "3884." in alone[1] and "à 2:15." in alone[2]


def test_the_shipped_models_group_thousands_as_the_target_does():
    """Real outputs: the en-fr model alone writes "52000" and "1,250.00" (one and a quarter, in
    French); "+34 91 555 0142" is a phone number, not 91,555."""
    en_fr = seq2seq.load("transformer-small.tatoeba.en-fr", device="cpu", precision="fp32")
    fr_en = seq2seq.load("transformer-small.tatoeba.fr-en", device="cpu", precision="fp32")
    lines = ["The salary is 52,000 euros a year.", "The bill for 1,250.00 euros is unpaid."]
    salary, bill = en_fr.translate(lines, beam=5)
    assert "52 000 euros" in salary and "1250,00 euros" in bill
    lines = ["Le salaire est de 52 000 euros par an.", "Appelle-moi au +34 91 555 0142 demain."]
    salary, phone = fr_en.translate(lines, beam=5)
    assert "52,000 euros" in salary and "34 91 555 0142" in phone


@pytest.mark.parametrize("beam", [1, 5])
def test_the_shipped_models_write_numbers_in_words_and_every_number(beam):
    """Real outputs of the Tatoeba models without a guard that counts numbers and reads words:
    "There are twenty-for students", "Il y a vingt étudiants dans ma classe" (the en-fr model
    drops the "-trois" of twenty-three), "06 12 56 78" (34 dropped). The guard makes the en-fr
    model write the number before it ends, not always in the right place (its card's limits)."""
    fr_en = seq2seq.load("transformer-small.tatoeba.fr-en", device="cpu", precision="fp32")
    en_fr = seq2seq.load("transformer-small.tatoeba.en-fr", device="cpu", precision="fp32")
    [students] = fr_en.translate(["Il y a vingt-cinq élèves."], beam=beam)
    assert "twenty-five students" in students or "25 students" in students
    [students, phone] = en_fr.translate(
        ["There are twenty-three students in my class.", "Call me at 06 12 34 56 78."], beam=beam
    )
    assert "vingt-trois" in students
    if beam > 1:  # greedy search writes "06 12 56 78" and cannot go back for the 34
        assert "06 12 34 56 78" in phone


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
