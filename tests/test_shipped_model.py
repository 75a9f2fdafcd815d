"""The models in the box (models/*): small, free of pickle, usable by name with no training, and
each card's test scores (Multi30k test2016, the Tatoeba test split) reproduced from the shipped
files."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pexpect
import pytest
import torch
from commands import SEQ2SEQ, default_sigint, run_in_process
from fastapi.testclient import TestClient

from seq2seq.commands.translate import load_translator, parse_args
from seq2seq.config import model_preset, model_shape
from seq2seq.config_file import load_config
from seq2seq.data.corpora import domain_of, get_corpus
from seq2seq.decoding.model_folder import CARD, JOINT_TOKENIZER, WEIGHTS, read_description
from seq2seq.decoding.model_result import SHIPPED_MODELS, ModelResult, domain_and_limits
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError
from seq2seq.serving.app import create_app
from seq2seq.serving.limits import Limits
from seq2seq.serving.registry import served_model

ROOT = Path(__file__).resolve().parents[1]


class Shipped(NamedTuple):
    name: str
    src: str
    tgt: str
    sentence: str  # a sentence to translate, and a word its translation must hold
    word: str
    max_bytes: int  # the folder's size limit

    @property
    def corpus(self) -> str:
        return self.name.split(".")[1]


MODELS = [
    Shipped(
        "transformer-tiny.multi30k.en-de", "en", "de", "A dog runs in the snow.", "Hund", 6_000_000
    ),
    Shipped(
        "transformer-tiny.multi30k.de-en", "de", "en", "Ein Hund rennt im Schnee.", "dog", 6_000_000
    ),
    Shipped("gru-small.multi30k.en-de", "en", "de", "A dog runs in the snow.", "Hund", 6_000_000),
    Shipped(
        "transformer-small.tatoeba.en-fr", "en", "fr", "Where is the station?", "gare", 12_000_000
    ),
    Shipped("transformer-small.tatoeba.fr-en", "fr", "en", "Je ne sais pas.", "know", 12_000_000),
]
shipped_models = pytest.mark.parametrize("model", MODELS, ids=[model.name for model in MODELS])


def run_script(name: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`seq2seq NAME ARGS`, in this process (tests/commands.py)."""
    return run_in_process([name, *args], stdin)


@shipped_models
def test_the_folder_is_small_and_holds_no_pickle(model: Shipped) -> None:
    files = {path.name: path.read_bytes() for path in (SHIPPED_MODELS / model.name).iterdir()}
    assert sorted(files) == sorted([WEIGHTS, "model.json", JOINT_TOKENIZER, CARD])
    assert sum(len(data) for data in files.values()) <= model.max_bytes
    header_size = int.from_bytes(files[WEIGHTS][:8], "little")  # safetensors: JSON, then bytes
    header = json.loads(files[WEIGHTS][8 : 8 + header_size])
    dtypes = {entry["dtype"] for key, entry in header.items() if key != "__metadata__"}
    assert dtypes == {"BF16"}
    for data in files.values():  # a pickle starts with its protocol byte, torch.save with a zip
        assert data[:1] != b"\x80" and data[:2] != b"PK"


@pytest.mark.slow  # decodes with the command
@shipped_models
def test_translates_by_name_with_its_attention_map(model: Shipped) -> None:
    result = run_script(
        "translate", "--model", model.name, "--show-attention", stdin=model.sentence + "\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and model.word in result.stdout
    rows = [line.split(" │")[0].strip() for line in result.stderr.splitlines()]
    assert f"▁{model.word}" in rows and rows[-1] == "</s>"  # one heatmap row per target piece


@shipped_models
def test_the_card_names_its_corpus_and_direction(model: Shipped) -> None:
    card = ModelResult.load(SHIPPED_MODELS / model.name / CARD)
    assert (card.corpus, card.direction, card.split) == (
        model.corpus,
        f"{model.src}-{model.tgt}",
        "test",
    )
    assert card.beam_size == 5 and card.decode_precision == "fp32"


def write_test_split(model: Shipped, shared_data: Path, folder: Path) -> list[str]:
    """The two sides of the test split of `model`'s corpus, read from `shared_data` as `prepare`
    reads it by the split rule the model was trained on (Tatoeba's: the English side), written
    as text files into `folder`: their paths."""
    corpus = get_corpus(model.corpus)
    files = corpus.remote_files(model.src, model.tgt)
    paths = {file.name: shared_data / corpus.mirror_folder / file.name for file in files}
    rule = read_description(SHIPPED_MODELS / model.name).config.data.split_rule
    pairs = corpus.pairs(model.src, model.tgt, paths, rule)
    pairs = [pair for pair in pairs if pair[0] == "test"]
    sides = []
    for lang, column in ((model.src, 1), (model.tgt, 2)):
        path = folder / f"test.{lang}"
        path.write_text("".join(pair[column] + "\n" for pair in pairs), encoding="utf-8")
        sides.append(str(path))
    return sides


@pytest.mark.slow  # decodes with the command
@shipped_models
def test_the_card_scores_are_reproduced_from_the_shipped_files(
    model: Shipped, shared_data: Path, tmp_path: Path
) -> None:
    card = ModelResult.load(SHIPPED_MODELS / model.name / CARD)
    # the card scores the model as it decodes by default: the number guard on or off
    assert read_description(SHIPPED_MODELS / model.name).config.decode.keep_numbers == (
        card.keep_numbers
    )
    sides = write_test_split(model, shared_data, tmp_path)
    result = run_script(
        "evaluate",
        *("--model", model.name, "--src", sides[0], "--ref", sides[1], "--json"),
        *("--beam", str(card.beam_size), "--precision", card.decode_precision, "--device", "cpu"),
        "--keep-numbers" if card.keep_numbers else "--no-keep-numbers",
    )
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    rule = read_description(SHIPPED_MODELS / model.name).config.data.split_rule
    test_sentences = {"multi30k": 1000, "english-side": 3346, "both-sides": 3228}[
        "multi30k" if model.corpus == "multi30k" else rule
    ]
    assert scores["sentences"] == test_sentences and scores["signatures"] == card.signatures
    assert scores["bleu"] == pytest.approx(card.bleu, abs=0.1)
    assert scores["bleu_lc"] == pytest.approx(card.bleu_lc, abs=0.1)
    assert scores["chrf"] == pytest.approx(card.chrf, abs=0.1)


@shipped_models
def test_the_card_and_the_readme_name_the_domain(model: Shipped) -> None:
    """The card names the model's domain; the README's table of the models in the box gives that
    domain, the card's first limit and the folder's true size, and its results table the card's
    scores."""
    folder = SHIPPED_MODELS / model.name
    card = ModelResult.load(folder / CARD)
    assert card.domain == domain_of(card.corpus)
    kind = {"multi30k": "Flickr image captions", "tatoeba": "everyday sentences"}[card.corpus]
    assert card.domain.startswith(kind)
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    (row,) = [line for line in readme if line.startswith(f"| `{model.name}` |")]
    size = sum(path.stat().st_size for path in folder.iterdir())
    assert f"| {kind} (" in row and row.endswith(f"| {size / 1e6:.1f} MB |")
    example = card.limits[0]
    assert f'| "{example["source"]}" → "{example["output"]}" |' in row
    (result,) = [line for line in readme if f": `{model.name}` |" in line]
    scores = f"| {card.bleu:.1f} | {card.bleu_lc:.1f} | {card.chrf:.1f} |"
    assert scores in result and f"| {card.train_hours:.1f} h |" in result


@shipped_models
def test_the_readme_and_the_card_give_the_shape(model: Shipped) -> None:
    """The README's table gives each model's shape (`model_shape`), and a card whose model has
    other layers than the preset it is named after (the Tatoeba models: 4+2, the preset 3+3)
    names them, so that the preset's name is not taken for its shape."""
    config = read_description(SHIPPED_MODELS / model.name).config.model
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    (row,) = [line for line in readme if line.startswith(f"| `{model.name}` |")]
    assert f"| {model_shape(config)} |" in row
    preset = model_preset(config.name)
    layers = (config.encoder_layers, config.decoder_layers)
    if layers != (preset.encoder_layers, preset.decoder_layers):
        card = ModelResult.load(SHIPPED_MODELS / model.name / CARD)
        assert f"({layers[0]}+{layers[1]} layers)" in card.name


# Three sentences on one line, as a user pastes a paragraph: a price, names with diacritics and a
# phone number, each to come through whole
PARAGRAPH = (
    "Siobhán bought three books for 27.99 dollars. Her number is 555-0142. "
    "Mr Dvořák arrives on Friday."
)


@pytest.mark.slow  # starts a Python that imports torch
def test_translate_py_keeps_a_paragraphs_names_and_numbers_whole() -> None:
    """scripts/translate.py with the shipped en-fr model cuts the paragraph into its sentences,
    translates them and joins them again, every name and number whole, the price as French
    writes it (fp32, so that every CPU gives the same words; bf16 and int8 give them too)."""
    options = ["--model", "transformer-small.tatoeba.en-fr", "--precision", "fp32"]
    result = subprocess.run(
        [sys.executable, "scripts/translate.py", *options],
        input=PARAGRAPH + "\n",
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Siobhán a acheté trois livres pour 27,99 dollars. Son numéro est le 555-0142. "
        "Mr Dvořák arrive vendredi.\n"
    )


@pytest.mark.slow  # starts a Python that imports torch
def test_make_translate_quits_cleanly_after_a_cancelled_line(tmp_path: Path) -> None:
    """Ctrl-C at the prompt reaches make too, which used to exit 130 after a clean Ctrl-D."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HOME=str(tmp_path), TERM="dumb")
    child = pexpect.spawn(
        "make",
        ["-s", "translate", f"NAME={MODELS[0].name}", "ARGS=--beam 1"],
        cwd=ROOT,
        env=env,
        encoding="utf-8",
        timeout=120,
        preexec_fn=default_sigint,
    )
    child.expect_exact(f"{MODELS[0].name} is trained on {domain_of('multi30k')}")
    child.expect_exact("> ")
    child.send("half a line")
    child.expect_exact("half a line")  # readline is reading
    child.sendintr()  # Ctrl-C: drop the line
    child.expect_exact("> ")
    child.sendeof()  # Ctrl-D: quit
    child.expect(pexpect.EOF)
    child.close()
    assert (child.exitstatus, child.signalstatus) == (0, None)


@pytest.mark.slow  # decodes with the command
def test_the_attention_map_shown_in_the_docs_is_what_the_command_prints() -> None:
    """README.md and docs/translate.md show the map of one sentence; docs/translate.md gives
    the command, and both show exactly what it prints (its translation, then the map)."""
    sentence = "A little girl is playing in the park."
    options = ["--model", MODELS[0].name, "--show-attention", "--precision", "fp32"]
    result = run_script("translate", *options, stdin=sentence + "\n")
    assert result.returncode == 0, result.stderr
    printed = (result.stdout + result.stderr).splitlines()
    command = f"seq2seq translate {' '.join(options)}"
    for doc in (ROOT / "README.md", ROOT / "docs" / "translate.md"):
        lines = doc.read_text(encoding="utf-8").splitlines()
        start = lines.index(f"    {printed[0]}")
        end = lines.index("", start)
        assert [line.removeprefix("    ") for line in lines[start:end]] == printed, doc
    assert lines[start - 1].endswith(command)  # docs/translate.md: the command just above


@shipped_models
def test_the_card_states_the_limits_with_real_outputs(model: Shipped) -> None:
    """Every card names what its model gets wrong, numbers and names among them, each with an
    example whose output is what the model gives at the card's beam and precision."""
    card = ModelResult.load(SHIPPED_MODELS / model.name / CARD)
    assert len(card.limits) >= 2
    assert any("numbers" in limit["problem"] for limit in card.limits)
    inference = load_model(model.name)
    inference.config.decode.precision = card.decode_precision
    inference.config.decode.beam_size = card.beam_size
    translator = Translator.from_inference(inference, "cpu")
    sources = [limit["source"] for limit in card.limits]
    outputs = [nbest[0].text for nbest in translator.translate(sources)]
    assert outputs == [limit["output"] for limit in card.limits]
    assert all(output != source for output, source in zip(outputs, sources, strict=True))


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_a_tatoeba_model_has_the_configuration_its_card_trains_with(direction: str) -> None:
    """The configuration in the shipped folder is exactly the one that the card's last training
    command builds (its file and overrides): the card's commands rebuild the model, and nothing
    of the run that made it (a folder outside the repository, a run name) is shipped."""
    name = f"transformer-small.tatoeba.{direction}"
    commands = ModelResult.load(SHIPPED_MODELS / name / CARD).commands
    trained = [command for command in commands if command.startswith("seq2seq train ")][-1]
    words = shlex.split(trained, comments=True)
    config = words.index("--config") + 1
    built = load_config(ROOT / words[config], words[config + 1 :])
    assert built == read_description(SHIPPED_MODELS / name).config


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_the_tatoeba_cards_and_docs_give_months_and_accented_names(direction: str) -> None:
    """Neither copy-teaching nor the entity test has months or accented names: each Tatoeba
    card lists one of each among its limits (their outputs checked by
    test_the_card_states_the_limits_with_real_outputs), as its copy in results/models/ and
    docs/data.md do."""
    name = f"transformer-small.tatoeba.{direction}"
    card = ModelResult.load(SHIPPED_MODELS / name / CARD)
    copy = ROOT / "results" / "models" / f"{name}.shipped.json"
    assert copy.read_bytes() == (SHIPPED_MODELS / name / CARD).read_bytes()
    (month,) = [limit for limit in card.limits if "month" in limit["problem"]]
    (accented,) = [limit for limit in card.limits if "diacritics" in limit["problem"]]
    assert {"February", "février"} & set(month["source"].rstrip(".").split())
    assert any(not letter.isascii() for letter in accented["source"].split()[0])
    doc = " ".join((ROOT / "docs" / "data.md").read_text(encoding="utf-8").split())
    for limit in (month, accented):
        assert f'"{limit["source"]}" -> "{limit["output"]}"' in doc


def test_v1_models_gives_each_models_domain_and_limits() -> None:
    served = {
        model.name: served_model(model.name, load_model(model.name), torch.device("cpu"))
        for model in MODELS
    }
    with TestClient(create_app(served, Limits())) as client:
        infos = client.get("/v1/models").json()
    assert [info["name"] for info in infos] == [model.name for model in MODELS]
    for info in infos:
        card = json.loads((SHIPPED_MODELS / info["name"] / CARD).read_text(encoding="utf-8"))
        assert (info["domain"], info["limits"]) == (card["domain"], card["limits"])


@shipped_models
def test_the_prompt_starts_with_the_domain_and_limits(model: Shipped) -> None:
    card = ModelResult.load(SHIPPED_MODELS / model.name / CARD)
    _, scope, _ = load_translator(parse_args(["--model", model.name, "--beam", "1"]))
    assert scope == [
        f"{model.name} is trained on {card.domain}; other kinds of text may come out wrong.",
        "What it gets wrong, for example:",
        *(f"  {limit['problem']}: {limit['source']} -> {limit['output']}" for limit in card.limits),
    ]


@pytest.mark.slow  # starts a Python that imports torch
def test_the_prompt_prints_the_limits_on_a_terminal(tmp_path: Path) -> None:
    model = MODELS[-1]
    card = ModelResult.load(SHIPPED_MODELS / model.name / CARD)
    env = dict(os.environ, OMP_NUM_THREADS="1", HOME=str(tmp_path), TERM="dumb")
    child = pexpect.spawn(
        SEQ2SEQ[0],
        [*SEQ2SEQ[1:], "translate", "--model", model.name, "--beam", "1"],
        env=env,
        encoding="utf-8",
        timeout=120,
        preexec_fn=default_sigint,
    )
    child.expect_exact(f"{model.name} is trained on {card.domain}")
    for limit in card.limits:
        child.expect_exact(f"  {limit['problem']}: {limit['source']} -> {limit['output']}")
    child.expect_exact("> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert (child.exitstatus, child.signalstatus) == (0, None)


def test_a_model_without_recorded_limits(tmp_path: Path) -> None:
    """A checkpoint has no card: its corpus's domain and no limits; a card's limits must be a
    list of problem, source and output, else one line names the card."""
    assert domain_and_limits(None, "multi30k") == (domain_of("multi30k"), [])
    card = tmp_path / CARD
    card.write_text(json.dumps({"domain": "recipes"}))
    assert domain_and_limits(card, "files") == ("recipes", [])
    card.write_text(json.dumps({"limits": [{"problem": "numbers", "source": "1"}]}))
    with pytest.raises(UserError, match=r"card\.json: domain should be a line and limits a list"):
        domain_and_limits(card, "files")


def test_the_prompt_shown_in_the_docs_is_what_it_prints() -> None:
    name = "transformer-small.tatoeba.fr-en"
    _, scope, _ = load_translator(parse_args(["--model", name, "--beam", "1"]))
    doc = (ROOT / "docs" / "translate.md").read_text(encoding="utf-8")
    assert "\n".join(f"    {line}" for line in scope) + "\n" in doc
