"""The options that scripts/translate.py and scripts/evaluate.py share.

`--checkpoint FILE` or `--model NAME|FOLDER` says which model to load. Each decoding option
overrides one field of the model's [decode] configuration for this run; a bad value is a
UserError naming the option.
"""

import argparse
from pathlib import Path

import torch

from seq2seq.checkpoint import Inference, load_for_inference
from seq2seq.config import DECODE_PRECISIONS, DecodeConfig
from seq2seq.errors import UserError
from seq2seq.export import find_model, load_exported


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Add --checkpoint and --model (exactly one of them is needed) to `parser`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a checkpoint written by training")
    source.add_argument(
        "--model",
        metavar="NAME|FOLDER",
        help="an exported model: the name of a shipped one under models/ "
        "(e.g. transformer-tiny.multi30k.en-de) or a folder from scripts/export_model.py",
    )


def load_model(args: argparse.Namespace, models_dir: Path, device: str | torch.device) -> Inference:
    """The model that --checkpoint or --model names, on `device`."""
    if args.checkpoint is not None:
        return load_for_inference(args.checkpoint, device)
    return load_exported(find_model(args.model, models_dir), device)


def add_decode_options(parser: argparse.ArgumentParser, batch_size_help: str) -> None:
    """Add --beam, --length-penalty, --stop-early, --batch-size, --precision and --device to
    `parser`."""
    parser.add_argument("--beam", type=int, help="beam size (default: the checkpoint's decode)")
    parser.add_argument(
        "--length-penalty",
        type=float,
        metavar="ALPHA",
        help="GNMT length penalty; higher favours longer outputs (default: the checkpoint's)",
    )
    parser.add_argument(
        "--stop-early",
        action="store_true",
        help="beam search: end a sentence when its most probable candidate ends (OpenNMT-py's "
        "rule; faster), not when the beam has ended (fairseq's)",
    )
    parser.add_argument("--batch-size", type=int, help=batch_size_help)
    parser.add_argument(
        "--precision",
        help="auto, bf16, fp16 (CUDA only), fp32, or int8 (CPU only: int8 linear layers, the rest "
        "fp32) (default: the checkpoint's decode.precision)",
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")


def apply_decode_options(args: argparse.Namespace, decode_cfg: DecodeConfig) -> None:
    """Check the options given in `args` and set them in `decode_cfg` (in place)."""
    if args.beam is not None:
        if args.beam < 1:
            raise UserError(f"--beam {args.beam}: must be >= 1")
        decode_cfg.beam_size = args.beam
    if args.length_penalty is not None:
        if args.length_penalty < 0:
            raise UserError(f"--length-penalty {args.length_penalty}: must be >= 0")
        decode_cfg.length_penalty = args.length_penalty
    if args.batch_size is not None:
        if args.batch_size < 1:
            raise UserError(f"--batch-size {args.batch_size}: must be >= 1")
        decode_cfg.batch_size = args.batch_size
    if args.precision is not None:
        if args.precision not in DECODE_PRECISIONS:
            raise UserError(
                f"--precision {args.precision}: must be one of {', '.join(DECODE_PRECISIONS)}"
            )
        decode_cfg.precision = args.precision
    decode_cfg.stop_early |= args.stop_early
