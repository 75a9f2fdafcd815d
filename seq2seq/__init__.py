"""seq2seq: neural machine translation with attention, written to be read.

Data flow, one package per step:
    data/      corpus -> clean -> tokenizer -> prepared folder -> batches
    models/    attention parts -> GRU + Bahdanau, Transformer
    training/  loss, one training step, the loop, writing checkpoints
    decoding/  search -> translations -> BLEU and chrF, attention maps
    serving/   the HTTP API and the attention explorer
    commands/  the `seq2seq` command, one module per subcommand
    fast/      the fast twins of textbook pieces, each tested equal to it

Beside them:
    api.py           the Python API: `load`, `Model`, `Attention`
    checkpoints.py   what a checkpoint holds, and reading one without running code from it
    config.py        the configuration: typed dataclasses, one per section, and model presets
    config_file.py   reading a TOML file and `section.key=value` overrides into them, checked
    config_rules.py  the valid values of every configuration key (`RULES`)
    device.py        the device to train or translate on, and the precision to compute in
    errors.py        `UserError`: a mistake the user can fix, shown as one `error:` line
    files.py         reading text files strictly; writing files that are never half-written
    __main__.py      `python -m seq2seq`: the same as the `seq2seq` command
    shipped_models/  the models that come with the package, loaded by name

Translating from a program (docs/api.md):

    import seq2seq
    model = seq2seq.load("transformer-tiny.multi30k.en-de")
    model.translate(["A dog runs in the snow."])

Importing it is light and changes nothing in the process: `load`, `Model` and `Attention` are
imported from seq2seq.api on first use, and only the `seq2seq` command tunes the process
(`seq2seq.fast.process.tune_process`).
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Attention", "Model", "load"]


def __getattr__(name: str) -> Any:
    """`seq2seq.load`, `seq2seq.Model` and `seq2seq.Attention`, imported on first use."""
    if name in __all__:
        from seq2seq import api

        return getattr(api, name)
    raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")
