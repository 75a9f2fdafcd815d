"""Everything the attention explorer shows about one sentence, as plain JSON-ready data.

`explain` takes a sentence's n-best translations by a `Translator` and teacher-forces the
chosen hypotheses (`seq2seq.decoding.attention_maps.teacher_forced_maps`, which lists the maps
and their shapes), so the maps are the weights the model computes when it produces exactly
those tokens. A target of one's own (`given_target`) takes the place of the n-best list: it
is teacher-forced the same way, and has no score (it was not searched).

Pieces are grouped into words (`seq2seq.data.word_links.word_of_piece`: sentencepiece marks
the first piece of a word with "▁", and the EOS piece is a word of its own). The word alignment
is read off cross-attention as `seq2seq align` reads it with its rule `mean`
(seq2seq.decoding.alignment), with its weights:

    A(t, s) = `source_attention`: the mean over every decoder layer and head of
              cross(l, h, t, s)   (GRU: bahdanau)
    W(u, v) = mean over the pieces t of target word u of sum over the pieces s of source word v
              of A(t, s)
    target word u is linked to the source word v with the largest W(u, v) (EOS left out)

The page opens on `first_view`: the last decoder layer's sharpest cross-attention head, the
one whose rows have the lowest mean entropy

    H(l, h) = mean over t of -sum over s of cross(l, h, t, s) log cross(l, h, t, s)

(the GRU's one Bahdanau map). Weights are rounded to `DECIMALS` decimals to keep the payload
small.

`traced_tree` gives the explorer's beam tree: what the translator's beam search recorded in a
`BeamTrace` (seq2seq.decoding.beam_trace), as JSON-ready steps of candidates; `beam_tree`
decodes a sentence with a trace and gives its tree.
"""

import math

import torch
from torch import Tensor

from seq2seq.data.tokenizer import Tokenizer
from seq2seq.data.word_links import word_of_piece
from seq2seq.decoding.alignment import word_weights
from seq2seq.decoding.attention_maps import source_attention, teacher_forced_maps
from seq2seq.decoding.beam_trace import BeamTrace, TraceStep
from seq2seq.decoding.line_translator import Translation, pieces
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError
from seq2seq.models import TransformerSeq2Seq

DECIMALS = 3
SCORE_DECIMALS = 4  # log-probabilities and scores of the beam tree
ALIGNED_WEIGHTS = {
    "transformer": "cross-attention averaged over every decoder layer and head",
    "gru": "the Bahdanau weights",
}
ALIGNMENT_RULE = (
    "{weights}; pieces summed over each source word and averaged over each target word; each "
    "target word linked to the source word it attends to most"
)


def check_text(text: str, field: str = "text") -> None:
    """Raise a one-line UserError, naming `field`, for a text the explorer cannot explain."""
    if not text.strip():
        raise UserError(f"{field}: empty; type a sentence")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UserError(f"{field}: not valid UTF-8 at character {err.start + 1}") from None


def given_target(translator: Translator, src_ids: list[int], target: str) -> Translation:
    """`target` as the one hypothesis of the source `src_ids` (no EOS) that `explain`
    teacher-forces, tokenized as `seq2seq align` tokenizes a pair's target; its score is NaN
    (not searched)."""
    (tokens,) = translator.tgt_tokenizer.encode([target])
    if not tokens:
        raise UserError("target: nothing in it is left to align once normalised")
    src_pieces = pieces(translator.src_tokenizer, src_ids)
    tgt_pieces = pieces(translator.tgt_tokenizer, tokens)
    return Translation(target, math.nan, tokens, src_pieces, tgt_pieces, src_tokens=src_ids)


def word_alignment(attention: Tensor, src_words: list[int], tgt_words: list[int]) -> list[list]:
    """[target word, source word, weight] links (see the module docstring), EOS left out.

    attention: (T, S) piece weights; src_words, tgt_words: the word index of every piece.
    """
    per_word = word_weights(attention, src_words, tgt_words)
    weights, links = per_word[:-1, :-1].max(dim=1)  # the EOS words are the last: leave them out
    pairs = zip(links.tolist(), weights.tolist(), strict=True)
    return [[u, v, round(w, DECIMALS)] for u, (v, w) in enumerate(pairs)]


def rounded(weights: Tensor, decimals: int = DECIMALS) -> list:
    """Nested lists of `weights` rounded to `decimals` (in float64, so 0.123 prints as 0.123)."""
    return torch.round(weights.double(), decimals=decimals).tolist()


def describe_hypothesis(
    translation: Translation, maps: dict[str, Tensor] | None, src_words: list[int]
) -> dict:
    """One hypothesis as the explorer's answer gives it (with its maps and alignment when
    `maps` is given; a score of NaN, a target given, as null); src_words: the word index of
    every source piece."""
    words, index = word_of_piece(translation.tgt_pieces)
    described = {
        "text": translation.text,
        "score": None if math.isnan(translation.score) else round(translation.score, 4),
        "pieces": translation.tgt_pieces,
        "words": words,
        "word_of_piece": index,
    }
    if maps is not None:
        described["maps"] = {name: rounded(weights) for name, weights in maps.items()}
        attention = source_attention(maps)
        described["alignment"] = word_alignment(attention, src_words, index)
    return described


def first_view(maps: dict[str, Tensor]) -> dict:
    """The map the explorer shows first: {"view", "layer", "head"} of the last decoder layer's
    cross-attention head with the lowest mean row entropy (the GRU: its Bahdanau map).

    maps: as `teacher_forced_maps` gives them, cross (L_dec, H, T, S)."""
    if "bahdanau" in maps:
        return {"view": "bahdanau", "layer": 0, "head": 0}
    last = maps["cross"][-1]  # (H, T, S)
    entropy = -(last * last.clamp_min(1e-12).log()).sum(dim=-1).mean(dim=-1)  # (H,)
    return {"view": "cross", "layer": maps["cross"].shape[0] - 1, "head": int(entropy.argmin())}


def explain(
    translator: Translator, nbest: list[Translation], hypothesis: int = 0, all_maps: bool = False
) -> dict:
    """What the explorer shows of the n-best translations `nbest` of one sentence by
    `translator`: the source and each hypothesis as pieces and words, and the attention maps and
    word alignment of hypothesis number `hypothesis` (of every one with `all_maps`)."""
    src_pieces = nbest[0].src_pieces
    if not src_pieces:
        raise UserError("text: nothing in it is left to translate once normalised")
    src_words, src_index = word_of_piece(src_pieces)
    model, device = translator.model, translator.device
    hypotheses, shown_first = [], None
    for number, translation in enumerate(nbest):
        maps = None
        if all_maps or number == hypothesis:
            maps = teacher_forced_maps(model, translation.src_tokens, translation.tokens, device)
        if number == hypothesis:
            shown_first = first_view(maps)
        hypotheses.append(describe_hypothesis(translation, maps, src_index))
    positions = torch.arange(max(len(src_pieces), *(len(t.tgt_pieces) for t in nbest)))
    arch = "transformer" if isinstance(model, TransformerSeq2Seq) else "gru"
    return {
        "arch": arch,
        "positional": rounded(model.positional(positions)) if arch == "transformer" else None,
        "source": {"pieces": src_pieces, "words": src_words, "word_of_piece": src_index},
        "hypotheses": hypotheses,
        "first_view": shown_first,
        "alignment_rule": ALIGNMENT_RULE.format(weights=ALIGNED_WEIGHTS[arch]),
    }


def beam_tree(translator: Translator, src_tokens: list[int], beam_size: int, nbest: int) -> dict:
    """The beam search of the source `src_tokens` (ids, no EOS) by `translator`, step by step
    (`traced_tree`)."""
    trace = BeamTrace()
    translator.translate_ids([src_tokens], beam_size, nbest, trace=trace)
    return traced_tree(translator, trace, beam_size, nbest)


def traced_tree(translator: Translator, trace: BeamTrace, beam_size: int, nbest: int) -> dict:
    """The beam search that `trace` recorded (of one sentence by `translator`, at `beam_size`),
    step by step: its live beams, each with its score, the (beam, candidate) of the previous
    step it continues, its cross-attention row over the source pieces, and its candidates
    (token, piece, log-probability, score, the next beam it became or -1, whether it finished),
    best first; and every finished hypothesis with its raw and length-penalised scores, best
    first (the first `nbest` are the search's n-best list); `attention` names the weights of
    the rows. Numbers are rounded (SCORE_DECIMALS, DECIMALS)."""
    tokenizer = translator.tgt_tokenizer
    finished = trace.finished()
    texts = tokenizer.decode([hypothesis.tokens for hypothesis in finished]) if finished else []
    model = translator.model
    attention = "the Bahdanau weights"
    if isinstance(model, TransformerSeq2Seq):
        layers = len(model.decoder_layers)
        attention = f"decoder layer {model.attention_layer + 1} of {layers}, mean of heads"
    return {
        "beam": beam_size,
        "length_penalty": translator.decode_cfg.length_penalty,
        "attention": attention,
        "steps": [
            {"penalty": round(step.penalty, SCORE_DECIMALS), "beams": traced_beams(step, tokenizer)}
            for step in trace.steps
        ],
        "finished": [
            {
                "step": hypothesis.step,
                "beam": hypothesis.beam,
                "candidate": hypothesis.candidate,
                "text": text,
                "raw_score": round(hypothesis.raw_score, SCORE_DECIMALS),
                "penalty": round(hypothesis.penalty, SCORE_DECIMALS),
                "score": round(hypothesis.score, SCORE_DECIMALS),
            }
            for hypothesis, text in zip(finished, texts, strict=True)
        ],
        "nbest": nbest,
    }


def traced_beams(step: TraceStep, tokenizer: Tokenizer) -> list[dict]:
    """The live beams of one traced step (score > -inf), each with its candidates of
    probability > 0 (see `traced_tree`). Each tensor of the step is rounded and listed once,
    then cut into beams."""
    counts = step.log_probs.isfinite().sum(dim=1).tolist()  # best first: the finite ones lead
    beam_scores, parents = step.beam_scores.tolist(), step.parents.tolist()
    attention = rounded(step.attention)
    tokens, next_beam, finished = (t.tolist() for t in (step.tokens, step.next_beam, step.finished))
    log_probs, scores = (rounded(t, SCORE_DECIMALS) for t in (step.log_probs, step.scores))
    beams = []
    for beam in step.beam_scores.isfinite().nonzero().squeeze(1).tolist():
        count, parent = counts[beam], parents[beam]
        beams.append(
            {
                "beam": beam,
                "score": round(beam_scores[beam], SCORE_DECIMALS),
                "parent": parent if parent[0] >= 0 else None,
                "attention": attention[beam],
                "tokens": tokens[beam][:count],
                "pieces": [tokenizer.id_to_piece(token) for token in tokens[beam][:count]],
                "log_probs": log_probs[beam][:count],
                "scores": scores[beam][:count],
                "next_beam": next_beam[beam][:count],
                "finished": finished[beam][:count],
            }
        )
    return beams
