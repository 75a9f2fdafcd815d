"""Export a checkpoint as a small model folder that translates on its own (see
seq2seq.decoding.export).

    seq2seq export --checkpoint checkpoints/run/best.pt   # to exported/run/
    seq2seq export --checkpoint checkpoints/run/best.pt --out exported/NAME
    seq2seq translate --model exported/NAME

The folder holds the weights in safetensors (bf16 by default), the sentencepiece model(s) and the
configuration: no optimizer state and no pickle. It goes to exported/ by default, which git
ignores (models/ holds the shipped models). Add its card with
`seq2seq evaluate --model exported/NAME --record exported/NAME/card.json ...`.
"""

from pathlib import Path

from seq2seq.commands.cli import command_parser
from seq2seq.errors import UserError

DTYPES = ("bf16", "fp16", "fp32")  # the keys of seq2seq.decoding.export.DTYPES

TUNE = False  # tune the process first (seq2seq.fast.process.tune_process)


def main(argv: list[str]) -> None:
    parser = command_parser("export", __doc__)
    parser.add_argument("--checkpoint", required=True, help="a checkpoint written by training")
    parser.add_argument(
        "--out", metavar="DIR", help="the model folder to write (default: exported/<run folder>)"
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, default="bf16", help="weight precision (default: bf16)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an exported model already in --out, or write inside the repository's "
        "models/ folder (the shipped models)",
    )
    args = parser.parse_args(argv)
    from seq2seq.decoding import export  # imports torch: not for --help
    from seq2seq.decoding.loading import load_model

    out = Path(args.out) if args.out else export.default_export_folder(args.checkpoint)
    export.check_export_target(out, args.force)
    inference = load_model(args.checkpoint, kind="checkpoint")
    try:
        export.export_model(inference, out, export.DTYPES[args.dtype])
    except OSError as err:
        raise UserError(f"--out {out}: cannot write ({err.strerror or err})") from None
    size = sum(path.stat().st_size for path in out.iterdir())
    print(f"exported {args.checkpoint} (step {inference.step}) to {out}: {size / 1e6:.1f} MB")
