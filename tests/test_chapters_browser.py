"""The chapter pages in a real browser (Debian's chromium, driven by Playwright), served by
seq2seq serve as in tests/test_explorer_browser.py: every number drawn is what the library's own
functions compute in the test, and the console has no error."""

from collections.abc import Iterator

import pytest
import torch
from explorer_models import EN_DE
from playwright.sync_api import Browser, ConsoleMessage, Page
from test_explorer_browser import server  # noqa: F401 (fixture)

from seq2seq.data.specials import EOS_ID
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import int8_copier
from seq2seq.models.attention import (
    AdditiveAttention,
    DotProductAttention,
    MultiHeadAttention,
    nadaraya_watson,
)
from seq2seq.models.kernel_regression import sample_points, train
from seq2seq.serving.chapters import seeded

CHAPTERS = [
    ("nadaraya_watson", "Nadaraya-Watson pooling"),
    ("masked_softmax", "Masked softmax"),
    ("scoring", "Additive and scaled dot-product scoring"),
    ("multi_head", "Multi-head attention"),
    ("self_attention", "Self-attention and positional encoding"),
]


def logged(message: ConsoleMessage) -> str:
    return f"{message.text} ({message.location.get('url')})"


def console_error(message: ConsoleMessage) -> bool:
    """An error in the console, but for the browser's note of an answer of the self-attention
    chapter with an error status (the page shows it: the bad-input test asks for one)."""
    answered = message.location.get("url", "").endswith("/v1/chapters/self_attention")
    return message.type == "error" and not answered


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:  # noqa: F811 (fixtures)
    """A browser tab on the server; the test fails on any JavaScript or console error."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: console_error(message) and errors.append(logged(message)))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server + "/explorer/chapters.html")
    yield page
    context.close()
    assert errors == []


def open_chapter(page: Page, name: str, shown: str, value: str) -> None:
    """Click the chapter `name` on the index, and wait until #chapter's data-`shown` is
    `value`."""
    with page.expect_navigation():
        page.click(f"ol.chapter-list a[href='/explorer/{name}.html']")
    wait_shown(page, shown, value)


def wait_shown(page: Page, shown: str, value: str) -> None:
    page.wait_for_function(
        "([key, value]) => document.getElementById('chapter').dataset[key] === value"
        " && document.getElementById('status').textContent === ''",
        arg=[shown, value],
    )


def table(page: Page, selector: str) -> list[list[float]]:
    """The values of a heatmap table's cells, row by row."""
    return page.eval_on_selector(
        selector,
        "table => [...table.tBodies[0].rows].map(row => [...row.querySelectorAll('td.cell')]"
        ".map(cell => Number(cell.dataset.value)))",
    )


def attribute_values(page: Page, selector: str) -> list[float]:
    return page.eval_on_selector_all(selector, "nodes => nodes.map(n => Number(n.dataset.value))")


@pytest.mark.slow  # serves in another process to a browser
def test_the_chapters_lead_in_order_to_the_translation_explorer(page: Page) -> None:
    names = page.locator("ol.chapter-list a").all_inner_texts()
    assert names == [title for _, title in CHAPTERS] + ["The translation explorer"]
    page.click("ol.chapter-list a >> nth=0")
    for _, title in CHAPTERS:
        page.wait_for_selector("h1")
        assert page.inner_text("h1") == title
        with page.expect_navigation():
            page.click("nav.chapters:not(.bottom) a[rel=next]")
    page.wait_for_selector("#model option", state="attached")  # the explorer, in the same tab
    with page.expect_navigation():
        page.click("a[href='/explorer/chapters.html']")
    assert page.inner_text("h1") == "Attention, chapter by chapter"


@pytest.mark.slow  # serves in another process to a browser
def test_nadaraya_watson_draws_the_librarys_pooling(page: Page) -> None:
    open_chapter(page, "nadaraya_watson", "query", "2.5")
    points = sample_points(50, 50, 5.0, 0)
    w = torch.ones(1)
    train(w, points.x_train, points.y_train, 1.0, 200)
    for n, width in enumerate(("fixed", "learned")):
        scale = torch.ones(1) if n == 0 else w
        curve, _ = nadaraya_watson(points.x_test, points.x_train, points.y_train, scale)
        drawn = page.get_attribute(f"#curve-{width}", "data-values")
        assert drawn == str(curve.tolist()).replace(" ", "")  # JSON of the same float32 values
    for query in (2.5, 1.0, None):  # the first, the slider moved, the line dragged
        if query == 1.0:
            page.fill("#query", "1")
        elif query is None:
            box = page.locator("svg#fit").bounding_box()
            page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] * 0.75, box["y"] + box["height"] / 2)
            page.mouse.up()
            page.wait_for_function("() => document.getElementById('chapter').dataset.query > 3")
            wait_shown(page, "query", page.eval_on_selector("#chapter", "c => c.dataset.query"))
            query = float(page.eval_on_selector("#chapter", "c => c.dataset.query"))
        wait_shown(page, "query", str(query).removesuffix(".0"))
        queries = torch.tensor([query])
        fixed = nadaraya_watson(queries, points.x_train, points.y_train, torch.ones(1))
        learned = nadaraya_watson(queries, points.x_train, points.y_train, w)
        assert attribute_values(page, "rect.weight.fixed") == fixed[1][0].tolist()
        assert attribute_values(page, "rect.weight.learned") == learned[1][0].tolist()
        pooled = page.eval_on_selector("#pooled", "p => JSON.parse(p.dataset.values)")
        assert pooled == [fixed[0].item(), learned[0].item()]
    page.select_option("#seed", "1")
    wait_shown(page, "seed", "1")
    assert page.locator("circle.train-point").count() == 50


@pytest.mark.slow  # serves in another process to a browser
def test_scoring_draws_both_modules_scores_and_weights(page: Page) -> None:
    open_chapter(page, "scoring", "shown", "1 0")
    for scale, seed in ((1, 0), (3, 2)):
        if scale != 1:
            page.fill("#scale", str(scale))
            page.select_option("#seed", str(seed))
            wait_shown(page, "shown", f"{scale} {seed}")
        queries, keys = (
            torch.tensor([table(page, f"#vectors figure:nth-child({n}) table")]) for n in (1, 2)
        )
        with torch.device("meta"):
            additive = AdditiveAttention(2, 2, 8)
        additive = seeded(additive, seed)
        with torch.no_grad():
            projected = additive.project_keys(keys)
            _, weights = additive(queries, projected, keys, None)
            assert table(page, "#additive-weights") == weights[0].tolist()
            assert table(page, "#additive-scores") == additive.score(queries, projected)[0].tolist()
            _, weights = DotProductAttention()(queries, keys, keys, None)
        assert table(page, "#dot-product-weights") == weights[0].tolist()
        expected = DotProductAttention.score(queries, keys)[0].tolist()
        assert table(page, "#dot-product-scores") == expected
    # scaled-up queries: the dot product's weights sharpen
    assert max(map(max, table(page, "#dot-product-weights"))) > 0.5


@pytest.mark.slow  # serves in another process to a browser
def test_multi_head_draws_each_heads_weights_and_the_output(page: Page) -> None:
    open_chapter(page, "multi_head", "shown", "2 0")
    for heads, input_seed in ((2, 0), (4, 3)):
        if heads != 2:
            page.select_option("#heads", str(heads))
            page.select_option("#input-seed", str(input_seed))
            wait_shown(page, "shown", f"{heads} {input_seed}")
        x = torch.tensor([table(page, "#inputs table")])
        generator = torch.Generator().manual_seed(input_seed)
        assert torch.equal(x[0], torch.randn(6, 8, generator=generator))
        with torch.device("meta"):
            attention = MultiHeadAttention(8, heads)
        attention = seeded(attention, 0)
        with torch.no_grad():
            output, weights = attention(x, x, None, need_weights=True)
        shown = [table(page, f"figure[data-head='{h}'] table") for h in range(heads)]
        assert shown == weights[0].tolist()
        assert torch.allclose(torch.tensor(table(page, "#output-table")), output[0], atol=1e-6)


@pytest.mark.slow  # serves in another process to a browser
def test_self_attention_draws_the_models_first_layer_with_and_without_pe(page: Page) -> None:
    sentence = "A dog sees a cat and a cat sees a dog ."
    open_chapter(page, "self_attention", "text", sentence)
    inference = load_model(EN_DE)
    model = int8_copier(inference.model)(inference.model)  # seq2seq serve's model on a CPU: int8
    for text, head in ((sentence, "0"), ("Two men play chess in a park .", "2")):
        if head != "0":
            page.fill("#text", text)
            wait_shown(page, "text", text)
            page.select_option("#head", head)
            wait_shown(page, "head", head)
        ids = inference.src_tokenizer.encode([text])[0]
        src = torch.tensor([[*ids, EOS_ID]])
        with torch.no_grad():
            maps = model.attention_maps(src, torch.tensor([src.shape[1]]), src[:, :1])
        expected = maps["encoder_self"][0, 0, int(head)]
        assert torch.allclose(torch.tensor(table(page, "#with-pe")), expected, atol=1e-6)
        assert page.locator("#pe-matrix rect").count() == src.shape[1] * model.d_model
        labels = page.locator("#pe-matrix .axis text.label").all_text_contents()
        assert labels == ["dimension i", "position p"]
    without = table(page, "#without-pe")
    assert len(without) == src.shape[1]
    assert page.eval_on_selector("#positional .legend", "b => [b.dataset.min, b.dataset.max]") == [
        "-1",
        "1",
    ]


@pytest.mark.slow  # serves in another process to a browser
def test_a_bad_sentence_shows_the_servers_line_and_keeps_the_maps(page: Page) -> None:
    sentence = "A dog sees a cat and a cat sees a dog ."
    open_chapter(page, "self_attention", "text", sentence)
    cells = page.locator("#with-pe td.cell").count()
    for text, message in (("   ", "text: empty"), ("x" * 300, "text: 300 characters, over")):
        page.fill("#text", text)
        page.wait_for_function(
            "message => !document.getElementById('error').hidden"
            " && document.getElementById('error').textContent.startsWith(message)",
            arg=message,
        )
        assert page.locator("#with-pe td.cell").count() == cells  # the last maps stay
    page.fill("#text", sentence)
    page.wait_for_selector("#error", state="hidden")
