"""The explorer's training page (a run's attention step by step) and compare page (two models
side by side) in a real browser: Debian's chromium, driven by Playwright, as in
tests/test_explorer_browser.py. Every map drawn is compared with the file or the API."""

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from explore import get, post, serve
from explorer_models import EN_DE, GRU_NAME
from playwright.sync_api import Browser, Page

from seq2seq.decoding.open_pytorch import load_model
from seq2seq.training.attention_history import (
    FILE_NAME,
    add_snapshot,
    choose_sentences,
    load_history,
)

SENTENCES = (
    ["A dog runs in the snow .", "Two men are playing football .", "A girl is reading a book ."],
    [
        "Ein Hund rennt im Schnee .",
        "Zwei Männer spielen Fußball .",
        "Ein Mädchen liest ein Buch .",
    ],
)
STEPS = [1, 500, 1000]
TOLERANCE = 6e-4  # the page shows 4 decimals of the weights rounded to 3 (fp16 in the file)


def write_run(run_dir: Path) -> Path:
    """An attention history of the shipped en-de Transformer, its weights disturbed less at each
    later step, as a run folder holds it."""
    shipped = load_model(EN_DE)
    sentences = choose_sentences(shipped.src_tokenizer, shipped.tgt_tokenizer, SENTENCES, 3)
    for number, step in enumerate(STEPS):
        model = copy.deepcopy(shipped.model)
        torch.manual_seed(step)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.2 * (len(STEPS) - 1 - number))
        add_snapshot(run_dir / FILE_NAME, step, model.eval(), sentences, torch.device("cpu"))
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("run") / "my-run")


@pytest.fixture(scope="module")
def server(random_gru: Path, run_dir: Path) -> Iterator[str]:
    """seq2seq serve with the random GRU and the en-de Transformer, and --run."""
    with serve([str(random_gru), str(EN_DE)], "--run", str(run_dir)) as started:
        yield started.url


def open_page(browser: Browser, url: str, errors: list[str], width: int = 1400) -> Page:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    return page


def table(page: Page, selector: str) -> list[list[float]]:
    """The weights of a heatmap's cells, row by row."""
    return page.eval_on_selector(
        selector + " tbody",
        "body => [...body.rows].map(row => [...row.querySelectorAll('td.cell')]"
        ".map(cell => Number(cell.dataset.value)))",
    )


def assert_same_map(shown: list[list[float]], expected: torch.Tensor) -> None:
    assert torch.tensor(shown).shape == expected.shape
    torch.testing.assert_close(
        torch.tensor(shown, dtype=torch.float64), expected.double(), rtol=0, atol=TOLERANCE
    )


def wait_for(page: Page, element: str, **shown: str) -> None:
    """Wait until the dataset of `element` says the page shows `shown`."""
    page.wait_for_function(
        "([id, shown]) => Object.entries(shown).every("
        "([key, value]) => document.getElementById(id).dataset[key] === value)"
        " && document.getElementById('status').textContent === ''",
        arg=[element, shown],
    )


@pytest.mark.slow  # serves in another process to a browser
def test_the_step_slider_shows_the_runs_maps(browser: Browser, server: str, run_dir: Path):
    history = load_history(run_dir / FILE_NAME)
    errors: list[str] = []
    page = open_page(browser, server + "/", errors)
    with page.expect_navigation():
        page.click("text=attention through training")
    last = str(history.snapshots[1000][0]["cross"].shape[0] - 1)  # the last layer first
    wait_for(page, "training", step="1000", sentence="0", view="cross", layer=last, head="mean")
    assert page.input_value("#step") == "2"  # the latest first
    assert "Run my-run (transformer): 3 snapshots, steps 1 to 1000." in page.inner_text("#run")
    sentence = history.sentences[0]
    texts = "cells => cells.map(cell => cell.textContent)"
    columns = page.eval_on_selector_all("#heatmap thead th[data-col]", texts)
    rows = page.eval_on_selector_all("#heatmap tbody th", texts)
    assert (columns, rows) == (sentence.src_pieces, sentence.tgt_pieces)
    scale = page.eval_on_selector("#heatmap-legend .legend", "b => [b.dataset.min, b.dataset.max]")
    assert scale == ["0", "1"]  # the same at every step
    for position in (2, 0, 1, 2):
        step = STEPS[position]
        page.fill("#step", str(position))
        wait_for(page, "training", step=str(step))
        assert page.inner_text("#step-shown") == f"step {step}"
        cross = history.snapshots[step][0]["cross"]  # (L, H, T, S)
        assert_same_map(table(page, "#heatmap"), cross[int(last)].float().mean(0))
    page.select_option("#sentence", "2")
    page.select_option("#view", "encoder_self")
    page.select_option("#layer", "0")
    page.select_option("#head", "3")
    wait_for(page, "training", step="1000", sentence="2", view="encoder_self", layer="0", head="3")
    assert_same_map(table(page, "#heatmap"), history.snapshots[1000][2]["encoder_self"][0, 3])
    answer = json.loads(get(server + "/v1/run/attention/500/1"))
    assert (
        answer["maps"]["decoder_self"]
        == torch.round(history.snapshots[500][1]["decoder_self"].double(), decimals=3).tolist()
    )
    page.context.close()
    assert errors == []


@pytest.mark.slow  # serves in another process to a browser
def test_two_models_side_by_side_on_one_colour_scale(browser: Browser, server: str) -> None:
    errors: list[str] = []
    page = open_page(browser, server + "/explorer/compare.html", errors)
    text = page.input_value("#text")
    wait_for(page, "left", model=GRU_NAME, text=text)
    wait_for(page, "right", model=EN_DE.name, text=text)
    gru = json.loads(post(server + "/v1/explain", {"model": GRU_NAME, "text": text, "nbest": 1}))
    body = {"model": EN_DE.name, "text": text, "nbest": 1}
    transformer = json.loads(post(server + "/v1/explain", body))
    bahdanau = torch.tensor(gru["hypotheses"][0]["maps"]["bahdanau"], dtype=torch.float64)
    view = transformer["first_view"]  # the right side opens on the sharpest last-layer head
    cross = torch.tensor(transformer["hypotheses"][0]["maps"]["cross"], dtype=torch.float64)
    assert page.input_value("#right-layer") == str(view["layer"])
    assert page.input_value("#right-head") == str(view["head"])
    assert page.is_disabled("#left-layer") and page.is_disabled("#left-head")
    assert_same_map(table(page, "#left-heatmap"), bahdanau)
    assert_same_map(table(page, "#right-heatmap"), cross[view["layer"], view["head"]])
    assert page.inner_text("#left-translation") == gru["hypotheses"][0]["text"]
    assert page.inner_text("#right-translation") == transformer["hypotheses"][0]["text"]
    top = max(bahdanau.max(), cross[view["layer"], view["head"]].max()).item()
    legend = page.eval_on_selector("#heatmap-legend .legend", "b => Number(b.dataset.max)")
    assert legend == pytest.approx(top, abs=1e-9)
    # a chosen head, then the mean of heads: drawn from the same answer
    page.select_option("#right-layer", "0")
    page.select_option("#right-head", "mean")
    wait_for(page, "right", layer="0", head="mean")
    assert_same_map(table(page, "#right-heatmap"), cross[0].mean(0))
    top = max(bahdanau.max(), cross[0].mean(0).max()).item()
    legend = page.eval_on_selector("#heatmap-legend .legend", "b => Number(b.dataset.max)")
    assert legend == pytest.approx(top, abs=1e-6)
    page.context.close()
    assert errors == []


# The left and right edges, top and bottom of each side's labels, their menus and the side.
BOXES_JS = """sides => sides.map(side => {
  const box = (node) => { const r = node.getBoundingClientRect();
                          return [r.left, r.right, r.top, r.bottom]; };
  return ["model", "layer", "head"].map(menu => {
    const id = `${side}-${menu}`;
    return [box(document.querySelector(`label[for="${id}"]`)), box(document.getElementById(id)),
            box(document.getElementById(side))];
  });
})"""


@pytest.mark.slow  # serves in another process to a browser
@pytest.mark.parametrize("width", [1280, 1024])
def test_each_label_stays_beside_its_menu(browser: Browser, server: str, width: int) -> None:
    """At the page's usual widths each label is on the line of its menu, just before it, and
    the menu within its side; the layer and head menus share a line."""
    errors: list[str] = []
    page = open_page(browser, server + "/explorer/compare.html", errors, width)
    wait_for(page, "left", model=GRU_NAME)
    wait_for(page, "right", model=EN_DE.name)
    for side in page.evaluate(BOXES_JS, ["left", "right"]):
        for label, menu, whole in side:
            label_left, label_right, label_top, label_bottom = label
            menu_left, menu_right, menu_top, menu_bottom = menu
            assert menu_top <= (label_top + label_bottom) / 2 <= menu_bottom
            assert 0 <= menu_left - label_right <= 10  # just before it, on its line
            assert whole[0] <= label_left and menu_right <= whole[1]
        (_, layer, _), (_, head, _) = side[1:]
        assert layer[2] == head[2]
    page.context.close()
    assert errors == []
