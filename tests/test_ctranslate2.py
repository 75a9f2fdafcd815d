"""CTranslate2 (seq2seq.decoding.ct2_*): the converter, the engine's search against the
textbook one, exported folders and their checks, and the engine choice.

Tolerance: CTranslate2's float32 kernels compute in another order than PyTorch's, so scores of
the same output agree within SCORE_TOLERANCE (measured on the first 200 test sentences of each
shipped Transformer: at most 7e-4 for the Multi30k models, 1.3e-3 for Tatoeba en-fr and 2.3e-3
for fr-en, on a 5-token output, where a length-normalised score averages few tokens), and a near
tie may break the other way."""

import copy
import hashlib
import itertools
import json
import os
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch
from commands import stop_server
from ctranslate2_bench import shipped_test_pairs
from fastapi.testclient import TestClient

import seq2seq
import seq2seq.commands
from seq2seq.commands import export as export_command
from seq2seq.commands import serve as serve_command
from seq2seq.config_file import config_from_dict
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.ct2_convert import (
    position_table,
    state_arrays,
    transformer_spec,
    translator_from_inference,
    translator_from_weights,
)
from seq2seq.decoding.ct2_engine import import_ctranslate2, use_ctranslate2
from seq2seq.decoding.ct2_folder import GUARD_DROPPED, MANIFEST, check_folder
from seq2seq.decoding.ct2_translator import CTranslate2Translator
from seq2seq.decoding.export import export_ctranslate2
from seq2seq.decoding.line_translator import SourceTooLong, Stopped
from seq2seq.decoding.model_folder import (
    CARD,
    MAX_DESCRIPTION_BYTES,
    MAX_TOKENIZER_BYTES,
    MAX_WEIGHTS_BYTES,
    WEIGHTS,
    read_description,
    read_weights,
)
from seq2seq.decoding.model_result import SHIPPED_MODELS, ModelResult
from seq2seq.decoding.open_pytorch import Inference, load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError
from seq2seq.files import sha256_file
from seq2seq.models import build_model
from seq2seq.models.positional import PositionalEncoding
from seq2seq.serving.app import create_app
from seq2seq.serving.limits import Limits
from seq2seq.serving.registry import ServedModel, served_model
from seq2seq.serving.state import NO_EXPLORER

SCORE_TOLERANCE = 3e-3
EN_DE = "transformer-tiny.multi30k.en-de"
TATOEBA_EN_FR = "transformer-small.tatoeba.en-fr"  # keeps numbers by default
TRANSFORMERS = sorted(p.name for p in SHIPPED_MODELS.glob("transformer-*"))
LINES = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "People are fixing the roof of a house.",
    "Two dogs play in the snow.",
    "A little girl climbs into a wooden playhouse.",
]


def fp32(name: str) -> Inference:
    """The model `name`, decoding in fp32 without the number guard (the Tatoeba models' default,
    which CTranslate2 lacks): the same search on both engines."""
    inference = load_model(name)
    inference.config.decode.precision = "fp32"
    inference.config.decode.keep_numbers = False
    return inference


@pytest.fixture(scope="module")
def en_de() -> Inference:
    return fp32(EN_DE)


@pytest.fixture(scope="module")
def engines(en_de: Inference) -> tuple[Translator, CTranslate2Translator]:
    return Translator.from_inference(en_de, "cpu"), translator_from_inference(en_de)


def assert_same(expected: list, got: list) -> None:
    """The same n-best lists: texts equal, scores within SCORE_TOLERANCE."""
    assert [[t.text for t in nbest] for nbest in got] == [[t.text for t in n] for n in expected]
    for ours, theirs in zip(itertools.chain(*expected), itertools.chain(*got), strict=True):
        assert theirs.score == pytest.approx(ours.score, abs=SCORE_TOLERANCE)
        assert theirs.tokens == ours.tokens and theirs.tgt_pieces == ours.tgt_pieces


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"length_penalty": 0.0},
        {"length_penalty": 2.0},
        {"beam_size": 1},
        {"no_repeat_ngram": 2},
        {"stop_early": True, "length_penalty": 0.0},
    ],
    ids=["default", "alpha-0", "alpha-2", "greedy", "no-repeat-2", "stop-early"],
)
def test_the_engine_gives_the_textbook_nbest_lists(engines, changes) -> None:
    pytorch, ct2 = (engine.with_decode(**changes) for engine in engines)
    nbest = 1 if changes.get("beam_size") == 1 else 3
    assert_same(pytorch.translate(LINES, nbest=nbest), ct2.translate(LINES, nbest=nbest))


def test_each_sentence_keeps_its_own_maximum_length(engines) -> None:
    """Batched with longer sentences, a sentence stops at its own limit, as alone; with limits
    that every search reaches, the outputs are the textbook's but where the differences in
    the module docstring of seq2seq.decoding.ct2_translator show."""
    pytorch, ct2 = (engine.with_decode(max_len_ratio=0.5, max_len_const=0) for engine in engines)
    together = ct2.translate(LINES, nbest=2)
    alone = [ct2.translate([line], nbest=2)[0] for line in LINES]
    assert_same(alone, together)
    limits = ct2.max_lengths(ct2.src_tokenizer.encode(LINES))
    assert len(set(limits)) > 1
    for nbest, limit in zip(together, limits, strict=True):
        assert max(len(t.tokens) for t in nbest) == limit
    # Every search ends K hypotheses at its last step, so CTranslate2 drops some (the module
    # docstring): the first sentence's empty output, ours's best, is one of them.
    ours = pytorch.translate(LINES, nbest=2)
    assert ours[0][0].text == "" and together[0][0].text == "Ein Mann mit orangefarbenem"
    assert_same(ours[1:], together[1:])


def test_a_maximum_length_of_zero_gives_the_eos_alone(engines) -> None:
    pytorch, ct2 = (engine.with_decode(max_len_ratio=0.0, max_len_const=0) for engine in engines)
    assert_same(pytorch.translate(LINES[:2]), ct2.translate(LINES[:2]))
    assert ct2.translate(LINES[:1])[0][0].tokens == []


def test_lines_over_the_source_limit_fail_alike(engines) -> None:
    pytorch, ct2 = (engine.with_decode(max_src_pieces=4) for engine in engines)
    errors = []
    for engine in (pytorch, ct2):
        with pytest.raises(SourceTooLong) as caught:
            engine.translate(["Hi.", LINES[1]])
        errors.append((caught.value.index, str(caught.value)))
    assert errors[0] == errors[1] and errors[0][0] == 1
    truncated = [e.with_decode(max_src_pieces=4, truncate_src=True) for e in engines]
    assert_same(*(engine.translate(LINES[:2]) for engine in truncated))
    assert truncated[1].translate(LINES[:2])[1][0].truncated_from > 4


def test_empty_lines_need_no_engine(engines) -> None:
    assert engines[1].translate(["", "   "], nbest=2) == engines[0].translate(["", "   "], nbest=2)


def test_a_search_nobody_waits_for_stops(engines) -> None:
    calls = []
    with pytest.raises(Stopped):
        engines[1].translate(LINES, should_stop=lambda: calls.append(1) or True)
    assert calls == [1]


def test_options_ctranslate2_lacks_are_refused(engines) -> None:
    with pytest.raises(UserError, match="max_piece_repeat"):
        engines[1].with_decode(max_piece_repeat=2)
    off = r"use --engine pytorch, or --no-keep-numbers to decode without it"
    with pytest.raises(UserError, match=r"decode.keep_numbers \(--keep-numbers\).*" + off):
        engines[1].with_decode(keep_numbers=True)
    with pytest.raises(UserError, match="PyTorch engine"):
        engines[1].translate(LINES[:1], need_attention=True)
    with pytest.raises(UserError, match="beam size 9000"):
        engines[1].translate(LINES[:1], beam_size=9000)


def random_model(pre_norm: bool, tie: bool) -> Inference:
    """A random tiny Transformer on the shipped en-de tokenizer: post-norm and untied weights
    too, which no shipped model has."""
    shipped = load_model(EN_DE)
    config = shipped.config.to_dict()
    config["model"].update(
        embed_dim=32, ffn_size=48, num_heads=2, encoder_layers=2, decoder_layers=3
    )
    config["model"].update(pre_norm=pre_norm, share_embeddings=tie, tie_output=tie)
    config["decode"]["precision"] = "fp32"
    cfg = config_from_dict(config)
    torch.manual_seed(0)
    vocab = shipped.src_tokenizer.vocab_size
    model = build_model(cfg.model, vocab, vocab, True, verbose=False).eval()
    return Inference(model, cfg, shipped.src_tokenizer, shipped.tgt_tokenizer, step=1)


@pytest.mark.parametrize(
    ("pre_norm", "tie"), [(True, True), (False, False)], ids=["pre-norm", "post-norm-untied"]
)
def test_the_converter_keeps_the_architecture(pre_norm: bool, tie: bool) -> None:
    inference = random_model(pre_norm, tie)
    pytorch = Translator.from_inference(inference, "cpu").with_decode(max_len_const=4)
    ct2 = translator_from_inference(inference).with_decode(max_len_const=4)
    assert_same(pytorch.translate(LINES[:3], nbest=2), ct2.translate(LINES[:3], nbest=2))


def test_byte_pieces_convert_and_decode_alike(tmp_path: Path) -> None:
    """A vocabulary with byte fallback (256 pieces <0x00> ... <0xFF>) converts as it is, and
    CTranslate2's output pieces decode through our sentencepiece model as PyTorch's do."""
    shipped = random_model(True, True)
    text = [line for line in LINES for _ in range(20)]
    tokenizer = Tokenizer.train(text, tmp_path / "spm.model", vocab_size=300)
    vocab = tokenizer.vocab_size
    torch.manual_seed(0)
    model = build_model(shipped.config.model, vocab, vocab, True, verbose=False).eval()
    inference = Inference(model, shipped.config, tokenizer, tokenizer, step=1)
    lines = ["Two dogs 🐕🐕 play in the snow in 東京.", "Привет!"]
    pytorch = Translator.from_inference(inference, "cpu").with_decode(max_len_const=6)
    ct2 = translator_from_inference(inference).with_decode(max_len_const=6)
    expected = pytorch.translate(lines, nbest=2)
    assert any(piece.startswith("<0x") for n in expected for t in n for piece in t.tgt_pieces)
    assert_same(expected, ct2.translate(lines, nbest=2))


def test_the_position_table_interleaves_sines_and_cosines() -> None:
    table = position_table(4, 3)
    assert table.shape == (3, 4)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    expected = [torch.sin(torch.tensor(2.0)), torch.cos(torch.tensor(2.0))]
    assert table[2, :2].tolist() == pytest.approx([float(x) for x in expected], abs=1e-6)
    ours = PositionalEncoding(128)(torch.arange(1024)).numpy()
    assert table.dtype == np.float32
    assert np.abs(position_table(128) - ours).max() <= 1e-4  # float32 sin/cos of angles < 1024


# --- Converting without torch -------------------------------------------------------------


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_the_weights_read_without_torch_are_the_pytorch_ones(name: str) -> None:
    """Every array of the shipped file, bf16 widened with numpy, equals the state dict's
    (torch's bf16 -> fp32), tied names included; so do the converted model's variables."""
    inference = load_model(name)
    expected = state_arrays(inference.model)
    weights = read_weights(SHIPPED_MODELS / name / WEIGHTS)
    assert sorted(weights) == sorted(expected)
    for key, array in expected.items():
        assert weights[key].dtype == np.float32 and np.array_equal(weights[key], array), key
    assert weights["src_embed.weight"] is weights["output.weight"]
    tokenizers = (inference.src_tokenizer, inference.tgt_tokenizer)
    theirs = transformer_spec(weights, inference.config, *tokenizers).variables()
    ours = transformer_spec(expected, inference.config, *tokenizers).variables()
    assert sorted(theirs) == sorted(ours)
    for key, variable in ours.items():  # an array, or the name of the variable it aliases
        if isinstance(variable, str):
            assert theirs[key] == variable
        else:
            assert np.array_equal(theirs[key].numpy(), variable.numpy()), key


def test_a_model_converted_without_torch_translates_the_same(engines) -> None:
    description = read_description(SHIPPED_MODELS / EN_DE)
    description.config.decode.precision = "fp32"
    weights = read_weights(SHIPPED_MODELS / EN_DE / WEIGHTS)
    ct2 = translator_from_weights(
        weights, description.config, description.src_tokenizer, description.tgt_tokenizer
    )
    expected, got = engines[1].translate(LINES, nbest=3), ct2.translate(LINES, nbest=3)
    assert [[(t.tokens, t.score) for t in n] for n in got] == [
        [(t.tokens, t.score) for t in n] for n in expected
    ]


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("one layer more", r"\(encoder_layers.4.ffn.linear1.bias: missing\)"),
        ("a stray array", r"\(extra.weight: unknown\)"),
        ("another shape", r"\(decoder_norm.bias: \[127\], not \[128\]\)"),
    ],
)
def test_weights_that_do_not_fit_the_configuration_are_one_line(how: str, message: str) -> None:
    description = read_description(SHIPPED_MODELS / EN_DE)
    weights = read_weights(SHIPPED_MODELS / EN_DE / WEIGHTS)
    if how == "one layer more":
        description.config.model.encoder_layers += 1
    elif how == "a stray array":
        weights["extra.weight"] = np.zeros(3, dtype=np.float32)
    else:
        weights["decoder_norm.bias"] = weights["decoder_norm.bias"][:-1]
    tokenizers = (description.src_tokenizer, description.tgt_tokenizer)
    with pytest.raises(UserError, match="the weights are not those of transformer-tiny " + message):
        transformer_spec(weights, description.config, *tokenizers)


def test_f32_and_f16_tensors_load_through_safetensors(tmp_path: Path) -> None:
    arrays = {"a": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}
    arrays["b"] = np.array([0.5, -1.25, 3.0], dtype=np.float16)
    safetensors.numpy.save_file(arrays, tmp_path / "w.safetensors")
    weights = read_weights(tmp_path / "w.safetensors")
    assert weights["a"].tolist() == arrays["a"].tolist()
    assert weights["b"].dtype == np.float32 and weights["b"].tolist() == [0.5, -1.25, 3.0]


def bf16_file(path: Path) -> bytes:
    """The bytes of a small safetensors file of two bf16 tensors, "a" (2, 3) and "b" (4,)."""
    tensors = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([0.1, -2.0, 1e30, -0.0])}
    safetensors.torch.save_file({k: t.bfloat16() for k, t in tensors.items()}, path)
    return path.read_bytes()


def with_header(data: bytes, change: dict) -> bytes:
    """`data` (a safetensors file) with its JSON header updated by `change`."""
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + size])
    for name, fields in change.items():
        header[name].update(fields)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data[8 + size :]


def test_bf16_is_widened_as_torch_does(tmp_path: Path) -> None:
    bf16_file(tmp_path / "w.safetensors")
    weights = read_weights(tmp_path / "w.safetensors")
    expected = safetensors.torch.load_file(tmp_path / "w.safetensors")
    for name, tensor in expected.items():
        assert np.array_equal(weights[name], tensor.float().numpy())
    assert weights["b"].tolist()[1:] == [-2.0, float(torch.tensor(1e30).bfloat16()), -0.0]


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("truncated", "not a readable safetensors file"),
        ("bad header", "not a readable safetensors file"),
        ("huge header size", "not a readable safetensors file"),
        ("wrong dtype", "a is I16, not a float weight"),
        ("offsets out of range", "not a readable safetensors file"),
        ("shape and size differ", "not a readable safetensors file"),
        ("empty", "not a readable safetensors file"),
    ],
)
def test_a_damaged_safetensors_file_is_one_line(tmp_path: Path, how: str, message: str) -> None:
    path = tmp_path / "w.safetensors"
    data = bf16_file(path)
    damaged = {
        "truncated": data[:-3],
        "bad header": data[:8] + b"[" + data[9:],
        "huge header size": struct.pack("<Q", 1 << 40) + data[8:],
        "wrong dtype": with_header(data, {"a": {"dtype": "I16"}}),
        "offsets out of range": with_header(data, {"b": {"data_offsets": [12, 1 << 20]}}),
        "shape and size differ": with_header(data, {"a": {"shape": [3, 3]}}),
        "empty": b"",
    }[how]
    assert damaged != data
    path.write_bytes(damaged)
    with pytest.raises(UserError, match=message) as caught:
        read_weights(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


# --- Exported folders ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ct2") / "en-de"
    export_command.main(["--model", EN_DE, "--format", "ctranslate2", "--out", str(out)])
    return out


def test_export_then_load_gives_the_same_translations(exported: Path, engines) -> None:
    names = sorted(path.name for path in exported.iterdir())
    assert names == [
        "card.json",
        "config.json",
        MANIFEST,
        "model.bin",
        "model.json",
        "sentencepiece.model",
        "shared_vocabulary.json",
    ]
    assert (exported / "card.json").read_bytes() == (
        SHIPPED_MODELS / EN_DE / "card.json"
    ).read_bytes()
    model = seq2seq.load(exported, engine="ctranslate2", precision="fp32")
    assert isinstance(model.translator, CTranslate2Translator) and model.inference is None
    assert (model.src, model.tgt) == ("en", "de")
    assert_same(engines[1].translate(LINES, nbest=2), model.translate(LINES, nbest=2))
    with pytest.raises(UserError, match="PyTorch engine"):
        model.attention(LINES[0])


def test_a_gru_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="CTranslate2 has no recurrent models"):
        export_ctranslate2(load_model("gru-small.multi30k.en-de"), tmp_path / "gru")
    assert not (tmp_path / "gru").exists()


def damage(folder: Path, how: str) -> None:
    """Spoil a copied CTranslate2 folder in one way."""
    manifest = json.loads((folder / MANIFEST).read_text())
    if how == "flipped byte":
        data = bytearray((folder / "model.bin").read_bytes())
        data[len(data) // 2] ^= 1
        (folder / "model.bin").write_bytes(bytes(data))
    elif how == "extra file":
        (folder / "sitecustomize.py").write_text("raise SystemExit('ran')\n")
    elif how == "link":
        (folder / "model.bin").unlink()
        (folder / "model.bin").symlink_to(SHIPPED_MODELS / EN_DE / "model.safetensors")
    elif how == "path in manifest":
        manifest["sha256"]["../model.bin"] = manifest["sha256"].pop("model.bin")
    elif how in ("config", "vocabulary"):  # changed, the manifest made to match
        name = "config.json" if how == "config" else "shared_vocabulary.json"
        content = json.loads((folder / name).read_text())
        if how == "config":
            content["add_source_bos"] = True
        else:
            content[5], content[6] = content[6], content[5]
        (folder / name).write_text(json.dumps(content))
        manifest["sha256"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    elif how == "decode value":  # model.json's batch_size 0, the manifest made to match
        description = json.loads((folder / "model.json").read_text())
        description["config"]["decode"]["batch_size"] = 0
        (folder / "model.json").write_text(json.dumps(description))
        manifest["sha256"]["model.json"] = sha256_file(folder / "model.json")
    elif how in ("big vocabulary", "big model.bin"):  # sparse: no disk used
        name, size = ("shared_vocabulary.json", MAX_TOKENIZER_BYTES + 1)
        if how == "big model.bin":
            name, size = "model.bin", MAX_WEIGHTS_BYTES + 1
        os.truncate(folder / name, size)
        manifest["sha256"][name] = sha256_file(folder / name) if how == "big vocabulary" else ""
    elif how == "big manifest":
        os.truncate(folder / MANIFEST, MAX_DESCRIPTION_BYTES + 1)
    elif how == "no manifest":
        (folder / MANIFEST).unlink()
    if how not in ("no manifest", "big manifest"):
        (folder / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("flipped byte", "model.bin: damaged"),
        ("extra file", r"unexpected \['sitecustomize.py'\]"),
        ("link", "model.bin: not a plain file"),
        ("path in manifest", "not a seq2seq-ctranslate2/1 manifest"),
        ("config", "config.json: not a configuration"),
        ("vocabulary", "not the vocabulary of the sentencepiece model"),
        ("no manifest", "not an exported model folder"),
        ("decode value", r"model.json: decode.batch_size=0: must be in \[1, 100000\]$"),
        ("big manifest", "ctranslate2.json: 1,048,577 bytes, over the limit of 1,048,576$"),
        ("big vocabulary", "vocabulary.json: 67,108,865 bytes, over the limit of 67,108,864$"),
        ("big model.bin", "model.bin: 17,179,869,185 bytes, over the limit of 17,179,869,184$"),
    ],
)
def test_bad_folders_are_refused_before_ctranslate2_reads_them(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, message: str
) -> None:
    folder = tmp_path / "bad"
    shutil.copytree(exported, folder)
    damage(folder, how)
    ctranslate2 = import_ctranslate2()

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("ctranslate2 read a folder that was not checked")

    monkeypatch.setattr(ctranslate2, "Translator", never)
    with pytest.raises(UserError, match=message) as caught:
        seq2seq.load(folder, engine="ctranslate2")
    assert "\n" not in str(caught.value)


def test_a_model_that_keeps_numbers_opens_on_ctranslate2_only_without_the_guard() -> None:
    """The Tatoeba models keep numbers by default (decode.keep_numbers), a rule CTranslate2
    lacks: the engine is refused in one line naming the way out, which works."""
    name = TATOEBA_EN_FR
    with pytest.raises(UserError, match=r"--no-keep-numbers to decode without it"):
        seq2seq.load(name, device="cpu", engine="ctranslate2")
    model = seq2seq.load(name, device="cpu", engine="ctranslate2", keep_numbers=False)
    assert not model.translator.decode_cfg.keep_numbers
    assert isinstance(model.translator, CTranslate2Translator)
    with pytest.raises(ValueError, match="keep_numbers: 'no' is not True or False"):
        seq2seq.load(name, device="cpu", keep_numbers="no")


GUARD_REFUSED = (
    "error: --format ctranslate2: the model keeps numbers (decode.keep_numbers, the number guard), "
    "which CTranslate2 cannot run; pass --no-keep-numbers to export it without the guard (its "
    "card then says so)\n"
)


@pytest.mark.parametrize(
    ("model", "options", "error"),
    [
        (TATOEBA_EN_FR, ["--format", "ctranslate2"], GUARD_REFUSED),
        (EN_DE, ["--format", "ctranslate2", "--keep-numbers"], GUARD_REFUSED),
        (
            EN_DE,
            ["--no-keep-numbers"],
            "error: --no-keep-numbers: only with --format ctranslate2\n",
        ),
    ],
)
def test_an_export_that_would_drop_the_number_guard_unsaid_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, model: str, options: list[str], error: str
) -> None:
    """CTranslate2 has no number guard: a model that keeps numbers exports to it only with
    --no-keep-numbers, else one line and exit status 2, and nothing is written."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        seq2seq.commands.main(["export", "--model", model, *options, "--out", str(out)])
    assert exit_info.value.code == 2
    assert capsys.readouterr() == ("", error)
    assert list(tmp_path.iterdir()) == []


def test_a_model_exported_without_its_number_guard_says_so_on_its_card(tmp_path: Path) -> None:
    """--no-keep-numbers: the folder decodes without the guard, and its card says so (keep_numbers
    false, number_guard saying why) where the rest is the shipped card's."""
    out = tmp_path / "en-fr"
    export_command.main(
        [
            "--model",
            TATOEBA_EN_FR,
            "--format",
            "ctranslate2",
            "--no-keep-numbers",
            "--out",
            str(out),
        ]
    )
    config, _, _ = check_folder(out)
    assert not config.decode.keep_numbers and config.decode.beam_size == 5
    shipped = json.loads((SHIPPED_MODELS / TATOEBA_EN_FR / CARD).read_text(encoding="utf-8"))
    card = json.loads((out / CARD).read_text(encoding="utf-8"))
    assert shipped["keep_numbers"] is True
    assert card == shipped | {"keep_numbers": False, "number_guard": GUARD_DROPPED}
    assert ModelResult.load(out / CARD).number_guard.startswith("not in this folder: ")
    assert seq2seq.load(out, engine="ctranslate2").translate(["Where is the train station?"]) == [
        "Où est la gare ?"
    ]


def test_a_model_without_the_number_guard_keeps_its_card_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "en-de"
    options = ["--format", "ctranslate2", "--no-keep-numbers", "--out", str(out)]
    export_command.main(["--model", EN_DE, *options])
    assert (out / CARD).read_bytes() == (SHIPPED_MODELS / EN_DE / CARD).read_bytes()


def test_the_server_refuses_the_number_guard_on_ctranslate2(served) -> None:
    with TestClient(create_app(served, Limits())) as client:
        answer, off = (
            client.post("/v1/translate", json={"lines": ["It is 12.50."], "keep_numbers": keep})
            for keep in (True, False)
        )
        assert client.get("/v1/models").json()[0]["keep_numbers"] is False
    assert (answer.status_code, answer.json()) == (
        422,
        {"error": f"keep_numbers: {EN_DE} is served on CTranslate2, which has no number guard"},
    )
    assert off.status_code == 200


def test_the_checked_folder_gives_its_configuration(exported: Path) -> None:
    config, src, tgt = check_folder(exported)
    assert config.model.name == "transformer-tiny" and config.data.joint_vocab
    assert (
        src is tgt
        and src.model_bytes == (SHIPPED_MODELS / EN_DE / "sentencepiece.model").read_bytes()
    )


# --- The engine choice --------------------------------------------------------------------


def test_auto_picks_ctranslate2_only_where_it_gives_the_same(en_de: Inference) -> None:
    assert use_ctranslate2("auto", en_de.config)
    assert not use_ctranslate2("auto", en_de.config, need_attention=True)
    for option in ("max_piece_repeat", "keep_numbers"):
        config = copy.deepcopy(en_de.config)
        setattr(config.decode, option, 1)
        assert not use_ctranslate2("auto", config)
    gru = load_model("gru-small.multi30k.en-de")
    assert not use_ctranslate2("auto", gru.config)
    assert use_ctranslate2("ctranslate2", gru.config) and not use_ctranslate2("pytorch", gru.config)


def test_a_missing_ctranslate2_is_one_line(monkeypatch: pytest.MonkeyPatch, en_de) -> None:
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    with pytest.raises(UserError, match="ctranslate2 cannot be imported") as caught:
        import_ctranslate2()
    assert "\n" not in str(caught.value)
    assert not use_ctranslate2("auto", en_de.config)


# --- Every shipped Transformer on the test set (slow) ---------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", TRANSFORMERS)
def test_every_shipped_transformer_matches_on_the_test_set(name: str, shared_data: Path) -> None:
    """On 200 test sentences the best outputs agree on at least 99%, every difference comes
    from the maximum-length rule, and the n-best lists agree on at least 95%."""
    inference = fp32(name)
    pytorch = Translator.from_inference(inference, "cpu")
    ct2 = translator_from_inference(inference)
    lines = shipped_test_pairs(name, shared_data, 200)[0]
    ours, theirs = pytorch.translate(lines, nbest=3), ct2.translate(lines, nbest=3)
    limits = ct2.max_lengths(ct2.src_tokenizer.encode(lines))
    differences = [
        (line, a[0].text, b[0].text, limit)
        for line, a, b, limit in zip(lines, ours, theirs, limits, strict=True)
        if a[0].text != b[0].text
    ]
    print(f"{name}: {len(differences)} of {len(lines)} differ", *differences, sep="\n")
    assert len(differences) <= len(lines) // 100
    for a, b, limit in zip(ours, theirs, limits, strict=True):
        if a[0].text != b[0].text:
            assert limit in (len(a[0].tokens), len(b[0].tokens))
        elif a[0].score != pytest.approx(b[0].score, abs=SCORE_TOLERANCE):
            pytest.fail(f"scores {a[0].score} and {b[0].score} of {a[0].text!r}")
    same_lists = sum(
        [t.text for t in a] == [t.text for t in b] for a, b in zip(ours, theirs, strict=True)
    )
    assert same_lists >= 0.95 * len(lines)


# --- Serving ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(en_de: Inference) -> dict[str, ServedModel]:
    return {EN_DE: served_model(EN_DE, en_de, torch.device("cpu"), ctranslate2=True)}


def test_the_server_answers_concurrent_requests_through_ctranslate2(served, engines) -> None:
    """Concurrent single-line requests, batched by the server, get what a direct call
    gives; the explorer's maps still come from PyTorch."""
    assert isinstance(served[EN_DE].translator, CTranslate2Translator)
    expected = engines[1].translate(LINES, nbest=2)
    with TestClient(create_app(served, Limits())) as client:
        assert client.get("/v1/models").json()[0]["precision"] == "fp32"
        with ThreadPoolExecutor(len(LINES)) as pool:
            answers = list(
                pool.map(
                    lambda line: client.post("/v1/translate", json={"lines": [line], "nbest": 2}),
                    LINES,
                )
            )
        explained = client.post("/v1/explain", json={"text": LINES[0], "nbest": 2})
        too_long = client.post("/v1/translate", json={"lines": ["a " * 300]})
    for answer, nbest in zip(answers, expected, strict=True):
        assert answer.status_code == 200
        got = answer.json()["translations"][0]
        assert [h["text"] for h in got] == [t.text for t in nbest]
        assert [h["score"] for h in got] == pytest.approx([t.score for t in nbest], abs=1e-4)
    assert explained.status_code == 200, explained.text
    hypotheses = explained.json()["hypotheses"]
    assert [h["text"] for h in hypotheses] == [t.text for t in expected[0]]
    assert "maps" in hypotheses[0]
    assert too_long.status_code == 413 and "over the limit of 256 pieces" in too_long.text


def test_a_folder_is_served_without_an_explorer(exported: Path, en_de: Inference) -> None:
    """A CTranslate2 folder has no PyTorch model: the explorer's routes answer 409 in one line
    saying what to serve instead, on a server of folders alone and beside a PyTorch model, and
    the self-attention chapter computes over the PyTorch model only."""
    args = serve_command.parse_args(["--model", str(exported), "--engine", "ctranslate2"])
    folder_only = serve_command.load_models(args)
    assert list(folder_only) == ["en-de"] and folder_only["en-de"].pytorch is None
    both = {**folder_only, EN_DE: served_model(EN_DE, en_de, torch.device("cpu"))}
    with TestClient(create_app(folder_only)) as client:
        info = client.get("/v1/models").json()[0]
        page = client.get("/")
        explain = client.post("/v1/explain", json={"text": LINES[0]})
        align = client.post("/v1/align", json={"pairs": [{"source": LINES[0]}]})
        html = client.post("/v1/translate", json={"lines": ["<b>A</b> dog."], "format": "html"})
        libre = {"q": "<b>A</b> dog.", "source": "en", "target": "de", "format": "html"}
        libre_html = client.post("/translate", json=libre)
    for answer in (html, libre_html):
        assert answer.status_code == 409
        assert answer.json() == {
            "error": "format html: word alignments come from the PyTorch model, and en-de is a "
            "CTranslate2 folder"
        }
    with TestClient(create_app(both)) as client:
        explain_folder = client.post("/v1/explain", json={"model": "en-de", "text": LINES[0]})
        chapter = client.post("/v1/chapters/self_attention", json={"text": LINES[3]})
        chapter_folder = client.post(
            "/v1/chapters/self_attention", json={"model": "en-de", "text": LINES[3]}
        )
        pair = {"source": LINES[0], "target": LINES[0]}
        align_folder = client.post("/v1/align", json={"model": "en-de", "pairs": [pair]})
    assert chapter.status_code == 200, chapter.text
    assert (chapter.json()["model"], chapter.json()["models"]) == (EN_DE, [EN_DE])
    assert info["parameters"] == sum(p.numel() for p in en_de.model.parameters())
    assert (info["precision"], info["scores"]["bleu"]) == ("fp32", pytest.approx(40.03, abs=0.01))
    for answer in (page, explain, explain_folder, chapter_folder, align, align_folder):
        assert answer.status_code == 409
        assert answer.json() == {"error": NO_EXPLORER.format(name="en-de")}


def test_a_shipped_model_is_served_converted_with_engine_ctranslate2(en_de: Inference) -> None:
    """--engine ctranslate2 converts a shipped Transformer without torch (no explorer, the
    parameters counted from its file); --engine auto keeps PyTorch beside it for the explorer."""
    args = serve_command.parse_args(["--model", EN_DE, "--engine", "ctranslate2"])
    served = serve_command.load_models(args)[EN_DE]
    assert isinstance(served.translator, CTranslate2Translator) and served.pytorch is None
    assert served.parameters == sum(p.numel() for p in en_de.model.parameters())
    assert served.scores is not None and served.translator.precision == "fp32"
    args = serve_command.parse_args(["--model", EN_DE, "--engine", "auto"])
    served = serve_command.load_models(args)[EN_DE]
    assert isinstance(served.translator, CTranslate2Translator) and served.pytorch is not None


# The seq2seq command in a child Python that says on its last stderr line, at exit, whether torch
# was ever imported.
WITHOUT_TORCH = """
import atexit, sys
atexit.register(lambda: print(f"torch imported: {'torch' in sys.modules}", file=sys.stderr))
from seq2seq.commands import main
main(sys.argv[1:])
"""


def model_and_name(which: str, exported: Path) -> tuple[str, str]:
    """The --model of a CTranslate2 folder or of the shipped model it was exported from (which
    --engine ctranslate2 converts without torch), and the name it is served under."""
    return (str(exported), "en-de") if which == "folder" else (EN_DE, EN_DE)


@pytest.mark.slow  # starts a Python that serves
@pytest.mark.parametrize("which", ["folder", "shipped"])
def test_a_server_of_folders_never_imports_torch(exported: Path, engines, which: str) -> None:
    """Every route but the explorer's answers, translations equal the PyTorch engine's, and
    neither the interpreter's modules nor the process's memory map ever held torch."""
    model, name = model_and_name(which, exported)
    command = [sys.executable, "-c", WITHOUT_TORCH, "serve", "--port", "0", "--log-level", "error"]
    process = subprocess.Popen(
        [*command, "--model", model, "--engine", "ctranslate2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = process.stdout.readline()
    url = first.split(" on ")[-1].strip()
    try:
        assert first.startswith(f"serving {name} on "), first + process.stderr.read()
        answers = [
            httpx2.post(f"{url}/v1/translate", json={"lines": [line]}, timeout=60) for line in LINES
        ]
        libre = httpx2.post(
            f"{url}/translate", json={"q": LINES[0], "source": "en", "target": "de"}
        )
        gets = {path: httpx2.get(url + path) for path in ("/v1/models", "/healthz", "/metrics")}
        docs = httpx2.get(f"{url}/docs")
        explorer = httpx2.get(url)
        maps = Path(f"/proc/{process.pid}/maps")
        libraries = maps.read_text() if maps.exists() else ""
    finally:
        assert stop_server(process) == 0
    expected = [nbest[0].text for nbest in engines[0].translate(LINES)]
    assert [answer.json()["translations"][0][0]["text"] for answer in answers] == expected
    assert libre.json() == {"translatedText": expected[0]}
    assert all(answer.status_code == 200 for answer in gets.values())
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    assert explorer.status_code == 409
    assert "libtorch" not in libraries and "libctranslate2" in libraries
    assert process.stderr.read().splitlines()[-1] == "torch imported: False"


@pytest.mark.slow  # starts Pythons that translate
@pytest.mark.parametrize("which", ["folder", "shipped"])
def test_translating_with_a_folder_never_imports_torch(
    exported: Path, engines, tmp_path: Path, which: str
) -> None:
    python = [sys.executable, "-c", WITHOUT_TORCH]
    model = ["--model", model_and_name(which, exported)[0], "--engine", "ctranslate2"]
    done = subprocess.run(
        [*python, "translate", *model],
        input="\n".join(LINES) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [nbest[0].text for nbest in engines[0].translate(LINES)]
    assert done.stderr.splitlines()[-1] == "torch imported: False"
    (tmp_path / "src.en").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (tmp_path / "ref.de").write_text(done.stdout, encoding="utf-8")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de"), "--json"]
    scored = subprocess.run(
        [*python, "evaluate", *model, *files], capture_output=True, text=True, timeout=120
    )
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["bleu"] == pytest.approx(100.0)
    assert scored.stderr.splitlines()[-1] == "torch imported: False"


@pytest.mark.slow  # starts a Python that translates the test set
def test_evaluating_a_prepared_split_never_imports_torch(
    multi30k_en_de: Path, tmp_path: Path
) -> None:
    """`seq2seq evaluate --split test` reads the split's lines from the prepared folder that the
    model's configuration names (data/multi30k.en-de, from the working directory): the card's
    BLEU, and no torch."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi30k.en-de").symlink_to(multi30k_en_de)
    command = ["evaluate", "--model", EN_DE, "--engine", "ctranslate2", "--split", "test"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *command, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    card = json.loads((SHIPPED_MODELS / EN_DE / CARD).read_text(encoding="utf-8"))
    assert json.loads(done.stdout)["bleu"] == pytest.approx(card["bleu"], abs=0.01)
    assert done.stderr.splitlines()[-1] == "torch imported: False"


# seq2seq.load in a child Python: argv model, engine; prints what it translates LINES to, what
# attention() gives (its target pieces, or the error) and whether torch was imported.
API_IN_A_CHILD = """
import json, sys
import seq2seq
model = seq2seq.load(sys.argv[1], device="cpu", precision="fp32", engine=sys.argv[2])
translations = model.translate(json.loads(sys.argv[3]))
try:
    attention = model.attention("Two dogs play in the snow.").translation.tgt_pieces
except seq2seq.errors.UserError as err:
    attention = str(err)
print(json.dumps([translations, attention, "torch" in sys.modules]))
"""


@pytest.mark.slow  # starts Pythons that translate
@pytest.mark.parametrize(
    ("which", "engine", "imports_torch"),
    [
        ("folder", "ctranslate2", False),
        ("shipped", "ctranslate2", False),
        ("shipped", "auto", False),
        ("shipped", "pytorch", True),
    ],
)
def test_the_api_on_ctranslate2_never_imports_torch(
    exported: Path, engines, which: str, engine: str, imports_torch: bool
) -> None:
    """seq2seq.load(..., engine="ctranslate2") opens a folder or a shipped Transformer without
    torch, as the command line does, and translates as the PyTorch engine; attention() then
    asks for the PyTorch engine. engine="pytorch" imports torch."""
    model = model_and_name(which, exported)[0]
    done = subprocess.run(
        [sys.executable, "-c", API_IN_A_CHILD, model, engine, json.dumps(LINES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    translations, attention, torch_imported = json.loads(done.stdout)
    assert translations == [nbest[0].text for nbest in engines[0].translate(LINES)]
    assert torch_imported is imports_torch
    if imports_torch:
        assert attention == ["▁Zwei", "▁Hunde", "▁spielen", "▁im", "▁Schnee", ".", "</s>"]
    else:
        assert attention == "attention maps: from the PyTorch engine only; use engine='pytorch'"
