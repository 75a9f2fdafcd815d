"""Everything the attention explorer shows about one sentence, as plain JSON-ready data.

`explain` translates a sentence with a `Translator`, then teacher-forces the chosen hypotheses
through `Seq2SeqModel.attention_maps`, so the maps are the weights the model computes when it
produces exactly those tokens. Shapes (no batch): S = source pieces, T = target pieces, both
ending with the EOS piece; L = layers, H = heads.

    Transformer   encoder_self (L_enc, H, S, S)   decoder_self (L_dec, H, T, T)
                  cross (L_dec, H, T, S)
    GRU           bahdanau (T, S)

Pieces are grouped into words: sentencepiece marks the first piece of a word with "▁", and the
EOS piece is a word of its own. The word alignment is read off cross-attention:

    A(t, s) = mean over every decoder layer and head of cross(l, h, t, s)   (GRU: bahdanau)
    W(u, v) = mean over the pieces t of target word u of sum over the pieces s of source word v
              of A(t, s)
    target word u is linked to the source word v with the largest W(u, v) (EOS left out)

Weights are rounded to `DECIMALS` decimals to keep the payload small.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.errors import UserError
from seq2seq.models import TransformerSeq2Seq
from seq2seq.specials import BOS_ID, EOS_ID
from seq2seq.translator import Translation, Translator

MAX_TEXT_CHARS = 400
MAX_BEAM = 8
DECIMALS = 3
WORD_START = "▁"
ALIGNMENT_RULE = (
    "cross-attention averaged over every decoder layer and head; pieces summed over each "
    "source word and averaged over each target word; each target word linked to the source "
    "word it attends to most"
)


@dataclass
class ExplainRequest:
    """What to explain: `text` translated by `model` with `beam` beams, the `nbest` best
    hypotheses listed, and the maps of hypothesis `hypothesis` (of every one with `all_maps`)."""

    model: str
    text: str
    beam: int | None = None
    nbest: int = 1
    hypothesis: int = 0
    all_maps: bool = False


def check_request(request: ExplainRequest) -> None:
    """Raise a one-line UserError naming the field of a request that cannot be explained."""
    text = request.text
    if not text.strip():
        raise UserError("text: empty; type a sentence to translate")
    if len(text) > MAX_TEXT_CHARS:
        raise UserError(f"text: {len(text)} characters; at most {MAX_TEXT_CHARS} are explained")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UserError(f"text: not valid UTF-8 at character {err.start + 1}") from None
    if request.beam is not None and not 1 <= request.beam <= MAX_BEAM:
        raise UserError(f"beam: {request.beam}; must be between 1 and {MAX_BEAM}")
    beam = request.beam or 1
    if not 1 <= request.nbest <= beam:
        raise UserError(f"nbest: {request.nbest}; must be between 1 and the beam size {beam}")
    if not 0 <= request.hypothesis < request.nbest:
        raise UserError(f"hypothesis: {request.hypothesis}; must be below nbest {request.nbest}")


def word_of_piece(pieces: list[str]) -> tuple[list[str], list[int]]:
    """The words of a piece sequence ending with EOS, and the word index of every piece.

    A piece starting with "▁" starts a word; the EOS piece is a word of its own.
    """
    words: list[str] = []
    index: list[int] = []
    for position, piece in enumerate(pieces):
        if position == len(pieces) - 1 or piece.startswith(WORD_START) or not words:
            words.append(piece.removeprefix(WORD_START))
        else:
            words[-1] += piece
        index.append(len(words) - 1)
    return words, index


def source_attention(maps: dict[str, Tensor]) -> Tensor:
    """(T, S) the weights of target pieces on source pieces behind the word alignment."""
    if "bahdanau" in maps:
        return maps["bahdanau"]
    return maps["cross"].mean(dim=(0, 1))


def word_alignment(attention: Tensor, src_words: list[int], tgt_words: list[int]) -> list[list]:
    """[target word, source word, weight] links (see the module docstring), EOS left out.

    attention: (T, S) piece weights; src_words, tgt_words: the word index of every piece.
    """
    src_index = torch.tensor(src_words)
    tgt_index = torch.tensor(tgt_words)
    num_src, num_tgt = src_words[-1], tgt_words[-1]  # the EOS word is the last; leave it out
    summed = torch.zeros(attention.shape[0], num_src + 1).index_add_(1, src_index, attention)
    per_word = torch.zeros(num_tgt + 1, num_src + 1).index_add_(0, tgt_index, summed)
    per_word /= torch.bincount(tgt_index, minlength=num_tgt + 1)[:, None]
    weights, links = per_word[:num_tgt, :num_src].max(dim=1)
    pairs = zip(links.tolist(), weights.tolist(), strict=True)
    return [[u, v, round(w, DECIMALS)] for u, (v, w) in enumerate(pairs)]


def rounded(weights: Tensor) -> list:
    """Nested lists of `weights` rounded to DECIMALS (in float64, so 0.123 prints as 0.123)."""
    return torch.round(weights.double(), decimals=DECIMALS).tolist()


@torch.no_grad()
def teacher_forced_maps(translator: Translator, src_ids: list[int], tokens: list[int]) -> dict:
    """The attention maps (fp32, no batch axis) of output `tokens` for source `src_ids`
    (both without EOS)."""
    model = translator.model
    src = torch.tensor([[*src_ids, EOS_ID]], device=translator.device)
    tgt_in = torch.tensor([[BOS_ID, *tokens]], device=translator.device)
    src_lens = torch.tensor([src.shape[1]], device=translator.device)
    maps = model.attention_maps(src, src_lens, tgt_in)
    return {name: weights[0].float().cpu() for name, weights in maps.items()}


def describe_hypothesis(
    translation: Translation, maps: dict[str, Tensor] | None, src_words: list[int]
) -> dict:
    words, index = word_of_piece(translation.tgt_pieces)
    described = {
        "text": translation.text,
        "score": round(translation.score, 4),
        "pieces": translation.tgt_pieces,
        "words": words,
        "word_of_piece": index,
    }
    if maps is not None:
        described["maps"] = {name: rounded(weights) for name, weights in maps.items()}
        described["alignment"] = word_alignment(source_attention(maps), src_words, index)
    return described


def explain(translator: Translator, request: ExplainRequest) -> dict:
    """The n-best translations of `request.text`, its pieces and words, and the attention
    maps and word alignment of the chosen hypotheses. Raises UserError on a bad request."""
    check_request(request)
    beam = request.beam or 1
    (nbest,) = translator.translate([request.text], beam_size=beam, nbest=request.nbest)
    src_ids = translator.src_tokenizer.encode([request.text])[0]
    if not src_ids:
        raise UserError("text: no piece of it is known to the model's tokenizer")
    src_words, src_index = word_of_piece(nbest[0].src_pieces)
    hypotheses = []
    for number, translation in enumerate(nbest):
        shown = request.all_maps or number == request.hypothesis
        maps = teacher_forced_maps(translator, src_ids, translation.tokens) if shown else None
        hypotheses.append(describe_hypothesis(translation, maps, src_index))
    positions = torch.arange(max(len(src_ids), max(len(t.tokens) for t in nbest)) + 1)
    model = translator.model
    positional = model.positional(positions) if isinstance(model, TransformerSeq2Seq) else None
    return {
        "model": request.model,
        "arch": "transformer" if positional is not None else "gru",
        "positional": None if positional is None else rounded(positional),
        "source": {"pieces": nbest[0].src_pieces, "words": src_words, "word_of_piece": src_index},
        "hypotheses": hypotheses,
        "alignment_rule": ALIGNMENT_RULE,
    }
