"""Choosing the device to train or translate on, and the precision to compute in."""

import torch

from seq2seq.errors import UserError


def pick_device(name: str, option: str = "--device") -> torch.device:
    """The device `name` given by `option`: "auto" (CUDA when present), "cpu", "cuda", "cuda:1"."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"{option} {name}: unknown device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{option} {name}: CUDA is not available on this machine")
    return device


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for `precision` on `device`; None: fp32.

    auto: bf16 on a GPU that has it, else fp16; on a CPU bf16 where it has bf16 instructions,
    else fp32. fp16 runs on a CPU too, slowly (training logs a warning), so that a machine
    without a GPU can check the fp16 path of GPUs without bf16, gradient scaler included."""
    if precision == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if device.type == "cpu" and cpu_has_bf16_instructions() else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def precision_name(dtype: torch.dtype | None) -> str:
    """ "fp32", "bf16" or "fp16" for an autocast dtype (None: fp32)."""
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def decode_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of decode.precision `precision` on `device`, as `autocast_dtype`;
    "int8" (int8 products, seq2seq/decoding/quantize.py) decodes in fp32 otherwise, on a CPU
    only."""
    if precision == "int8":
        if device.type != "cpu":
            raise UserError(f"decode.precision=int8 runs on a CPU only, not on {device}")
        return None
    return autocast_dtype(precision, device)


def cpu_has_fast_bf16() -> bool:
    """Whether torch's CPU kernels can do bf16 matrix products quickly (AVX-512 and up).

    Without it, bf16 autocast on the CPU falls back to generic kernels, many times slower per
    training step than fp32 (docs/benchmarks.md).
    """
    return torch.backends.cpu.get_cpu_capability() not in ("DEFAULT", "AVX2")


def cpu_has_bf16_instructions() -> bool:
    """Whether the CPU multiplies bf16 in hardware (AVX512_BF16 or AMX), where `auto` picks bf16.

    There bf16 autocast makes a training step and beam search faster than fp32 at the same BLEU
    (docs/benchmarks.md).
    """
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
