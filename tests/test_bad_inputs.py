"""Bad inputs to every script: one `error:` line on stderr naming the option, file or line, exit
status 2, no traceback, and every file that existed before left as it was.

Each case runs the `seq2seq` command (or a benchmark script's `__main__`, through runpy) in this
process, with sys.argv, stdin and the standard streams replaced, which keeps about 90 cases
within seconds;
a few run as real subprocesses too, to show the same from outside. The files are tiny: a
reversal corpus prepared with a 32-piece vocabulary and an untrained two-layer Transformer.
"""

import contextlib
import hashlib
import io
import json
import os
import pickle
import runpy
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pexpect
import pytest
import torch
from commands import SEQ2SEQ
from commands import run_in_process as run_command
from fastapi.testclient import TestClient
from reversal import prepare_reversal

import seq2seq
import seq2seq.commands
from seq2seq.checkpoints import CHECKPOINT_FORMAT, tokenizer_entry
from seq2seq.commands import COMMANDS
from seq2seq.config_file import dump_toml, load_config
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.export import export_model
from seq2seq.decoding.line_translator import SourceTooLong
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError
from seq2seq.models import build_model
from seq2seq.serving.app import create_app
from seq2seq.serving.registry import served_model
from seq2seq.training.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = SHIPPED_MODELS / "transformer-tiny.multi30k.en-de"
GPU_CONFIG = ROOT / "configs" / "transformer.multi30k.en-de.gpu.toml"
PROFILE_INPUTS = ["--checkpoint", str(SHIPPED), "--src", "{none}"]  # benchmarks/gpu_profile.py


def command_line(name: str) -> list[str]:
    """`seq2seq <name>`, or benchmarks/<name>.py."""
    if name in COMMANDS:
        return [*SEQ2SEQ, name]
    return [sys.executable, str(ROOT / "benchmarks" / f"{name}.py")]


class Payload:
    """Unpickling this creates the file `marker`: a checkpoint that would run code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def tiny_checkpoint(prepared: Path, run_dir: Path, **model: int) -> dict:
    """An untrained checkpoint of a tiny Transformer on the `prepared` folder."""
    overrides = [f'data.prepared="{prepared}"', f'train.run_dir="{run_dir}"']
    overrides += ["model.embed_dim=16", "model.ffn_size=32", "model.num_heads=2"]
    overrides += ["model.encoder_layers=1", "model.decoder_layers=1", "train.device=cpu"]
    overrides += ["train.max_steps=2", "train.valid_every=1", "train.log_every=1"]
    overrides += ["decode.beam_size=2", "train.attention_samples=0"]
    overrides += [f"model.{key}={value}" for key, value in model.items()]
    cfg = load_config(None, overrides)
    data = PreparedData.load(prepared)
    src, tgt = data.src_tokenizer, data.tgt_tokenizer
    torch.manual_seed(0)
    network = build_model(cfg.model, src.vocab_size, tgt.vocab_size, True, verbose=False)
    return {
        "format": CHECKPOINT_FORMAT,
        "config": cfg.to_dict(),
        "model": network.state_dict(),
        "tokenizers": tokenizer_entry(src, tgt),
        "step": 1,
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of inputs, good and bad, that the cases below name as {name}."""
    root = tmp_path_factory.mktemp("bad_inputs")
    prepared = prepare_reversal(root / "data", {"train": 300, "valid": 10, "test": 10})
    run = root / "run"
    checkpoint = tiny_checkpoint(prepared, run)
    for step in (1, 2):
        save_checkpoint(checkpoint, run / f"step-{step}.pt")
    save_checkpoint(checkpoint, root / "good.pt")
    save_checkpoint(tiny_checkpoint(prepared, run, embed_dim=32), root / "wider.pt")
    config = checkpoint["config"]
    # A case that wrongly starts training writes into a folder no other case reads.
    trained = {**config, "train": {**config["train"], "run_dir": str(root / "train_run")}}
    (root / "good.toml").write_text(dump_toml(trained), encoding="utf-8")
    moved = {**config, "data": {**config["data"], "prepared": str(root / "moved")}}
    save_checkpoint({**checkpoint, "config": moved}, root / "moved.pt")
    (root / "bad_value.toml").write_text("[train]\nwarmup_steps = -5\n")
    (root / "broken.toml").write_text("[train\nlr = 1\n")
    (root / "latin1.toml").write_bytes('[data]\nsrc = "é"\n'.encode("latin-1"))
    (root / "not_a_table.toml").write_text("train = 1\n")
    (root / "file").write_text("a regular file\n")

    torch.save({"format": CHECKPOINT_FORMAT, "extra": Payload(root / "pwned")}, root / "evil.pt")
    (root / "plain.pt").write_bytes(pickle.dumps({"format": CHECKPOINT_FORMAT}))
    torch.save({"format": 1}, root / "legacy.pt", _use_new_zipfile_serialization=False)
    torch.save({"weights": torch.ones(2)}, root / "foreign.pt")
    (root / "text.pt").write_text("not a checkpoint\n")
    (root / "empty.pt").write_bytes(b"")
    (root / "cut.pt").write_bytes((root / "good.pt").read_bytes()[:5000])

    sources = ["a b c", "d e f"]
    (root / "src.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (root / "ref.txt").write_text("c b a\nf e d\n", encoding="utf-8")
    (root / "short_ref.txt").write_text("c b a\n", encoding="utf-8")
    (root / "bad_utf8.txt").write_bytes(b"a b c\nd \xff e\n")
    (root / "ref_link.txt").symlink_to(root / "ref.txt")
    (root / "folder").mkdir()
    damaged = {name: root / name for name in ("cut_ids", "cut_offsets", "edited", "big_id")}
    for folder in damaged.values():
        shutil.copytree(prepared, folder)
    (damaged["cut_ids"] / "train.src.ids").write_bytes(b"")
    offsets = damaged["cut_offsets"] / "valid.tgt.offsets"
    offsets.write_bytes(offsets.read_bytes()[:-16])
    manifest = json.loads((damaged["edited"] / "manifest.json").read_text())
    manifest["files"]["train.src"] = "0" * 64
    (damaged["edited"] / "manifest.json").write_text(json.dumps(manifest))
    ids = np.fromfile(damaged["big_id"] / "train.tgt.ids", dtype=np.uint16)
    ids[0] = 99
    ids.tofile(damaged["big_id"] / "train.tgt.ids")
    empty_valid = root / "empty_valid"
    shutil.copytree(root / "data" / "raw", empty_valid)
    for side in ("src", "tgt"):
        (empty_valid / f"valid.{side}").write_text("")

    (root / "long.txt").write_text("a " * 50_000 + "\n", encoding="utf-8")  # 100,000 characters
    (root / "long_ref.txt").write_text("a\n", encoding="utf-8")
    huge = {**config, "model": {**config["model"], "embed_dim": 1_000_000}}
    save_checkpoint({**checkpoint, "config": huge}, root / "huge.pt")
    export_model(load_model(root / "good.pt"), root / "exported")
    shutil.copytree(root / "exported", root / "huge_model")
    description = json.loads((root / "huge_model" / "model.json").read_text())
    description["config"]["model"]["embed_dim"] = 1_000_000
    (root / "huge_model" / "model.json").write_text(json.dumps(description))
    for i, (key, value, _) in enumerate(BAD_DECODE):
        shutil.copytree(root / "exported", root / f"bad_decode_{i}")
        description = json.loads((root / "exported" / "model.json").read_text())
        description["config"]["decode"][key] = value
        (root / f"bad_decode_{i}" / "model.json").write_text(json.dumps(description))
    (root / "loop").symlink_to("loop")  # a symbolic link to itself
    (root / "read_only").mkdir(mode=0o555)
    return root


@dataclass
class Case:
    script: str
    args: list[str]  # {name} is a path in the world folder
    message: str  # a fragment of the one error line
    stdin: bytes = b"a b c\n"


# A model folder's decode values out of their configuration ranges, each in a folder of its own
BAD_DECODE = [
    ("precision", "int4", 'decode.precision="int4": must be one of auto, bf16, fp16, fp32, int8'),
    ("max_len_ratio", 1e6, "decode.max_len_ratio=1000000.0: must be in (0, 10]"),
    ("length_penalty", -5, "decode.length_penalty=-5.0: must be in [0, 5]"),
    ("no_repeat_ngram", -1, "decode.no_repeat_ngram=-1: must be in [0, 100]"),
    ("batch_size", 0, "decode.batch_size=0: must be in [1, 100000]"),
    ("batch_size", 10**12, "decode.batch_size=1000000000000: must be in [1, 100000]"),
]
CONFIG = ["--config", "{good.toml}"]
CKPT = ["--checkpoint", "{good.pt}"]
SRC_REF = ["--src", "{src.txt}", "--ref", "{ref.txt}"]
RECORD = ["--name", "x", "--trained-on", "cpu", "--train-hours", "1", "--command", "make"]


def prepared_at(name: str) -> list[str]:
    """Overrides that train on the world's prepared folder `name` (a damaged copy)."""
    return [f'data.prepared="{{{name}}}"', "data.vocab_size=32"]


FILES = ["--corpus", "files", "--src", "src", "--tgt", "tgt", "--data-dir", "{data}/raw"]
CASES: dict[str, Case | object] = {
    # Configuration values, overrides and files (seq2seq train).
    "num_heads=0": Case("train", [*CONFIG, "model.num_heads=0"], "override: model.num_heads=0"),
    "seed=-1": Case("train", [*CONFIG, "train.seed=-1"], "train.seed=-1: must be in [0, "),
    "num_workers=-1": Case("train", [*CONFIG, "train.num_workers=-1"], "num_workers=-1: must"),
    "clip_norm<0": Case("train", [*CONFIG, "train.clip_norm=-0.5"], "train.clip_norm=-0.5"),
    "decode.batch_size=0": Case("train", [*CONFIG, "decode.batch_size=0"], "batch_size=0"),
    "ffn_size=0": Case("train", [*CONFIG, "model.ffn_size=0"], "model.ffn_size=0: must be >= 1"),
    "keep_last=-1": Case("train", [*CONFIG, "train.keep_last=-1"], "train.keep_last=-1"),
    "log_every=0": Case("train", [*CONFIG, "train.log_every=0"], "train.log_every=0"),
    "lr=nan": Case("train", [*CONFIG, "train.lr=nan"], "train.lr=nan: must be in (0, 1]"),
    "length_penalty=inf": Case("train", [*CONFIG, "decode.length_penalty=inf"], "=inf: must"),
    "length_penalty=1000": Case(
        "train",
        [*CONFIG, "decode.length_penalty=1000.0"],
        "length_penalty=1000.0: must be in [0, 5]",
    ),
    "max_len_ratio=1e6": Case(
        "train",
        [*CONFIG, "decode.max_len_ratio=1e6"],
        "max_len_ratio=1000000.0: must be in (0, 10]",
    ),
    "beam_size=257": Case("train", [*CONFIG, "decode.beam_size=257"], "must be in [1, 256]"),
    "heads do not divide": Case("train", [*CONFIG, "model.num_heads=3"], "divisible by"),
    "dropout=1": Case("train", [*CONFIG, "model.dropout=1.0"], "model.dropout=1.0: must be in"),
    "one beta": Case("train", [*CONFIG, "train.optimizer_betas=[0.9]"], "optimizer_betas"),
    "betas >= 1": Case("train", [*CONFIG, "train.optimizer_betas=[0.9, 1.5]"], "in [0, 1)"),
    "attention_layer": Case("train", [*CONFIG, "model.attention_layer=5"], "attention_layer=5"),
    "max_tokens=0": Case("train", [*CONFIG, "train.max_tokens=0"], "train.max_tokens=0"),
    "max_tokens=-5": Case(
        "train", [*CONFIG, "train.max_tokens=-5"], "train.max_tokens=-5: must be >= 1"
    ),
    "warmup<0 in file": Case("train", ["--config", "{bad_value.toml}"], "train.warmup_steps=-5"),
    "unknown key": Case("train", [*CONFIG, "train.nope=1"], "unknown key train.nope"),
    "unknown key bogus": Case("train", [*CONFIG, "train.bogus=1"], "unknown key train.bogus"),
    "unknown section": Case("train", [*CONFIG, "nope.x=1"], "unknown section [nope]"),
    "wrong type": Case("train", [*CONFIG, "train.lr=fast"], "train.lr: expected float"),
    "wrong type, str": Case(
        "train", [*CONFIG, "train.lr=high"], "train.lr: expected float, got str"
    ),
    "float for int": Case("train", [*CONFIG, "train.max_tokens=10.5"], "expected int"),
    "unknown preset": Case("train", [*CONFIG, "model.name=huge"], "unknown preset 'huge'"),
    "precision": Case("train", [*CONFIG, "train.precision=fp8"], 'train.precision="fp8"'),
    "override syntax": Case("train", [*CONFIG, "lr=1"], "expected section.key=value"),
    "missing config": Case("train", ["--config", "{none.toml}"], "configuration file not found"),
    "missing config, absolute": Case(
        "train",
        ["--config", "/nonexistent.toml"],
        "/nonexistent.toml: configuration file not found",
    ),
    "broken TOML": Case("train", ["--config", "{broken.toml}"], "broken.toml: not valid TOML"),
    "latin-1 config": Case("train", ["--config", "{latin1.toml}"], "latin1.toml: not valid"),
    "section not a table": Case("train", ["--config", "{not_a_table.toml}"], "table of keys"),
    "unknown device": Case("train", [*CONFIG, "train.device=tpu"], "tpu"),
    "missing prepared": Case("train", [*CONFIG, 'data.prepared="{none}"'], "none"),
    "prepared not a corpus": Case(
        "train",
        [*CONFIG, 'data.prepared="/nonexistent/folder"'],
        "/nonexistent/folder is not a prepared corpus",
    ),
    "unknown train option": Case("train", [*CONFIG, "--resume"], "unrecognized arguments"),
    "run_dir under a file": Case(
        "train", [*CONFIG, "data.vocab_size=32", 'train.run_dir="{file}/run"'], "Not a directory"
    ),
    # Damaged prepared folders (seq2seq train): sizes always, checksums with --verify.
    "truncated ids": Case("train", [*CONFIG, *prepared_at("cut_ids")], "train.src.ids: 0 bytes"),
    "truncated offsets": Case(
        "train", [*CONFIG, *prepared_at("cut_offsets")], "valid.tgt.offsets: 72 bytes, but 88 when"
    ),
    "edited checksum": Case(
        "train", [*CONFIG, *prepared_at("edited"), "--verify"], "train.src: its SHA256 differs"
    ),
    "id beyond vocabulary": Case(
        "train", [*CONFIG, *prepared_at("big_id")], "token id 99 is outside the vocabulary of 32"
    ),
    # Sizes that cannot fit the machine, values the data refutes (seq2seq train).
    "embed_dim=1000000": Case(
        "train", [*CONFIG, "model.embed_dim=1000000", "data.vocab_size=32"], "GiB to train on"
    ),
    "max_tokens=1": Case(
        "train",
        [*CONFIG, "train.max_tokens=1", "data.vocab_size=32"],
        "train.max_tokens=1: smaller than the longest training sentence (15 tokens",
    ),
    "beam over vocabulary": Case(
        "train",
        [*CONFIG, "decode.beam_size=100", "data.vocab_size=32"],
        "decode.beam_size=100: larger than the target vocabulary (32 pieces)",
    ),
    "valid line over limit": Case(
        "train",
        [*CONFIG, "decode.max_src_pieces=3", "data.vocab_size=32"],
        "decode.max_src_pieces=3: valid sentence ",
    ),
    "max_src_pieces=0": Case(
        "train", [*CONFIG, "decode.max_src_pieces=0"], "=0: must be in [1, 10000]"
    ),
    "run folder in /proc": Case(
        "train", [*CONFIG, "data.vocab_size=32", 'train.run_dir="/proc/run"'], "run folder /proc"
    ),
    "read-only run folder": pytest.param(
        Case("train", [*CONFIG, "data.vocab_size=32", 'train.run_dir="{read_only}"'], "denied"),
        marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders"),
    ),
    "vocab_size != prepared": pytest.param(
        Case("train", [*CONFIG, "data.vocab_size=5000"], "vocab_size")
    ),
    # Checkpoints (seq2seq translate).
    "missing checkpoint": Case("translate", ["--checkpoint", "{none.pt}"], "checkpoint not found"),
    "code payload": Case("translate", ["--checkpoint", "{evil.pt}"], "could run code"),
    "plain pickle": Case("translate", ["--checkpoint", "{plain.pt}"], "saved with pickle"),
    "legacy torch.save": Case("translate", ["--checkpoint", "{legacy.pt}"], "saved with pickle"),
    "foreign checkpoint": Case("translate", ["--checkpoint", "{foreign.pt}"], "not a seq2seq"),
    "text as checkpoint": Case("translate", ["--checkpoint", "{text.pt}"], "not a seq2seq"),
    "empty checkpoint": Case("translate", ["--checkpoint", "{empty.pt}"], "empty.pt: empty file"),
    "cut checkpoint": Case("translate", ["--checkpoint", "{cut.pt}"], "truncated or corrupt"),
    "folder as checkpoint": Case(
        "translate", ["--checkpoint", "{folder}"], "a folder, not a checkpoint"
    ),
    "no --checkpoint": Case("translate", [], "--checkpoint"),
    # Decoding options (seq2seq translate).
    "length penalty nan": Case("translate", [*CKPT, "--length-penalty", "nan"], "nan: must be"),
    "length penalty < 0": Case("translate", [*CKPT, "--length-penalty", "-1"], "-1: must be"),
    "length penalty text": Case("translate", [*CKPT, "--length-penalty", "x"], "not a number"),
    "beam 0": Case("translate", [*CKPT, "--beam", "0"], "--beam: 0: must be in [1, 256]"),
    "beam 2.5": Case("translate", [*CKPT, "--beam", "2.5"], "'2.5' is not an integer"),
    "batch size 0": Case("translate", [*CKPT, "--batch-size", "0"], "--batch-size: 0"),
    "nbest 0": Case("translate", [*CKPT, "--nbest", "0"], "--nbest: 0: must be in [1, 256]"),
    "nbest > beam": Case("translate", [*CKPT, "--nbest", "3"], "--nbest 3: must be between"),
    "max len ratio 0": Case("translate", [*CKPT, "--max-len-ratio", "0"], "must be in (0, 10]"),
    "max len ratio 1000000": Case(
        "translate", [*CKPT, "--max-len-ratio", "1000000"], "--max-len-ratio: 1000000: must be in"
    ),
    "length penalty 1000": Case(
        "translate",
        [*CKPT, "--length-penalty", "1000"],
        "--length-penalty: 1000: must be in [0, 5]",
    ),
    "length penalty 1e308": Case("translate", [*CKPT, "--length-penalty", "1e308"], "1e308: must"),
    "beam 257": Case("translate", [*CKPT, "--beam", "257"], "--beam: 257: must be in [1, 256]"),
    "nbest 1000": Case("translate", [*CKPT, "--nbest", "1000"], "--nbest: 1000: must be in [1,"),
    "max len ratio inf": Case("translate", [*CKPT, "--max-len-ratio", "inf"], "inf: must be"),
    "precision int4": Case("translate", [*CKPT, "--precision", "int4"], "--precision int4"),
    "device tpu": Case("translate", [*CKPT, "--device", "tpu"], "--device tpu: unknown device"),
    "unknown option": Case("translate", [*CKPT, "--fast"], "unrecognized arguments: --fast"),
    # Input text (seq2seq translate).
    "missing input": Case("translate", [*CKPT, "--input", "{none.txt}"], "--input"),
    "folder as input": Case("translate", [*CKPT, "--input", "{folder}"], "cannot read"),
    "input not UTF-8": Case(
        "translate", [*CKPT, "--input", "{bad_utf8.txt}"], ":2: not UTF-8 text"
    ),
    "stdin not UTF-8": Case(
        "translate",
        CKPT,
        "standard input:3: not UTF-8 text (bad byte at byte 1",
        b"a\nb\n\xe9t\xe9\n",
    ),
    "stdin with a surrogate": Case(  # U+D800 encoded as UTF-8 would be: not UTF-8 text
        "translate",
        CKPT,
        "standard input:2: not UTF-8 text (bad byte at byte 3",
        b"a\nb \xed\xa0\x80\n",
    ),
    "line of 100,000 characters": Case(
        "translate",
        CKPT,
        "standard input:2: 50,000 pieces, more than the 256 that decode.max_src_pieces",
        b"a b c\n" + b"a " * 50_000 + b"\n",
    ),
    "long line at a wide beam": Case(
        "translate",
        [*CKPT, "--beam", "30", "--max-src-pieces", "1000", "--input", "{long.txt}"],
        "long.txt:1: 50,000 pieces, more than the 532 that the decoding budget (16,000 tokens)",
    ),
    "max src pieces 0": Case(
        "translate", [*CKPT, "--max-src-pieces", "0"], "0: must be in [1, 10000]"
    ),
    "beam 100": Case(
        "translate", [*CKPT, "--beam", "100"], "beam size 100: larger than the target vocab"
    ),
    "huge model checkpoint": Case(
        "translate", ["--checkpoint", "{huge.pt}"], "huge.pt: model transformer-tiny (embed_dim"
    ),
    "huge exported model": Case(
        "translate", ["--model", "{huge_model}"], "parameters need at least"
    ),
    "attention into a loop": Case(
        "translate", [*CKPT, "--save-attention", "{loop}/map.png"], "a loop of symbolic links"
    ),
    "attention into no folder": Case(
        "translate", [*CKPT, "--save-attention", "{none}/map.png"], "does not exist"
    ),
    # seq2seq evaluate
    "output is src": Case("evaluate", [*CKPT, *SRC_REF, "--output", "{src.txt}"], "also an in"),
    "output links to ref": Case(
        "evaluate", [*CKPT, *SRC_REF, "--output", "{ref_link.txt}"], "is also an input"
    ),
    "output is checkpoint": Case("evaluate", [*CKPT, "--output", "{good.pt}"], "also an input"),
    "output in no folder": Case(
        "evaluate", [*CKPT, *SRC_REF, "--output", "{none}/hyp.txt"], "does not exist"
    ),
    "output is a folder": Case("evaluate", [*CKPT, *SRC_REF, "--output", "{folder}"], "folder"),
    "output into a loop": Case(
        "evaluate", [*CKPT, *SRC_REF, "--output", "{loop}"], "{loop}: a loop of symbolic links"
    ),
    "evaluate a long line": Case(
        "evaluate",
        [*CKPT, "--src", "{long.txt}", "--ref", "{long_ref.txt}"],
        "--src {long.txt}:1: 50,000 pieces, more than the 256",
    ),
    "evaluate beam 100": Case("evaluate", [*CKPT, "--beam", "100"], "larger than the target"),
    "evaluate beam 1000": Case("evaluate", [*CKPT, "--beam", "1000"], "--beam: 1000: must be in"),
    "evaluate length penalty 1000": Case(
        "evaluate", [*CKPT, "--length-penalty", "1000"], "--length-penalty: 1000: must be in [0, 5]"
    ),
    "src without ref": Case("evaluate", [*CKPT, "--src", "{src.txt}"], "go together"),
    "split and src": Case("evaluate", [*CKPT, *SRC_REF, "--split", "test"], "not both"),
    "split train": Case("evaluate", [*CKPT, "--split", "train"], "invalid choice: 'train'"),
    "src not UTF-8": Case(
        "evaluate", [*CKPT, "--src", "{bad_utf8.txt}", "--ref", "{ref.txt}"], ":2: not UTF-8 text"
    ),
    "missing src": Case("evaluate", [*CKPT, "--src", "{none}", "--ref", "{ref.txt}"], "--src"),
    "ref shorter": Case(
        "evaluate",
        [*CKPT, "--src", "{src.txt}", "--ref", "{short_ref.txt}"],
        "has 2 lines but --ref",
    ),
    "record without name": Case("evaluate", [*CKPT, "--record", "{r.json}"], "--record needs"),
    "train hours < 0": Case("evaluate", [*CKPT, "--train-hours", "-1"], "--train-hours: -1"),
    "evaluate nan": Case("evaluate", [*CKPT, "--length-penalty", "nan"], "nan: must be in [0, 5]"),
    "evaluate pickle": Case("evaluate", ["--checkpoint", "{plain.pt}"], "saved with pickle"),
    "evaluate missing prepared": Case("evaluate", ["--checkpoint", "{moved.pt}"], "moved"),
    # seq2seq serve: the same options, and the server's limits within the same ranges
    "serve max beam 300": Case(
        "serve", [*CKPT, "--max-beam", "300"], "--max-beam: 300: must be in"
    ),
    "serve length penalty": Case("serve", [*CKPT, "--length-penalty", "6"], "6: must be in [0, 5]"),
    # seq2seq average
    "out is a folder": Case("average", ["--out", "{folder}", "{good.pt}"], "folder"),
    "record under a file": Case(
        "evaluate", [*CKPT, "--record", "{file}/r.json", *RECORD], "file is not a folder"
    ),
    "out unwritable": Case("average", ["--out", "/proc/avg.pt", "{good.pt}"], "/proc"),
    "out under a file": Case(
        "average", ["--out", "{file}/new/avg.pt", "{good.pt}"], "is not a folder"
    ),
    "out is an input": Case(
        "average", ["--out", "{good.pt}", "{good.pt}", "{run}/step-1.pt"], "input"
    ),
    "last 0": Case("average", ["--out", "{avg.pt}", "--last", "0", "{run}"], "--last: 0: must"),
    "last, two folders": Case(
        "average", ["--out", "{avg.pt}", "--last", "1", "{run}", "{run}"], "one run"
    ),
    "last too many": Case("average", ["--out", "{avg.pt}", "--last", "3", "{run}"], "has 2 step-"),
    "last on a file": Case(
        "average", ["--out", "{avg.pt}", "--last", "1", "{file}"], "not a folder"
    ),
    "different models": Case(
        "average", ["--out", "{avg.pt}", "{good.pt}", "{wider.pt}"], "not the same model"
    ),
    "average a pickle": Case(
        "average", ["--out", "{avg.pt}", "{good.pt}", "{plain.pt}"], "with pickle"
    ),
    "average nothing": Case("average", ["--out", "{avg.pt}"], "required: CHECKP"),
    # seq2seq export and seq2seq prepare
    "export a pickle": Case(
        "export", ["--checkpoint", "{plain.pt}", "--out", "{m}"], "with pickle"
    ),
    "export over a file": Case("export", [*CKPT, "--out", "{file}"], "not replacing it"),
    "export into /proc": Case("export", [*CKPT, "--out", "/proc/m"], "write in /proc"),
    "export into a loop": Case("export", [*CKPT, "--out", "{loop}"], "loop of symbolic"),
    "export over an export": Case(
        "export", [*CKPT, "--out", "{exported}"], "exported model already; pass --force"
    ),
    "export over a shipped model": Case(
        "export", [*CKPT, "--out", str(SHIPPED)], "exported model already; pass --force"
    ),
    "export into models/": Case(
        "export", [*CKPT, "--out", str(SHIPPED_MODELS / "mine")], "the shipped models' folder"
    ),
    "export dtype": Case("export", [*CKPT, "--out", "{m}", "--dtype", "fp4"], "fp4"),
    "prepare into a loop": Case("prepare", [*FILES, "--out", "{loop}/p"], "loop of symbol"),
    "prepare into /proc": Case("prepare", [*FILES, "--out", "/proc/p"], "write in /proc"),
    # benchmarks/
    "bench beams 0": Case("bench", ["--beams", "0"], "argument --beams: 0: must be >= 1"),
    "bench seed text": Case("bench", ["--seed", "x"], "--seed: 'x' is not an integer"),
    "scale without mirror": Case("scale", [], "required: --mirror"),
    "gpu_report no folder": Case("gpu_report", ["{none}"], "not a folder written by"),
    "gpu_report empty folder": Case("gpu_report", ["{folder}"], "incomplete benchmark folder"),
    "gpu_syncs no config": Case(
        "gpu_syncs", ["--config", "{none}", "--out", "{folder}/s.json"], "configuration file"
    ),
    "gpu_profile no config": Case(
        "gpu_profile",
        ["--config", "{none}", *PROFILE_INPUTS, "--out", "{folder}/p.json"],
        "configuration file",
    ),
    "gpu_profile no src": Case(
        "gpu_profile",
        ["--config", str(GPU_CONFIG), *PROFILE_INPUTS, "--out", "{folder}/p.json"],
        "--src {none}: cannot read",
    ),
    "gpu_profile steps 0": Case(
        "gpu_profile",
        ["--config", str(GPU_CONFIG), *PROFILE_INPUTS, "--out", "{p.json}", "--steps", "0"],
        "--steps must be >= 1",
    ),
    "results_table option": Case("results_table", ["--nope"], "unrecognized arguments: --nope"),
    "speedrun seeds 0": Case("speedrun", ["--seeds", "0"], "--seeds 0: must be at least 1"),
    "speedrun no data": Case("speedrun", ["--data", "{none}"], "not a prepared corpus"),
    "vocab size text": Case("prepare", ["--vocab-size", "many"], "--vocab-size"),
    "no data dir": Case(
        "prepare", ["--corpus", "files", "--data-dir", "{none}", "--out", "{p}"], "none"
    ),
    "empty valid split": pytest.param(
        Case("prepare", [*FILES[:-1], "{empty_valid}", "--out", "{p2}"], "valid")
    ),
    "vocab too large": pytest.param(
        Case(
            "prepare",
            [*FILES, "--out", "{p}", "--vocab-size", "5000"],
            "--vocab-size 5000",
        )
    ),
    **{
        f"model.json {key}={value}": Case(
            "translate", ["--model", f"{{bad_decode_{i}}}"], f"bad_decode_{i}/model.json: {message}"
        )
        for i, (key, value, message) in enumerate(BAD_DECODE)
    },
}


def expand(args: list[str], world: Path) -> list[str]:
    """Replace each {name} by the path of `name` in the world folder."""
    out = []
    for arg in args:
        while "{" in arg:
            start, end = arg.index("{"), arg.index("}")
            arg = arg[:start] + str(world / arg[start + 1 : end]) + arg[end + 1 :]
        out.append(arg)
    return out


def checksums(world: Path) -> dict[Path, str]:
    return {
        path: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in world.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


@contextlib.contextmanager
def script_process(name: str, args: list[str], stdin: bytes) -> Iterator[io.StringIO]:
    """sys.argv, stdin, stdout and stderr as a subprocess of `name` would see them."""
    saved = sys.argv, sys.stdin
    stderr = io.StringIO()
    sys.argv = ["seq2seq", name, *args] if name in COMMANDS else [*command_line(name)[1:], *args]
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            yield stderr
    finally:
        sys.argv, sys.stdin = saved


def run_in_process(case: Case, world: Path) -> tuple[int | str | None, str]:
    """The exit status and the standard error of the script run in this process."""
    with script_process(case.script, expand(case.args, world), case.stdin) as stderr:
        try:
            if case.script in COMMANDS:
                seq2seq.commands.main(sys.argv[1:])
            else:
                runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit as exit:
            return exit.code, stderr.getvalue()
    return 0, stderr.getvalue()


def assert_one_line_error(status: int | str | None, stderr: str, message: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert status == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert message in stderr, stderr


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_bad_input_is_one_line_and_damages_nothing(case: Case, world: Path) -> None:
    before = checksums(world)
    status, stderr = run_in_process(case, world)
    assert_one_line_error(status, stderr, expand([case.message], world)[0])
    after = checksums(world)
    assert {path: after.get(path) for path in before} == before
    assert not (world / "pwned").exists()  # the code payload never ran
    assert not (SHIPPED_MODELS / "mine").exists()  # nothing written among the shipped models


SUBPROCESS_CASES = [
    "seed=-1",
    "plain pickle",
    "stdin not UTF-8",
    "output is src",
    "out is a folder",
    "vocab size text",
]


@pytest.mark.slow
def test_the_same_from_a_real_process(world: Path) -> None:
    """A few cases as real subprocesses: the exit status and stderr seen from outside."""
    before = checksums(world)

    def run(case: Case) -> subprocess.CompletedProcess:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
        command = [*command_line(case.script), *expand(case.args, world)]
        return subprocess.run(command, input=case.stdin, capture_output=True, env=env, timeout=120)

    cases = [CASES[name] for name in SUBPROCESS_CASES]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, cases))
    for case, result in zip(cases, results, strict=True):
        message = expand([case.message], world)[0]
        assert_one_line_error(result.returncode, result.stderr.decode(), message)
    assert checksums(world) == before


def test_truncate_cuts_a_long_line_with_a_warning(world: Path) -> None:
    """--truncate: the over-long line is translated as its first N pieces, with one warning."""
    script = ["translate", "--checkpoint", str(world / "good.pt")]
    lines = "a b c\n" + "a " * 50_000 + "\n"
    cut = run_command([*script, "--truncate", "--max-src-pieces", "8"], lines)
    assert cut.returncode == 0, cut.stderr
    assert cut.stderr == "warning: standard input:2: 50,000 pieces, cut to the first 8\n"
    first_eight = run_command(script, "a b c\n" + "a " * 8 + "\n")
    assert first_eight.returncode == 0, first_eight.stderr
    assert cut.stdout == first_eight.stdout and cut.stdout.count("\n") == 2


@pytest.mark.slow  # a prompt in another process
def test_the_prompt_refuses_a_line_that_is_not_text(world: Path, tmp_path: Path) -> None:
    """Bytes that are not UTF-8 typed at the prompt: one error line, and the prompt goes on."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HOME=str(tmp_path), TERM="dumb")
    command = ["-m", "seq2seq", "translate", "--checkpoint", str(world / "good.pt")]
    child = pexpect.spawn(sys.executable, command, env=dict(env, PYTHONPATH=str(ROOT)), timeout=120)
    child.expect_exact(b"> ")
    child.send(b"a \xed\xa0\x80 b\n")  # U+D800 encoded as UTF-8 would be
    child.expect_exact(b"error: this line: a lone surrogate (U+DCED at character 3) is not text")
    child.expect_exact(b"> ")
    child.sendline(b"a b c")
    child.expect(rb"\(score -?\d+\.\d{3}\)")
    child.expect_exact(b"> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and b"Traceback" not in child.before


def test_the_python_api_bounds_its_input_too(world: Path) -> None:
    inference = load_model(world / "good.pt")
    inference.config.decode.max_src_pieces = 4
    translator = Translator.from_inference(inference, "cpu")
    with pytest.raises(SourceTooLong, match=r"^input line 2: 5 pieces, more than the 4 that") as e:
        translator.translate(["a b c", "a b c d e"])
    assert e.value.index == 1
    with pytest.raises(UserError, match=r"^beam size 33: larger than the target vocabulary \(32"):
        translator.translate(["a b c"], beam_size=33)
    inference.config.decode.truncate_src = True
    [[kept]], [[cut]] = translator.translate(["a b c d"]), translator.translate(["a b c d e"])
    assert (kept.truncated_from, cut.truncated_from) == (None, 5)
    assert cut.tokens == kept.tokens and cut.src_pieces == kept.src_pieces


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"beam": 0}, "beam: 0: must be in [1, 256]"),
        ({"beam": 2.5}, "beam: 2.5 is not an integer"),
        ({"beam": True}, "beam: True is not an integer"),
        ({"beam": 257}, "beam: 257: must be in [1, 256]"),
        ({"nbest": 3}, "nbest: 3 is more than the beam size (2)"),
        ({"beam": 1, "nbest": 0}, "nbest: 0: must be in [1, 256]"),
        ({"length_penalty": 1e308}, "length_penalty: 1e+308: must be in [0, 5]"),
        ({"length_penalty": float("nan")}, "length_penalty: nan: must be in [0, 5]"),
        ({"length_penalty": "1"}, "length_penalty: '1' is not a number"),
        ({"max_len_ratio": 1e6}, "max_len_ratio: 1000000.0: must be in (0, 10]"),
        ({"lines": ["a b", 3]}, "lines[1]: expected a str, got int"),
        ({"lines": ["a", "b \ud800"]}, "lines[1]: a lone surrogate (U+D800 at character 3) is not"),
    ],
)
def test_the_python_api_checks_its_arguments(world: Path, arguments: dict, message: str) -> None:
    """Model.translate refuses a bad argument with a one-line ValueError naming it."""
    model = seq2seq.load(world / "good.pt", device="cpu")  # decode.beam_size 2
    lines = arguments.pop("lines", ["a b c"])
    with pytest.raises(ValueError) as error:
        model.translate(lines, **arguments)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_the_python_api_takes_the_bounds_themselves(world: Path) -> None:
    model = seq2seq.load(world / "good.pt", device="cpu")
    [text] = model.translate(["a b c"], beam=1, length_penalty=5, max_len_ratio=10)
    assert isinstance(text, str)
    assert len(model.translate(["a b c"], nbest=2)[0]) == 2
    with pytest.raises(ValueError, match=r"^line: a lone surrogate \(U\+DC00 at character 1\)"):
        model.attention("\udc00")


HTTP_BAD_FIELDS = [
    ({"length_penalty": 1e308}, "length_penalty: Input should be less than or equal to 5"),
    ({"max_len_ratio": 1e6}, "max_len_ratio: Input should be less than or equal to 10"),
    ({"beam": 0}, "beam: Input should be greater than or equal to 1"),
    ({"beam": 257}, "beam: Input should be less than or equal to 256"),
    ({"nbest": 300}, "nbest: Input should be less than or equal to 256"),
]


def test_the_http_api_refuses_the_same_values(world: Path) -> None:
    """Each value out of its range is 422 with one line naming the field, never a 500 (a line
    that is not text: tests/test_hardening.py)."""
    inference = load_model(world / "good.pt", "cpu")
    models = {"good": served_model("good", inference, torch.device("cpu"))}
    with TestClient(create_app(models)) as client:
        for fields, error in HTTP_BAD_FIELDS:
            body = json.dumps({"lines": ["a b c"], **fields})
            answer = client.post(
                "/v1/translate", content=body, headers={"content-type": "application/json"}
            )
            assert (answer.status_code, answer.json()) == (422, {"error": error})
