"""Attention maps: which maps are shown and how they are averaged, the teacher-forced maps, the
terminal heatmap's exact layout and the matplotlib figures' labels."""

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from tiny import tiny_model

from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.decoding.attention_maps import (
    CARD_LABEL_POINTS,
    CARD_PIXELS,
    CELL_INCHES,
    DPI,
    LABEL_POINTS,
    ROW_PIXELS,
    attention_figure,
    attention_text,
    card_figure,
    head_figures,
    shown_cross_attention,
    source_attention,
    teacher_forced_maps,
)

SOURCE = ["▁A", "▁dog", "</s>"]
TARGET = ["▁Ein", "▁Hund", "</s>"]
WEIGHTS = torch.tensor([[1.0, 0.0, 0.0], [0.1, 0.6, 0.3], [0.0, 0.5, 0.5]])


def test_attention_text_layout():
    expected = [
        "      │▁ ▁ <",
        "      │A d /",
        "      │  o s",
        "      │  g >",
        "      ┼──────",
        " ▁Ein │██",
        "▁Hund │  ▒▒░░",  # 0.1 rounds to blank, 0.6 to ▒ (level 2), 0.3 to ░ (level 1)
        " </s> │  ▒▒▒▒",
    ]
    assert attention_text(WEIGHTS, SOURCE, TARGET).split("\n") == expected


def test_attention_text_cuts_long_source_pieces():
    lines = attention_text(torch.ones(1, 1), ["▁" + "x" * 20], ["y"]).split("\n")
    assert len(lines) == 8 + 2  # 8 header rows, the rule, one target row
    assert lines[-1] == "y │██"


def test_attention_figure_labels_and_png(tmp_path):
    figure = attention_figure(WEIGHTS, SOURCE, TARGET, "a title")
    axes, colorbar_axes = figure.axes
    assert colorbar_axes.get_ylabel() == "attention weight"
    assert [t.get_text() for t in axes.get_xticklabels()] == SOURCE
    assert [t.get_text() for t in axes.get_yticklabels()] == TARGET
    assert axes.get_title() == "a title"
    assert torch.equal(torch.tensor(axes.images[0].get_array()), WEIGHTS)
    path = tmp_path / "map.png"
    figure.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_attention_figure_wraps_a_long_title():
    title = " ".join(["word"] * 40)
    figure = attention_figure(WEIGHTS, SOURCE, TARGET, title)
    shown = figure.axes[0].get_title()
    assert shown.replace("\n", " ") == title
    assert len(shown.splitlines()) > 1 and max(map(len, shown.splitlines())) <= 40


def test_attention_text_fits_the_terminal_width():
    source = [f"▁w{i}" for i in range(35)] + ["</s>"]  # 36 pieces: 72 columns of cells
    target = ["▁Zusammenarbeit", "▁ist", "</s>"]  # a 15-character label
    weights = torch.rand(3, 36, generator=torch.Generator().manual_seed(0))
    assert max(map(len, attention_text(weights, source, target).split("\n"))) > 80
    assert attention_text(weights, source, target, width=200) == attention_text(
        weights, source, target
    )

    lines = attention_text(weights, source, target, width=80).split("\n")
    assert max(map(len, lines)) <= 80
    assert lines[-3].startswith("▁Zusammenar… │")  # cut to 12 characters
    assert lines[-4] == " " * 12 + " ┼" + "─" * 36  # one-character cells, every column
    assert (
        lines[-1]
        == "        </s> │" + "".join(" ░▒▓█"[round(float(w) * 4)] for w in weights[2]).rstrip()
    )

    lines = attention_text(weights, source, target, width=40).split("\n")
    assert max(map(len, lines)) <= 65  # the note on the last line may be longer than the map
    assert max(map(len, lines[:-1])) <= 40
    assert lines[-1] == "(10 more source pieces; --save-attention FILE.png draws them all)"


def test_source_attention_averages_every_layer_and_head() -> None:
    cross = torch.zeros(2, 2, 1, 2)  # (L, H, T, S)
    cross[0, 0, 0, 0] = cross[0, 1, 0, 0] = cross[1, 0, 0, 0] = 1.0
    cross[1, 1, 0, 1] = 1.0
    assert source_attention({"cross": cross}).tolist() == [[0.75, 0.25]]
    bahdanau = torch.tensor([[0.2, 0.8]])
    assert source_attention({"bahdanau": bahdanau}) is bahdanau


def test_shown_cross_attention_picks_a_layer_with_or_without_a_batch_axis() -> None:
    cross = torch.arange(2 * 3 * 4 * 1 * 2, dtype=torch.float).view(2, 3, 4, 1, 2)  # B L H T S
    assert torch.equal(shown_cross_attention({"cross": cross}, -1), cross[:, 2])
    assert torch.equal(shown_cross_attention({"cross": cross[1]}, 0), cross[1, 0])
    bahdanau = torch.rand(2, 3, 5)  # (B, T, S)
    assert shown_cross_attention({"bahdanau": bahdanau}, 0).shape == (2, 1, 3, 5)
    assert torch.equal(shown_cross_attention({"bahdanau": bahdanau[0]}, 0)[0], bahdanau[0])


@pytest.mark.parametrize("kind", ["transformer", "gru"])
def test_teacher_forced_maps_are_the_models_weights_without_the_batch_axis(kind: str) -> None:
    model = tiny_model(kind, fast=False).eval()
    src_ids, tokens = [5, 6, 7], [8, 9]
    maps = teacher_forced_maps(model, src_ids, tokens, torch.device("cpu"))
    with torch.no_grad():
        expected = model.attention_maps(
            torch.tensor([[5, 6, 7, EOS_ID]]), torch.tensor([4]), torch.tensor([[BOS_ID, 8, 9]])
        )
    assert list(maps) == list(expected)
    for name, weights in maps.items():
        assert torch.equal(weights, expected[name][0])
    assert source_attention(maps).shape == (3, 4)  # T = 2 tokens + EOS, S = 3 ids + EOS


def test_head_figures_show_the_mean_and_every_head() -> None:
    heads = torch.stack([WEIGHTS, WEIGHTS.flip(1)])  # (H = 2, T, S)
    figures = head_figures(heads, SOURCE, TARGET, "sentence 0")
    assert list(figures) == ["", "_head0", "_head1"]  # the ends of their TensorBoard tags
    titles = [figure.axes[0].get_title() for figure in figures.values()]
    assert titles == ["sentence 0, mean of heads", "sentence 0, head 0", "sentence 0, head 1"]
    shown = [torch.tensor(figure.axes[0].images[0].get_array()) for figure in figures.values()]
    assert torch.allclose(shown[0], heads.mean(0))
    assert torch.equal(shown[1], heads[0]) and torch.equal(shown[2], heads[1])
    assert all(figure.axes[1].get_xlabel() == "attention weight" for figure in figures.values())
    assert list(head_figures(heads[:1], SOURCE, TARGET, "one head")) == [""]


def test_attention_figure_is_readable_at_its_own_size() -> None:
    """Every map cell is at least 25 pixels and every piece label 10 points (about 14 pixels) in
    the PNG that --save-attention writes."""
    source = [f"▁word{i}" for i in range(15)] + ["</s>"]
    target = [f"▁Wort{i}" for i in range(13)] + ["</s>"]
    weights = torch.rand(14, 16, generator=torch.Generator().manual_seed(0)).softmax(-1)
    figure = attention_figure(weights, source, target)
    FigureCanvasAgg(figure).draw()
    box = figure.axes[0].get_window_extent()
    assert box.width / 16 >= CELL_INCHES * DPI and box.height / 14 >= CELL_INCHES * DPI
    labels = [*figure.axes[0].get_xticklabels(), *figure.axes[0].get_yticklabels()]
    assert [label.get_text() for label in labels] == source + target
    assert {label.get_fontsize() for label in labels} == {LABEL_POINTS}


@pytest.mark.parametrize(("num_src", "step"), [(6, 1), (16, 1), (24, 2), (60, 3)])
def test_card_figures_are_read_at_their_own_size_in_tensorboard(num_src: int, step: int):
    """TensorBoard shows an image CARD_PIXELS wide: a card is that wide, whatever the sentence,
    so its labels are CARD_LABEL_POINTS (about 11 pixels) there, every target piece with a row
    of ROW_PIXELS or more; the source labels are a label's height apart or more, every piece's
    when that fits, else every `step`-th."""
    source = [f"▁word{i}" for i in range(num_src - 1)] + ["</s>"]
    target = [f"▁Wort{i}" for i in range(13)] + ["</s>"]
    weights = torch.rand(14, num_src, generator=torch.Generator().manual_seed(0)).softmax(-1)
    figure = card_figure(weights, source, target, "valid sentence 0 on its translation, step 1")
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    assert canvas.get_width_height()[0] == CARD_PIXELS
    axes = figure.axes[0]
    box = axes.get_window_extent()
    assert ROW_PIXELS - 0.5 <= box.height / 14 <= max(ROW_PIXELS, box.width / num_src) + 0.5
    assert [label.get_text() for label in axes.get_yticklabels()] == target
    assert [label.get_text() for label in axes.get_xticklabels()] == source[::step]
    label_pixels = CARD_LABEL_POINTS * DPI / 72
    assert step * box.width / num_src >= label_pixels > (step - 1) * box.width / num_src
    labels = [*axes.get_xticklabels(), *axes.get_yticklabels()]
    assert {label.get_fontsize() for label in labels} == {CARD_LABEL_POINTS}
    assert axes.title.get_window_extent().x1 <= CARD_PIXELS  # the title is wrapped to fit
