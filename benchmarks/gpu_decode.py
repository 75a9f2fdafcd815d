#!/usr/bin/env python3
"""Decoding on a GPU: sentences/s of a warm decoder, and the host's waits per decoding step.

    benchmarks/gpu_decode.py --checkpoint best.pt --src test.en --device cuda --out decode.json

For each --beams size, translates --src as `seq2seq evaluate` does (the Translator, its batches
of --batch-size sentences and `batch_tokens_for` the device, and the searches for the device):

1. the first --sync-sentences lines under `torch.cuda.set_sync_debug_mode("warn")`, which warns
   at every operation that waits for the GPU, counting the warnings of each decoding step (from
   one `decode_step` call to the next; a batch's last step, which also assembles its outputs,
   is left out). A fast model's searches on a GPU (`BatchedReads` of seq2seq.decoding.search)
   read the device once every CHECK_EVERY steps; tests/test_decode_sync.py counts the same on
   a CPU;
2. all the lines again, timed: the model is warm by then (unlike `seq2seq evaluate`, whose time
   includes the GPU's first kernels);
3. with --textbook-too, the --sync-sentences lines timed once more with the textbook's reads
   (`EVERY_STEP` of seq2seq.decoding.search), after every step, for comparison.

Writes all of it as JSON. On a CPU nothing waits and every count is 0: a check that this runs.
"""

import copy
import warnings
from pathlib import Path

from measure import gpu_name, sync_warnings, synchronize, syncs_in, timed_call, write_record

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.search import CHECK_EVERY, EVERY_STEP
from seq2seq.decoding.torch_translator import Translator
from seq2seq.files import text_lines


class MarkedSteps:
    """A model's `decode_step`, noting how many warnings had come when each step began."""

    def __init__(self, decode_step: object, caught: list[warnings.WarningMessage]) -> None:
        self.decode_step, self.caught = decode_step, caught
        self.marks: list[int] = []
        self.batch_starts: set[int] = set()  # the steps that began a batch (encoding first)

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.marks.append(len(self.caught))
        return self.decode_step(*args, **kwargs)

    def new_batch(self) -> None:
        self.batch_starts.add(len(self.marks))

    def syncs_per_step(self) -> list[int]:
        """The synchronisation warnings of each step but each batch's last."""
        ends = {start - 1 for start in self.batch_starts} | {len(self.marks) - 1}
        counts = []
        for step, start in enumerate(self.marks):
            if step in ends:
                continue
            counts.append(syncs_in(self.caught[start : self.marks[step + 1]]))
        return counts


def count_syncs(translator: Translator, lines: list[str], beam: int) -> list[int]:
    """Translate `lines` with beam `beam`, step by step marked; the syncs of each step."""
    model = translator.model
    with sync_warnings(translator.device) as caught:
        marked = MarkedSteps(model.decode_step, caught)
        model.decode_step = marked
        try:
            translator.translate(lines, beam, on_batch=lambda _: marked.new_batch())
        finally:
            del model.decode_step
    return marked.syncs_per_step()


def timed(translator: Translator, lines: list[str], beam: int) -> dict[str, float]:
    """Translate `lines` with beam `beam`: the seconds, sentences/s and batches it took."""
    batches: list[int] = []
    synchronize(translator.device)
    # The outputs are on the host when `translate` returns: the GPU is done.
    _, seconds = timed_call(translator.translate, lines, beam, on_batch=batches.append)
    per_second = len(lines) / max(seconds, 1e-9)
    return {"seconds": seconds, "sentences_per_second": per_second, "batches": len(batches)}


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="a checkpoint or model to decode with")
    parser.add_argument("--src", type=Path, required=True, help="source sentences, one a line")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1 or cpu (default: cuda)")
    parser.add_argument("--precision", default="bf16", help="decoding precision (default: bf16)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5], help="(default: 1 5)")
    parser.add_argument(
        "--sync-sentences", type=int, default=200, help="lines counted (default: 200)"
    )
    parser.add_argument("--batch-size", type=int, default=1024, help="(default: 1024)")
    parser.add_argument("--textbook-too", action="store_true", help="time the textbook too")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args()
    inference = load_model(args.checkpoint, args.device)
    decode = inference.config.decode
    decode.precision, decode.batch_size = args.precision, args.batch_size
    translator = Translator.from_inference(inference, args.device)
    with args.src.open("rb") as stream:
        lines = list(text_lines(stream, str(args.src)))
    record: dict[str, object] = {
        "device": gpu_name(translator.device),
        "precision": translator.precision,
        "sentences": len(lines),
        "batch_size": args.batch_size,
        "batch_tokens": translator.max_batch_tokens,
        "check_every": CHECK_EVERY,
        "sync_sentences": min(args.sync_sentences, len(lines)),
    }
    for beam in args.beams:
        syncs = count_syncs(translator, lines[: args.sync_sentences], beam)
        figures = {
            "syncs_per_step": syncs,
            "mean_syncs_per_step": sum(syncs) / max(1, len(syncs)),
            **timed(translator, lines, beam),
        }
        if args.textbook_too:
            textbook = copy.copy(translator)
            textbook.reads = EVERY_STEP
            figures["textbook"] = timed(textbook, lines[: args.sync_sentences], beam)
        record[f"beam{beam}"] = figures
        print(
            f"beam {beam}: {figures['sentences_per_second']:.1f} sentences/s in "
            f"{figures['batches']} batches, {figures['mean_syncs_per_step']:.2f} host syncs "
            "per decoding step"
        )
    write_record(record, args.out)


if __name__ == "__main__":
    run_cli(main)
