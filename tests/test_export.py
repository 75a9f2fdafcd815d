"""Exported model folders (seq2seq.decoding.export): safetensors weights, tokenizers and
configuration that load back into the same model, with no pickle anywhere."""

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import torch

from seq2seq.config_file import load_config
from seq2seq.data.corpora import UserFiles
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.export import export_model
from seq2seq.decoding.model_folder import CARD, WEIGHTS, find_model
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.decoding.open_pytorch import Inference, load_model
from seq2seq.errors import UserError
from seq2seq.models import build_model
from seq2seq.serving.registry import served_name
from tests.test_translate import run, script, write_word_corpus  # noqa: F401 (run: a fixture)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def inference(tmp_path_factory) -> Inference:
    """A randomly initialised tiny Transformer with shared, tied embeddings and its tokenizer."""
    root = tmp_path_factory.mktemp("export")
    files = UserFiles.from_options("en", "de", str(write_word_corpus(root / "corpus")), {})
    folder = prepare(
        "files", "en", "de", root / "prepared", vocab_size=48, byte_fallback=False, files=files
    )
    data = PreparedData.load(folder)
    overrides = {"data.prepared": str(folder), "model.embed_dim": 32, "model.ffn_size": 64}
    cfg = load_config(None, [f"{key}={json.dumps(value)}" for key, value in overrides.items()])
    torch.manual_seed(0)
    model = build_model(
        cfg.model,
        data.src_tokenizer.vocab_size,
        data.tgt_tokenizer.vocab_size,
        data.joint,
        verbose=False,
    )
    return Inference(model.eval(), cfg, data.src_tokenizer, data.tgt_tokenizer, step=7)


def logits(inference: Inference) -> torch.Tensor:
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    tgt_in = torch.tensor([[2, 10, 11], [2, 12, 0]])
    with torch.no_grad():
        return inference.model(src, torch.tensor([4, 3]), tgt_in)


def test_fp32_export_loads_back_to_the_same_model(inference, tmp_path):
    export_model(inference, tmp_path / "m", torch.float32)
    loaded = load_model(tmp_path / "m")
    assert torch.equal(logits(loaded), logits(inference))
    assert loaded.step == 7 and loaded.config.to_dict() == inference.config.to_dict()
    assert loaded.src_tokenizer.model_bytes == inference.src_tokenizer.model_bytes
    assert loaded.src_tokenizer is loaded.tgt_tokenizer  # joint vocabulary: one file
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "model.json",
        "model.safetensors",
        "sentencepiece.model",
    ]


def test_bf16_export_holds_rounded_weights_stored_once(inference, tmp_path):
    export_model(inference, tmp_path / "m")
    weights = tmp_path / "m" / WEIGHTS
    header_size = struct.unpack("<Q", weights.read_bytes()[:8])[0]
    header = json.loads(weights.read_bytes()[8 : 8 + header_size])
    dtypes = {entry["dtype"] for name, entry in header.items() if name != "__metadata__"}
    assert dtypes == {"BF16"}
    # shared source/target embeddings and the tied output layer: one tensor in the file
    tensors = [name for name in header if name != "__metadata__"]
    expected = {name for name, _ in inference.model.named_parameters()}
    assert len(tensors) == len(expected) < len(inference.model.state_dict())
    loaded = load_model(tmp_path / "m")
    for (name, original), (_, restored) in zip(
        inference.model.state_dict().items(), loaded.model.state_dict().items(), strict=True
    ):
        assert restored.dtype == torch.float32, name
        assert torch.equal(restored, original.to(torch.bfloat16).float()), name


def test_reexport_keeps_the_card_and_replaces_the_rest(inference, tmp_path):
    export_model(inference, tmp_path / "m")
    (tmp_path / "m" / "card.json").write_text('{"bleu": 1.0}', encoding="utf-8")
    export_model(inference, tmp_path / "m", torch.float32)
    assert (tmp_path / "m" / "card.json").read_text(encoding="utf-8") == '{"bleu": 1.0}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary folder left


def test_find_model_by_path_or_name(inference, tmp_path):
    export_model(inference, tmp_path / "models" / "tiny")
    assert find_model("tiny", tmp_path / "models") == tmp_path / "models" / "tiny"
    assert find_model(str(tmp_path / "models" / "tiny"), ROOT) == tmp_path / "models" / "tiny"
    with pytest.raises(
        UserError,
        match=r"--model nope: not an exported model folder; "
        r"shipped models: tiny$",
    ):
        find_model("nope", tmp_path / "models")


def test_broken_folders_are_one_line_errors(inference, tmp_path):
    export_model(inference, tmp_path / "m")
    (tmp_path / "m" / WEIGHTS).write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(UserError, match=r"model.safetensors: weights do not load"):
        load_model(tmp_path / "m")
    (tmp_path / "m" / "model.json").write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match=r"model.json: unreadable model description"):
        load_model(tmp_path / "m")


def test_export_script_refuses_to_replace_another_folder(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine", encoding="utf-8")
    result = script("export", "--checkpoint", "x.pt", "--out", str(tmp_path / "notes"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --out {tmp_path / 'notes'}: exists and is not an exported model folder; "
        "not replacing it"
    ]
    assert (tmp_path / "notes" / "a.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.slow  # decodes or exports with the command
def test_scripts_take_an_exported_model_like_its_checkpoint(run, tmp_path):  # noqa: F811
    """translate.py and evaluate.py --model FOLDER give what --checkpoint gives (fp32 export)."""
    export_model(load_model(run / "best.pt"), tmp_path / "m", torch.float32)
    lines = "A dog runs.\nThe old tree sleeps.\n\nBig cat."
    by_checkpoint = script("translate", "--checkpoint", str(run / "best.pt"), stdin=lines)
    by_model = script("translate", "--model", str(tmp_path / "m"), stdin=lines)
    assert by_model.returncode == 0, by_model.stderr
    assert by_model.stdout == by_checkpoint.stdout and by_model.stdout.count("\n") == 4

    scores = [
        json.loads(script("evaluate", option, str(path), "--json").stdout)
        for option, path in (("--checkpoint", run / "best.pt"), ("--model", tmp_path / "m"))
    ]
    assert scores[1]["bleu"] == scores[0]["bleu"] and scores[1]["chrf"] == scores[0]["chrf"]

    both = script("translate", "--model", "m", "--checkpoint", "x.pt", stdin="")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_load_model_takes_a_checkpoint_a_folder_or_a_shipped_name(run, tmp_path):  # noqa: F811
    checkpoint = load_model(run / "best.pt")
    assert checkpoint.path == run / "best.pt" and checkpoint.card is None
    assert served_name(checkpoint) == f"{run.name}/best"
    export_model(checkpoint, tmp_path / "m", torch.float32)
    exported = load_model(tmp_path / "m")
    assert exported.path == tmp_path / "m" and exported.card == tmp_path / "m" / CARD
    assert served_name(exported) == "m" and exported.step == checkpoint.step
    assert torch.equal(logits(exported), logits(checkpoint))
    shipped = load_model("transformer-tiny.multi30k.en-de")
    assert shipped.path == SHIPPED_MODELS / "transformer-tiny.multi30k.en-de"
    renamed = tmp_path / "best-checkpoint"  # a checkpoint file without the .pt suffix
    shutil.copyfile(run / "best.pt", renamed)
    assert torch.equal(logits(load_model(renamed)), logits(checkpoint))
    with pytest.raises(UserError, match=r"m: a folder, not a checkpoint file$"):
        load_model(tmp_path / "m", kind="checkpoint")
    with pytest.raises(UserError, match=r"best.pt: not an exported model folder"):
        load_model(run / "best.pt", kind="exported")


@pytest.mark.slow  # decodes or exports with the command
def test_export_goes_to_an_ignored_folder_by_default(run, tmp_path, monkeypatch):  # noqa: F811
    """Without --out the model goes to exported/<run folder>, which git ignores: an export
    never shows up as untracked beside the shipped models."""
    monkeypatch.chdir(tmp_path)
    result = script("export", "--checkpoint", str(run / "best.pt"))
    assert result.returncode == 0, result.stderr
    folder = Path("exported") / run.name
    assert (
        result.stdout.startswith(f"exported {run / 'best.pt'} (step ")
        and f"to {folder}:" in result.stdout
    )
    assert (tmp_path / folder / WEIGHTS).is_file()
    ignored = subprocess.run(["git", "check-ignore", "-q", str(folder / WEIGHTS)], cwd=ROOT)
    assert ignored.returncode == 0, f"{folder} is not ignored by git"
