"""Attention maps: which maps are shown and how they are averaged, the teacher-forced maps, the
terminal heatmap's exact layout and the matplotlib figures' labels."""

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from tiny import tiny_model

from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.decoding.attention_maps import (
    CELL_INCHES,
    DPI,
    LABEL_POINTS,
    attention_figure,
    attention_grid_figure,
    attention_text,
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
    assert list(figures) == ["mean", "heads"]
    mean_axes = figures["mean"].axes[0]
    assert mean_axes.get_title() == "sentence 0, mean of heads"
    assert torch.allclose(torch.tensor(mean_axes.images[0].get_array()), heads.mean(0))
    maps = [axes for axes in figures["heads"].axes if axes.images]
    assert [axes.get_title() for axes in maps] == ["head 0", "head 1"]
    assert figures["heads"].axes[-1].get_ylabel() == "attention weight"  # the colour bar
    assert list(head_figures(heads[:1], SOURCE, TARGET, "one head")) == ["mean"]


@pytest.mark.parametrize("figure_of", [attention_figure, attention_grid_figure])
def test_figures_are_readable_at_their_own_size(figure_of) -> None:
    """Every map cell is at least 25 pixels and every piece label 10 points (about 14 pixels) in
    the PNG, the size TensorBoard shows; four heads are two across and two down."""
    source = [f"▁word{i}" for i in range(15)] + ["</s>"]
    target = [f"▁Wort{i}" for i in range(13)] + ["</s>"]
    weights = torch.rand(4, 14, 16, generator=torch.Generator().manual_seed(0)).softmax(-1)
    figure = figure_of(
        weights if figure_of is attention_grid_figure else weights[0], source, target
    )
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    maps = [axes for axes in figure.axes if axes.images]
    assert len(maps) == (4 if figure_of is attention_grid_figure else 1)
    for axes in maps:
        box = axes.get_window_extent()
        assert box.width / 16 >= CELL_INCHES * DPI and box.height / 14 >= CELL_INCHES * DPI
        labels = [*axes.get_xticklabels(), *axes.get_yticklabels()]
        assert [label.get_text() for label in labels] == source + target
        assert {label.get_fontsize() for label in labels} == {LABEL_POINTS}
    if figure_of is attention_grid_figure:
        lefts = sorted({round(axes.get_window_extent().x0) for axes in maps})
        tops = sorted({round(axes.get_window_extent().y0) for axes in maps})
        assert len(lefts) == len(tops) == 2  # 2 x 2
    assert canvas.get_width_height()[0] <= 1200  # two maps of 16 pieces side by side, not four
