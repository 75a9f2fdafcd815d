#!/usr/bin/env python3
"""The ATen operators that training steps and beam-search decoding run, counted by shapes.

    benchmarks/aten_ops.py                  # the fast model (the default)
    benchmarks/aten_ops.py --plain          # the textbook modules alone
    benchmarks/aten_ops.py > a.txt; ...; diff a.txt b.txt

Under torch.profiler (CPU, record_shapes), with seeded random weights and inputs:

    train   3 updates of the gru and transformer-tiny presets (8000 pieces) on a fixed batch
            of 32 random sentences, as seq2seq.training.step makes them (`bench.make_training_step`)
    decode  beam search (beam 5) of 4 sentences with the shipped transformer-tiny and gru-small
            models, through `Translator`, in fp32 and int8

Prints, per part, one line per operator and input shapes, `count name shapes`, sorted, then the
part's number of calls and of distinct (operator, shapes). Two trees (or the fast and the plain
model) run the same operators when the lines are the same; the timings of those operators are
benchmarks/bench.py's business.
"""

import argparse
import dataclasses
from collections import Counter
from collections.abc import Callable
from functools import partial

import bench
import torch
from torch.profiler import ProfilerActivity, profile

from seq2seq.config_file import load_config
from seq2seq.data.batching import Batch
from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.fast import speed_up
from seq2seq.models import build_model

TRAIN_MODELS = ["gru", "transformer-tiny"]
DECODE_MODELS = ["transformer-tiny.multi30k.en-de", "gru-small.multi30k.en-de"]
SENTENCES = [
    "A man in an orange hat starring at something.",
    "Two dogs play in the snow.",
    "A group of people are standing in front of an igloo.",
    "A little girl climbs into a wooden playhouse.",
]
VOCAB = 8000


def aten_ops(work: Callable[[], object]) -> Counter[tuple[str, str]]:
    """How many times `work` calls each ATen operator, by operator and input shapes."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        work()
    counts: Counter[tuple[str, str]] = Counter()
    for event in prof.events():
        if event.name.startswith("aten::"):
            counts[event.name, str(event.input_shapes)] += 1
    return counts


def random_batch(sentences: int, length: int) -> Batch:
    """`sentences` random sentences of `length` pieces each side, as `collate` pads them."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(4, VOCAB, (2, sentences, length), generator=generator)
    eos = torch.full((sentences, 1), EOS_ID)
    src = torch.cat([ids[0], eos], dim=1)
    tgt = torch.cat([torch.full((sentences, 1), BOS_ID), ids[1], eos], dim=1)
    lens = torch.full((sentences,), length + 1)
    return Batch(src, lens, tgt, lens + 1, torch.arange(sentences), src.numel(), src.numel())


def repeat(step: Callable[[Batch], None], batch: Batch, times: int) -> None:
    for _ in range(times):
        step(batch)


def train_ops(plain: bool) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    batch = random_batch(32, 20)
    for name in TRAIN_MODELS:
        config = load_config(None, [f"model.name={name}"])
        torch.manual_seed(0)
        model = build_model(config.model, VOCAB, VOCAB, True, verbose=False)
        model = model if plain else speed_up(model)
        step = bench.make_training_step(model, torch.device("cpu"), None)
        counts += aten_ops(partial(repeat, step, batch, 3))
    return counts


def decode_ops(plain: bool) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for name in DECODE_MODELS:
        inference = load_model(name, plain=plain)
        for precision in ("fp32", "int8"):
            decode = dataclasses.replace(inference.config.decode, precision=precision)
            translator = Translator(
                inference.model, inference.src_tokenizer, inference.tgt_tokenizer, decode, "cpu"
            )
            counts += aten_ops(partial(translator.translate, SENTENCES, beam_size=5))
    return counts


def report(part: str, counts: Counter[tuple[str, str]]) -> None:
    for (name, shapes), count in sorted(counts.items()):
        print(f"{part} {count} {name} {shapes}")
    print(f"{part}: {sum(counts.values())} calls, {len(counts)} distinct operator and shapes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plain", action="store_true", help="the textbook modules alone")
    args = parser.parse_args()
    torch.set_num_threads(1)
    report("train", train_ops(args.plain))
    report("decode", decode_ops(args.plain))


if __name__ == "__main__":
    main()
