"""Whether a model fits the machine, estimated before anything is allocated.

The parameters are counted exactly by building the model on PyTorch's "meta" device, which
records shapes and allocates nothing. Memory is then estimated from them:

    inference   4 bytes a parameter (fp32 weights)
    training    16 bytes a parameter (weights, gradients, AdamW's two moments, fp32), plus the
                activations of one batch of `max_tokens` tokens, at least
                4 bytes * max_tokens * (layers * (12 * embed_dim + 2 * ffn_size) + 3 * vocabulary)
                (each layer's inputs, attention and feed-forward outputs kept for backward; the
                logits, their log-softmax and its gradient)

The activation figure is a lower bound (attention scores grow with sentence length), so only a
configuration that cannot fit is refused; one that passes may still run out of memory.
"""

import os

import torch

from seq2seq.config import Config, ModelConfig
from seq2seq.errors import UserError
from seq2seq.models import build_model

GIB = 1 << 30


def count_parameters(
    cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool
) -> int:
    """The number of parameters of the model `cfg` describes (shared weights counted once),
    without allocating it."""
    with torch.device("meta"):
        model = build_model(cfg, src_vocab_size, tgt_vocab_size, joint_vocab, verbose=False)
    return model.num_parameters()


def device_memory(device: torch.device) -> int | None:
    """The memory of `device` in bytes: the GPU's, or the machine's RAM for a CPU; None where
    unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def check_model_fits(
    cfg: Config,
    src_vocab_size: int,
    tgt_vocab_size: int,
    device: torch.device,
    training: bool,
) -> None:
    """`UserError` giving the estimate when the model of `cfg` (and, when `training`, the
    optimizer state and a batch of train.max_tokens) needs more memory than `device` has."""
    model = cfg.model
    parameters = count_parameters(model, src_vocab_size, tgt_vocab_size, cfg.data.joint_vocab)
    needed = 4 * parameters
    what, advice = "to load", "smaller model sizes"
    if training:
        layers = model.encoder_layers + model.decoder_layers
        width = 12 * max(model.embed_dim, model.hidden_size) + 2 * model.ffn_size
        activations = 4 * cfg.train.max_tokens * (layers * width + 3 * tgt_vocab_size)
        needed = 16 * parameters + activations
        what = f"to train on batches of train.max_tokens={cfg.train.max_tokens}"
        advice += " or a smaller train.max_tokens"
    available = device_memory(device)
    if available is not None and needed > available:
        width = f"ffn_size {model.ffn_size}" if model.arch == "transformer" else "hidden_size "
        width += "" if model.arch == "transformer" else str(model.hidden_size)
        raise UserError(
            f"model {model.name} (embed_dim {model.embed_dim}, {width}, {model.encoder_layers}+"
            f"{model.decoder_layers} layers): {parameters:,} parameters need at least "
            f"{needed / GIB:,.1f} GiB {what}, more than the {available / GIB:,.1f} GiB of "
            f"{device}; choose {advice}"
        )
