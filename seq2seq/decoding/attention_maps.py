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

The figures are sized for reading at their own pixel size, which is how TensorBoard shows an
image when it fits the card: at `DPI` dots per inch every map cell is `CELL_INCHES` wide and
high (25 pixels) and every piece label is `LABEL_POINTS` points (about 14 pixels), so one
label fits beside one cell. A grid of heads has at most `GRID_COLUMNS` columns, so it grows
down rather than across.
"""

import math
import textwrap

import torch
from matplotlib.figure import Figure
from torch import Tensor

from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.models.base import Seq2SeqModel

SHADES = " ░▒▓█"  # weight 0 .. 1, in five steps
MAX_HEADER_CHARS = 8  # the vertical source labels of the terminal view are cut to this height
MAX_LABEL_CHARS = 12  # the target labels of a terminal view too wide for its width: cut to this
DPI = 100  # pixels per inch of the figures (matplotlib's default, set so sizes are fixed)
CELL_INCHES = 0.25  # the side of one map cell
LABEL_POINTS = 10  # the font size of the piece labels
TITLE_POINTS = 11  # and of the head titles
GRID_COLUMNS = 2  # at most this many heads side by side


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


def attention_figure(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str = ""
) -> Figure:
    """A heatmap of weights (T, S): source pieces across the top, target pieces down the side.
    A title longer than the figure is wide is wrapped onto several lines."""
    num_tgt, num_src = weights.shape
    size = (2.5 + CELL_INCHES * num_src, 2 + CELL_INCHES * num_tgt)
    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(weights.detach().float().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    axes.set_xticks(range(num_src), src_pieces, rotation=90, fontsize=LABEL_POINTS)
    axes.set_yticks(range(num_tgt), tgt_pieces, fontsize=LABEL_POINTS)
    axes.xaxis.tick_top()
    axes.xaxis.set_label_position("top")
    axes.set_xlabel("source")
    axes.set_ylabel("target")
    if title:
        axes.set_title("\n".join(textwrap.wrap(title, width=max(40, int(3.5 * num_src) + 10))))
    figure.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    return figure


def attention_grid_figure(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str = ""
) -> Figure:
    """Every head of one sentence in one image: weights (H, T, S) as a grid of heatmaps,
    head 0, 1, ... (TensorBoard shows one image per sentence instead of one per head)."""
    columns = min(GRID_COLUMNS, len(weights))
    rows = math.ceil(len(weights) / columns)
    num_tgt, num_src = weights.shape[1:]
    size = (columns * (1.5 + CELL_INCHES * num_src) + 1, rows * (1.5 + CELL_INCHES * num_tgt))
    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False)
    for head, (axes, head_weights) in enumerate(zip(grid.flat, weights, strict=False)):
        image = axes.imshow(head_weights.float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        axes.set_xticks(range(num_src), src_pieces, rotation=90, fontsize=LABEL_POINTS)
        axes.set_yticks(range(num_tgt), tgt_pieces, fontsize=LABEL_POINTS)
        axes.xaxis.tick_top()
        axes.set_title(f"head {head}", fontsize=TITLE_POINTS)
    for axes in grid.flat[len(weights) :]:
        axes.set_axis_off()
    figure.colorbar(image, ax=grid, label="attention weight", shrink=0.6)
    if title:
        figure.suptitle(title)
    return figure


def head_figures(
    weights: Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str
) -> dict[str, Figure]:
    """The figures of one sentence's weights (H, T, S), by kind: "mean", the mean over heads,
    and with several heads "heads", every head in a grid."""
    figures = {
        "mean": attention_figure(weights.mean(0), src_pieces, tgt_pieces, f"{title}, mean of heads")
    }
    if weights.shape[0] > 1:
        figures["heads"] = attention_grid_figure(
            weights, src_pieces, tgt_pieces, f"{title}, each head"
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
