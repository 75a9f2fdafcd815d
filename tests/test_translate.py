"""The translator, evaluate.py, translate.py (pipe mode and a real terminal) and checkpoint
averaging, on a checkpoint trained for a few steps by seq2seq.training.loop on a generated
corpus."""

import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import pexpect
import pytest
import sacrebleu
import torch
from commands import default_sigint, run_in_process
from results_table import sections

from seq2seq.checkpoints import load_checkpoint, tokenizer_entry
from seq2seq.config_file import load_config
from seq2seq.data.corpora import UserFiles, domain_of
from seq2seq.data.prepare import prepare
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.evaluation import evaluate
from seq2seq.decoding.model_result import ModelResult
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError
from seq2seq.training.checkpoint import average_checkpoints, save_checkpoint
from seq2seq.training.loop import train

ROOT = Path(__file__).resolve().parents[1]
LEXICON = {
    "the": "der",
    "a": "ein",
    "dog": "Hund",
    "cat": "Katze",
    "house": "Haus",
    "tree": "Baum",
    "red": "rot",
    "green": "grün",
    "big": "groß",
    "old": "alt",
    "runs": "läuft",
    "sleeps": "schläft",
    "sees": "sieht",
}
TRAIN_STEPS = 40


def write_word_corpus(folder: Path) -> Path:
    """English-like sentences and their word-by-word German, in train/valid/test.{en,de}."""
    rng = random.Random(0)
    folder.mkdir()
    for split, size in (("train", 400), ("valid", 12), ("test", 20)):
        pairs = []
        for _ in range(size):
            words = [rng.choice(list(LEXICON)) for _ in range(rng.randint(2, 7))]
            english = " ".join(words)
            german = " ".join(LEXICON[word] for word in words)
            pairs.append((english.capitalize() + ".", german.capitalize() + "."))
        for side, lang in enumerate(("en", "de")):
            lines = "".join(pair[side] + "\n" for pair in pairs)
            (folder / f"{split}.{lang}").write_text(lines, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run folder with best.pt, last.pt and two step checkpoints of a tiny Transformer."""
    root = tmp_path_factory.mktemp("translate")
    corpus = write_word_corpus(root / "corpus")
    files = UserFiles.from_options("en", "de", str(corpus), {})
    prepared = prepare(
        "files", "en", "de", root / "prepared", vocab_size=48, byte_fallback=False, files=files
    )
    overrides = {
        "data.prepared": str(prepared),
        "data.vocab_size": 48,
        "model.embed_dim": 32,
        "model.ffn_size": 64,
        "model.encoder_layers": 1,
        "model.decoder_layers": 1,
        "train.device": "cpu",
        "train.max_steps": TRAIN_STEPS,
        "train.valid_every": TRAIN_STEPS // 2,
        "train.keep_last": 2,
        "train.warmup_steps": 10,
        "train.lr": 3e-3,
        "train.max_tokens": 600,
        "train.attention_samples": 0,
        "train.run_dir": str(root / "run"),
        "decode.beam_size": 3,
    }
    cfg = load_config(None, [f"{key}={json.dumps(value)}" for key, value in overrides.items()])
    train(cfg)
    return root / "run"


@pytest.fixture(scope="module")
def translator(run: Path) -> Translator:
    inference = load_model(run / "best.pt")
    return Translator(
        inference.model,
        inference.src_tokenizer,
        inference.tgt_tokenizer,
        inference.config.decode,
        "cpu",
    )


def corpus_side(run: Path, split: str, lang: str) -> list[str]:
    return (run.parent / "corpus" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()


LONG_LINE = " ".join(["The big red dog sees the old house."] * 6)  # training lines: 2-7 words
AWKWARD = ["A dog runs.", "", "   ", "Ωμέγα 漢字 ✓ runs.", LONG_LINE, "The cat sleeps."]


def test_translate_keeps_order_and_handles_awkward_lines(translator):
    # each line whole, so that LONG_LINE is one long input (test_sentences.py cuts lines)
    translate = partial(translator.translate, beam_size=2, nbest=2, split_sentences=False)
    results = translate(AWKWARD)
    assert len(results) == len(AWKWARD)
    for line, nbest in zip(AWKWARD, results, strict=True):
        if not line.strip():
            assert [(t.text, t.score, t.tokens) for t in nbest] == [("", 0.0, [])] * 2
            continue
        assert len(nbest) == 2 and nbest[0].score >= nbest[1].score
        (alone,) = translate([line])
        assert [t.tokens for t in alone] == [t.tokens for t in nbest]
        assert nbest[0].text == translator.tgt_tokenizer.decode([nbest[0].tokens])[0]
    assert results[4][0].src_pieces[-1] == "</s>" and len(results[4][0].src_pieces) > 96


def test_batches_of_any_size_give_the_same_translations(translator, run):
    sources = corpus_side(run, "test", "en")
    expected = [n[0].tokens for n in translator.translate(sources)]
    translator.decode_cfg.batch_size = 3
    batch_sizes: list[int] = []
    try:
        translations = translator.translate([*sources, ""], on_batch=batch_sizes.append)
        assert [n[0].tokens for n in translations[:-1]] == expected
    finally:
        translator.decode_cfg.batch_size = 128
    # a progress report after each batch, of every sentence the model decodes (not the blank)
    assert len(batch_sizes) == -(-len(sources) // 3) and sum(batch_sizes) == len(sources)


@pytest.mark.parametrize(
    ("precision", "dtype", "atol"),
    [("fp32", None, 1e-5), ("bf16", torch.bfloat16, 2e-3), ("int8", None, 1e-5)],
)
def test_attention_pieces_and_shapes(translator, precision, dtype, atol):
    decode_cfg = replace(translator.decode_cfg, precision=precision)
    translator = Translator(
        translator.model, translator.src_tokenizer, translator.tgt_tokenizer, decode_cfg, "cpu"
    )
    assert translator.dtype is dtype
    (nbest,) = translator.translate(["The dog sees a cat."], beam_size=3, need_attention=True)
    best = nbest[0]
    assert best.src_pieces == [*translator.src_tokenizer.pieces("The dog sees a cat."), "</s>"]
    assert best.tgt_pieces[-1] == "</s>" and len(best.tgt_pieces) == len(best.tokens) + 1
    assert best.attention.shape == (len(best.tgt_pieces), len(best.src_pieces))
    assert best.attention.dtype == torch.float32
    assert torch.allclose(best.attention.sum(1), torch.ones(len(best.tgt_pieces)), atol=atol)


def test_int8_decodes_with_a_quantized_copy_on_a_cpu_only(translator, run):
    decode_cfg = replace(translator.decode_cfg, precision="int8")
    tokenizers = translator.src_tokenizer, translator.tgt_tokenizer
    int8 = Translator(translator.model, *tokenizers, decode_cfg, "cpu")
    assert int8.dtype is None and int8.model is not translator.model
    assert type(translator.model.output) is torch.nn.Linear
    sources = corpus_side(run, "test", "en")
    expected = [n[0].tokens for n in translator.translate(sources)]
    got = [n[0].tokens for n in int8.translate(sources)]
    assert sum(a == b for a, b in zip(got, expected, strict=True)) >= 0.9 * len(sources)
    with pytest.raises(UserError, match=r"decode\.precision=int8 runs on a CPU only, not on cuda"):
        Translator(translator.model, *tokenizers, decode_cfg, "cuda")


def test_auto_decodes_a_single_line_in_int8_on_a_cpu(translator, monkeypatch):
    """decode.precision "auto" on a CPU: one line decodes with an int8 copy of the model (made
    at the first such call, reused, made again once the weights change); two lines decode with
    the model itself, in `precision`; an explicit precision is kept for one line too."""
    assert translator.decode_cfg.precision == "auto"
    tokenizers = translator.src_tokenizer, translator.tgt_tokenizer
    decode_cfg = translator.decode_cfg
    int8 = Translator(translator.model, *tokenizers, replace(decode_cfg, precision="int8"), "cpu")
    pinned = replace(decode_cfg, precision=translator.precision)  # "auto" chose it for more lines
    same = Translator(translator.model, *tokenizers, pinned, "cpu")
    assert (translator.precision_for(1), translator.precision_for(2)) == ("int8", same.precision)
    assert (same.precision_for(1), int8.precision_for(2)) == (same.precision, "int8")
    line, other = "The dog sees a cat.", "A cat."
    translator.one_line_models.clear()
    (alone,) = translator.translate([line], beam_size=3)
    assert alone[0].tokens == int8.translate([line], beam_size=3)[0][0].tokens
    ((version, copy),) = translator.one_line_models.items()
    assert copy is not translator.model and type(copy.output) is not torch.nn.Linear
    copies = []
    monkeypatch.setattr(translator, "int8_copy", lambda model: copies.append(1) or copy)
    translator.translate([other], beam_size=3)
    translator.with_decode(length_penalty=0.6).translate([other], beam_size=3)
    assert copies == [] and translator.one_line_models == {version: copy}  # made once, shared
    monkeypatch.undo()
    two = translator.translate([line, other], beam_size=3)
    assert [n[0].tokens for n in two] == [n[0].tokens for n in same.translate([line, other], 3)]
    with torch.no_grad():
        translator.model.output.weight.mul_(1.0)  # an in-place write, as an optimizer step
    translator.translate([line], beam_size=3)
    ((newer, newer_copy),) = translator.one_line_models.items()
    assert newer > version and newer_copy is not copy
    assert evaluate(translator, [line], ["Der Hund sieht eine Katze."]).precision == "int8"


def test_translate_restores_training_mode_and_checks_nbest(translator):
    translator.model.train()
    try:
        translator.translate(["A dog.", "A cat."])  # two lines: the model itself decodes
        assert translator.model.training
    finally:
        translator.model.eval()
    with pytest.raises(UserError, match="n-best"):
        translator.translate(["A dog."], beam_size=2, nbest=3)


def test_evaluate_scores_its_own_hypotheses(translator, run):
    sources, references = corpus_side(run, "test", "en"), corpus_side(run, "test", "de")
    result = evaluate(translator, sources, references, beam_size=2)
    best = [n[0] for n in translator.translate(sources, beam_size=2)]
    assert result.hypotheses == [translation.text for translation in best]
    assert result.hypothesis_ids == [translation.tokens for translation in best]
    assert result.bleu == pytest.approx(
        sacrebleu.corpus_bleu(result.hypotheses, [references]).score
    )
    assert result.chrf == pytest.approx(
        sacrebleu.corpus_chrf(result.hypotheses, [references]).score
    )
    assert (result.sentences, result.beam_size, result.device) == (20, 2, "cpu")
    assert not {"hypotheses", "hypothesis_ids"} & set(result.summary())
    with pytest.raises(UserError, match="the source has 20 lines but the reference has 19"):
        evaluate(translator, sources, references[:-1])


def script(name: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`seq2seq NAME ARGS` in this process (tests/commands.py): the interactive prompt runs in
    a real process and a real terminal (test_translate_interactive_in_a_terminal)."""
    return run_in_process([name, *args], stdin)


@pytest.mark.slow  # decodes with the command
def test_translate_pipe_mode(run, translator, tmp_path):
    lines = ["A dog runs.", "", "The old tree sleeps.", "Ωμέγα ✓", "Big cat."]
    result = script("translate", "--checkpoint", str(run / "best.pt"), stdin="\n".join(lines))
    assert result.returncode == 0, result.stderr
    expected = [n[0].text for n in translator.translate(lines)]
    assert result.stdout.split("\n") == [*expected, ""]

    maps = tmp_path / "map.png"
    result = script(
        "translate",
        "--checkpoint",
        str(run / "best.pt"),
        "--beam",
        "2",
        "--nbest",
        "2",
        "--show-attention",
        "--save-attention",
        str(maps),
        stdin="\n".join(lines),
    )
    assert result.returncode == 0, result.stderr
    nbest_lines = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert [int(number) for number, _, _ in nbest_lines] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert nbest_lines[2][1:] == nbest_lines[3][1:] == ["", "0.0000"]  # the empty line
    assert result.stderr.count("┼") == 4  # one heatmap per non-empty line
    # map-<the n-best lines' number>.png: the empty line 1 has none
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"map-{n}.png" for n in (0, 2, 3, 4)]


@pytest.mark.slow  # decodes with the command
def test_length_penalty_option_rescales_the_finished_hypotheses(run, translator):
    """--length-penalty divides each finished hypothesis's log-probability by ((5 + n) / 6) **
    alpha; it does not change which hypotheses finish (beams are pruned on log-probabilities)."""
    lines = corpus_side(run, "test", "en")[:6]
    nbest_lists = {}
    for alpha in (0.0, 3.0):
        options = ["--checkpoint", str(run / "best.pt"), "--beam", "3", "--nbest", "3"]
        options += ["--length-penalty", str(alpha)]
        result = script("translate", *options, stdin="\n".join(lines))
        assert result.returncode == 0, result.stderr
        decode_cfg = replace(translator.decode_cfg, length_penalty=alpha)
        nbest_lists[alpha] = Translator(
            translator.model, translator.src_tokenizer, translator.tgt_tokenizer, decode_cfg, "cpu"
        ).translate(lines, beam_size=3, nbest=3)
        assert result.stdout.splitlines() == [
            f"{number} ||| {t.text} ||| {t.score:.4f}"
            for number, nbest in enumerate(nbest_lists[alpha])
            for t in nbest
        ]
    for plain, penalised in zip(nbest_lists[0.0], nbest_lists[3.0], strict=True):
        log_probs = {tuple(t.tokens): t.score for t in plain}
        assert set(log_probs) == {tuple(t.tokens) for t in penalised}
        for t in penalised:
            lp = ((5 + len(t.tokens) + 1) / 6) ** 3.0
            assert t.score == pytest.approx(log_probs[tuple(t.tokens)] / lp, rel=1e-5)

    negative = script("translate", "--checkpoint", str(run / "best.pt"), "--length-penalty", "-1")
    assert_one_line_error(negative, "--length-penalty: -1: must be in [0, 5]")


@pytest.mark.slow  # decodes with the command
def test_stop_early_option_decodes_as_the_translator_with_stop_early(run, translator):
    lines = corpus_side(run, "test", "en")[:6]
    options = ["--checkpoint", str(run / "best.pt"), "--beam", "4", "--nbest", "2", "--stop-early"]
    result = script("translate", *options, stdin="\n".join(lines))
    assert result.returncode == 0, result.stderr
    decode_cfg = replace(translator.decode_cfg, stop_early=True)
    nbest_lists = Translator(
        translator.model, translator.src_tokenizer, translator.tgt_tokenizer, decode_cfg, "cpu"
    ).translate(lines, beam_size=4, nbest=2)
    assert result.stdout.splitlines() == [
        f"{number} ||| {t.text} ||| {t.score:.4f}"
        for number, nbest in enumerate(nbest_lists)
        for t in nbest
    ]


@pytest.mark.slow  # starts a Python that imports torch, in a terminal
def test_translate_interactive_in_a_terminal(run, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", HOME=str(tmp_path), TERM="dumb")
    child = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "seq2seq",
            "translate",
            "--show-attention",
            "--checkpoint",
            str(run / "best.pt"),
        ],
        env=env,
        encoding="utf-8",
        timeout=60,
        preexec_fn=default_sigint,
    )
    child.expect_exact(f"{run / 'best.pt'} is trained on your own parallel text;")
    child.expect_exact("Ctrl-D quits")
    child.expect_exact("> ")
    child.sendline("A dog sees the house.")
    child.expect(r"\(score -?\d+\.\d{3}\)")
    child.expect_exact("┼")  # the heatmap's corner
    child.expect_exact("</s> │")  # its last row
    child.expect_exact("> ")
    child.send("half a line")
    child.expect_exact("half a line")  # echoed by readline: it is reading, not starting up
    child.sendintr()  # Ctrl-C: drop the line, prompt again
    child.expect_exact("> ")
    child.sendline("")
    child.expect_exact("> ")
    child.sendeof()  # Ctrl-D: quit
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in child.before
    assert (tmp_path / ".seq2seq_history").read_text().splitlines()[-1] == "A dog sees the house."


@pytest.mark.slow  # decodes with the command
def test_evaluate_script_matches_sacrebleu_on_its_output(run, tmp_path):
    output = tmp_path / "hyp.de"
    result = script(
        "evaluate", "--checkpoint", str(run / "best.pt"), "--json", "--output", str(output)
    )
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    hypotheses = output.read_text(encoding="utf-8").splitlines()
    references = corpus_side(run, "test", "de")
    assert len(hypotheses) == len(references) == scores["sentences"] == 20
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    lowercased = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score
    assert scores["bleu_lc"] == pytest.approx(lowercased)
    assert scores["signatures"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert scores["device"] == "cpu" and scores["beam_size"] == 3
    assert scores["seconds"] > 0 and scores["sentences_per_second"] > 0
    assert sum(bucket["sentences"] for bucket in scores["by_length"]) == 20

    src, ref = run.parent / "corpus" / "valid.en", run.parent / "corpus" / "valid.de"
    by_files = script(
        "evaluate", "--checkpoint", str(run / "best.pt"), "--src", str(src), "--ref", str(ref)
    )
    assert by_files.returncode == 0, by_files.stderr
    lines = by_files.stdout.splitlines()
    assert [line.split()[0] for line in lines[:4]] == [
        "BLEU",
        "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + sacrebleu.__version__,
        "BLEU-lc",
        "chrF",
    ]
    assert lines[4] == "by source length (words):"  # then one line per length, 12 sentences
    assert sum(int(line.split()[1]) for line in lines[5:-1]) == 12
    ending = f"on cpu, {scores['precision']}, beam 3"
    assert lines[-1].startswith("12 sentences in ") and lines[-1].endswith(ending)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    for fragment in fragments:
        assert fragment in result.stderr


@pytest.mark.slow  # decodes with the command
def test_bad_checkpoints_are_one_line_errors(run, tmp_path):
    missing = script("translate", "--checkpoint", str(tmp_path / "none.pt"), stdin="A dog.")
    assert_one_line_error(missing, "none.pt: checkpoint not found")

    checkpoint = load_checkpoint(run / "best.pt")
    other = Tokenizer.train(
        ["Lorem ipsum dolor sit amet."] * 50, tmp_path / "other.model", 30, byte_fallback=False
    )
    checkpoint["tokenizers"] = tokenizer_entry(other, other)
    save_checkpoint(checkpoint, tmp_path / "mismatch.pt")
    mismatch = script("evaluate", "--checkpoint", str(tmp_path / "mismatch.pt"))
    assert_one_line_error(mismatch, "mismatch.pt: weights do not fit the model or tokenizer")


@pytest.mark.slow  # decodes with the command
@pytest.mark.parametrize("name", ["translate", "evaluate"])
def test_bad_decoding_options_are_one_line_errors(run, name):
    checkpoint = str(run / "best.pt")
    for option, value, message in [
        ("--beam", "0", "--beam: 0: must be in [1, 256]"),
        ("--length-penalty", "-0.5", "--length-penalty: -0.5: must be in [0, 5]"),
        ("--batch-size", "0", "--batch-size: 0: must be in [1, 100000]"),
        ("--precision", "int4", "--precision int4: must be one of auto, bf16, fp16, fp32, int8"),
    ]:
        result = script(name, "--checkpoint", checkpoint, option, value, stdin="A dog.")
        assert_one_line_error(result, message)


@pytest.mark.slow  # decodes with the command
def test_average_checkpoints(run, tmp_path):
    paths = [run / "step-20.pt", run / "step-40.pt"]
    averaged = average_checkpoints(paths)
    first, second = (load_checkpoint(path)["model"] for path in paths)
    assert averaged["model"].keys() == first.keys()
    for name, weight in averaged["model"].items():
        assert torch.allclose(weight, (first[name] + second[name]) / 2, atol=1e-7), name
    assert "training" not in averaged
    assert averaged["step"] == TRAIN_STEPS  # the latest step, whatever the order
    assert average_checkpoints(paths[::-1])["step"] == TRAIN_STEPS

    broken = load_checkpoint(paths[1])
    broken["model"]["output.weight"] = broken["model"]["output.weight"][:-1]
    save_checkpoint(broken, tmp_path / "broken.pt")
    with pytest.raises(UserError, match=r"broken\.pt: output\.weight has shape"):
        average_checkpoints([paths[0], tmp_path / "broken.pt"])

    # --last takes the step-<N>.pt files only, ordered by N (step-5 before step-40)
    folder = tmp_path / "run"
    folder.mkdir()
    for name, source in [("step-5.pt", "step-20.pt"), ("step-40.pt", "step-40.pt")]:
        shutil.copyfile(run / source, folder / name)
    for stray in ("step-final.pt", "step-120-copy.pt", "step-3.pt.tmp"):
        (folder / stray).write_text("not a checkpoint")
    out = tmp_path / "avg.pt"
    result = script("average", "--out", str(out), "--last", "2", str(folder))
    assert result.returncode == 0, result.stderr
    assert torch.equal(
        load_checkpoint(out)["model"]["output.weight"], averaged["model"]["output.weight"]
    )
    assert load_model(out).averaged_checkpoints == 2
    translations = script("translate", "--checkpoint", str(out), stdin="A dog.\nA cat.\n")
    assert translations.returncode == 0 and len(translations.stdout.splitlines()) == 2


@pytest.mark.slow  # decodes with the command
def test_evaluate_records_a_result_for_the_table(run, tmp_path):
    record = tmp_path / "results" / "models" / "tiny.json"
    checkpoint = str(run / "best.pt")
    options = ["--checkpoint", checkpoint, "--beam", "2", "--length-penalty", "0.5", "--stop-early"]
    options += ["--json", "--record", str(record)]
    options += ["--name", "Tiny", "--trained-on", "CPU", "--train-hours", "0.01"]
    options += ["--command", "make data", "--command", "make train"]
    result = script("evaluate", *options)
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    recorded = ModelResult.load(record)
    assert (recorded.bleu, recorded.bleu_lc, recorded.chrf) == (
        scores["bleu"],
        scores["bleu_lc"],
        scores["chrf"],
    )
    assert recorded.signatures == scores["signatures"] and recorded.beam_size == 2
    inference = load_model(checkpoint)
    assert recorded.parameters == inference.model.num_parameters()
    assert recorded.train_steps == inference.step > 0 and recorded.averaged_checkpoints == 1
    assert (recorded.model, recorded.direction, recorded.corpus, recorded.split) == (
        "transformer-tiny",
        "en-de",
        "files",
        "test",
    )
    assert (recorded.name, recorded.device, recorded.train_hours) == ("Tiny", "CPU", 0.01)
    precision = scores["precision"]
    assert recorded.decode_precision == precision and precision in ("fp32", "bf16")
    assert recorded.domain == domain_of("files") == "your own parallel text"
    evaluation = f"seq2seq evaluate --checkpoint {checkpoint} --split test --beam 2"
    evaluation += f" --precision {precision} --length-penalty 0.5 --stop-early"
    assert recorded.commands == ["make data", "make train", evaluation]
    assert len(recorded.git_revision.removesuffix("-dirty")) == 40
    assert "Tiny" in sections(tmp_path / "results")["results"]

    incomplete = script("evaluate", "--checkpoint", checkpoint, "--record", str(record))
    assert incomplete.returncode == 2
    assert "--record needs --name, --trained-on, --train-hours, --command" in incomplete.stderr
    assert ModelResult.load(record) == recorded  # untouched


@pytest.mark.slow  # decodes with the command
def test_translate_gives_one_line_per_input_line(run, tmp_path):
    """A bare CR stays inside its line, so two input lines give two outputs, as in evaluate.py."""
    path = tmp_path / "two.txt"
    path.write_bytes(b"A dog\rruns.\nThe cat.\n")
    result = script("translate", "--checkpoint", str(run / "best.pt"), "--input", str(path))
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
