"""The Transformer encoder-decoder (Vaswani et al., 2017), pre-norm by default.

    encoder layer:  x = x + SelfAttention(x)             with a source padding mask
                    x = x + FFN(x)
    decoder layer:  y = y + SelfAttention(y)             with a causal mask
                    y = y + CrossAttention(y, memory)    with the source padding mask
                    y = y + FFN(y)

Each sublayer f sits in a residual connection with layer norm: pre-norm computes
x + dropout(f(LN(x))) and ends each stack with a final LN; post-norm (the original paper,
`pre_norm = False`) computes LN(x + dropout(f(x))).

Incremental decoding: the source keys/values of every cross-attention are projected once, in
`encode`; the self-attention keys/values of the target prefix are cached per layer and grow by
one position per `decode_step`, so step t costs O(t) and the prefix is never recomputed.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.config import ModelConfig
from seq2seq.data.specials import PAD_ID
from seq2seq.errors import UserError
from seq2seq.models.attention import MultiHeadAttention, causal_mask, padding_mask
from seq2seq.models.base import Seq2SeqModel, State, StepOutput, make_embeddings
from seq2seq.models.positional import PositionalEncoding


class Residual(nn.Module):
    """Layer norm and residual connection around one sublayer, pre-norm or post-norm.

    Use: `y = f(res.input(x))`, then `x = res.output(x, y)`.
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def input(self, x: Tensor) -> Tensor:
        """What the sublayer reads: LN(x) in pre-norm, x in post-norm."""
        return self.norm(x) if self.pre_norm else x

    def output(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """The residual stream after the sublayer."""
        x = x + self.dropout(sublayer_out)
        return x if self.pre_norm else self.norm(x)


class FeedForward(nn.Module):
    """Position-wise FFN(x) = W_2 dropout(ReLU(W_1 x + b_1)) + b_2."""

    def __init__(self, d_model: int, ffn_size: int, dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, ffn_size)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(ffn_size, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d_model = cfg.embed_dim
        self.self_attn = MultiHeadAttention(d_model, cfg.num_heads, cfg.attention_dropout)
        self.self_attn_res = Residual(d_model, cfg.dropout, cfg.pre_norm)
        self.ffn = FeedForward(d_model, cfg.ffn_size, cfg.dropout)
        self.ffn_res = Residual(d_model, cfg.dropout, cfg.pre_norm)

    def forward(
        self, x: Tensor, src_mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D) and, when asked, the self-attention
        weights (B, H, S, S)."""
        h = self.self_attn_res.input(x)
        out, weights = self.self_attn(h, h, src_mask, need_weights)
        x = self.self_attn_res.output(x, out)
        return self.ffn_res.output(x, self.ffn(self.ffn_res.input(x))), weights


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d_model = cfg.embed_dim
        self.self_attn = MultiHeadAttention(d_model, cfg.num_heads, cfg.attention_dropout)
        self.self_attn_res = Residual(d_model, cfg.dropout, cfg.pre_norm)
        self.cross_attn = MultiHeadAttention(d_model, cfg.num_heads, cfg.attention_dropout)
        self.cross_attn_res = Residual(d_model, cfg.dropout, cfg.pre_norm)
        self.ffn = FeedForward(d_model, cfg.ffn_size, cfg.dropout)
        self.ffn_res = Residual(d_model, cfg.dropout, cfg.pre_norm)

    def forward(
        self,
        y: Tensor,
        past_kv: tuple[Tensor, Tensor] | None,
        self_mask: Tensor | None,
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need_weights: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], tuple[Tensor, Tensor] | None]:
        """Run the layer on T new target positions.

        Args:
            y: (B, T, D) the new positions.
            past_kv: self-attention keys/values (B, H, t, d) of the t positions before them,
                or None when y is the whole prefix (teacher forcing).
            self_mask: causal mask (T, t + T), or None when every key is in the past
                (one new position per step).
            cross_kv: the source keys/values (B, H, S, d) of this layer's cross-attention.
            src_mask: (B, 1, 1, S) source padding mask.
            need_weights: also return the attention weights.

        Returns:
            the output (B, T, D), the self-attention keys/values (B, H, t + T, d) to cache,
            and the self- and cross-attention weights, (B, H, T, t + T) and (B, H, T, S), or
            None.
        """
        h = self.self_attn_res.input(y)
        k, v = self.self_attn.project_kv(h)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)
        q = self.self_attn.project_q(h)
        out, self_weights = self.self_attn.attend(q, k, v, self_mask, need_weights)
        y = self.self_attn_res.output(y, out)

        h = self.cross_attn_res.input(y)
        q = self.cross_attn.project_q(h)
        out, cross_weights = self.cross_attn.attend(q, *cross_kv, src_mask, need_weights)
        y = self.cross_attn_res.output(y, out)

        y = self.ffn_res.output(y, self.ffn(self.ffn_res.input(y)))
        weights = (self_weights, cross_weights) if need_weights else None
        return y, (k, v), weights


class TransformerSeq2Seq(Seq2SeqModel):
    """Encoder-decoder Transformer; see the module docstring for the layer maths.

    Tokens are embedded as E[token] * sqrt(D) + PE(position), then dropout. With a joint
    vocabulary and `share_embeddings`, source and target share one embedding; with
    `tie_output`, the output projection is the target embedding matrix (logits = y E^T).
    """

    def __init__(
        self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool
    ) -> None:
        super().__init__()
        if not -cfg.decoder_layers <= cfg.attention_layer < cfg.decoder_layers:
            raise UserError(
                f"model.attention_layer {cfg.attention_layer} is out of range for "
                f"{cfg.decoder_layers} decoder layers"
            )
        d_model = cfg.embed_dim
        self.d_model = d_model
        self.attention_layer = cfg.attention_layer % cfg.decoder_layers
        self.tgt_embed, self.src_embed = make_embeddings(
            cfg, src_vocab_size, tgt_vocab_size, joint_vocab
        )
        self.positional = PositionalEncoding(d_model)
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        # Pre-norm leaves the residual stream unnormalised: each stack ends with a layer norm.
        self.encoder_norm = nn.LayerNorm(d_model) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if cfg.pre_norm else nn.Identity()
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._init_parameters()
        if cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _init_parameters(self) -> None:
        """Xavier-uniform linear layers with zero biases; embeddings N(0, 1/D) (so that
        E * sqrt(D) has unit scale) with a zero padding row."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=self.d_model**-0.5)
                with torch.no_grad():
                    module.weight[PAD_ID].zero_()

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, positions: Tensor) -> Tensor:
        """tokens (B, L), positions (L,) or (B, L) -> (B, L, D)."""
        x = embedding(tokens) * math.sqrt(self.d_model)
        return self.embed_dropout(x + self.positional(positions).to(x.dtype))

    def _encode(
        self, src: Tensor, src_lens: Tensor, need_weights: bool = False
    ) -> tuple[State, list[Tensor]]:
        """The encoder state (see `encode`) and, when asked, every encoder layer's
        self-attention weights (B, H, S, S)."""
        src_mask = padding_mask(src_lens, src.shape[1])
        x = self._embed(self.src_embed, src, torch.arange(src.shape[1], device=src.device))
        weights = []
        for layer in self.encoder_layers:
            x, layer_weights = layer(x, src_mask, need_weights)
            if layer_weights is not None:
                weights.append(layer_weights)
        memory = self.encoder_norm(x)
        cross_kv = [layer.cross_attn.project_kv(memory) for layer in self.decoder_layers]
        state: State = {
            "memory": memory,
            "src_lens": src_lens,
            "cross_k": [k for k, _ in cross_kv],
            "cross_v": [v for _, v in cross_kv],
        }
        return state, weights

    def encode(self, src: Tensor, src_lens: Tensor) -> State:
        """Returns memory (B, S, D), src_lens (B,), and per decoder layer the projected source
        keys `cross_k` and values `cross_v` (B, H, S, d)."""
        return self._encode(src, src_lens)[0]

    def _decode(
        self,
        state: State,
        tokens: Tensor,
        positions: Tensor,
        past_kv: list[tuple[Tensor, Tensor]] | None,
        need_weights: bool = False,
        weights_layer: int | None = None,
    ) -> tuple[Tensor, list[tuple[Tensor, Tensor]], list[tuple[Tensor, Tensor]]]:
        """Run the decoder stack.

        Teacher forcing: tokens (B, T), positions (T,), past_kv None (a causal mask applies).
        One incremental step: tokens (B, 1), positions (B, 1), past_kv the cached keys/values
        of every layer (every cached key is in the past, so no mask is needed).

        Returns the final hidden states (B, T, D), every layer's self-attention keys/values,
        and, when asked, every layer's self- and cross-attention weights (B, H, T, t + T) and
        (B, H, T, S) (else an empty list); with `weights_layer`, those of that layer alone.
        """
        src_mask = padding_mask(state["src_lens"], state["memory"].shape[1])
        self_mask = None if past_kv is not None else causal_mask(tokens.shape[1], tokens.device)
        y = self._embed(self.tgt_embed, tokens, positions)
        new_kv, weights = [], []
        for i, layer in enumerate(self.decoder_layers):
            y, kv, layer_weights = layer(
                y,
                past_kv[i] if past_kv is not None else None,
                self_mask,
                (state["cross_k"][i], state["cross_v"][i]),
                src_mask,
                need_weights or i == weights_layer,
            )
            new_kv.append(kv)
            if layer_weights is not None:
                weights.append(layer_weights)
        return self.decoder_norm(y), new_kv, weights

    def forward(
        self,
        src: Tensor,
        src_lens: Tensor,
        tgt_in: Tensor,
        alignment_head: tuple[int, int] | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """The teacher-forced logits (B, T, V); with `alignment_head` (layer, head), also that
        head's cross-attention weights (B, T, S), the only weights computed (an alignment head's
        training, seq2seq.training.loss.alignment_loss)."""
        positions = torch.arange(tgt_in.shape[1], device=tgt_in.device)
        layer = None if alignment_head is None else alignment_head[0]
        state = self.encode(src, src_lens)
        hidden, _, weights = self._decode(state, tgt_in, positions, None, weights_layer=layer)
        if alignment_head is None:
            return self.output(hidden)
        return self.output(hidden), weights[0][1][:, alignment_head[1]]

    def init_cache(self, state: State) -> State:
        """Empty self-attention keys/values (B, H, 0, d) per layer and a step counter (B,)."""
        cross_k = state["cross_k"][0]
        batch, heads, _, head_dim = cross_k.shape
        empty = cross_k.new_zeros(batch, heads, 0, head_dim)
        layers = len(self.decoder_layers)
        return {
            "self_k": [empty] * layers,
            "self_v": [empty] * layers,
            "step": torch.zeros(empty.shape[0], dtype=torch.long, device=empty.device),
        }

    def decode_step(
        self, state: State, prev_tokens: Tensor, cache: State, need_attention: bool = False
    ) -> StepOutput:
        past_kv = list(zip(cache["self_k"], cache["self_v"], strict=True))
        hidden, new_kv, weights = self._decode(
            state, prev_tokens[:, None], cache["step"][:, None], past_kv, need_attention
        )
        log_probs = F.log_softmax(self.output(hidden[:, 0]), dim=-1, dtype=torch.float32)
        new_cache: State = {
            "self_k": [k for k, _ in new_kv],
            "self_v": [v for _, v in new_kv],
            "step": cache["step"] + 1,
        }
        attention = weights[self.attention_layer][1][:, :, 0] if need_attention else None
        return StepOutput(log_probs, new_cache, attention)

    def attention_maps(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """Teacher-forced weights of every attention, stacked over layers:
        `encoder_self` (B, L_enc, H, S, S), `decoder_self` (B, L_dec, H, T, T) and `cross`
        (B, L_dec, H, T, S)."""
        state, encoder_weights = self._encode(src, src_lens, need_weights=True)
        positions = torch.arange(tgt_in.shape[1], device=tgt_in.device)
        _, _, decoder_weights = self._decode(state, tgt_in, positions, None, need_weights=True)
        return {
            "encoder_self": torch.stack(encoder_weights, dim=1),
            "decoder_self": torch.stack([w for w, _ in decoder_weights], dim=1),
            "cross": torch.stack([w for _, w in decoder_weights], dim=1),
        }
