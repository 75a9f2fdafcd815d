"""Attention maps: the terminal heatmap's exact layout and the matplotlib figure's labels."""

import torch

from seq2seq.decoding.attention_maps import attention_figure, attention_text

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
