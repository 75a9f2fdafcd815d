"""HTML through translation (seq2seq/decoding/markup.py): tags put back around the output words
aligned to the words they enclosed, by hand-made alignments, then through the shipped en-fr
model, its Python API and the seq2seq translate command."""

from pathlib import Path

import pytest
from html_check import well_formed

import seq2seq
from seq2seq.api import Model
from seq2seq.commands import main
from seq2seq.data.word_links import Link
from seq2seq.decoding.alignment import WordAlignment
from seq2seq.decoding.markup import WORD, cut, parse_html, render
from seq2seq.decoding.sentences import split_lines
from seq2seq.errors import UserError

EN_FR = "transformer-small.tatoeba.en-fr"
PARAGRAPH = (
    '<p>The <b>red <i>car</i></b> is <a href="https://example.com/?a=1&amp;b=2" '
    'title="A &amp; B">here</a>. I like <em>big <strong>dogs</strong></em>.<br>'
    "Tom and Mary are my <u>friends</u>.</p>"
)


def translated(html: str, outputs: list[str], links: list[set[Link]]) -> str:
    """`html` rendered with `outputs` as the translations of its sentences, aligned by
    `links` (one set a sentence)."""
    markup = parse_html(html)
    sentences = cut([markup], lambda lines, split: split_lines(lines, "en", split))
    assert len(sentences.sentences) == len(outputs)
    alignments = [
        WordAlignment(source.split(), output.split(), found)
        for source, output, found in zip(sentences.sentences, outputs, links, strict=True)
    ]
    return render(markup, alignments)


def identity(html: str) -> str:
    """`html` 'translated' into itself, each word linked to itself."""
    markup = parse_html(html)
    sentences = cut([markup], lambda lines, split: split_lines(lines, "en", split))
    words = [WORD.findall(sentence) for sentence in sentences.sentences]
    alignments = [WordAlignment(w, w, {(i, i) for i in range(len(w))}) for w in words]
    return render(markup, alignments)


def test_nested_tags_follow_their_words_and_stay_nested() -> None:
    html = "<p>The <b>red <i>car</i></b> is small.</p>"
    links = {(0, 0), (1, 2), (2, 1), (3, 3), (4, 4)}
    assert translated(html, ["La voiture rouge est petite."], [links]) == (
        "<p>La <b><i>voiture</i> rouge</b> est petite.</p>"
    )


def test_links_keep_their_attributes_verbatim_and_entities_are_escaped_again() -> None:
    html = "<a href=\"/x?a=1&amp;b=2\" title='A &amp; B' data-n=1>Tom &amp; Mary</a> &lt;3"
    out = translated(html, ["Tom & Marie <3"], [{(0, 0), (1, 1), (2, 2), (3, 3)}])
    assert out == "<a href=\"/x?a=1&amp;b=2\" title='A &amp; B' data-n=1>Tom &amp; Marie</a> &lt;3"
    assert parse_html(html).text == "Tom & Mary <3"


def test_punctuation_goes_inside_an_element_only_where_its_text_has_some() -> None:
    three = [{(0, 0), (1, 1), (2, 2)}]
    # trailing: after the end tag, or inside when the element's text ends with punctuation
    out = translated('I am <a href="x">here</a>.', ["Je suis ici."], three)
    assert out == 'Je suis <a href="x">ici</a>.'
    assert translated("my <u><b>friends</b></u>.", ["mes amis."], [{(0, 0), (1, 1)}]) == (
        "mes <u><b>amis</b></u>."
    )
    assert translated("He is <b>here!</b>", ["Il est ici!"], three) == "Il est <b>ici!</b>"
    assert translated("<b>A</b>&amp;", ["B&"], [{(0, 0)}]) == "<b>B</b>&amp;"
    # leading: before the start tag, or inside; all the punctuation at that edge
    assert translated('I said "<i>no</i>".', ["J'ai dit «non»."], three) == (
        "J'ai dit «<i>non</i>»."
    )
    assert translated('I said <i>"no"</i>.', ["J'ai dit «non»."], three) == (
        "J'ai dit <i>«non».</i>"
    )
    # words of punctuation alone (French spacing) at an edge: left out, or kept in
    out = translated("Where is <b>Tom</b>?", ["Où est Tom ?"], [three[0] | {(2, 3)}])
    assert out == "Où est <b>Tom</b> ?"
    assert translated('"<i>no</i>"', ["« non »"], [{(0, 0), (0, 1), (0, 2)}]) == ("« <i>non</i> »")
    assert translated("<b>Come here!</b>", ["Venez ici !"], [{(0, 0), (1, 1), (1, 2)}]) == (
        "<b>Venez ici !</b>"
    )
    # a word of punctuation alone, the element's only word, is kept
    assert translated("<b>Ha</b>", ["!"], [{(0, 0)}]) == "!<b></b>"
    # a nested element goes no further than its parent
    assert translated("<b><i>here,</i> now</b>", ["ici,"], [{(0, 0)}]) == "<b><i>ici</i></b>,"


def test_void_tags_sit_before_the_output_word_of_the_next_source_word() -> None:
    html = 'a <br>b <img src="x.png" alt="X">c'
    out = translated(html, ["C A B"], [{(0, 1), (1, 2), (2, 0)}])
    assert out == '<img src="x.png" alt="X">C A <br>B'
    # after the last word, or before words linked to nothing: at the end
    assert translated("a b<br>", ["A B"], [{(0, 0), (1, 1)}]) == "A B<br>"
    assert translated("a <hr/>b", ["A B"], [{(0, 0), (0, 1)}]) == "A B<hr/>"


def test_an_element_linked_to_nothing_keeps_its_place_before_its_next_word() -> None:
    html = "<b>the</b> <i>cat</i> sleeps"
    out = translated(html, ["le chat dort"], [{(1, 0), (1, 1), (2, 2)}])
    assert out == "<b></b><i>le chat</i> dort"
    # an empty element inside a word wraps nothing
    assert translated("x<b></b>y z", ["X Y"], [{(0, 0), (1, 1)}]) == "X <b></b>Y"


def test_crossing_sister_spans_are_made_well_formed() -> None:
    html = "<p>a <b>b c</b> <i>d</i> e</p>"
    links = {(0, 0), (1, 3), (2, 1), (3, 2), (4, 4)}
    out = translated(html, ["A B C D E"], [links])
    assert out == "<p>A <b>B C D</b> <i></i>E</p>"
    well_formed(out)


@pytest.mark.parametrize(
    "html",
    [
        "<b>bold <i>both</b> after",
        "</p>stray <b>x",
        '<a href="x">unclosed <i>deep',
        "x </i></b> y",
        "<p><p>a</p>",
        "<b>a &amp b &lt; c &#x41; &nosuch;",
        "<!-- note -->x<!DOCTYPE html><?pi x?> y",
        "<ul><li>one<li>two</ul>",
        "<b>one. <i>Two</b> three.</i> Four <b",
        "<script>if (a < b) x();</script>text<style>p {}</style>",
        "",
        "   ",
    ],
)
def test_broken_html_keeps_all_its_text_and_comes_out_well_formed(html: str) -> None:
    out = identity(html)
    _, text = well_formed(out)
    markup = parse_html(html)
    assert WORD.findall(text) == WORD.findall(markup.text)
    elements, queue = [], list(markup.root.children)
    while queue:
        element = queue.pop()
        elements.append(element.start_tag)
        queue += element.children
    assert all(tag in out for tag in elements)


@pytest.fixture(scope="module")
def en_fr() -> Model:
    return seq2seq.load(EN_FR, device="cpu", precision="fp32")


def start_tags(html: str) -> list[str]:
    return well_formed(html)[0]


def test_a_paragraph_of_three_sentences_keeps_every_tag(en_fr: Model) -> None:
    (out,) = en_fr.translate([PARAGRAPH], format="html")
    tags, text = well_formed(out)
    assert tags == start_tags(PARAGRAPH)
    plain = en_fr.translate([parse_html(PARAGRAPH).text])[0]
    assert text.split() == plain.replace("\n", " ").split()
    # the words the model aligns are wrapped by their tags
    assert '<a href="https://example.com/?a=1&amp;b=2" title="A &amp; B">ici</a>. ' in out
    assert "<i>voiture</i>" in out
    # the full stops after the tags stay after them
    assert "<strong>chiens</strong></em>.<br>" in out
    assert "<u>amis</u>.</p>" in out


def test_the_api_checks_the_format(en_fr: Model) -> None:
    with pytest.raises(ValueError, match="format 'xml': one of text, html"):
        en_fr.translate(["a"], format="xml")
    with pytest.raises(ValueError, match="nbest: format html"):
        en_fr.translate(["a"], nbest=2, format="html")


def test_translate_command_format_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], en_fr: Model
) -> None:
    source = tmp_path / "in.html"
    lines = [PARAGRAPH, "<b>Hello</b> &amp; welcome!"]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    main(["translate", "--model", EN_FR, "--precision", "fp32", "--format", "html",
          "--input", str(source)])  # fmt: skip
    assert capsys.readouterr().out.splitlines() == en_fr.translate(lines, format="html")
    with pytest.raises(SystemExit) as stopped:
        main(["translate", "--model", EN_FR, "--format", "html", "--nbest", "2"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.startswith("error: --format html: the best translation alone")


def test_ctranslate2_alone_cannot_align_so_html_is_one_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fast = seq2seq.load(EN_FR, engine="ctranslate2", keep_numbers=False)
    with pytest.raises(UserError, match="format html: word alignments come from the PyTorch"):
        fast.translate(["<b>Hello</b>"], format="html")
    with pytest.raises(SystemExit) as stopped:
        main(["translate", "--model", EN_FR, "--engine", "ctranslate2", "--no-keep-numbers",
              "--format", "html", "--input", "/dev/null"])  # fmt: skip
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        "error: --format html: word alignments come from the PyTorch engine, and this model is "
        "translated by CTranslate2 alone; translate it on the PyTorch engine\n"
    )
