"""Attention maps: which source pieces each output piece looked at, from the model's weights to
a text or figure view. The one place that chooses, averages and draws maps; the model's only part
is `Seq2SeqModel.attention_maps`, which gives every weight it computes on a teacher-forced
target.

Shapes: S = source pieces, T = target pieces, both ending with the EOS piece; L = layers,
H = heads; B = batch, where a map has one. The maps, by name:

    Transformer   encoder_self (L_enc, H, S, S)   decoder_self (L_dec, H, T, T)
                  cross (L_dec, H, T, S)
    GRU           bahdanau (T, S)

The views take weights (T, S), one row per target piece over the source pieces, as
`source_attention` gives them or as the search returns them with `need_attention=True` (the
last decoder layer, averaged over heads). The figures are bare matplotlib `Figure`s (no pyplot,
so no display and no global state): save one with `figure.savefig(path)` or hand it to
TensorBoard's `add_figure`.

`attention_figure` is sized for reading at its own pixel size (a saved PNG): at `DPI` dots per
inch every map cell is `CELL_INCHES` wide and high (25 pixels) and every piece label is
`LABEL_POINTS` points (about 14 pixels), so one label fits beside one cell. The TensorBoard
figures (`card_figure`, one per head and one of their mean) are `CARD_PIXELS` wide instead, the
width at which TensorBoard's images dashboard shows every image, so they are read there at their
own size too: every target piece has a row of at least `ROW_PIXELS` and a label of
`CARD_LABEL_POINTS` points, and the source columns share the width that is left.
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.models.base import Seq2SeqModel

if TYPE_CHECKING:  # matplotlib is imported by the figures, not by a run that draws none
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

SHADES = " ░▒▓█"  # weight 0 .. 1, in five steps
MAX_HEADER_CHARS = 8  # the vertical source labels of the terminal view are cut to this height
MAX_LABEL_CHARS = 12  # the target labels of a terminal view too wide for its width: cut to this
DPI = 100  # pixels per inch of the figures (matplotlib's default, set so sizes are fixed)
CELL_INCHES = 0.25  # the side of one map cell
LABEL_POINTS = 10  # the font size of the piece labels
CARD_PIXELS = 350  # the width of a TensorBoard card's image, whatever the image's own width
CARD_LABEL_POINTS = 8  # the piece labels of a card (about 11 pixels)
CARD_TITLE_POINTS = 9
ROW_PIXELS = 14  # the least height of a card's row, a label's and a little space


# --- Which maps ----------------------------------------------------------------------------


@torch.no_grad()
def teacher_forced_maps(
    model: Seq2SeqModel, src_ids: list[int], tokens: list[int], device: torch.device
) -> dict[str, Tensor]:
    """Every attention map `model` computes (fp32, on the CPU, no batch axis) when it produces
    exactly the output `tokens` for the source `src_ids` (both without EOS)."""
    src = torch.tensor([[*src_ids, EOS_ID]], device=device)
    tgt_in = torch.tensor([[BOS_ID, *tokens]], device=device)
    src_lens = torch.tensor([src.shape[1]], device=device)
    maps = model.attention_maps(src, src_lens, tgt_in)
    return {name: weights[0].float().cpu() for name, weights in maps.items()}


def source_attention(maps: dict[str, Tensor]) -> Tensor:
    """(T, S) how much each target piece looks at each source piece: cross-attention averaged
    over every decoder layer and head (the GRU's Bahdanau weights as they are)."""
    if "bahdanau" in maps:
        return maps["bahdanau"]
    return maps["cross"].mean(dim=(0, 1))


def shown_cross_attention(maps: dict[str, Tensor], layer: int) -> Tensor:
    """(..., H, T, S) the source attention of each head that a plot shows: the Bahdanau weights
    (H = 1), or the cross-attention of Transformer decoder layer `layer`. The maps may have a
    batch axis (as `Seq2SeqModel.attention_maps` gives them) or not (`teacher_forced_maps`)."""
    if "bahdanau" in maps:
        return maps["bahdanau"].unsqueeze(-3)
    return maps["cross"][..., layer, :, :, :]


# --- Views -----------------------------------------------------------------------------------


def draw_map(
    axes: Axes, weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], points: float
) -> AxesImage:
    """Draw weights (T, S) on `axes`: source pieces across the top, target pieces down the
    side, labelled in `points`-point type."""
    image = axes.imshow(weights.detach().float().cpu().numpy(), cmap="viridis", vmin=0, vmax=1)
    axes.set_xticks(range(len(src_pieces)), src_pieces, rotation=90, fontsize=points)
    axes.set_yticks(range(len(tgt_pieces)), tgt_pieces, fontsize=points)
    axes.xaxis.tick_top()
    axes.xaxis.set_label_position("top")
    axes.set_xlabel("source", fontsize=points)
    axes.set_ylabel("target", fontsize=points)
    return image


def attention_figure(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str = ""
) -> Figure:
    """A heatmap of weights (T, S): source pieces across the top, target pieces down the side.
    A title longer than the figure is wide is wrapped onto several lines."""
    from matplotlib.figure import Figure

    num_tgt, num_src = weights.shape
    size = (2.5 + CELL_INCHES * num_src, 2 + CELL_INCHES * num_tgt)
    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    image = draw_map(axes, weights, src_pieces, tgt_pieces, LABEL_POINTS)
    if title:
        axes.set_title("\n".join(textwrap.wrap(title, width=max(40, int(3.5 * num_src) + 10))))
    figure.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    return figure


def card_figure(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str
) -> Figure:
    """A heatmap of weights (T, S) for a TensorBoard card: CARD_PIXELS wide, its colour scale
    below. Every target piece has a row of ROW_PIXELS or more (as high as a column is wide, up
    to a cell of `attention_figure`) and its label; the source columns share the width left
    by the labels, and where a column is narrower than a label is high, every k-th source piece
    is labelled, k as small as fits."""
    from matplotlib.figure import Figure

    num_tgt, num_src = weights.shape
    size = (CARD_PIXELS / DPI, 2.5 + num_tgt * ROW_PIXELS / DPI)  # its height corrected below
    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    image = draw_map(axes, weights, src_pieces, tgt_pieces, CARD_LABEL_POINTS)
    axes.set_aspect("auto")
    axes.set_title("\n".join(textwrap.wrap(title, width=40)), fontsize=CARD_TITLE_POINTS)
    scale = figure.colorbar(image, ax=axes, location="bottom", aspect=40)
    scale.set_label("attention weight", fontsize=CARD_LABEL_POINTS)
    scale.ax.tick_params(labelsize=CARD_LABEL_POINTS)
    figure.draw_without_rendering()
    column = axes.get_window_extent().width / num_src
    step = math.ceil(CARD_LABEL_POINTS * DPI / 72 / column)
    shown = range(0, num_src, step)
    axes.set_xticks(shown, [src_pieces[j] for j in shown], rotation=90, fontsize=CARD_LABEL_POINTS)
    row = max(ROW_PIXELS, min(column, CELL_INCHES * DPI))
    for _ in range(3):  # the colour bar's height follows the map's: a few corrections
        figure.draw_without_rendering()
        missing = num_tgt * row - axes.get_window_extent().height
        figure.set_figheight(figure.get_figheight() + missing / DPI)
    return figure


def head_figures(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str
) -> dict[str, Figure]:
    """The TensorBoard figures of one sentence's weights (H, T, S), by the end of their tag:
    "" the mean over heads, and with several heads "_head0", "_head1", ... each head."""
    figures = {"": card_figure(weights.mean(0), src_pieces, tgt_pieces, f"{title}, mean of heads")}
    if weights.shape[0] > 1:
        for head, head_weights in enumerate(weights):
            figures[f"_head{head}"] = card_figure(
                head_weights, src_pieces, tgt_pieces, f"{title}, head {head}"
            )
    return figures


def attention_text(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], width: int | None = None
) -> str:
    """A heatmap for the terminal, one shaded cell per weight (' ' low .. '█' high).

    The source pieces are written vertically above their columns (cut to MAX_HEADER_CHARS
    characters); the target pieces label the rows. Each cell is two characters wide; with a
    `width` (the terminal's columns), a map wider than that gets one-character cells, row labels
    cut to MAX_LABEL_CHARS, and, if it is still too wide, only the source columns that fit,
    with a last line saying how many are left out.
    """
    label_width = max(len(piece) for piece in tgt_pieces)
    cell, shown = 2, len(src_pieces)
    if width is not None and label_width + 2 + cell * shown > width:
        cell, label_width = 1, min(label_width, MAX_LABEL_CHARS)
        shown = max(1, min(shown, width - label_width - 2))
    labels = [
        piece if len(piece) <= label_width else piece[: label_width - 1] + "…"
        for piece in tgt_pieces
    ]
    header_height = min(MAX_HEADER_CHARS, max(len(piece) for piece in src_pieces[:shown]))
    lines = []
    for row in range(header_height):
        letters = [piece[row] if row < len(piece) else " " for piece in src_pieces[:shown]]
        lines.append(" " * label_width + " │" + "".join(f"{letter:<{cell}}" for letter in letters))
    lines.append(" " * label_width + " ┼" + "─" * cell * shown)
    levels = (weights[:, :shown].float().clamp(0, 1) * (len(SHADES) - 1)).round().long().tolist()
    for label, row_levels in zip(labels, levels, strict=True):
        cells = "".join(SHADES[level] * cell for level in row_levels)
        lines.append(f"{label:>{label_width}} │{cells}")
    if shown < len(src_pieces):
        left_out = len(src_pieces) - shown
        lines.append(f"({left_out} more source pieces; --save-attention FILE.png draws them all)")
    return "\n".join(line.rstrip() for line in lines)
