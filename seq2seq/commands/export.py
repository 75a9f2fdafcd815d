"""Export a checkpoint as a small model folder that translates on its own (see
seq2seq.decoding.export), or a Transformer for CTranslate2 (seq2seq.decoding.ct2_convert).

    seq2seq export --checkpoint checkpoints/run/best.pt   # to exported/run/
    seq2seq export --checkpoint checkpoints/run/best.pt --out exported/NAME
    seq2seq translate --model exported/NAME
    seq2seq export --model transformer-tiny.multi30k.en-de --format ctranslate2 --out exported/ct2
    seq2seq translate --model exported/ct2 --engine ctranslate2

The folder holds the weights in safetensors (bf16 by default), the sentencepiece model(s) and the
configuration: no optimizer state and no pickle. It goes to exported/ by default, which git
ignores (models/ holds the shipped models). Add its card with
`seq2seq evaluate --model exported/NAME --record exported/NAME/card.json ...`.
With --format ctranslate2 it holds CTranslate2's model (fp32 weights) and vocabulary, the
sentencepiece model(s), the configuration, the model's card.json and a manifest of checksums.
CTranslate2 has no number guard: a model that keeps numbers (the Tatoeba models) is refused
unless --no-keep-numbers exports it without the guard, which its card then says.
"""

import argparse
from pathlib import Path

from seq2seq.commands.cli import add_model_options, command_parser
from seq2seq.errors import UserError

DTYPES = ("bf16", "fp16", "fp32")  # the keys of seq2seq.decoding.export.DTYPES

TUNE = False  # tune the process first (seq2seq.fast.process.tune_process)


def main(argv: list[str]) -> None:
    parser = command_parser("export", __doc__)
    add_model_options(parser)
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="the model folder to write (default: exported/<run folder or model name>, "
        "with .ct2 after it for --format ctranslate2)",
    )
    parser.add_argument(
        "--format",
        choices=["pytorch", "ctranslate2"],
        default="pytorch",
        help="pytorch (default): our own folder; ctranslate2: for --engine ctranslate2 "
        "(Transformers only)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="bf16",
        help="weight precision of --format pytorch (default: bf16)",
    )
    parser.add_argument(
        "--keep-numbers",
        action=argparse.BooleanOptionalAction,
        help="--format ctranslate2: a model that keeps numbers (decode.keep_numbers, the number "
        "guard, which CTranslate2 lacks) is refused unless --no-keep-numbers exports it without "
        "the guard; its card then says so",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an exported model already in --out, or write inside the repository's "
        "models/ folder (the shipped models)",
    )
    args = parser.parse_args(argv)
    if args.keep_numbers is not None and args.format != "ctranslate2":
        option = "--keep-numbers" if args.keep_numbers else "--no-keep-numbers"
        raise UserError(f"{option}: only with --format ctranslate2")
    from seq2seq.decoding import export  # imports torch: not for --help
    from seq2seq.decoding.model_folder import CARD, find_model
    from seq2seq.decoding.open_pytorch import load_model

    suffix = ".ct2" if args.format == "ctranslate2" else ""
    if args.out:
        out = Path(args.out)
    elif args.checkpoint:
        out = export.default_export_folder(args.checkpoint, suffix)
    else:
        out = export.EXPORTED / (Path(args.model).name + suffix)
    export.check_export_target(out, args.force)
    card = None
    if args.checkpoint:
        inference = load_model(args.checkpoint, kind="checkpoint")
    else:
        inference = load_model(args.model, kind="exported")
        card = find_model(args.model) / CARD
    try:
        if args.format == "ctranslate2":
            export.export_ctranslate2(inference, out, card, args.keep_numbers)
        else:
            export.export_model(inference, out, export.DTYPES[args.dtype])
    except OSError as err:
        raise UserError(f"--out {out}: cannot write ({err.strerror or err})") from None
    size = sum(path.stat().st_size for path in out.iterdir())
    source = args.checkpoint or args.model
    print(f"exported {source} (step {inference.step}) to {out}: {size / 1e6:.1f} MB")
