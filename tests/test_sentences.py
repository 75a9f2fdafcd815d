"""Input lines cut into sentences before translation (seq2seq/decoding/sentences.py), in the
translator, the Python API and the command line; the server's routes are in test_serve.py and
test_explorer.py."""

import pytest

import seq2seq
from seq2seq.commands import translate
from seq2seq.decoding.line_translator import SourceTooLong
from seq2seq.decoding.sentences import join_line, split_line, split_lines

SENTENCES = ["A dog runs in the snow.", "Two men play football.", "A woman sings."]
# the whitespace between them, as a paragraph may have it: two spaces, a line break
PARAGRAPH = SENTENCES[0] + "  " + SENTENCES[1] + "\n" + SENTENCES[2]


@pytest.fixture(scope="module")
def model() -> seq2seq.Model:
    return seq2seq.load("transformer-tiny.multi30k.en-de", device="cpu", precision="fp32")


def test_a_line_is_cut_into_its_sentences_with_the_whitespace_between() -> None:
    assert split_line(PARAGRAPH, "en") == (SENTENCES, ["  ", "\n"])
    assert join_line(["a", "b", "c"], ["  ", "\n"]) == "a  b\nc"
    titles = ["Bonjour M.  Dupont.", "Mlle. Roux et Pr. Noir arrivent."]
    assert split_line("\t".join(titles), "fr") == (titles, ["\t"])


@pytest.mark.parametrize(
    ("line", "language"),
    [
        ("Dr. Smith will see you at 3 p.m. tomorrow.", "en"),
        ("Mr. Brown lives in St. Louis, e.g. near the river.", "en"),
        ("The price rose by 3.5 percent.", "en"),
        ("  Mme Martin habite à Saint-Louis, p. ex. près du parc.  ", "fr"),
        ("M. Dupont et Me. Blanc voient Dr. Wu.", "fr"),  # sentencex ends a sentence after each
        ("", "en"),
        ("   ", "fr"),
    ],
)
def test_a_line_of_one_sentence_is_itself(line: str, language: str) -> None:
    assert split_line(line, language) == ([line], [])


def test_lines_keep_track_of_their_sentences() -> None:
    sentences = split_lines(["One.", PARAGRAPH, ""], "en")
    assert sentences.sentences == ["One.", *SENTENCES, ""]
    assert sentences.line_of == [0, 1, 1, 1, 2]
    assert sentences.by_line(list("abcde")) == [["a"], ["b", "c", "d"], ["e"]]
    assert sentences.where(2) == (1, "sentence 2: ") and sentences.where(0) == (0, "")
    assert split_lines([PARAGRAPH], "en", split=False).sentences == [PARAGRAPH]


def test_a_paragraph_comes_back_as_its_sentences_translations(model: seq2seq.Model) -> None:
    translator = model.translator
    alone = [nbest[0] for nbest in translator.translate(SENTENCES, beam_size=1)]
    (nbest,) = translator.translate([PARAGRAPH], beam_size=1)
    (best,) = nbest
    assert best.text == alone[0].text + "  " + alone[1].text + "\n" + alone[2].text
    assert best.score == pytest.approx(sum(t.score for t in alone))
    assert best.tokens == [i for t in alone for i in t.tokens]
    assert best.src_pieces == [p for t in alone for p in t.src_pieces]
    # off: the whole line, as one input, as before
    (whole,) = translator.translate_ids(translator.src_tokenizer.encode([PARAGRAPH]), 1)
    (off,) = translator.translate([PARAGRAPH], beam_size=1, split_sentences=False)
    assert [t.text for t in off] == [t.text for t in whole] and off[0].text != best.text


def test_one_sentence_lines_and_nbest_lists_are_unchanged(model: seq2seq.Model) -> None:
    lines = [SENTENCES[0], " A cat sleeps on a red sofa . ", ""]
    on = model.translator.translate(lines, beam_size=2, nbest=2)
    off = model.translator.translate(lines, beam_size=2, nbest=2, split_sentences=False)
    assert [[(t.text, t.score) for t in n] for n in on] == [
        [(t.text, t.score) for t in n] for n in off
    ]
    (ranked,) = model.translator.translate([PARAGRAPH], beam_size=2, nbest=2)
    assert len(ranked) == 2 and ranked[0].score >= ranked[1].score


def test_the_attention_maps_of_a_paragraph_are_its_sentences_on_the_diagonal(
    model: seq2seq.Model,
) -> None:
    alone = [n[0] for n in model.translator.translate(SENTENCES[:2], 1, need_attention=True)]
    (nbest,) = model.translator.translate(["  ".join(SENTENCES[:2])], 1, need_attention=True)
    rows, cols = alone[0].attention.shape
    assert nbest[0].attention.shape == (
        rows + len(alone[1].tgt_pieces),
        cols + len(alone[1].src_pieces),
    )
    assert nbest[0].attention[:rows, :cols].equal(alone[0].attention)
    assert nbest[0].attention[rows:, cols:].equal(alone[1].attention)
    assert not nbest[0].attention[:rows, cols:].any()


def test_the_length_limit_applies_per_sentence_and_names_the_line(model: seq2seq.Model) -> None:
    translator = model.translator.with_decode(max_src_pieces=12)
    long = "A man in a blue shirt is standing on a tall ladder near the house."
    assert translator.translate([f"{SENTENCES[2]} {SENTENCES[2]}"], beam_size=1)[0][0].text
    with pytest.raises(SourceTooLong) as caught:
        translator.translate(["Hi.", f"{SENTENCES[2]} {long}"], beam_size=1)
    assert caught.value.index == 1 and caught.value.problem.startswith("sentence 2: ")


def test_the_api_honours_split_sentences(model: seq2seq.Model) -> None:
    on = model.translate([PARAGRAPH], beam=1)
    alone = model.translate(SENTENCES, beam=1)
    assert on == [alone[0] + "  " + alone[1] + "\n" + alone[2]]
    assert model.translate([PARAGRAPH], beam=1, split_sentences=False) != on
    with pytest.raises(ValueError, match=r"^split_sentences: 'no' is not True or False$"):
        model.translate([PARAGRAPH], split_sentences="no")
    second = model.attention(PARAGRAPH, beam=1, sentence=1)
    assert second.translation.text == alone[1]
    with pytest.raises(ValueError, match=r"^sentence: 3, but the line has 3 sentences"):
        model.attention(PARAGRAPH, sentence=3)


def test_the_command_line_option_and_a_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert translate.parse_args(["--model", "m"]).split_sentences is True
    assert translate.parse_args(["--model", "m", "--no-split-sentences"]).split_sentences is False
    with pytest.raises(SystemExit) as exited:
        translate.parse_args(["--model", "m", "--no-split-sentences=yes"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "--no-split-sentences" in err and "\n" not in err
