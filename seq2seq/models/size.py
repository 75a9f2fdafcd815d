"""Whether a model fits the machine, estimated before anything is allocated.

`count_parameters` counts the parameters from the configuration alone, layer by layer as
seq2seq/models builds them (a test checks it against the built models). Building on PyTorch's
"meta" device would allocate nothing too, but its first `normal_` imports torch._dynamo, about
5 s at every start. Memory is then estimated from the count:

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

GIB = 1 << 30


def count_parameters(
    cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool
) -> int:
    """The number of parameters of the model `cfg` describes (shared weights counted once),
    without building it."""
    d, vocab = cfg.embed_dim, tgt_vocab_size
    embeddings = vocab * d + (0 if cfg.share_embeddings and joint_vocab else src_vocab_size * d)
    output = 0 if cfg.tie_output else d * vocab  # no bias
    if cfg.arch == "gru":
        hidden = cfg.hidden_size
        encoder = _gru(d, hidden // 2, cfg.encoder_layers, directions=2)
        bridge = hidden * hidden + hidden
        attention = 2 * hidden * hidden + hidden  # W_q, W_k, w_v, no biases
        decoder = _gru(d + hidden, hidden, cfg.decoder_layers, directions=1)
        readout = (2 * hidden + d) * d + d
        return embeddings + encoder + bridge + attention + decoder + readout + output
    attention = 4 * (d * d + d)  # q, k, v and output projections
    ffn = 2 * d * cfg.ffn_size + cfg.ffn_size + d
    norm = 2 * d
    encoder = cfg.encoder_layers * (attention + ffn + 2 * norm)
    decoder = cfg.decoder_layers * (2 * attention + ffn + 3 * norm)
    final_norms = 2 * norm if cfg.pre_norm else 0
    return embeddings + encoder + decoder + final_norms + output


def _gru(input_size: int, hidden: int, layers: int, directions: int) -> int:
    """Parameters of `torch.nn.GRU`: per layer and direction, three gates of input and hidden
    weights, each with a bias."""
    total = 0
    for layer in range(layers):
        inputs = input_size if layer == 0 else hidden * directions
        total += directions * (3 * hidden * (inputs + hidden) + 6 * hidden)
    return total


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
