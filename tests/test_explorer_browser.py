"""The attention explorer in a real browser: Debian's chromium, driven by Playwright.

The server is seq2seq serve with the two shipped Transformers and a random GRU, on a free
port of 127.0.0.1; server and browser start as in benchmarks/explore.py. Every map drawn is
compared with the API's answer for the same request.
"""

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from explore import post, serve
from explorer_models import DE_EN, EN_DE, GRU_NAME
from playwright.sync_api import Browser, ConsoleMessage, Page, Route

from seq2seq.models.attention import masked_softmax

SENTENCE = "A man in a blue shirt is standing on a ladder ."
PAGE_INK = "rgb(29, 36, 48)"  # the page's text colour (explorer.css), on every piece unpainted
TOLERANCE = 2e-4  # the page shows 4 decimals of the API's weights (or of their mean)


@pytest.fixture(scope="module")
def server(random_gru: Path) -> Iterator[str]:
    """The URL of seq2seq serve serving the three models; stopped after the module."""
    with serve([str(EN_DE), str(DE_EN), str(random_gru)]) as started:
        yield started.url


def console_error(message: ConsoleMessage) -> bool:
    """An error in the console, but for the browser's note of an answer of /v1/explain or
    /v1/align with an error status (the page shows it: the bad-input tests ask for those)."""
    answered = message.location.get("url", "").endswith(("/v1/explain", "/v1/align", "/gold"))
    return message.type == "error" and not answered


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """The explorer, loaded; the test fails on any JavaScript error or console error."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: console_error(message) and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server + "/")
    page.wait_for_selector("#model option", state="attached")
    yield page
    context.close()
    assert errors == []


def api(server: str, body: dict) -> dict:
    return json.loads(post(server + "/v1/explain", body))


def shown_request(page: Page, hypothesis: int = 0) -> dict:
    """The request the page sends for what it shows now."""
    beam = int(page.input_value("#beam"))
    return {
        "model": page.input_value("#model"),
        "text": page.input_value("#text"),
        "beam": beam,
        "nbest": min(beam, 5),
        "hypothesis": hypothesis,
    }


def heatmap(page: Page) -> list[list[float]]:
    """The weights of the heatmap's cells, row by row."""
    return page.eval_on_selector(
        "#heatmap tbody",
        "body => [...body.rows].map(row => [...row.querySelectorAll('td.cell')]"
        ".map(cell => Number(cell.dataset.value)))",
    )


def mean_of_heads(heads: list[list[list[float]]]) -> list[list[float]]:
    return [
        [sum(head[i][j] for head in heads) / len(heads) for j in range(len(heads[0][0]))]
        for i in range(len(heads[0]))
    ]


def assert_same_map(shown: list[list[float]], expected: list[list[float]]) -> None:
    assert len(shown) == len(expected) and len(shown[0]) == len(expected[0])
    for shown_row, expected_row in zip(shown, expected, strict=True):
        assert shown_row == pytest.approx(expected_row, abs=TOLERANCE)


def type_sentence(page: Page, text: str) -> None:
    page.fill("#text", text)
    wait_until_shown(page, text)


def wait_until_shown(page: Page, text: str, model: str | None = None) -> None:
    """Wait until the page shows the answer for `text` (and `model`) and waits for no other."""
    page.wait_for_function(
        "([text, model]) => { const shown = document.getElementById('result').dataset;"
        " return shown.text === text && (model === null || shown.model === model)"
        " && document.getElementById('status').textContent === ''; }",
        arg=[text, model],
    )


def sharpest_last_layer_head(cross: list) -> int:
    """The head of the last layer whose rows have the lowest mean entropy."""
    entropies = [
        sum(-sum(w * math.log(w) for w in row if w > 0) for row in head) / len(head)
        for head in cross[-1]
    ]
    return entropies.index(min(entropies))


def first_map(answer: dict, hypothesis: int = 0) -> list[list[float]]:
    """The cross-attention map of the view the page opens on (the API's first_view)."""
    view = answer["first_view"]
    return answer["hypotheses"][hypothesis]["maps"][view["view"]][view["layer"]][view["head"]]


@pytest.mark.slow  # serves in another process to a browser
def test_typing_shows_the_translation_and_the_apis_cross_attention(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    answer = api(server, shown_request(page))
    shown = page.locator("#nbest li").all_inner_texts()
    assert len(shown) == len(answer["hypotheses"]) == 4
    assert shown[0].startswith(answer["hypotheses"][0]["text"])
    assert_same_map(heatmap(page), first_map(answer))
    rows, columns = len(answer["hypotheses"][0]["pieces"]), len(answer["source"]["pieces"])
    assert page.locator("#heatmap td.cell").count() == rows * columns  # T x S cells
    assert page.locator("#grid canvas.thumb").count() == 4 * 5  # 4 layers x (4 heads + mean)
    links = page.locator("#align-links line").count()
    assert links == len(answer["hypotheses"][0]["alignment"]) > 0
    # the alignment outlined on the map: the cells of every piece of two linked words
    best, source = answer["hypotheses"][0], answer["source"]
    words = {(u, v) for u, v, _ in best["alignment"]}
    expected = {
        (t, s)
        for t, u in enumerate(best["word_of_piece"])
        for s, v in enumerate(source["word_of_piece"])
        if (u, v) in words
    }
    outlined = page.eval_on_selector_all(
        "#heatmap td.cell.linked", "cells => cells.map(c => [+c.dataset.row, +c.dataset.col])"
    )
    assert {tuple(cell) for cell in outlined} == expected


@pytest.mark.slow  # serves in another process to a browser
def test_the_first_view_is_the_last_layers_sharpest_head(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    answer = api(server, shown_request(page))
    cross = answer["hypotheses"][0]["maps"]["cross"]
    head = sharpest_last_layer_head(cross)
    assert answer["first_view"] == {"view": "cross", "layer": 3, "head": head}
    assert page.input_value("#view") == "cross"
    assert page.input_value("#layer") == "3"
    assert page.input_value("#head") == str(head)
    assert_same_map(heatmap(page), cross[3][head])
    assert page.locator("#grid figure.chosen").get_attribute("data-head") == str(head)


def legend_maxima(page: Page, selector: str) -> list[float]:
    return page.eval_on_selector_all(selector, "boxes => boxes.map(b => Number(b.dataset.max))")


@pytest.mark.slow  # serves in another process to a browser
def test_every_heatmap_has_a_legend_up_to_its_largest_weight(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    maps = api(server, shown_request(page))["hypotheses"][0]["maps"]
    for view in ("cross", "encoder_self"):
        page.select_option("#view", view)
        page.select_option("#layer", "1")
        page.select_option("#head", "mean")
        shown = heatmap(page)
        (top,) = legend_maxima(page, "#heatmap-legend .legend")
        assert top == pytest.approx(max(map(max, mean_of_heads(maps[view][1]))), abs=1e-9)
        assert top == pytest.approx(max(map(max, shown)), abs=TOLERANCE)
        assert page.inner_text("#heatmap-legend .legend-min") == "0"
        assert page.inner_text("#heatmap-legend .legend-max") == f"{top:.3f}"
        # the largest cell has the scale's darkest colour, whatever the map's largest weight
        darkest = page.eval_on_selector_all(
            "#heatmap td.cell",
            "cells => cells.filter(c => c.style.background === 'rgb(8, 48, 107)').length",
        )
        assert darkest >= 1
        grid = legend_maxima(page, "#grid figure .legend")
        expected = [max(map(max, head)) for layer in maps[view] for head in layer]
        means = [max(map(max, mean_of_heads(layer))) for layer in maps[view]]
        per_layer = [
            [*expected[n * 4 : n * 4 + 4], means[n]] for n in range(len(maps[view]))
        ]  # the grid shows each layer's heads, then their mean
        assert grid == pytest.approx([value for row in per_layer for value in row], abs=1e-9)


@pytest.mark.slow  # serves in another process to a browser
def test_the_positional_encoding_plots_have_axes_and_a_diverging_scale(page: Page, server):
    type_sentence(page, SENTENCE)
    positional = api(server, shown_request(page))["positional"]
    for plot in ("#pe-matrix", "#pe-curves"):
        assert page.locator(f"{plot} g.axis.x text.tick").count() >= 2
        assert page.locator(f"{plot} g.axis.y text.tick").count() >= 2
    labels = page.locator("#pe-matrix .axis text.label").all_text_contents()
    assert labels == ["dimension i", "position p"]
    assert page.locator("#pe-curves .axis.y text.tick").all_text_contents() == ["-1", "0", "1"]
    assert page.locator("#pe-matrix rect").count() == len(positional) * len(positional[0])
    (low, high) = page.eval_on_selector(
        "#positional .legend", "box => [Number(box.dataset.min), Number(box.dataset.max)]"
    )
    assert (low, high) == (-1, 1)
    fills = page.eval_on_selector_all(
        "#pe-matrix rect", "rects => rects.map(r => r.getAttribute('fill'))"
    )
    assert fills[0] == "rgb(247,247,247)"  # PE(0, 0) = sin 0 = 0: white, the scale's middle
    assert fills[1] == "rgb(178,24,43)"  # PE(0, 1) = cos 0 = +1: the scale's red end


@pytest.mark.slow  # serves in another process to a browser
def test_switching_view_layer_head_and_model_shows_the_apis_map(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    maps = api(server, shown_request(page))["hypotheses"][0]["maps"]
    page.select_option("#layer", "2")
    page.select_option("#head", "1")
    assert_same_map(heatmap(page), maps["cross"][2][1])
    page.select_option("#view", "encoder_self")
    assert_same_map(heatmap(page), maps["encoder_self"][2][1])
    page.select_option("#view", "decoder_self")
    page.select_option("#head", "mean")
    assert_same_map(heatmap(page), mean_of_heads(maps["decoder_self"][2]))
    page.locator("#grid figure[data-layer='3'][data-head='0']").click()
    assert_same_map(heatmap(page), maps["decoder_self"][3][0])

    page.select_option("#model", GRU_NAME)
    wait_until_shown(page, SENTENCE, GRU_NAME)
    answer = api(server, shown_request(page))
    assert page.locator("#view option").all_inner_texts() == ["Bahdanau attention"]
    assert_same_map(heatmap(page), answer["hypotheses"][0]["maps"]["bahdanau"])
    assert page.locator("#positional").inner_text().startswith("The GRU has no positional")


@pytest.mark.slow  # serves in another process to a browser
def test_hovering_a_piece_colours_the_pieces_by_its_weights(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    expected = first_map(api(server, shown_request(page)))  # the map shown
    backgrounds = "chips => chips.map(chip => chip.style.background)"
    page.locator("#tgt-pieces .piece").nth(1).hover()
    shown = page.eval_on_selector_all("#src-pieces .piece", backgrounds)
    row = expected[1]
    assert shown[row.index(max(row))] == colour(max(row)) and shown.count("") == 0
    page.locator("#src-pieces .piece").nth(0).hover()
    shown = page.eval_on_selector_all("#tgt-pieces .piece", backgrounds)
    column = [row[0] for row in expected]
    assert shown == [colour(value) for value in column]


def contrast(foreground: str, background: str) -> float:
    """The WCAG 2 contrast ratio of two CSS colours "rgb(r, g, b)": 1 (alike) to 21."""

    def luminance(css: str) -> float:
        channels = [int(c) / 255 for c in re.findall(r"\d+", css)[:3]]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    darker, lighter = sorted((luminance(foreground), luminance(background)))
    return (lighter + 0.05) / (darker + 0.05)


def test_contrast_is_wcags_ratio() -> None:
    assert contrast("rgb(0, 0, 0)", "rgb(255, 255, 255)") == pytest.approx(21)
    assert contrast("rgb(255, 255, 255)", "rgb(255, 255, 255)") == 1
    # the pieces' text before inkOn: the page's ink on the darkest blue of the scale
    assert contrast(PAGE_INK, "rgb(8, 48, 107)") == pytest.approx(1.22, abs=0.01)


def text_and_background(page: Page, selector: str) -> list[tuple[str, str]]:
    """The computed text and background colours of the elements `selector` finds."""
    return page.eval_on_selector_all(
        selector,
        "nodes => nodes.map(node => { const style = getComputedStyle(node);"
        " return [style.color, style.backgroundColor]; })",
    )


@pytest.mark.slow  # serves in another process to a browser
def test_hovered_pieces_are_readable_on_their_colours(page: Page) -> None:
    """Hovering each piece in turn paints the other sentence's pieces; the text of each has a
    WCAG contrast of at least 4.5 with its colour, which the page's ink does not reach on the
    darkest of them."""
    type_sentence(page, SENTENCE)
    ink_contrasts = []
    for hovered, painted in (("#tgt-pieces", "#src-pieces"), ("#src-pieces", "#tgt-pieces")):
        for chip in page.locator(f"{hovered} .piece").all():
            chip.hover()
            colours = text_and_background(page, f"{painted} .piece")
            assert min(contrast(text, background) for text, background in colours) >= 4.5
            ink_contrasts += [contrast(PAGE_INK, background) for _, background in colours]
    assert min(ink_contrasts) < 2  # the most attended pieces are dark
    page.mouse.move(0, 0)  # unhovered: the page's colours again
    colours = text_and_background(page, ".piece")
    assert {text for text, _ in colours} == {PAGE_INK}
    assert {background for _, background in colours} == {"rgba(0, 0, 0, 0)"}


def colour(value: float) -> str:
    """The page's colour of a weight (explorer.js `colour`, top 1): white to dark blue."""
    r, g, b = (math.floor(255 - value * (255 - end) + 0.5) for end in (8, 48, 107))  # Math.round
    return f"rgb({r}, {g}, {b})"


@pytest.mark.slow  # serves in another process to a browser
def test_clicking_a_hypothesis_shows_its_maps(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    view = api(server, shown_request(page))["first_view"]  # kept when another one is clicked
    page.locator("#nbest li").nth(2).click()
    page.wait_for_selector("#nbest li.chosen[data-index='2']")
    answer = api(server, shown_request(page, hypothesis=2))
    chosen = answer["hypotheses"][2]
    assert page.locator("#tgt-pieces .piece").count() == len(chosen["pieces"])
    assert_same_map(heatmap(page), chosen["maps"]["cross"][view["layer"]][view["head"]])


@pytest.mark.slow  # serves in another process to a browser
def test_a_text_of_two_sentences_is_explained_one_at_a_time(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    assert page.locator("#sentence-chooser").is_hidden()
    sentences = ["A dog runs in the snow.", "Two men sit on a bench."]
    type_sentence(page, " ".join(sentences))
    assert page.locator("#sentence option").all_inner_texts() == sentences
    page.select_option("#sentence", "1")
    page.wait_for_function("() => document.getElementById('sentence').value === '1'")
    wait_until_shown(page, " ".join(sentences))
    answer = api(server, {**shown_request(page), "sentence": 1})
    page.wait_for_function(
        "(n) => document.querySelectorAll('#src-pieces .piece').length === n",
        arg=len(answer["source"]["pieces"]),
    )
    assert page.locator("#nbest li").first.inner_text().startswith(answer["hypotheses"][0]["text"])


@pytest.mark.slow  # serves in another process to a browser
def test_a_late_answer_never_replaces_a_newer_one(page: Page) -> None:
    held: list[Route] = []

    def hold_first(route: Route) -> None:
        if not held:
            held.append(route)  # answered only after the second request's answer is shown
        else:
            route.continue_()

    page.route("**/v1/explain", hold_first)
    page.fill("#text", "A dog runs .")
    page.wait_for_function("() => document.querySelector('#status').textContent !== ''")
    type_sentence(page, SENTENCE)
    newer = page.locator("#nbest").inner_text()
    held[0].continue_()
    page.wait_for_timeout(1000)
    assert page.locator("#nbest").inner_text() == newer
    assert page.input_value("#text") == SENTENCE


def cells_of_words(answer: dict, words: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The (row, column) cells of the best hypothesis's map whose target and source words are
    one of `words` ((target word, source word) pairs)."""
    target, source = answer["hypotheses"][0]["word_of_piece"], answer["source"]["word_of_piece"]
    return {(t, s) for t, u in enumerate(target) for s, v in enumerate(source) if (u, v) in words}


def marked_cells(page: Page, kind: str) -> set[tuple[int, int]]:
    found = page.eval_on_selector_all(
        f"#heatmap td.cell.{kind}", "cells => cells.map(c => [+c.dataset.row, +c.dataset.col])"
    )
    return {tuple(cell) for cell in found}


@pytest.mark.slow  # serves in another process to a browser
def test_a_gold_line_is_drawn_and_scored_for_every_head(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    answer = api(server, shown_request(page))
    line = "1-1 2p2"  # source word 1 - target word 1 sure, 2 - 2 possible
    pair = {"source": SENTENCE, "target": answer["hypotheses"][0]["text"], "gold": line}
    body = {"model": answer["model"], "pairs": [pair], "grid": True}
    scores = json.loads(post(server + "/v1/align", body))["scores"]
    page.fill("#gold", line)
    page.wait_for_selector("#gold-grid td.aer")
    page.wait_for_function("() => document.getElementById('gold-status').textContent === ''")
    # on the map: a filled dot on the cells of the sure link, a hollow one on the possible's
    assert marked_cells(page, "gold-sure") == cells_of_words(answer, {(0, 0)})
    assert marked_cells(page, "gold-possible") == cells_of_words(answer, {(1, 1)})
    after = "cell => getComputedStyle(cell, '::after').content"
    assert page.eval_on_selector("#heatmap td.cell.gold-sure", after) == '"●"'
    assert page.eval_on_selector("#heatmap td.cell.gold-possible", after) == '"○"'
    assert page.locator("p.hint .key-cell.gold-sure").count() == 1  # the legend
    assert page.locator("#align-links line.gold-sure").count() == 1
    assert page.locator("#align-links line.gold-possible").count() == 1
    # the grid: 4 layers x (4 heads + their mean) + the mean of all, the API's numbers
    cells = page.eval_on_selector_all(
        "#gold-grid td.aer", "cells => cells.map(c => [c.dataset.rule, +c.dataset.aer])"
    )
    assert len(cells) == 4 * 5 + 1 == len(scores)
    assert dict(cells) == {rule: score["aer"] for rule, score in scores.items()}
    heads = [rule for rule in scores if rule.startswith("head:")]
    best = min(heads, key=lambda rule: scores[rule]["aer"])
    assert page.eval_on_selector_all("#gold-grid td.best", "c => c.map(x => x.dataset.rule)") == [
        best
    ]
    page.fill("#gold", "1-1 2x2")
    page.wait_for_selector("#gold-error:not([hidden])")
    assert "pairs[0].gold: '2x2' is not a link i-j (sure)" in page.inner_text("#gold-error")
    assert page.locator("#gold-grid td").count() == 0 and not marked_cells(page, "gold-sure")
    page.click("#gold-file")  # this server has no gold file
    page.wait_for_selector("#file-error:not([hidden])")
    assert page.inner_text("#file-error") == "no gold file: start the server with --gold PAIRS GOLD"


@pytest.mark.slow  # serves in another process to a browser
def test_a_typed_target_is_teacher_forced_and_its_gold_scored_on_it(page: Page, server) -> None:
    type_sentence(page, SENTENCE)
    target, line = "Ein Mann steht auf der Leiter .", "1-1 2p2"
    assert api(server, shown_request(page))["hypotheses"][0]["text"] != target
    answer = api(server, {**shown_request(page), "target": target})
    align = {"model": answer["model"], "pairs": [{"source": SENTENCE, "target": target}]}
    (aligned,) = json.loads(post(server + "/v1/align", align))["alignments"]
    align["pairs"][0]["gold"], align["grid"] = line, True
    scores = json.loads(post(server + "/v1/align", align))["scores"]
    page.fill("#gold", line)
    page.fill("#target", target)
    page.wait_for_function(
        "target => document.getElementById('result').dataset.target === target", arg=target
    )
    page.wait_for_selector("#gold-grid td.aer")
    page.wait_for_function("() => document.getElementById('gold-status').textContent === ''")
    labels = page.locator(".pair-shown").all_inner_texts()
    assert labels == ["your target, teacher-forced"] * 2
    assert page.locator("#nbest li").all_inner_texts() == [target + "not searched"]
    # the map: a row per piece of the target, its weights, the model's links and the gold's
    pieces = answer["hypotheses"][0]["pieces"]
    assert "".join(pieces[:-1]).replace("▁", " ").strip() == target
    assert page.locator("#heatmap tbody th").all_inner_texts() == pieces
    layer, head = int(page.input_value("#layer")), page.input_value("#head")
    heads = answer["hypotheses"][0]["maps"]["cross"][layer]
    assert_same_map(heatmap(page), mean_of_heads(heads) if head == "mean" else heads[int(head)])
    drawn = page.eval_on_selector_all("#align-links line.model", "l => l.map(x => x.dataset.link)")
    assert {"-".join(link.split("-")[::-1]) for link in drawn} == set(aligned["links"].split())
    assert marked_cells(page, "gold-sure") == cells_of_words(answer, {(0, 0)})
    assert marked_cells(page, "gold-possible") == cells_of_words(answer, {(1, 1)})
    # the grid: the API's scores of (source, target, gold), its legend in one decimal as they
    cells = page.eval_on_selector_all(
        "#gold-grid td.aer", "cells => cells.map(c => [c.dataset.rule, +c.dataset.aer])"
    )
    assert dict(cells) == {rule: score["aer"] for rule, score in scores.items()}
    aers = [score["aer"] for score in scores.values()]
    legend = page.locator("#gold-grid .legend-min, #gold-grid .legend-max").all_inner_texts()
    assert legend == [f"{min(aers):.1f}", f"{max(aers):.1f}"]
    assert "the source and your target, teacher-forced" in page.inner_text("#gold-grid caption")
    page.fill("#target", "")  # back to the model's translation
    page.wait_for_function("() => document.getElementById('result').dataset.target === ''")
    assert page.locator(".pair-shown").all_inner_texts() == ["the model's translation"] * 2


@pytest.mark.slow  # serves in another process to a browser
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x" * 5000, "5000 characters, over the explorer's limit"),
        ("", "text: empty"),
        ("a \ud800 b", "text: not valid UTF-8"),
    ],
)
def test_bad_input_shows_a_message(page: Page, text: str, message: str) -> None:
    type_sentence(page, SENTENCE)
    # Set the value from JavaScript: a lone surrogate cannot be typed, but can be pasted.
    page.eval_on_selector(
        "#text",
        "(box, text) => { box.value = text; box.dispatchEvent(new Event('input')); }",
        text,
    )
    page.wait_for_selector("#error:not([hidden])")
    assert message in page.inner_text("#error")
    assert page.locator("#nbest li").count() > 0  # the last translation stays on the page


@pytest.mark.slow  # serves in another process to a browser
def test_the_masked_softmax_chapter_shows_the_librarys_weights(browser: Browser, server) -> None:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    chapter = context.new_page()
    errors: list[str] = []
    chapter.on("console", lambda message: message.type == "error" and errors.append(message.text))
    chapter.on("pageerror", lambda error: errors.append(str(error)))
    chapter.goto(server + "/")
    with chapter.expect_navigation():  # the checks below must read the chapter, not this page
        chapter.click("text=masked softmax")
    chapter.wait_for_selector("#chapter")
    for valid_len in (5, 2, 0, 8):  # 5: the page's first; then moved by the reader
        if valid_len != 5:
            chapter.fill("#valid-len", str(valid_len))
        chapter.wait_for_function(
            "n => document.getElementById('chapter').dataset.validLen === n", arg=str(valid_len)
        )
        scores = chapter.eval_on_selector_all(
            "#heatmap tbody tr",
            "rows => rows.map(r => [...r.querySelectorAll('.score')]"
            ".map(s => Number(s.textContent)))",
        )
        expected = masked_softmax(torch.tensor([scores]), torch.tensor([[valid_len] * 3]))[0]
        assert heatmap(chapter) == expected.tolist()  # the library's float32 weights, exactly
        shown = text_and_background(chapter, "#heatmap td.cell")
        assert min(contrast(text, background) for text, background in shown) >= 4.5
        masked = chapter.locator("#heatmap td.masked").count()
        assert masked == 3 * (8 - valid_len)
        top = legend_maxima(chapter, "#heatmap-legend .legend")
        assert top == ([expected.max().item()] if valid_len else [1])  # all zeros: scale 0..1
    chapter.click("text=On to the translation explorer")
    chapter.wait_for_selector("#model option", state="attached")
    context.close()
    assert errors == []
