"""A GRU encoder-decoder with Bahdanau (additive) attention (Bahdanau et al., 2015).

    encoder:  h_j = [fwd_j; bwd_j]    a bidirectional GRU over the source embeddings,
                                      hidden_size / 2 per direction, so h_j has hidden_size
    bridge:   s_0 = tanh(W_b [fwd_S; bwd_1] + b_b)      the initial state of every decoder layer
    step t:   c_t = sum_j a_tj h_j,   a_t = masked_softmax_j(w_v^T tanh(W_q s_{t-1} + W_k h_j))
              s_t = GRU([e(y_{t-1}); c_t], s_{t-1})     (s_{t-1}: the top layer's state)
              o_t = tanh(W_o [s_t; c_t; e(y_{t-1})] + b_o)
              logits_t = W_out o_t

The readout o_t has the embedding size, so with `tie_output` W_out is the target embedding
matrix itself (Press & Wolf, 2017), whatever the hidden size.

The recurrence is sequential, so teacher forcing loops over the T target positions, but only
the recurrent part: the key projections W_k h_j are computed once per batch, and the
embeddings and the output layer run for all positions at once.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.config import ModelConfig
from seq2seq.models.attention import AdditiveAttention
from seq2seq.models.base import Seq2SeqModel, State, StepOutput, make_embeddings


class GRUSeq2Seq(Seq2SeqModel):
    """Shapes: E = embed_dim, Hd = hidden_size, L = decoder_layers."""

    def __init__(
        self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool
    ) -> None:
        super().__init__()
        embed_dim, hidden = cfg.embed_dim, cfg.hidden_size
        self.tgt_embed, self.src_embed = make_embeddings(
            cfg, src_vocab_size, tgt_vocab_size, joint_vocab
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = nn.GRU(
            embed_dim,
            hidden // 2,
            num_layers=cfg.encoder_layers,
            batch_first=True,
            bidirectional=True,
            dropout=cfg.dropout if cfg.encoder_layers > 1 else 0.0,
        )
        self.bridge = nn.Linear(hidden, hidden)
        self.attention = AdditiveAttention(hidden, hidden, hidden, cfg.attention_dropout)
        self.decoder = nn.GRU(
            embed_dim + hidden,
            hidden,
            num_layers=cfg.decoder_layers,
            batch_first=True,
            dropout=cfg.dropout if cfg.decoder_layers > 1 else 0.0,
        )
        self.decoder_layers = cfg.decoder_layers
        self.readout = nn.Linear(2 * hidden + embed_dim, embed_dim)
        self.output = nn.Linear(embed_dim, tgt_vocab_size, bias=False)
        if cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def encode(self, src: Tensor, src_lens: Tensor) -> State:
        """Returns memory (B, S, Hd) encoder outputs (zeros at padding), keys (B, S, Hd) their
        projections W_k h_j, src_lens (B,), and hidden (B, L, Hd) the decoder's initial state.
        """
        embedded = self.dropout(self.src_embed(src))
        packed = pack_padded_sequence(
            embedded, src_lens.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, final = self.encoder(packed)
        memory, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        # final: (encoder_layers * 2, B, Hd / 2); the last two are the top layer's forward state
        # after the last real token and its backward state after the first one.
        top = torch.cat([final[-2], final[-1]], dim=-1)
        initial = torch.tanh(self.bridge(top))
        return {
            "memory": memory,
            "keys": self.attention.project_keys(memory),
            "src_lens": src_lens,
            "hidden": initial[:, None].expand(-1, self.decoder_layers, -1),
        }

    def _step(
        self, state: State, embedded: Tensor, hidden: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """One decoder step for R = B * G rows: the G rows of each of the B sentences in
        `state` (G = 1 but in beam search with a fast model, where G is the beam size: see
        `Seq2SeqModel.decode_step`) attend to their sentence's source together, as G queries of
        the additive attention.

        Args:
            embedded: (R, 1, E) embedding of the previous target token.
            hidden: (L, R, Hd) decoder state s_{t-1}, every layer.

        Returns:
            the top layer's new state s_t (R, 1, Hd), the context c_t (R, 1, Hd), the new state
            of every layer (L, R, Hd), and the attention weights (R, 1, S).
        """
        rows, sentences = hidden.shape[1], state["keys"].shape[0]
        query = hidden[-1].view(sentences, rows // sentences, -1)  # (B, G, Hd)
        context, weights = self.attention(query, state["keys"], state["memory"], state["src_lens"])
        context, weights = context.view(rows, 1, -1), weights.view(rows, 1, -1)
        output, hidden = self.decoder(torch.cat([embedded, context], dim=-1), hidden)
        return output, context, hidden, weights

    def _teacher_forced(self, state: State, embedded: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Run the recurrence over embedded (B, T, E) target inputs.

        Returns the states s_1..s_T (B, T, Hd), contexts c_1..c_T (B, T, Hd), and attention
        weights (B, T, S).
        """
        hidden = state["hidden"].transpose(0, 1).contiguous()
        outputs, contexts, weights = [], [], []
        for embedded_t in embedded.split(1, dim=1):  # (B, 1, E) each; one gradient copy back
            output, context, hidden, step_weights = self._step(state, embedded_t, hidden)
            outputs.append(output)
            contexts.append(context)
            weights.append(step_weights)
        return torch.cat(outputs, dim=1), torch.cat(contexts, dim=1), torch.cat(weights, dim=1)

    def _logits(self, states: Tensor, contexts: Tensor, embedded: Tensor) -> Tensor:
        """s (B, T, Hd), c (B, T, Hd), e (B, T, E) -> (B, T, V):
        W_out dropout(tanh(W_o [s; c; e] + b_o)), for all T positions at once."""
        readout = torch.tanh(self.readout(torch.cat([states, contexts, embedded], dim=-1)))
        return self.output(self.dropout(readout))

    def forward(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> Tensor:
        embedded = self.dropout(self.tgt_embed(tgt_in))
        states, contexts, _ = self._teacher_forced(self.encode(src, src_lens), embedded)
        return self._logits(states, contexts, embedded)

    def init_cache(self, state: State) -> State:
        """The decoder state (B, L, Hd), starting from the bridge."""
        return {"hidden": state["hidden"]}

    def decode_step(
        self, state: State, prev_tokens: Tensor, cache: State, need_attention: bool = False
    ) -> StepOutput:
        embedded = self.dropout(self.tgt_embed(prev_tokens[:, None]))
        hidden = cache["hidden"].transpose(0, 1).contiguous()
        output, context, hidden, weights = self._step(state, embedded, hidden)
        logits = self._logits(output, context, embedded)[:, 0]
        log_probs = F.log_softmax(logits, dim=-1, dtype=torch.float32)
        # weights (B * G, 1, S): the single query doubles as the single head, H = 1.
        attention = weights if need_attention else None
        return StepOutput(log_probs, {"hidden": hidden.transpose(0, 1)}, attention)

    def attention_maps(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """Teacher-forced Bahdanau weights `bahdanau` (B, T, S): one map, a_tj of every step t."""
        embedded = self.dropout(self.tgt_embed(tgt_in))
        _, _, weights = self._teacher_forced(self.encode(src, src_lens), embedded)
        return {"bahdanau": weights}
