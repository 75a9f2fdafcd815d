"""Word alignment: the rules on hand-made maps, the combination heuristics on hand-made links,
AER where its value is known exactly, the shipped Tatoeba models on lines of the Hansards gold,
POST /v1/align on loopback, a bad gold file as one `error:` line, and the AER in the shipped
Tatoeba cards reproduced."""

import copy
import dataclasses
import json
import shlex
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import get_args
from unittest import mock

import httpx2
import pytest
import torch
import uvicorn

import seq2seq
from seq2seq.api import Model
from seq2seq.commands import align, serve
from seq2seq.commands.cli import run_cli
from seq2seq.data.word_links import COMBINATIONS, grow_diag, grow_diag_final, intersection, union
from seq2seq.decoding.alignment import (
    Aligner,
    AlignmentRule,
    AlignmentScore,
    GoldLinks,
    attention_links,
    parse_gold,
)
from seq2seq.decoding.model_result import SHIPPED_MODELS, ModelResult
from seq2seq.decoding.torch_translator import Translator
from seq2seq.errors import UserError
from seq2seq.serving.app import create_app
from seq2seq.serving.registry import served_model
from seq2seq.serving.schemas import AlignRequest

EN_FR, FR_EN = "transformer-small.tatoeba.en-fr", "transformer-small.tatoeba.fr-en"
ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "models"


@pytest.fixture(scope="module")
def hansards(shared_data: Path) -> tuple[Path, Path]:
    folder = shared_data / "alignment"
    return folder / "hansards.en-fr.src-tgt", folder / "hansards.en-fr.gold"


@pytest.fixture(scope="module")
def en_fr() -> Model:
    return seq2seq.load(EN_FR, device="cpu")


# --- Rules on hand-made maps ------------------------------------------------------------------


def test_rules_are_parsed_and_named_back() -> None:
    assert AlignmentRule.parse("mean") == AlignmentRule()
    assert AlignmentRule.parse("layer:1") == AlignmentRule(layer=1)
    assert AlignmentRule.parse("head:1.3") == AlignmentRule(1, 3)
    assert AlignmentRule.parse("shifted") == AlignmentRule(shifted=True)
    assert AlignmentRule.parse("shifted:head:0.2") == AlignmentRule(0, 2, shifted=True)
    assert AlignmentRule.parse("shifted:alignment-head") == AlignmentRule(
        shifted=True, trained=True
    )
    texts = ("mean", "layer:1", "head:1.3", "shifted:mean", "shifted:layer:0", "alignment-head")
    for text in texts:
        assert str(AlignmentRule.parse(text)) == text
    for bad in ("", "max", "head:1", "layer:x", "shifted:", "shifted:shifted", "alignment"):
        with pytest.raises(UserError, match=r"^--rule .*: one of mean, layer:L, head:L\.H or al"):
            AlignmentRule.parse(bad)


def test_each_rule_reads_its_own_layer_head_and_row() -> None:
    """Two source words of one piece each, two target words (pieces "▁a" "b" and "▁c"), EOS on
    both sides: head 1 of layer 0 looks across, every other head along the diagonal."""
    diagonal = torch.tensor([[0.8, 0.1, 0.1], [0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.1, 0.3, 0.6]])
    across = torch.tensor([[0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    cross = torch.stack([torch.stack([diagonal, across]), torch.stack([diagonal, diagonal])])
    maps = {"cross": cross}  # (L 2, H 2, T 4, S 3)
    src_words, tgt_words = [0, 1, 2], [0, 0, 1, 2]

    def links(rule: str) -> set[tuple[int, int]]:
        return attention_links(maps, AlignmentRule.parse(rule), src_words, tgt_words)

    assert links("head:0.0") == {(0, 0), (1, 1)}
    assert links("head:0.1") == {(1, 0), (0, 1)}
    assert links("mean") == {(0, 0), (1, 1)}  # 3 diagonal heads out of 4
    # shifted: target piece t reads row t + 1; word 0 ("▁a" "b") averages rows 1 and 2
    assert links("shifted:head:0.0") == {(1, 0), (1, 1)}


def test_a_rule_the_model_lacks_is_refused_before_any_work(en_fr: Model, tiny_model) -> None:
    model = en_fr.translator.model  # 2 decoder layers of 4 heads
    AlignmentRule(1, 3).check(model)
    with pytest.raises(UserError, match=r"^--rule head:2\.0: the model has layers 0-1, heads 0-3$"):
        AlignmentRule(2, 0).check(model, "--rule")
    with pytest.raises(UserError, match=r"^rule layer:0: the GRU has one attention map"):
        AlignmentRule(0).check(tiny_model("gru"))


# --- Combination heuristics on hand-made links -------------------------------------------------

# Five words a side: the diagonal agreed on, and one link of each direction far from it.
FORWARD_A = {(0, 0), (1, 1), (2, 2), (3, 3), (0, 4)}  # one source word per target word
REVERSE_A = {(0, 0), (1, 1), (2, 2), (3, 3), (4, 0)}  # one target word per source word
# Three source words, four target words: the reverse link (2, 3) grows from (2, 2), which grows
# from (1, 1); the forward link (0, 3) touches no alignment point and links two aligned words.
FORWARD_B = {(0, 0), (1, 1), (2, 2), (0, 3)}
REVERSE_B = {(0, 0), (1, 1), (2, 3)}


def test_the_heuristics_offered_are_those_of_the_library() -> None:
    """The command line and the HTTP schema list them without importing torch."""
    assert tuple(COMBINATIONS) == align.COMBINE_CHOICES
    assert get_args(AlignRequest.model_fields["combine"].annotation) == tuple(COMBINATIONS)


def test_intersection_and_union() -> None:
    assert intersection(FORWARD_A, REVERSE_A) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert union(FORWARD_B, REVERSE_B) == {(0, 0), (1, 1), (2, 2), (0, 3), (2, 3)}


def test_grow_diag_adds_neighbours_that_link_an_unaligned_word() -> None:
    assert grow_diag(FORWARD_A, REVERSE_A) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert grow_diag(FORWARD_B, REVERSE_B) == {(0, 0), (1, 1), (2, 2), (2, 3)}


def test_grow_diag_final_adds_the_links_of_unaligned_words_alone() -> None:
    assert grow_diag_final(FORWARD_A, REVERSE_A) == FORWARD_A | REVERSE_A
    assert grow_diag_final(FORWARD_B, REVERSE_B) == {(0, 0), (1, 1), (2, 2), (2, 3)}


def test_grow_diag_final_and_adds_links_whose_two_words_are_unaligned() -> None:
    final_and = COMBINATIONS["grow-diag-final-and"]
    assert final_and(FORWARD_A, REVERSE_A) == {(0, 0), (1, 1), (2, 2), (3, 3)}  # one side aligned
    assert final_and({(0, 0), (2, 3)}, {(0, 0)}) == {(0, 0), (2, 3)}  # (2, 3): both unaligned


# --- AER --------------------------------------------------------------------------------------


def test_aer_precision_and_recall_of_hand_made_links() -> None:
    gold = parse_gold("1-1 2p2 4-4")  # sure (0, 0) and (3, 3); (1, 1) possible
    assert gold == GoldLinks(sure={(0, 0), (3, 3)}, possible={(0, 0), (1, 1), (3, 3)})
    score = AlignmentScore()
    score.add({(0, 0), (1, 1), (2, 2)}, gold)  # |A| 3, |S| 2, |A∩S| 1, |A∩P| 2
    assert (score.precision, score.recall, score.aer) == (2 / 3, 1 / 2, 1 - 3 / 5)
    score.add({(0, 0)}, GoldLinks(sure={(0, 0)}, possible={(0, 0)}))  # counts are summed
    assert (score.predicted, score.sure, score.sure_found, score.possible_found) == (4, 3, 2, 3)
    assert score.summary() == {
        "aer": 28.6,
        "precision": 75.0,
        "recall": 66.7,
        "links": 4,
        "sure": 3,
    }
    with pytest.raises(ValueError, match="'0-1' is not a link"):
        parse_gold("1-1 0-1")


# --- The shipped Tatoeba models on Hansards lines --------------------------------------------


def test_the_en_fr_model_aligns_hansards_lines(en_fr: Model, hansards: tuple[Path, Path]) -> None:
    lines = hansards[0].read_text(encoding="utf-8").splitlines()
    source, target = (side.strip() for side in lines[2].split("|||"))  # oh , oh ! ||| oh , oh !
    assert en_fr.align(source, target).pharaoh() == "0-0 1-1 2-2 3-3"
    reverse = seq2seq.load(FR_EN, device="cpu")
    assert en_fr.align(source, target, reverse=reverse).pharaoh() == "0-0 1-1 2-2 3-3"
    own = en_fr.align("The cat sleeps.")  # its own translation, one link per target word
    assert own.src_words == ["The", "cat", "sleeps."]
    assert sorted(j for _, j in own.links) == list(range(len(own.tgt_words)))
    with pytest.raises(ValueError, match="combine 'grow': one of intersection"):
        en_fr.align(source, target, combine="grow")


def test_the_alignment_head_rule_reads_the_trained_head(en_fr: Model, monkeypatch) -> None:
    monkeypatch.setattr(en_fr.translator, "alignment_head", None)  # a model trained without
    with pytest.raises(ValueError, match=r"^rule alignment-head: the model was trained without"):
        en_fr.align("The cat sleeps.", "Le chat dort.", rule="alignment-head")
    # a model trained with train.alignment_head = [-1, 2] (of 2 decoder layers)
    config = copy.deepcopy(en_fr.inference.config)
    config.train.alignment_weight, config.train.alignment_head = 0.5, (-1, 2)
    inference = dataclasses.replace(en_fr.inference, config=config)
    assert Translator.from_inference(inference, "cpu").alignment_head == (1, 2)
    monkeypatch.setattr(en_fr.translator, "alignment_head", (1, 2))
    trained = en_fr.align("The big cat sleeps.", "Le gros chat dort.", rule="alignment-head")
    assert trained == en_fr.align("The big cat sleeps.", "Le gros chat dort.", rule="head:1.2")


def test_align_scores_gold_lines(hansards: tuple[Path, Path], capsys) -> None:
    """Lines 7-8, twice `hear , hear ! ||| bravo !` (sure 4-2): the model links bravo to hear,
    a possible link, and ! to the first comma, a wrong one: |A| 4, |S| 2, |A∩S| 0, |A∩P| 2."""
    pairs, gold = hansards
    align.main(["--model", EN_FR, "--input", str(pairs), "--gold", str(gold), "--lines", "7-8"])
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split() == ["mean", "66.7", "50.0", "0.0", "4", "2"]  # 1 - 2/6


def test_several_rules_are_scored_beside_each_other(
    tmp_path: Path, hansards: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--rule` twice with --gold: each rule's row is what the rule alone gives, and with
    --reverse-model each rule is combined with the reverse model's same rule, each model
    teacher-forcing a pair once for both rules; a record keeps the first rule as its rule and
    every row; without --gold two rules, and a rule given twice, are refused in one line."""
    pairs, gold = map(str, hansards)
    argv = ["--model", EN_FR, "--input", pairs, "--gold", gold, "--lines", "1-20", "--json"]
    both = ["--reverse-model", FR_EN, "--combine", "grow-diag"]
    alone = {}
    for rule in ("head:1.0", "mean"):
        align.main([*argv, *both, "--rule", rule])
        alone |= json.loads(capsys.readouterr().out)
    record = tmp_path / "record.json"
    shutil.copy(RECORDS / f"{EN_FR}.shipped.json", record)
    rules = ["--rule", "head:1.0", "--rule", "mean"]
    with mock.patch.object(Aligner, "maps", autospec=True, side_effect=Aligner.maps) as maps:
        align.main([*argv, *both, *rules, "--record", str(record)])
    together = json.loads(capsys.readouterr().out)
    assert maps.call_count == 2 * 20  # each of lines 1-20 once each way
    assert list(together) == ["head:1.0", "head:1.0 grow-diag", "mean", "mean grow-diag"]
    assert together == alone
    test = ModelResult.load(record).alignment_test
    assert (test["rule"], test["scores"]) == ("head:1.0", {"lines 1-20": together})
    assert shlex.join(rules) in test["command"]
    align.main([*argv[:-1], *both, *rules])  # the table: its columns in line
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 5 and len({len(line) for line in table}) == 1
    assert together["head:1.0"] != together["mean"]
    with pytest.raises(SystemExit) as stopped:
        run_cli(partial(align.main, ["--model", EN_FR, "--rule", "mean", "--rule", "layer:0"]))
    assert stopped.value.code == 2
    expected = "error: several --rule need --gold (and no --grid) (see seq2seq align --help)\n"
    assert capsys.readouterr().err == expected
    with pytest.raises(SystemExit) as stopped:
        run_cli(partial(align.main, [*argv, "--rule", "mean", "--rule", "mean"]))
    assert stopped.value.code == 2
    expected = "error: --rule mean given twice (see seq2seq align --help)\n"
    assert capsys.readouterr().err == expected


def test_a_bad_gold_file_is_one_error_line(tmp_path: Path, hansards: tuple[Path, Path], capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("1-1 2-2\n1-1 2x2\n", encoding="utf-8")
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("2 . ||| 2 .\n2 . ||| 2 .\n", encoding="utf-8")
    argv = ["--model", EN_FR, "--input", str(pairs), "--gold", str(gold)]
    with pytest.raises(SystemExit) as stopped:
        run_cli(partial(align.main, argv))
    assert stopped.value.code == 2
    expected = f"error: {gold}:2: '2x2' is not a link i-j (sure) or ipj (possible), from 1\n"
    assert capsys.readouterr().err == expected


# --- The AER in the shipped Tatoeba models' cards --------------------------------------------


def test_recording_the_alignment_test_changes_nothing_else(
    tmp_path: Path, hansards: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Lines 7-8 as in test_align_scores_gold_lines, recorded in a copy of the en-fr record; a
    record of fr-en is refused in one line before any alignment."""
    pairs, gold = map(str, hansards)
    path = tmp_path / "record.json"
    before = json.loads((RECORDS / f"{EN_FR}.shipped.json").read_text(encoding="utf-8"))
    before.pop("alignment_test")
    path.write_text(json.dumps(before), encoding="utf-8")
    argv = ["--model", EN_FR, "--input", pairs, "--gold", gold, "--lines", "7-8"]
    align.main([*argv, "--record", str(path)])
    after = json.loads(path.read_text(encoding="utf-8"))
    recorded = after.pop("alignment_test")
    assert after == before
    assert recorded["git_revision"]
    del recorded["git_revision"]
    scores = {"aer": 66.7, "precision": 50.0, "recall": 0.0, "links": 4, "sure": 2}
    assert recorded == {
        "gold": "hansards.en-fr.gold",
        "pairs": 447,
        "direction": "en-fr",
        "rule": "mean",
        "scores": {"lines 7-8": {"mean": scores}},
        "command": shlex.join(["seq2seq", "align", *argv]),
    }
    capsys.readouterr()
    wrong = tmp_path / "fr-en.json"
    wrong.write_text(json.dumps({**before, "direction": "fr-en"}), encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        run_cli(partial(align.main, [*argv, "--record", str(wrong)]))
    assert stopped.value.code == 2
    expected = f"error: --record {wrong}: a record of fr-en; the model is en-fr\n"
    assert capsys.readouterr().err == expected


def card_command(command: str, hansards: tuple[Path, Path]) -> list[str]:
    """The arguments of a card's `seq2seq align` command, its two Hansards files (named from the
    repository root) those of the suite's shared data."""
    words = shlex.split(command)
    assert words[:2] == ["seq2seq", "align"]
    for option, path in zip(("--input", "--gold"), hansards, strict=True):
        given = words.index(option) + 1
        assert words[given] == f"../shared/data/alignment/{path.name}"
        words[given] = str(path)
    return words[2:]


@pytest.mark.slow  # aligns the 447 pairs with both models
@pytest.mark.parametrize("name", [EN_FR, FR_EN])
def test_align_gold_reproduces_the_aer_of_the_cards(
    name: str, hansards: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The card's command, run, prints the card's scores exactly: the model alone, the benchmark
    record's, and both directions combined with grow-diag, the heuristic it chose on lines
    1-100; the card is the record's copy."""
    card = ModelResult.load(SHIPPED_MODELS / name / "card.json")
    test = card.alignment_test
    assert ModelResult.load(RECORDS / f"{name}.shipped.json").alignment_test == test
    assert (test["gold"], test["pairs"], test["direction"]) == (hansards[1].name, 447, name[-5:])
    align.main([*card_command(test["command"], hansards), "--json"])
    assert json.loads(capsys.readouterr().out) == test["scores"]
    benchmark = json.loads((ROOT / "results/alignment/aer-amd-epyc.json").read_text("utf-8"))
    both = benchmark["combined_mean"]  # en-fr's links grown with fr-en's
    assert (benchmark["chosen_on"], both["chosen"]) == ("lines 1-100", "grow-diag")
    for split, lines in {"lines 1-100": "lines 1-100", "all 447": "lines 1-447"}.items():
        scores = test["scores"][lines]
        assert scores["mean"] == benchmark[test["direction"]]["mean"][split]
        if name == EN_FR:
            assert scores["mean grow-diag"] == both["heuristics"]["grow-diag"][split]


# --- POST /v1/align on loopback ---------------------------------------------------------------


# A hand example: the model links the first pair word for word, and in the second bravo to a
# hear (possible) and ! to the first comma (wrong), as on Hansards lines 7-8: |A| 5 + 2, |S| 5
# + 1, |A∩S| 5 + 0, |A∩P| 5 + 1, AER 1 - 11/13.
GOLD_PAIRS = "the house is small . ||| la maison est petite .\nhear , hear ! ||| bravo !\n"
GOLD_LINES = "1-1 2-2 3-3 4-4 5-5\n4-2 1p1 3p1\n"


@pytest.fixture(scope="module")
def gold_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gold")
    (folder / "pairs.txt").write_text(GOLD_PAIRS, encoding="utf-8")
    (folder / "gold.txt").write_text(GOLD_LINES, encoding="utf-8")
    return folder / "pairs.txt", folder / "gold.txt"


@pytest.fixture(scope="module")
def server(en_fr: Model, gold_files: tuple[Path, Path]) -> Iterator[str]:
    """A server of the en-fr model and the gold files on a free port of 127.0.0.1, in a thread
    of this process."""
    served = {EN_FR: served_model(EN_FR, en_fr.inference, torch.device("cpu"))}
    gold = align.read_gold_file(*map(str, gold_files))
    config = uvicorn.Config(create_app(served, gold=gold), log_level="warning")
    running = uvicorn.Server(config)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=running.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    for _ in range(200):
        if running.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    running.should_exit = True
    thread.join(timeout=30)


def test_post_align_gives_links_and_one_line_errors(server: str) -> None:
    house = {"source": "the house is small .", "target": "la maison est petite ."}
    pairs = [{"source": "2 .", "target": "2 ."}, house]
    answer = httpx2.post(f"{server}/v1/align", json={"pairs": pairs}, timeout=60)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert [pair["links"] for pair in found["alignments"]] == ["0-0 1-1", "0-0 1-1 2-2 3-3 4-4"]
    assert found["alignments"][1]["target_words"] == ["la", "maison", "est", "petite", "."]
    body = {"pairs": [{"source": "I see."}], "beam": 1}
    own = httpx2.post(f"{server}/v1/align", json=body, timeout=60)
    assert own.status_code == 200, own.text
    assert own.json()["alignments"][0]["target_words"]  # the model's translation
    for body, status, error in [
        ({"pairs": pairs, "rule": "head:7.0"}, 422, "rule head:7.0: the model has layers 0-1"),
        ({"pairs": [{"source": "a", "target": " "}]}, 422, "pairs[0]: the target has no words"),
        ({"pairs": pairs, "reverse_model": "x"}, 404, "reverse_model: no model named 'x'"),
        ({"pairs": [{"source": "a" * 1001}]}, 413, "pairs.source[0]: 1001 characters"),
    ]:
        answer = httpx2.post(f"{server}/v1/align", json=body, timeout=60)
        assert answer.status_code == status, answer.text
        assert answer.json()["error"].startswith(error), answer.text


def test_post_align_scores_gold_as_seq2seq_align_does(
    server: str, gold_files: tuple[Path, Path], capsys
) -> None:
    pairs_file, gold_file = map(str, gold_files)
    align.main(["--model", EN_FR, "--input", pairs_file, "--gold", gold_file, "--grid", "--json"])
    expected = json.loads(capsys.readouterr().out)
    assert len(expected) == 2 * (4 + 1) + 1  # 2 layers of 4 heads, their means, the mean
    assert expected["mean"] == {
        "aer": 15.4,
        "precision": 85.7,
        "recall": 83.3,
        "links": 7,
        "sure": 6,
    }
    pairs = [
        {"source": source, "target": target, "gold": gold}
        for (source, target), gold in zip(
            (line.split(" ||| ") for line in GOLD_PAIRS.splitlines()),
            GOLD_LINES.splitlines(),
            strict=True,
        )
    ]
    answer = httpx2.post(f"{server}/v1/align", json={"pairs": pairs, "grid": True}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["scores"] == expected
    shown = [pair["gold"] for pair in answer.json()["alignments"]]
    assert shown == [
        {"sure": "0-0 1-1 2-2 3-3 4-4", "possible": ""},
        {"sure": "3-1", "possible": "0-0 2-0"},
    ]
    answer = httpx2.post(f"{server}/v1/align", json={"pairs": pairs}, timeout=60)
    assert answer.json()["scores"] == {"mean": expected["mean"]}
    answer = httpx2.post(f"{server}/v1/align/gold", json={}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"model": EN_FR, "file": gold_file, "pairs": 2, "scores": expected}


def test_bad_gold_gets_one_line_and_a_status(server: str) -> None:
    pair = {"source": "2 .", "target": "2 ."}
    for body, status, error in [
        ({"pairs": [{**pair, "gold": "1-1 2x2"}]}, 422, "pairs[0].gold: '2x2' is not a link i-j"),
        ({"pairs": [{**pair, "gold": "1-1 3p2"}]}, 422, "pairs[0].gold: link 3-2 is past the "
         "pair's 2 source and 2 target words"),
        ({"pairs": [pair], "grid": True}, 422, "pairs[0]: no gold; to score, give every pair"),
        ({"pairs": [{**pair, "gold": "1-1"}, pair]}, 422, "pairs[1]: no gold"),
        ({"pairs": [{"source": "2 .", "gold": "1-1"}]}, 422, "pairs[0]: no target"),
        ({"pairs": [{**pair, "gold": "1-1"}], "grid": True, "reverse_model": EN_FR}, 422,
         "grid: scores one model; leave reverse_model out"),
        ({"pairs": [{**pair, "gold": "1-1 " * 70_000}]}, 413, "the request body is over"),
        ({"pairs": [{**pair, "gold": 11}]}, 422, "pairs[0].gold: Input should be a valid string"),
    ]:  # fmt: skip
        answer = httpx2.post(f"{server}/v1/align", json=body, timeout=60)
        assert answer.status_code == status, answer.text
        assert answer.json()["error"].startswith(error), answer.text
    answer = httpx2.post(f"{server}/v1/align/gold", json={"model": "x"}, timeout=60)
    assert (answer.status_code, answer.json()["error"]) == (
        404,
        f"model: no model named 'x'; this server has {EN_FR}",
    )


def test_a_bad_gold_file_stops_the_server_with_one_line(
    tmp_path: Path, gold_files: tuple[Path, Path], capsys
) -> None:
    gold = tmp_path / "gold.txt"
    gold.write_text("1-1\n", encoding="utf-8")
    argv = ["--model", EN_FR, "--port", "0", "--gold", str(gold_files[0]), str(gold)]
    with pytest.raises(SystemExit) as stopped:
        run_cli(partial(serve.main, argv))
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"error: --gold {gold}: 1 lines, the input has 2\n"


@pytest.mark.parametrize("text", ["²-3", "0-2", "3-2", "1-9", "a-b", "1"])
def test_a_bad_line_range_is_one_user_error(text: str) -> None:
    with pytest.raises(UserError, match=r"^--lines .*: A-B with 1 <= A <= B <= 5"):
        align.line_range(text, 5)
