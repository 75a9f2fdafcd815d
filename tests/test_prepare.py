"""The prepared folder: contents, manifest, reuse, rebuilds, atomicity, loading, user corpora."""

import gzip
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

import seq2seq.commands
import seq2seq.data.prepare
from seq2seq.config import Config
from seq2seq.config_file import load_config
from seq2seq.data.clean import normalize_lines
from seq2seq.data.corpora import CORPORA, UserFiles
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData, prepare_command, prepare_hint
from seq2seq.data.specials import BOS_ID, EOS_ID, UNK_ID
from seq2seq.decoding.model_folder import CARD
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.errors import UserError
from seq2seq.files import read_lines, sha256_file

ROOT = Path(__file__).resolve().parents[1]

NO_FILES = {
    f"{split}_{kind}": None
    for split in ("train", "valid", "test")
    for kind in ["src", "tgt", "tsv"]
}
# How every folder was tokenized before digit splitting and byte fallback.
NO_TOKENIZATION = {"split_digits": False, "byte_fallback": False}


def _data_dir_files(folder: Path) -> UserFiles:
    return UserFiles.from_options("en", "de", str(folder), NO_FILES)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file's (inode, modification time): changes when a file is written or replaced."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _leftovers(parent: Path) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith(".")]


def _prepare_small(corpus: Path, out: Path) -> Path:
    """The user files in `corpus`, prepared into `out` with a vocabulary of 47 pieces."""
    return prepare(
        "files", "en", "de", out, vocab_size=47, byte_fallback=False, files=_data_dir_files(corpus)
    )


@pytest.mark.slow  # prepares a whole corpus
def test_multi30k_en_de(multi30k_en_de: Path, shared_data: Path) -> None:
    folder = multi30k_en_de
    for split, count in {"train": 29000, "valid": 1014, "test": 1000}.items():
        for lang in ("en", "de"):
            assert len(read_lines(folder / f"{split}.{lang}")) == count

    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["corpus"], manifest["src"], manifest["tgt"]) == ("multi30k", "en", "de")
    assert manifest["lines"] == {"train": 29000, "valid": 1014, "test": 1000}
    assert manifest["cleaning"]["pairs"] == manifest["cleaning"]["kept"] == 29000
    assert manifest["licence"].startswith("Multi30K")
    expected_sources = {f.name: f.sha256 for f in CORPORA["multi30k"].remote_files("en", "de")}
    assert {Path(s["path"]).name: s["sha256"] for s in manifest["sources"]} == expected_sources
    names = {f"{s}.{lang}" for s in ("train", "valid", "test") for lang in ("en", "de")}
    arrays = {f"{name}.{kind}" for name in names for kind in ("ids", "offsets")}
    assert set(manifest["files"]) == names | arrays | {"spm.model", "spm.vocab"}
    assert set(os.listdir(folder)) == set(manifest["files"]) | {"manifest.json"}
    assert all(sha256_file(folder / name) == sha for name, sha in manifest["files"].items())
    tokenizer = manifest["tokenizer"]
    assert tokenizer["joint"] and tokenizer["src_vocab_size"] == tokenizer["tgt_vocab_size"] == 8000
    assert tokenizer["normalization_rule_name"] == "identity"
    assert tokenizer["character_coverage"] == 1.0
    assert tokenizer["split_digits"] and tokenizer["byte_fallback"]

    data = PreparedData.load(folder)
    assert data.joint and data.src_tokenizer is data.tgt_tokenizer
    assert (data.src, data.tgt) == ("en", "de")
    raw_valid_de = gzip.decompress((shared_data / "multi30k" / "val.de.gz").read_bytes())
    assert data.lines("valid")[1] == normalize_lines(raw_valid_de.decode().split("\n")[:-1])
    test_en, _ = data.lines("test")
    dataset = data.dataset("test")
    assert len(dataset) == 1000
    first = dataset[0]
    assert first.src.tolist() == [*data.src_tokenizer.encode(test_en[:1])[0], EOS_ID]
    assert first.tgt[0] == BOS_ID and first.tgt[-1] == EOS_ID


@pytest.mark.slow  # prepares a whole corpus
def test_second_run_reuses_the_folder(
    multi30k_en_de: Path,
    shared_data: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _snapshot(multi30k_en_de)

    def build_again(*args: object) -> None:
        raise AssertionError("the folder was built again")

    monkeypatch.setattr(seq2seq.data.prepare, "_build", build_again)
    prepare("multi30k", "en", "de", multi30k_en_de, mirror=str(shared_data))
    assert "reusing it" in capsys.readouterr().out
    assert _snapshot(multi30k_en_de) == before


def test_user_corpus_in_three_layouts(small_corpus: Path, tmp_path: Path) -> None:
    tsv_dir = tmp_path / "tsv"
    tsv_dir.mkdir()
    options = dict(NO_FILES)
    for split in ("train", "valid", "test"):
        src_lines = read_lines(small_corpus / f"{split}.en")
        tgt_lines = read_lines(small_corpus / f"{split}.de")
        rows = "".join(f"{s}\t{t}\n" for s, t in zip(src_lines, tgt_lines, strict=True))
        (tsv_dir / f"{split}.tsv").write_text(rows, encoding="utf-8")
        options[f"{split}_tsv"] = str(tsv_dir / f"{split}.tsv")
    gz_dir = tmp_path / "gz"
    shutil.copytree(small_corpus, gz_dir)
    (gz_dir / "train.de.gz").write_bytes(gzip.compress((gz_dir / "train.de").read_bytes()))
    (gz_dir / "train.de").unlink()
    explicit = dict(
        NO_FILES, train_src=str(gz_dir / "train.en"), train_tgt=str(gz_dir / "train.de.gz")
    )
    for split in ("valid", "test"):
        explicit.update({f"{split}_src": str(small_corpus / f"{split}.en")})
        explicit.update({f"{split}_tgt": str(small_corpus / f"{split}.de")})

    layouts = {
        "dir": _data_dir_files(gz_dir),
        "tsv": UserFiles.from_options("en", "de", None, options),
        "explicit": UserFiles.from_options("en", "de", None, explicit),
    }
    manifests = {}
    for name, files in layouts.items():
        out = prepare(
            "files",
            "en",
            "de",
            tmp_path / name / "files.en-de",
            vocab_size=47,
            byte_fallback=False,
            files=files,
        )
        manifests[name] = json.loads((out / "manifest.json").read_text())
    texts = [
        {k: v for k, v in m["files"].items() if not k.startswith("spm")} for m in manifests.values()
    ]
    assert texts[0] == texts[1] == texts[2]

    manifest = manifests["dir"]
    assert manifest["lines"] == {"train": 80, "valid": 10, "test": 10}
    assert manifest["cleaning"] == {
        "pairs": 82,
        "kept": 80,
        "empty": 1,
        "too_long": 0,
        "length_ratio": 1,
        "max_words": 250,
        "max_ratio": 9.0,
    }
    assert set(manifest["settings"]["inputs"].values()) == {
        sha256_file(path) for path in layouts["dir"].paths()
    }
    valid_de = read_lines(tmp_path / "dir" / "files.en-de" / "valid.de")
    assert valid_de[0] == "fünf grün Hund." and len(valid_de) == 10  # NFC and spaces, not dropped


def test_separate_vocabularies(small_corpus: Path, tmp_path: Path) -> None:
    out = prepare(
        "files",
        "en",
        "de",
        tmp_path / "sep",
        vocab_size=40,
        byte_fallback=False,
        joint=False,
        model_type="bpe",
        files=_data_dir_files(small_corpus),
    )
    data = PreparedData.load(out)
    assert not data.joint and data.src_tokenizer is not data.tgt_tokenizer
    assert {"spm.en.model", "spm.de.model", "spm.en.vocab", "spm.de.vocab"} <= set(os.listdir(out))
    assert data.manifest["tokenizer"]["model_type"] == "bpe"
    assert "▁Hund" not in data.src_tokenizer.pieces("Hund")
    assert data.tgt_tokenizer.decode(data.tgt_tokenizer.encode(["zwei rot Katze."])) == [
        "zwei rot Katze."
    ]


def test_rebuilds_when_settings_or_files_change(
    small_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _data_dir_files(small_corpus)
    out = prepare(
        "files", "en", "de", tmp_path / "p", vocab_size=47, byte_fallback=False, files=files
    )
    prepare("files", "en", "de", out, vocab_size=40, byte_fallback=False, files=files)
    assert "prepared with other settings" in capsys.readouterr().out
    assert PreparedData.load(out).manifest["settings"]["vocab_size"] == 40

    with open(out / "train.en", "a") as f:
        f.write("tampered\n")
    prepare("files", "en", "de", out, vocab_size=40, byte_fallback=False, files=files)
    assert "train.en is missing or changed" in capsys.readouterr().out
    assert len(read_lines(out / "train.en")) == 80

    (small_corpus / "test.en").write_text("changed input\n" * 10)
    prepare("files", "en", "de", out, vocab_size=40, byte_fallback=False, files=files)
    assert "prepared with other settings" in capsys.readouterr().out
    assert read_lines(out / "test.en")[0] == "changed input"


def test_failed_rebuild_keeps_the_good_folder(small_corpus: Path, tmp_path: Path) -> None:
    out = _prepare_small(small_corpus, tmp_path / "p")
    before = _snapshot(out)
    manifest = (out / "manifest.json").read_text()
    (small_corpus / "valid.de").write_text("one line\n")
    with pytest.raises(UserError, match=r"valid: .*valid\.en has 10 lines but .*valid\.de has 1"):
        _prepare_small(small_corpus, out)
    assert _snapshot(out) == before and (out / "manifest.json").read_text() == manifest
    assert _leftovers(tmp_path) == []


def _killed(*_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_children_answer_in_the_order_of_the_calls_or_raise_their_error() -> None:
    run = seq2seq.data.prepare._run_in_children
    assert run(pow, [(2, 3), (3, 2), (2, 10), (5, 0)], processes=2) == [8, 9, 1024, 1]
    with pytest.raises(ValueError, match="'twelve'"):
        run(int, [("12",), ("twelve",)], processes=2)


def test_a_child_killed_stops_prepare_with_one_error(
    small_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child killed while it encodes (as by the out-of-memory killer) leaves its call
    unanswered: prepare stops at once with an error naming the signal, and leaves nothing
    behind, where multiprocessing.Pool waited for the answer forever."""
    monkeypatch.setattr(seq2seq.data.prepare, "_write_ids", _killed)
    started = time.monotonic()
    with pytest.raises(UserError, match=r"^prepare: a child process died \(exit code -9: "):
        _prepare_small(small_corpus, tmp_path / "p")
    assert time.monotonic() - started < 60
    assert not (tmp_path / "p").exists() and _leftovers(tmp_path) == []


def test_out_must_be_a_prepared_folder(small_corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="is not a prepared folder"):
        prepare("files", "en", "de", tmp_path / "mine", files=_data_dir_files(small_corpus))
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]


def test_load_errors_name_the_folder(small_corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nowhere: not a prepared corpus .*make data"):
        PreparedData.load(tmp_path / "nowhere")
    out = _prepare_small(small_corpus, tmp_path / "p")
    (out / "valid.de").unlink()
    with pytest.raises(UserError, match=r"p: missing valid\.de; .*make data"):
        PreparedData.load(out)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match=r"manifest\.json: damaged manifest"):
        PreparedData.load(out)


@pytest.mark.slow  # prepares a whole corpus
def test_tatoeba_split_is_deterministic(shared_data: Path, tmp_path: Path) -> None:
    """A new folder is split by both sides (tests/test_tatoeba_split.py checks the rule) and
    says so; no sentence of either side is in two splits."""
    out = prepare(
        "tatoeba", "en", "fr", tmp_path / "tatoeba.en-fr", mirror=str(shared_data), model_type="bpe"
    )
    data = PreparedData.load(out)
    assert data.manifest["settings"]["split_rule"] == "both-sides"
    assert data.manifest["lines"] == {"train": 160645, "valid": 3257, "test": 3228}
    for side in (0, 1):
        sentences = {split: set(data.lines(split)[side]) for split in ("train", "valid", "test")}
        assert not sentences["train"] & sentences["valid"]
        assert not sentences["train"] & sentences["test"]
        assert not sentences["valid"] & sentences["test"]
    # The three French translations of "Go on." are in the valid split, in file order.
    assert data.lines("valid")[0][:3] == ["Go on.", "Go on.", "Go on."]
    assert data.lines("valid")[1][:3] == ["Poursuis.", "Continuez.", "Poursuivez."]


def test_new_folders_split_digits_and_fall_back_to_bytes(
    small_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """By default a prepared folder's tokenizer splits digits and spells unseen characters as
    bytes, and its manifest says so; a folder prepared before these options existed (no keys)
    still loads, and is reused when prepared again without them."""
    files = _data_dir_files(small_corpus)
    out = prepare("files", "en", "de", tmp_path / "p", vocab_size=300, files=files)
    manifest = json.loads((out / "manifest.json").read_text())
    for section in (manifest["settings"], manifest["tokenizer"]):
        assert (section["split_digits"], section["byte_fallback"]) == (True, True)
    tokenizer = PreparedData.load(out).src_tokenizer
    unusual = ["Julia Schmidt zahlt 19,99 € für 48213 🐕 in Москва, 東京 und Ἀθῆναι."]
    ids = tokenizer.encode(unusual)[0]
    assert UNK_ID not in ids and tokenizer.decode([ids]) == normalize_lines(unusual)
    digits = [text for text in tokenizer.decode([[i] for i in ids]) if any(map(str.isdigit, text))]
    assert digits == list("1999" + "48213")

    older = prepare(
        "files", "en", "de", tmp_path / "older", vocab_size=47, files=files, **NO_TOKENIZATION
    )
    manifest = json.loads((older / "manifest.json").read_text())
    for key in ("split_digits", "byte_fallback"):
        del manifest["settings"][key], manifest["tokenizer"][key]
    (older / "manifest.json").write_text(json.dumps(manifest))
    assert UNK_ID in PreparedData.load(older).src_tokenizer.encode(unusual)[0]
    capsys.readouterr()
    prepare("files", "en", "de", older, vocab_size=47, files=files, **NO_TOKENIZATION)
    assert "reusing it" in capsys.readouterr().out
    prepare("files", "en", "de", older, vocab_size=300, files=files)
    assert "prepared with other settings; rebuilding it" in capsys.readouterr().out


def card_commands(direction: str) -> tuple[str, Config]:
    """The last prepare command that the card of the shipped Tatoeba model of `direction`
    records (a model fine-tuned from another records that one's commands first), but for its
    --mirror, and the configuration of the card's last training command."""
    card = SHIPPED_MODELS / f"transformer-small.tatoeba.{direction}" / CARD
    commands = json.loads(card.read_text(encoding="utf-8"))["commands"]
    prepared, trained = (
        [command for command in commands if command.startswith(f"seq2seq {step} ")][-1]
        for step in ("prepare", "train")
    )
    words = trained.split()
    config = load_config(ROOT / words[words.index("--config") + 1])
    return prepared.replace(" --mirror ../shared/data", ""), config


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_the_hint_of_a_missing_tatoeba_folder_is_the_command_that_made_it(direction: str) -> None:
    """The Tatoeba configurations train on a copy-teaching folder (data/tatoeba-copy.*,
    data/tatoeba-v2.* or data/tatoeba-months.*) that `make data` does not prepare: the hint is
    the command their shipped model's card records, but for the card's --mirror."""
    recorded, config = card_commands(direction)
    assert recorded.startswith("seq2seq prepare ")
    assert prepare_command(config) == recorded
    assert prepare_hint(config) == f"prepare it with `{recorded}`"


def test_the_prepare_command_gives_every_setting_that_is_not_the_default() -> None:
    config = load_config(None)
    assert prepare_command(config) == (
        "seq2seq prepare --corpus multi30k --src en --tgt de --out data/multi30k.en-de"
    )
    settings = ["vocab_size=1000", "joint_vocab=false", "split_digits=false"]
    settings += ["byte_fallback=false", "augment_numbers=1.5"]
    head = ["train.seed=7", "train.alignment_weight=0.05"]  # a head: the teacher's links too
    config = load_config(None, [*(f"data.{s}" for s in settings), *head])
    config.data.corpus, config.data.prepared = "files", "data/mine"
    assert prepare_command(config) == (
        "seq2seq prepare --corpus files --src en --tgt de --data-dir DIR --vocab-size 1000 "
        "--separate-vocab --no-split-digits --no-byte-fallback --augment-numbers 1.5 --seed 7 "
        "--align-teacher eflomal --out data/mine"
    )


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_evaluating_without_the_tatoeba_folder_names_its_command(
    direction: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    recorded, config = card_commands(direction)
    monkeypatch.chdir(tmp_path)  # no data/ here
    with pytest.raises(SystemExit) as exit_info:
        seq2seq.commands.main(["evaluate", "--model", f"transformer-small.tatoeba.{direction}"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"error: {config.data.prepared}: not a prepared corpus (no manifest.json); prepare it "
        f"with `{recorded}`\n"
    )


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_evaluating_a_tatoeba_model_on_another_split_rule_is_refused(
    direction: str,
    reversal: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """A shipped Tatoeba model is not scored on a folder split by the other rule (English side
    or both sides), whose test pairs it may have trained on; the error names the command that
    prepares its own."""
    recorded, config = card_commands(direction)
    rule = config.data.split_rule
    other = "both-sides" if rule == "english-side" else "english-side"
    folder = tmp_path / config.data.prepared
    shutil.copytree(reversal, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["corpus"], manifest["settings"]["split_rule"] = "tatoeba", other
    (folder / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        seq2seq.commands.main(["evaluate", "--model", f"transformer-small.tatoeba.{direction}"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"error: data.split_rule {rule}: {config.data.prepared} was split by --split-rule "
        f"{other}, whose test pairs may be training pairs of this model; prepare the folder "
        f"with `{recorded}`\n"
    )


def test_a_folder_prepared_before_the_split_rules_is_split_by_the_english_side(
    reversal: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "tatoeba"
    shutil.copytree(reversal, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["corpus"] = "tatoeba"
    manifest["settings"].pop("split_rule", None)  # a folder prepared before the rules
    (folder / "manifest.json").write_text(json.dumps(manifest))
    data = PreparedData.load(folder)
    data.check_split_rule(load_config(ROOT / "configs" / "transformer.tatoeba.en-fr.toml"))
    with pytest.raises(UserError, match=r"^data\.split_rule both-sides: .* --split-rule english-"):
        data.check_split_rule(load_config(ROOT / "configs" / "transformer.tatoeba-v2.en-fr.toml"))
