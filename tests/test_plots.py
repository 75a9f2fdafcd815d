"""Attention maps: the terminal heatmap's exact layout and the matplotlib figure's labels."""

import torch

from seq2seq.plots import attention_figure, attention_text

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
