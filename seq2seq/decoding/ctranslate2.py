"""Translating with CTranslate2, a C++ inference engine, on our own Transformer weights.

    seq2seq export --model transformer-tiny.multi30k.en-de --format ctranslate2 --out ct2/en-de
    seq2seq translate --model ct2/en-de --engine ctranslate2

The textbook decoder (seq2seq.decoding.search) stays the reference; CTranslate2 runs the same
weights with the same search, much faster one sentence at a time. `transformer_spec` describes
our Transformer with CTranslate2's public spec API, from float32 arrays by our state dict's
names: a PyTorch model's (`state_arrays`), or a shipped or exported model's file read with numpy
(seq2seq.decoding.exported), which converts without torch:

    our model                              CTranslate2 TransformerSpec
    E[token] * sqrt(D) + PE(position)      scale_embeddings, position_encodings (our table)
    q_proj, k_proj, v_proj (self)          self_attention.linear[0]: one fused QKV projection
    q_proj / k_proj, v_proj (cross)        attention.linear[0] / attention.linear[1] (fused KV)
    Residual.norm (pre- or post-norm)      the layer_norm of each sublayer
    encoder_norm, decoder_norm (pre-norm)  encoder.layer_norm, decoder.layer_norm
    output (tied to the embedding)         decoder.projection (stored once: CTranslate2 aliases)

CTranslate2's own sinusoidal table puts every sine before every cosine; ours interleaves them
(seq2seq.models.positional), so the folder stores our table for POSITIONS positions.

`CTranslate2Translator` translates like `Translator`, the same options meaning the same:

- beam search keeps the 2K best candidates and stops a sentence once K hypotheses have ended
  (with decode.stop_early: once its best candidate ends), as ours does; CTranslate2 returns
  the raw log-probabilities and the GNMT length penalty is applied here, exactly as ours;
- the maximum output length is per sentence (`max_output_lengths`); CTranslate2 takes one per
  call, so a sentence whose search reached its own limit is decoded again with it;
- at the maximum length our search forces the EOS after each of the K beams; CTranslate2's
  last step instead ends its K best candidates, with whatever token; those that are not the
  EOS get the EOS appended and are scored again (`score_batch`), which gives our hypotheses
  and scores.

Two differences remain. When some of those K best candidates are the EOS, our search also
forces the EOS after the next-best beams, which CTranslate2 never forms. And CTranslate2 keeps
at most K finished hypotheses per sentence, ranked by log-probability / length, where ours
ranks every finished one by the GNMT penalty: when more than K have ended (several end at the
last step of a search that reaches the maximum length), ours's best can be one CTranslate2
dropped. tests/test_ctranslate2.py counts them: on the test sets, only sentences whose search
runs to the maximum length differ.

An exported folder holds CTranslate2's files (model.bin, config.json, the vocabulary), our
model.json and sentencepiece model(s), card.json when the model has one, and MANIFEST, the
SHA-256 of every file. `check_folder` verifies all of it before CTranslate2 reads anything.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from seq2seq.config import Config, DecodeConfig, config_from_dict
from seq2seq.data.specials import BOS_PIECE, EOS_PIECE, PAD_PIECE, UNK_PIECE
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.model_result import read_card
from seq2seq.decoding.translation import (
    CARD,
    DESCRIPTION,
    JOINT_TOKENIZER,
    SEPARATE_TOKENIZERS,
    Hypothesis,
    LineTranslator,
    Translation,
    check_stop,
    gnmt_penalty,
)
from seq2seq.errors import UserError

if TYPE_CHECKING:  # exporting and translating from a PyTorch model import torch; a folder does not
    from seq2seq.decoding.loading import Inference

MANIFEST = "ctranslate2.json"  # {"format": FORMAT, "parameters": N, "sha256": {file: digest}}
FORMAT = "seq2seq-ctranslate2/1"
POSITIONS = 1024  # positions of the stored encoding table: source and output lengths below it
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's
# CTranslate2's precisions for ours ("auto": float32 on a CPU, where its int8 is slower one
# sentence at a time (docs/benchmarks.md); float16 on a GPU)
# the decoding options CTranslate2 has no counterpart of, with the command-line flags that turn
# each on and off
PYTORCH_ONLY_OPTIONS = {
    "max_piece_repeat": ("--max-piece-repeat", "--max-piece-repeat 0"),
    "keep_numbers": ("--keep-numbers", "--no-keep-numbers"),
}
COMPUTE_TYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "int8_float32"}
# what the card of a folder exported without the model's number guard says (its number_guard)
GUARD_DROPPED = (
    "not in this folder: CTranslate2 has no number guard (exported with --no-keep-numbers), so "
    "it can change numbers; the scores and limits above were decoded with the guard"
)


def import_ctranslate2() -> ModuleType:
    """The ctranslate2 module, or a `UserError` saying why it cannot be used."""
    try:
        import ctranslate2
    except ImportError as err:
        raise UserError(
            f"ctranslate2 cannot be imported ({err}); install it with "
            "`.venv/bin/python -m pip install ctranslate2`, or use --engine pytorch"
        ) from None
    return ctranslate2


# --- Export -------------------------------------------------------------------------------


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
    seq2seq.decoding.exported.read_weights), and its source and target tokenizers."""
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
    from seq2seq.decoding.loading import write_description

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
    digests = {path.name: _sha256(path) for path in sorted(folder.iterdir()) if path.name != CARD}
    parameters = sum(parameter.numel() for parameter in inference.model.parameters())
    manifest = {
        "format": FORMAT,
        "positions": POSITIONS,
        "parameters": parameters,
        "sha256": digests,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def write_card(card: Path, to: Path, guard_dropped: bool) -> None:
    """Copy the model card `card` to `to`; for a model exported without the number guard it
    decodes with, the card says so: keep_numbers false, and number_guard (GUARD_DROPPED)."""
    if not guard_dropped:
        shutil.copyfile(card, to)
        return
    values = read_card(card) | {"keep_numbers": False, "number_guard": GUARD_DROPPED}
    to.write_text(json.dumps(values, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --- Loading ------------------------------------------------------------------------------


def is_ctranslate2_folder(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def check_folder(folder: Path) -> tuple[Config, Tokenizer, Tokenizer]:
    """Verify a CTranslate2 folder written by `write_ctranslate2` before CTranslate2 reads it:
    MANIFEST names every file but card.json, each a plain file (no link) with its SHA-256;
    nothing else is there; config.json is the one we write, and the vocabulary is the
    tokenizer's. Returns the model's configuration and its source and target tokenizers."""
    manifest = _read_json(folder / MANIFEST)
    digests = manifest.get("sha256") if isinstance(manifest, dict) else None
    if (
        not isinstance(digests, dict)
        or manifest.get("format") != FORMAT
        or not all(isinstance(name, str) and _plain_name(name) for name in digests)
    ):
        raise UserError(f"{folder / MANIFEST}: not a {FORMAT} manifest")
    present = {path.name for path in folder.iterdir()}
    unexpected = present - set(digests) - {CARD, MANIFEST}
    if unexpected or not set(digests) <= present:
        what = f"unexpected {sorted(unexpected)}" if unexpected else "files missing"
        raise UserError(f"{folder}: its files do not match {MANIFEST} ({what})")
    for name, digest in digests.items():
        path = folder / name
        if path.is_symlink() or not path.is_file():
            raise UserError(f"{path}: not a plain file")
        if _sha256(path) != digest:
            raise UserError(f"{path}: damaged (its SHA-256 differs from {MANIFEST})")
    try:
        config = config_from_dict(_read_json(folder / DESCRIPTION)["config"])
    except (KeyError, TypeError, UserError) as err:
        raise UserError(f"{folder / DESCRIPTION}: unreadable model description ({err})") from None
    if config.data.joint_vocab:
        src = tgt = _tokenizer(folder / JOINT_TOKENIZER)
    else:
        src, tgt = (_tokenizer(folder / name) for name in SEPARATE_TOKENIZERS)
    src_pieces, tgt_pieces = src.vocabulary(), tgt.vocabulary()
    vocabularies = {"shared_vocabulary.json": src_pieces}
    if src_pieces != tgt_pieces:
        vocabularies = {"source_vocabulary.json": src_pieces, "target_vocabulary.json": tgt_pieces}
    for name, pieces in vocabularies.items():
        if _read_json(folder / name) != pieces:
            raise UserError(f"{folder / name}: not the vocabulary of the sentencepiece model")
    if _read_json(folder / "config.json") != EXPECTED_CONFIG:
        raise UserError(f"{folder / 'config.json'}: not a configuration seq2seq export writes")
    return config, src, tgt


def folder_parameters(folder: Path) -> int | None:
    """The model's number of parameters, which MANIFEST records (None in a folder written
    before it did)."""
    parameters = _read_json(folder / MANIFEST).get("parameters")
    return parameters if isinstance(parameters, int) else None


EXPECTED_CONFIG = {
    "add_source_bos": False,
    "add_source_eos": False,
    "bos_token": BOS_PIECE,
    "decoder_start_token": BOS_PIECE,
    "eos_token": EOS_PIECE,
    "layer_norm_epsilon": LAYER_NORM_EPSILON,
    "multi_query_attention": False,
    "unk_token": UNK_PIECE,
}


def _plain_name(name: str) -> bool:
    """A file name in the folder itself: no folder part, not hidden."""
    return name == Path(name).name and not name.startswith(".")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: unreadable ({err})") from None


def _tokenizer(path: Path) -> Tokenizer:
    try:
        return Tokenizer(path.read_bytes())
    except OSError as err:
        raise UserError(f"{path}: cannot read the tokenizer ({err.strerror})") from None
    except UserError as err:
        raise UserError(f"{path}: {err}") from None


def cpu_threads() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def engine_device(name: str, option: str = "--device") -> str:
    """The device CTranslate2 runs on for the device `name` given by `option`: "cpu", or
    "cuda" ("auto": when CTranslate2 sees a GPU), without importing torch."""
    if name not in ("auto", "cpu", "cuda"):
        raise UserError(f"{option} {name}: CTranslate2 runs on cpu or cuda (or auto)")
    gpus = import_ctranslate2().get_cuda_device_count() if name != "cpu" else 0
    if name == "cuda" and gpus == 0:
        raise UserError(f"{option} cuda: CTranslate2 sees no CUDA device on this machine")
    return "cuda" if name != "cpu" and gpus > 0 else "cpu"


def open_engine(
    folder: Path, precision: str, device: str = "cpu", threads: int | None = None
) -> tuple[Any, str]:
    """CTranslate2's translator of the checked `folder` on `device` ("cpu": on `threads`
    cores, by default every core this process may use; "cuda") in our `precision`, and that
    precision ("auto" resolved: fp32 on a CPU, fp16 on a GPU)."""
    ctranslate2 = import_ctranslate2()
    if precision == "auto":
        precision = "fp16" if device == "cuda" else "fp32"
    try:
        engine = ctranslate2.Translator(
            str(folder),
            device=device,
            compute_type=COMPUTE_TYPES[precision],
            intra_threads=(threads or cpu_threads()) if device == "cpu" else 0,
        )
    except (RuntimeError, ValueError) as err:
        raise UserError(f"{folder}: CTranslate2 cannot load it ({err})") from None
    return engine, precision


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
        return CTranslate2Translator.open(
            Path(tmp), src_tokenizer, tgt_tokenizer, config.decode, device, threads
        )


def use_ctranslate2(engine: str, config: Config, need_attention: bool = False) -> bool:
    """Whether `engine` ("pytorch", "ctranslate2" or "auto") decodes a model of `config`
    with CTranslate2.

    "auto" picks CTranslate2 only where it gives what PyTorch would: a Transformer, no
    attention maps asked for, options it has (none of PYTORCH_ONLY_OPTIONS), and ctranslate2
    installed; else PyTorch."""
    if engine != "auto":
        return engine == "ctranslate2"
    pytorch_only = pytorch_only_option(config.decode) is not None
    if config.model.arch != "transformer" or need_attention or pytorch_only:
        return False
    try:
        import_ctranslate2()
    except UserError:
        return False
    return True


# --- Translating --------------------------------------------------------------------------


def pytorch_only_option(decode_cfg: DecodeConfig) -> str | None:
    """The first option set in `decode_cfg` that CTranslate2 has no counterpart of, or None."""
    return next((name for name in PYTORCH_ONLY_OPTIONS if getattr(decode_cfg, name)), None)


def check_options(decode_cfg: DecodeConfig) -> None:
    """`UserError` for a decoding option CTranslate2 has no counterpart of."""
    if (name := pytorch_only_option(decode_cfg)) is not None:
        on, off = PYTORCH_ONLY_OPTIONS[name]
        raise UserError(
            f"decode.{name} ({on}): CTranslate2 has no such rule; use --engine pytorch, or "
            f"{off} to decode without it"
        )


class CTranslate2Translator(LineTranslator):
    """`Translator`'s interface and options (see the module docstring) with CTranslate2 doing
    the search: `translate`, `source_limit`, `check_beam_size`, `with_decode`, `precision`."""

    lacks_options = frozenset(PYTORCH_ONLY_OPTIONS)

    def __init__(
        self,
        engine: Any,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        decode_cfg: DecodeConfig,
        precision: str,
    ) -> None:
        check_options(decode_cfg)
        self.engine = engine
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.decode_cfg = decode_cfg
        self.device = engine.device
        self.precision = precision
        self.target_ids = {piece: i for i, piece in enumerate(tgt_tokenizer.vocabulary())}
        # the PyTorch translator that answers calls asking for attention maps (None: refused)
        self.attention_translator: LineTranslator | None = None

    @classmethod
    def open(
        cls,
        folder: Path,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        decode_cfg: DecodeConfig,
        device: str = "cpu",
        threads: int | None = None,
    ) -> CTranslate2Translator:
        """The translator of a checked CTranslate2 folder (`check_folder`) with `decode_cfg`,
        on `threads` CPU threads (None: every core this process may use)."""
        engine, precision = open_engine(folder, decode_cfg.precision, device, threads)
        return cls(engine, src_tokenizer, tgt_tokenizer, decode_cfg, precision)

    def with_decode(self, **changes: Any) -> CTranslate2Translator:
        translator = super().with_decode(**changes)
        check_options(translator.decode_cfg)
        if self.attention_translator is not None:
            translator.attention_translator = self.attention_translator.with_decode(**changes)
        return translator

    def source_limit(self, beam_size: int) -> int:
        """`LineTranslator.source_limit`, and below the POSITIONS of the stored encodings."""
        return min(super().source_limit(beam_size), POSITIONS - 1)

    def translate_ids(
        self,
        sources: list[list[int]],
        beam_size: int | None = None,
        nbest: int = 1,
        need_attention: bool = False,
        on_batch: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[list[Translation]]:
        """`LineTranslator.translate_ids` (which `translate` calls); a call that asks for
        attention maps goes to `attention_translator` (PyTorch), and is refused without one.
        `should_stop` is called before each CTranslate2 call (a call runs to its end): once it
        returns True, `seq2seq.decoding.translation.Stopped` is raised."""
        if need_attention:
            if self.attention_translator is None:
                raise UserError("attention maps come from the PyTorch engine: use --engine pytorch")
            return self.attention_translator.translate_ids(
                sources, beam_size, nbest, need_attention, on_batch, should_stop
            )
        search = partial(self._search_all, nbest, should_stop)
        return self._translate_batches(sources, beam_size, nbest, search, on_batch)

    def max_lengths(self, sources: list[list[int]]) -> list[int]:
        """Each source's maximum output length (EOS not counted): `max_output_lengths`."""
        cfg = self.decode_cfg
        lengths = [int((len(ids) + 1) * cfg.max_len_ratio) + cfg.max_len_const for ids in sources]
        if max(lengths) >= POSITIONS:
            raise UserError(
                f"an output of up to {max(lengths)} pieces: more than the {POSITIONS - 1} that a "
                "CTranslate2 folder holds positions for; lower --max-len-ratio"
            )
        return lengths

    def _search_all(
        self,
        nbest: int,
        should_stop: Callable[[], bool] | None,
        sources: list[list[int]],
        beam_size: int,
    ) -> list[list[Hypothesis]]:
        """Search a batch at its longest maximum length, then again at their own the sentences
        whose search reached the last step of theirs (a hypothesis of limit - 1 tokens or
        more: the search ran that many steps)."""
        limits = self.max_lengths(sources)
        check_stop(should_stop)
        found = self._search(sources, beam_size, nbest, max(limits))
        again: dict[int, list[int]] = {}
        for i, (hypotheses, limit) in enumerate(zip(found, limits, strict=True)):
            if limit < max(limits) and max(len(h.tokens) for h in hypotheses) >= limit - 1:
                again.setdefault(limit, []).append(i)
        for limit, rows in again.items():
            check_stop(should_stop)
            redone = self._search([sources[i] for i in rows], beam_size, nbest, limit)
            for i, hypotheses in zip(rows, redone, strict=True):
                found[i] = hypotheses
        return [sorted(hypotheses, key=lambda h: -h.score)[:nbest] for hypotheses in found]

    def _search(
        self, sources: list[list[int]], beam_size: int, nbest: int, max_len: int
    ) -> list[list[Hypothesis]]:
        """One CTranslate2 search of outputs up to `max_len` tokens: every finished hypothesis
        of each source (the `nbest` best with decode.stop_early), scored with our length
        penalty.

        Its length penalty 1 divides each log-probability by the hypothesis' length, which is
        undone here; 0 would stop a sentence once its best candidate ends (stop_early). Its
        last step ends each beam with a token other than EOS; the log-probability of the EOS
        after them is added by `_end`, as our search forces the EOS there."""
        pieces = [[self.src_tokenizer.id_to_piece(i) for i in ids] + [EOS_PIECE] for ids in sources]
        if max_len == 0:  # nothing but the EOS
            return [[hypothesis] for hypothesis in self._end(pieces, [[]] * len(pieces))]
        stop_early = self.decode_cfg.stop_early and beam_size > 1
        results = self.engine.translate_batch(
            pieces,
            beam_size=beam_size,
            num_hypotheses=nbest if stop_early else beam_size,
            length_penalty=0.0 if stop_early else 1.0,
            no_repeat_ngram_size=self.decode_cfg.no_repeat_ngram,
            suppress_sequences=[[PAD_PIECE], [BOS_PIECE]],
            return_end_token=True,
            return_scores=True,
            max_input_length=0,
            max_decoding_length=max_len,
            min_decoding_length=0,
        )
        found, unended = [], []
        for row, result in enumerate(results):
            hypotheses = []
            for output, score in zip(result.hypotheses, result.scores, strict=True):
                if output[-1] != EOS_PIECE:
                    unended.append((row, output))
                    continue
                log_prob = score if stop_early else score * len(output)
                tokens = [self.target_ids[piece] for piece in output[:-1]]
                hypotheses.append(Hypothesis(tokens, self._penalised(log_prob, len(output))))
            found.append(hypotheses)
        ended = self._end([pieces[row] for row, _ in unended], [out for _, out in unended])
        for (row, _), hypothesis in zip(unended, ended, strict=True):
            found[row].append(hypothesis)
        return found

    def _end(self, sources: list[list[str]], outputs: list[list[str]]) -> list[Hypothesis]:
        """The hypotheses `outputs` followed by the EOS, scored by CTranslate2 (no search)."""
        if not outputs:
            return []
        results = self.engine.score_batch(sources, outputs, max_input_length=0)
        return [
            Hypothesis(
                [self.target_ids[piece] for piece in output],
                self._penalised(sum(result.log_probs), len(output) + 1),
            )
            for output, result in zip(outputs, results, strict=True)
        ]

    def _penalised(self, log_prob: float, length: int) -> float:
        """Our score of a hypothesis of `length` tokens, EOS included (gnmt_penalty)."""
        return float(log_prob / gnmt_penalty(length, self.decode_cfg.length_penalty))
