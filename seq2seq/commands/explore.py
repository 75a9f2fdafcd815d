"""Explore attention in the browser: serve every shipped model and the explorer's page.

    seq2seq explore                  # http://127.0.0.1:8000/
    seq2seq explore --port 8080 --model exported/my-run
    seq2seq explore --run checkpoints/my-run   # and its attention step by step
    seq2seq explore --gold pairs.txt gold.txt  # and which head aligns as the gold does

The same server as `seq2seq serve` (its options all apply) with every shipped model,
transformer-tiny.multi30k.en-de first (the page's default), and the models given with --model
or --checkpoint after them; with --run, the attention history of that run folder
(seq2seq.training.attention_history) for the training page; with --gold, sentence pairs and
their gold links, scored per head on the main page. docs/explore.md shows each view.
"""

from seq2seq.commands import serve

TUNE = True  # tune the process first (seq2seq.fast.process.tune_process)
FIRST = "transformer-tiny.multi30k.en-de"


def shipped_models() -> list[str]:
    """The names of the shipped models, FIRST first."""
    from seq2seq.decoding.model_folder import WEIGHTS  # imports numpy: not for --help
    from seq2seq.decoding.model_result import SHIPPED_MODELS

    names = sorted(path.parent.name for path in SHIPPED_MODELS.glob(f"*/{WEIGHTS}"))
    return sorted(names, key=lambda name: name != FIRST)


def main(argv: list[str]) -> None:
    args = serve.parse_args(argv, command="explore", description=__doc__.splitlines()[0])
    args.model = [*shipped_models(), *args.model]
    serve.serve(args)
