"""int8 decoding on a CPU: the model's matrix products in 8-bit integers.

`decode.precision = "int8"` decodes with a copy of the model whose linear layers (and GRUs) are
dynamically quantized: each weight matrix is stored once as int8 with one scale per output row,
and at every call the input is scaled to int8 by its own range, multiplied in int32 (VNNI
instructions where the CPU has them) and scaled back to fp32. Everything else (embeddings,
attention, layer norms, the search's scores) stays fp32. This is PyTorch's eager dynamic
quantization (FBGEMM / oneDNN kernels): no calibration data, no retraining.

On a CPU with VNNI, beam search is faster than under bf16 autocast at the same BLEU
(docs/benchmarks.md).

PyTorch has deprecated this eager API (its warning says "will be removed in 2.10"; torch 2.13
still has it) in favour of torchao's flow, which on a CPU is fast only under torch.compile,
whose compile time here exceeded the decoding of the whole test set. Those warnings are
silenced below; a torch without the API gets a clear error.
"""

import copy
import warnings

import torch
from torch import nn

from seq2seq.errors import UserError


def quantized_copy(model: nn.Module) -> nn.Module:
    """A copy of the CPU model `model` for decoding, with int8 linear layers and GRUs; `model`
    is untouched. (`seq2seq.decoding.torch_translator.fast_int8_copy` calls this, and gives a fast
    model's copy its own int8 layer.)"""
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError:
        raise UserError(
            f"decode.precision=int8: torch {torch.__version__} has no dynamic quantization "
            "(torch.ao.quantization.quantize_dynamic); use bf16 or fp32"
        ) from None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
        warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per")
        return quantize_dynamic(
            copy.deepcopy(model),
            {nn.Linear: per_channel_dynamic_qconfig, nn.GRU: per_channel_dynamic_qconfig},
            dtype=torch.qint8,
        )
