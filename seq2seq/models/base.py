"""The one interface both model families implement, used by training and by search.

Shapes: B = batch, S = source length, T = target length, V = target vocabulary, H = heads.
Token id conventions (seq2seq.data.specials): a source is `ids + [EOS]`; a target is
`[BOS] + ids + [EOS]`, fed as `tgt_in = target[:, :-1]` and predicted as `target[:, 1:]`.

Encoder state and decoder cache are dictionaries whose values are tensors (or lists of tensors)
with the batch on dimension 0, so that one function, `select_rows`, reorders both for beam search.

Besides the forward pass and the decoder steps, a model gives beam search two functions
(`best_candidates`, `beam_state`). The classes here give the textbook versions;
`seq2seq.fast.speed_up` turns a model into its fast twin, whose versions compute the same faster:
beam search then keeps the encoder state once per sentence and the cache once per beam, so that
the K beams of a sentence read its source keys and values together instead of from K copies.
The loss that trains a model and its int8 copy for decoding come later in the data flow
(seq2seq/training/loss.py, seq2seq/decoding/quantize.py) and take the model as an argument.
"""

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seq2seq.config import ModelConfig
from seq2seq.data.specials import PAD_ID

State = dict[str, Tensor | list[Tensor]]


@dataclass
class StepOutput:
    """What one decoder step returns.

    log_probs: (B, V) float32 log-probabilities of the next token, a new tensor (the search
        modifies it in place).
    cache: the updated incremental cache (pass it to the next step).
    attention: (B, H, S) cross-attention weights of this step when asked for (the GRU has H = 1),
        else None.
    """

    log_probs: Tensor
    cache: State
    attention: Tensor | None = None


def select_rows(state: State, index: Tensor) -> State:
    """Pick (and repeat or reorder) batch rows of an encoder state or decoder cache.

    `index` is a (B',) long tensor of row numbers; every tensor is indexed on dimension 0.
    """
    out: State = {}
    for key, value in state.items():
        if isinstance(value, list):
            out[key] = [v.index_select(0, index) for v in value]
        else:
            out[key] = value.index_select(0, index)
    return out


class Seq2SeqModel(nn.Module):
    """Base class of the GRU and Transformer translation models."""

    @staticmethod
    def best_candidates(beam_scores: Tensor, log_probs: Tensor, n: int) -> tuple[Tensor, Tensor]:
        """The n best continuations of each sentence's beams, for beam search: (A, K) beam scores
        and (A * K, V) next-token log-probabilities -> scores (A, n) and indices (A, n) into the
        K * V (beam, token) pairs (beam * V + token), best first."""
        sentences = beam_scores.shape[0]
        return (beam_scores.view(-1, 1) + log_probs).view(sentences, -1).topk(n, dim=1)

    def beam_state(self, state: State, beams: int) -> State:
        """The encoder state that beam search decodes `beams` beams per sentence from.

        `decode_step` reads one state row per cache row, so each sentence's row is repeated:
        rows i * K .. i * K + K - 1 are sentence i's (K = beams). `state` is what `encode`
        returns (every model's holds `src_lens` (B,)), or a selection of its rows.
        """
        src_lens = state["src_lens"]
        sentences = torch.arange(len(src_lens), device=src_lens.device)
        return select_rows(state, sentences.repeat_interleave(beams))

    def forward(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits.

        src: (B, S) source ids, padded with PAD; src_lens: (B,) true lengths;
        tgt_in: (B, T) target ids starting with BOS, padded with PAD.
        Returns (B, T, V) unnormalised scores of the next target token at every position.
        """
        raise NotImplementedError

    def encode(self, src: Tensor, src_lens: Tensor) -> State:
        """Run the encoder once. Returns the state every decoder step reads (batch on dim 0)."""
        raise NotImplementedError

    def init_cache(self, state: State) -> State:
        """The empty incremental cache for decoding from `state` (batch on dim 0)."""
        raise NotImplementedError

    def decode_step(
        self, state: State, prev_tokens: Tensor, cache: State, need_attention: bool = False
    ) -> StepOutput:
        """Advance the decoder by one token.

        state: B rows; cache and prev_tokens: B * G rows, of which rows i * G .. i * G + G - 1
        decode from row i of `state` (G = 1 but in beam search with a fast model, whose
        `beam_state` keeps one row per sentence: there G is the beam size).
        prev_tokens: the previous target token of each cache row (BOS at the first step).
        Step t costs O(t) for the Transformer (cached keys/values) and O(1) for the GRU.
        """
        raise NotImplementedError

    def attention_maps(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """Every attention weight the model computes on teacher-forced `tgt_in`, by name.

        Transformer: `encoder_self` (B, L_enc, H, S, S), `decoder_self` (B, L_dec, H, T, T),
        `cross` (B, L_dec, H, T, S). GRU: `bahdanau` (B, T, S). Inputs as in `forward`.
        The one hook of seq2seq.decoding.attention_maps, which chooses, averages and draws them.
        """
        raise NotImplementedError

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def make_embeddings(
    cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool
) -> tuple[nn.Embedding, nn.Embedding]:
    """The (target, source) token embeddings, (V, cfg.embed_dim) each: one module shared by both
    sides when `cfg.share_embeddings` is set and the vocabulary is joint, else two.

    Target first, as the models register them: that order fixes the order of their parameters,
    and so of the optimizer state saved in checkpoints."""
    tgt_embed = nn.Embedding(tgt_vocab_size, cfg.embed_dim, padding_idx=PAD_ID)
    if not (cfg.share_embeddings and joint_vocab):
        return tgt_embed, nn.Embedding(src_vocab_size, cfg.embed_dim, padding_idx=PAD_ID)
    if src_vocab_size != tgt_vocab_size:
        raise ValueError("a joint vocabulary needs equal source and target sizes")
    return tgt_embed, tgt_embed
