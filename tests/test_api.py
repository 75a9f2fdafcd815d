"""The Python API (seq2seq.load) does what docs/api.md shows: its examples run as written."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import seq2seq
from seq2seq.decoding.torch_translator import Translator

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "api.md").read_text(), re.S | re.M)


@pytest.mark.slow  # starts a Python that imports torch
def test_the_docs_examples_run_from_another_folder(tmp_path: Path) -> None:
    """All examples of the page, in order, as one program."""
    assert len(EXAMPLES) == 3
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(EXAMPLES)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("en -> de\n")
    assert "▁Hund │" in result.stdout


def test_importing_seq2seq_imports_no_torch() -> None:
    code = "import sys, seq2seq; print('torch' in sys.modules, callable(seq2seq.load))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["False", "True"]


def test_the_api_translates_as_the_translator_does() -> None:
    model = seq2seq.load("transformer-tiny.multi30k.de-en", device="cpu", precision="int8")
    assert model.translator.precision == "int8"
    lines = ["Ein Hund rennt im Schnee.", "Zwei Männer spielen Fußball."]
    plain = Translator.from_inference(model.inference, "cpu")
    assert plain.precision == "int8"
    assert model.translate(lines, beam=3) == [n[0].text for n in plain.translate(lines, 3)]
    with pytest.raises(TypeError, match="list of lines"):
        model.translate("Ein Hund.")


def test_the_gru_gives_its_bahdanau_weights() -> None:
    model = seq2seq.load("gru-small.multi30k.en-de", device="cpu", precision="fp32")
    seen = model.attention("A dog runs in the snow.")
    pieces = len(seen.translation.tgt_pieces), len(seen.translation.src_pieces)
    assert list(seen.maps) == ["bahdanau"] and seen.maps["bahdanau"].shape == pieces
    assert torch.allclose(seen.source_weights().sum(-1), torch.ones(pieces[0]))


def test_a_bad_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="precision 'int4'"):
        seq2seq.load("transformer-tiny.multi30k.en-de", precision="int4")


def test_with_decode_refuses_to_change_the_precision() -> None:
    """The precision chose the model a translator holds (an int8 copy, or an autocast type)."""
    model = seq2seq.load("transformer-tiny.multi30k.en-de", device="cpu", precision="fp32")
    with pytest.raises(ValueError, match="cannot change the precision"):
        model.translator.with_decode(precision="int8")
    assert model.translator.with_decode(beam_size=2).decode_cfg.beam_size == 2
