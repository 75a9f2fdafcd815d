"""Converting our Transformer to CTranslate2.

The textbook decoder (seq2seq.decoding.search) stays the reference; CTranslate2 runs the same
weights with the same search, much faster one sentence at a time. `transformer_spec` describes
our Transformer with CTranslate2's public spec API, from float32 arrays by our state dict's
names: a PyTorch model's (`state_arrays`), or a shipped or exported model's file read with numpy
(seq2seq.decoding.model_folder), which converts without torch:

    our model                              CTranslate2 TransformerSpec
    E[token] * sqrt(D) + PE(position)      scale_embeddings, position_encodings (our table)
    q_proj, k_proj, v_proj (self)          self_attention.linear[0]: one fused QKV projection
    q_proj / k_proj, v_proj (cross)        attention.linear[0] / attention.linear[1] (fused KV)
    Residual.norm (pre- or post-norm)      the layer_norm of each sublayer
    encoder_norm, decoder_norm (pre-norm)  encoder.layer_norm, decoder.layer_norm
    output (tied to the embedding)         decoder.projection (stored once: CTranslate2 aliases)

CTranslate2's own sinusoidal table puts every sine before every cosine; ours interleaves them
(seq2seq.models.positional), so the folder stores our table for POSITIONS positions.

`write_ctranslate2` writes a PyTorch model's conversion as a folder (seq2seq.decoding.ct2_folder);
`translator_from_weights` converts in memory. Nothing here imports torch: a PyTorch model's
arrays come from the model it is given, and only writing its description imports
seq2seq.decoding.open_pytorch.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from seq2seq.config import Config, DecodeConfig
from seq2seq.data.specials import BOS_PIECE, EOS_PIECE, UNK_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.ct2_engine import PYTORCH_ONLY_OPTIONS, import_ctranslate2
from seq2seq.decoding.ct2_folder import (
    FORMAT,
    LAYER_NORM_EPSILON,
    MANIFEST,
    POSITIONS,
    write_card,
)
from seq2seq.decoding.ct2_translator import CTranslate2Translator
from seq2seq.decoding.model_folder import CARD
from seq2seq.errors import UserError
from seq2seq.files import sha256_file

if TYPE_CHECKING:  # exporting and translating from a PyTorch model import torch; a folder does not
    from seq2seq.decoding.open_pytorch import Inference


def import_specs() -> ModuleType:
    """ctranslate2.specs, the model description API, imported without torch. It imports torch
    where it is installed, only to take torch tensors, and the converter gives it numpy arrays:
    while it is imported (once per process, unless torch already is), `import torch` fails."""
    ctranslate2 = import_ctranslate2()
    if "torch" in sys.modules or "ctranslate2.specs" in sys.modules:
        return ctranslate2.specs
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError
    try:
        return importlib.import_module("ctranslate2.specs")
    finally:
        del sys.modules["torch"]


def state_arrays(model: Any) -> dict[str, np.ndarray]:
    """The float32 arrays by name of a PyTorch model's state dict (on the CPU)."""
    state = model.state_dict()
    return {name: tensor.detach().float().cpu().numpy() for name, tensor in state.items()}


def position_table(dim: int, positions: int = POSITIONS) -> np.ndarray:
    """(positions, dim) our interleaved sinusoidal encodings (seq2seq.models.positional),
    computed in float32 as it does."""
    two_i = np.arange(0, dim, 2, dtype=np.float32)
    angles = np.arange(positions, dtype=np.float32)[:, None] / np.float32(10000.0) ** (two_i / dim)
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(positions, -1)[:, :dim]


def transformer_spec(
    weights: Mapping[str, np.ndarray], config: Config, src: Tokenizer, tgt: Tokenizer
) -> Any:
    """The CTranslate2 TransformerSpec (see the module docstring) of our Transformer of
    `config` with `weights`: float32 arrays by our state dict's names (`state_arrays`, or
    seq2seq.decoding.model_folder.read_weights), and its source and target tokenizers."""
    specs = import_specs()
    cfg = config.model
    if cfg.arch != "transformer":
        raise UserError(
            f"{cfg.name}: CTranslate2 has no recurrent models; only a Transformer exports to it"
        )
    spec = specs.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers), cfg.num_heads, pre_norm=cfg.pre_norm
    )
    check_shapes(weights, config, src.vocab_size, tgt.vocab_size)
    table = position_table(cfg.embed_dim)
    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = weights["src_embed.weight"]
    decoder.embeddings.weight = weights["tgt_embed.weight"]
    encoder.position_encodings.encodings = table
    decoder.position_encodings.encodings = table
    for i, theirs in enumerate(encoder.layer):
        _set_self_attention(theirs.self_attention, weights, f"encoder_layers.{i}")
        _set_ffn(theirs.ffn, weights, f"encoder_layers.{i}")
    for i, theirs in enumerate(decoder.layer):
        ours = f"decoder_layers.{i}"
        _set_self_attention(theirs.self_attention, weights, ours)
        _set_norm(theirs.attention.layer_norm, weights, f"{ours}.cross_attn_res.norm")
        _set_linear(theirs.attention.linear[0], weights, f"{ours}.cross_attn.q_proj")
        _set_linear(
            theirs.attention.linear[1], weights, *(f"{ours}.cross_attn.{n}_proj" for n in "kv")
        )
        _set_linear(theirs.attention.linear[2], weights, f"{ours}.cross_attn.out_proj")
        _set_ffn(theirs.ffn, weights, ours)
    if cfg.pre_norm:
        _set_norm(encoder.layer_norm, weights, "encoder_norm")
        _set_norm(decoder.layer_norm, weights, "decoder_norm")
    decoder.projection.weight = weights["output.weight"]
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.config.unk_token, spec.config.bos_token = UNK_PIECE, BOS_PIECE
    spec.config.eos_token, spec.config.decoder_start_token = EOS_PIECE, BOS_PIECE
    spec.register_source_vocabulary(src.vocabulary())
    spec.register_target_vocabulary(tgt.vocabulary())
    spec.validate()
    spec.optimize(quantization="float32")
    return spec


def check_shapes(
    weights: Mapping[str, np.ndarray], config: Config, src_vocab: int, tgt_vocab: int
) -> None:
    """A one-line `UserError` unless `weights` holds every weight of our Transformer of
    `config` and nothing else, each of its shape (as loading it into the PyTorch model needs)."""
    cfg = config.model
    dim, ffn = cfg.embed_dim, cfg.ffn_size
    shapes = {
        "src_embed.weight": (src_vocab, dim),
        "tgt_embed.weight": (tgt_vocab, dim),
        "output.weight": (tgt_vocab, dim),
    }
    for i in range(cfg.encoder_layers):
        shapes |= _layer_shapes(f"encoder_layers.{i}", ("self_attn",), dim, ffn)
    for i in range(cfg.decoder_layers):
        shapes |= _layer_shapes(f"decoder_layers.{i}", ("self_attn", "cross_attn"), dim, ffn)
    if cfg.pre_norm:
        shapes |= _shapes("encoder_norm", dim) | _shapes("decoder_norm", dim)
    problems = [(name, "missing") for name in sorted(shapes.keys() - weights.keys())]
    problems += [(name, "unknown") for name in sorted(weights.keys() - shapes.keys())]
    problems += [
        (name, f"{list(weights[name].shape)}, not {list(shape)}")
        for name, shape in shapes.items()
        if name in weights and weights[name].shape != shape
    ]
    if problems:
        name, problem = problems[0]
        raise UserError(f"the weights are not those of {cfg.name} ({name}: {problem})")


def _layer_shapes(
    layer: str, attentions: tuple[str, ...], dim: int, ffn: int
) -> dict[str, tuple[int, ...]]:
    """The shapes of an encoder or decoder layer's weights, by name."""
    shapes = _shapes(f"{layer}.ffn_res.norm", dim)
    shapes |= _shapes(f"{layer}.ffn.linear1", ffn, dim) | _shapes(f"{layer}.ffn.linear2", dim, ffn)
    for attention in attentions:
        shapes |= _shapes(f"{layer}.{attention}_res.norm", dim)
        for projection in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes |= _shapes(f"{layer}.{attention}.{projection}", dim, dim)
    return shapes


def _shapes(name: str, outputs: int, *inputs: int) -> dict[str, tuple[int, ...]]:
    """The shapes of an nn.Linear's weight (outputs, inputs) and bias (outputs,), or of a
    LayerNorm's (no `inputs`: both (outputs,))."""
    return {f"{name}.weight": (outputs, *inputs), f"{name}.bias": (outputs,)}


def _set_linear(spec: Any, weights: Mapping[str, np.ndarray], *linears: str) -> None:
    """Set a LinearSpec from one or more of our nn.Linear layers (by name), stacked (fused)
    along the outputs."""
    spec.weight = np.concatenate([weights[f"{linear}.weight"] for linear in linears])
    spec.bias = np.concatenate([weights[f"{linear}.bias"] for linear in linears])


def _set_norm(spec: Any, weights: Mapping[str, np.ndarray], norm: str) -> None:
    spec.gamma, spec.beta = weights[f"{norm}.weight"], weights[f"{norm}.bias"]


def _set_self_attention(spec: Any, weights: Mapping[str, np.ndarray], layer: str) -> None:
    _set_norm(spec.layer_norm, weights, f"{layer}.self_attn_res.norm")
    projections = (f"{layer}.self_attn.{n}_proj" for n in "qkv")
    _set_linear(spec.linear[0], weights, *projections)
    _set_linear(spec.linear[1], weights, f"{layer}.self_attn.out_proj")


def _set_ffn(spec: Any, weights: Mapping[str, np.ndarray], layer: str) -> None:
    _set_norm(spec.layer_norm, weights, f"{layer}.ffn_res.norm")
    _set_linear(spec.linear_0, weights, f"{layer}.ffn.linear1")
    _set_linear(spec.linear_1, weights, f"{layer}.ffn.linear2")


def check_number_guard(decode_cfg: DecodeConfig, keep_numbers: bool | None = None) -> None:
    """Refuse to export for CTranslate2, which has no number guard, a model that decodes with it:
    `keep_numbers` (None: the model's `decode_cfg.keep_numbers`) must be False."""
    if decode_cfg.keep_numbers if keep_numbers is None else keep_numbers:
        raise UserError(
            "--format ctranslate2: the model keeps numbers (decode.keep_numbers, the number "
            "guard), which CTranslate2 cannot run; pass --no-keep-numbers to export it without "
            "the guard (its card then says so)"
        )


def write_ctranslate2(inference: Inference, folder: Path, card: Path | None = None) -> None:
    """Write the CTranslate2 model of `inference` into the empty folder `folder`: CTranslate2's
    files, our model.json (with PYTORCH_ONLY_OPTIONS off) and tokenizer(s), `card` (if given;
    `write_card`) and MANIFEST."""
    from seq2seq.decoding.open_pytorch import write_description

    spec = transformer_spec(
        state_arrays(inference.model),
        inference.config,
        inference.src_tokenizer,
        inference.tgt_tokenizer,
    )
    spec.save(str(folder))
    # the folder decodes on CTranslate2 alone: its defaults are options CTranslate2 has
    config = copy.deepcopy(inference.config)
    for name in PYTORCH_ONLY_OPTIONS:
        setattr(config.decode, name, getattr(DecodeConfig(), name))
    write_description(dataclasses.replace(inference, config=config), folder)
    if card is not None and card.is_file():
        write_card(card, folder / CARD, guard_dropped=inference.config.decode.keep_numbers)
    digests = {
        path.name: sha256_file(path) for path in sorted(folder.iterdir()) if path.name != CARD
    }
    parameters = sum(parameter.numel() for parameter in inference.model.parameters())
    manifest = {
        "format": FORMAT,
        "positions": POSITIONS,
        "parameters": parameters,
        "sha256": digests,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def translator_from_inference(inference: Inference, device: str = "cpu") -> CTranslate2Translator:
    """The translator of a loaded PyTorch model (`Inference`) with its config.decode options
    (`translator_from_weights`)."""
    return translator_from_weights(
        state_arrays(inference.model),
        inference.config,
        inference.src_tokenizer,
        inference.tgt_tokenizer,
        device,
    )


def translator_from_weights(
    weights: Mapping[str, np.ndarray],
    config: Config,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    device: str = "cpu",
    threads: int | None = None,
) -> CTranslate2Translator:
    """The translator of our Transformer of `config` with `weights` (see `transformer_spec`),
    converted in a temporary folder that CTranslate2 reads into memory, with its config.decode
    options, on `device` and `threads` CPU threads (None: every core this process may use)."""
    spec = transformer_spec(weights, config, src_tokenizer, tgt_tokenizer)
    with tempfile.TemporaryDirectory(prefix="seq2seq-ct2-") as tmp:
        spec.save(tmp)
        languages = (config.data.src, config.data.tgt)
        return CTranslate2Translator.open(
            Path(tmp), src_tokenizer, tgt_tokenizer, config.decode, device, threads, languages
        )
