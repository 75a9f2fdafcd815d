"""The decoding options that scripts/translate.py and scripts/evaluate.py share.

Each overrides one field of the checkpoint's [decode] configuration for this run; a bad value
is refused, naming the option, with the range of the field in seq2seq.config.RULES.
"""

import argparse

from seq2seq.config import DECODE_PRECISIONS, RULES, DecodeConfig
from seq2seq.errors import UserError, number


def add_decode_options(parser: argparse.ArgumentParser, batch_size_help: str) -> None:
    """Add --beam, --length-penalty, --stop-early, --batch-size, --precision and --device to
    `parser`."""
    parser.add_argument(
        "--beam",
        type=number(int, RULES["decode.beam_size"]),
        help="beam size (default: the checkpoint's decode)",
    )
    parser.add_argument(
        "--length-penalty",
        type=number(float, RULES["decode.length_penalty"]),
        metavar="ALPHA",
        help="GNMT length penalty; higher favours longer outputs (default: the checkpoint's)",
    )
    parser.add_argument(
        "--stop-early",
        action="store_true",
        help="beam search: end a sentence when its most probable candidate ends (OpenNMT-py's "
        "rule; faster), not when the beam has ended (fairseq's)",
    )
    parser.add_argument(
        "--batch-size", type=number(int, RULES["decode.batch_size"]), help=batch_size_help
    )
    parser.add_argument(
        "--precision",
        help="auto, bf16, fp16 (CUDA only), fp32, or int8 (CPU only: int8 linear layers, the rest "
        "fp32) (default: the checkpoint's decode.precision)",
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:1, ...")


def apply_decode_options(args: argparse.Namespace, decode_cfg: DecodeConfig) -> None:
    """Set the options given in `args` in `decode_cfg` (in place), checking --precision."""
    if args.beam is not None:
        decode_cfg.beam_size = args.beam
    if args.length_penalty is not None:
        decode_cfg.length_penalty = args.length_penalty
    if args.batch_size is not None:
        decode_cfg.batch_size = args.batch_size
    if args.precision is not None:
        if args.precision not in DECODE_PRECISIONS:
            raise UserError(
                f"--precision {args.precision}: must be one of {', '.join(DECODE_PRECISIONS)}"
            )
        decode_cfg.precision = args.precision
    decode_cfg.stop_early |= args.stop_early
