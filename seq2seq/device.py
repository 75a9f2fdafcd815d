"""Choosing the device to train or translate on."""

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
