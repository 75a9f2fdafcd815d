"""The chapters' endpoints (seq2seq.serving.chapters): each answers exactly what the library's
own functions compute, and refuses bad input with 422 and one line."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from explorer_models import EN_DE
from fastapi.testclient import TestClient

from seq2seq.data.specials import EOS_ID
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.models.attention import (
    AdditiveAttention,
    DotProductAttention,
    MultiHeadAttention,
    masked_softmax,
    nadaraya_watson,
)
from seq2seq.models.kernel_regression import sample_points, train
from seq2seq.serving.app import create_app
from seq2seq.serving.chapters import seeded
from seq2seq.serving.explorer import STATIC, STATIC_TYPES
from seq2seq.serving.registry import served_model

SENTENCE = "A dog sees a cat and a cat sees a dog ."


@pytest.fixture(scope="module")
def client(random_gru: Path) -> Iterator[TestClient]:
    models = {
        folder.name: served_model(folder.name, load_model(folder), torch.device("cpu"))
        for folder in (EN_DE, random_gru)
    }
    with TestClient(create_app(models)) as client:
        yield client


def post(client: TestClient, chapter: str, body: dict) -> dict:
    answer = client.post(f"/v1/chapters/{chapter}", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_every_page_and_script_is_served_and_every_link_leads_to_one(client) -> None:
    assert sorted([*STATIC_TYPES, "index.html"]) == sorted(path.name for path in STATIC.iterdir())
    for name, kind in STATIC_TYPES.items():
        answer = client.get(f"/explorer/{name}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
    for page in STATIC.glob("*.html"):
        for link in re.findall(r'(?:href|src)="(/[^"]*)"', page.read_text(encoding="utf-8")):
            assert client.get(link).status_code == 200, f"{page.name}: {link}"


def test_nadaraya_watson_pools_like_the_textbook_formula() -> None:
    keys = torch.tensor([0.0, 1.0, 3.0])
    values = torch.tensor([1.0, 2.0, 4.0])
    pooled, weights = nadaraya_watson(torch.tensor([1.0]), keys, values, torch.tensor([2.0]))
    kernel = torch.exp(-(((1.0 - keys) * 2.0) ** 2) / 2)  # e^-2, 1, e^-8
    assert torch.allclose(weights[0], kernel / kernel.sum())
    assert torch.isclose(pooled[0], (kernel * values).sum() / kernel.sum())


def test_the_fit_is_the_examples_data_and_learned_width(client) -> None:
    answer = post(client, "nadaraya_watson/fit", {})
    points = sample_points(50, 50, 5.0, 0)
    assert answer["x_train"] == points.x_train.tolist()
    assert answer["y_test"] == points.y_test.tolist()
    w = torch.ones(1)
    losses = train(w, points.x_train, points.y_train, 1.0, 200)
    assert answer["w"] == w.item() and answer["losses"] == losses
    assert answer["w"] == pytest.approx(5.672, abs=1e-3)  # about 6x narrower (docs/attention.md)
    assert losses[-1] < losses[0]


def test_the_pooling_answers_nadaraya_watson_for_each_width(client) -> None:
    keys, values, queries = [0.0, 0.5, 2.0, 4.0], [1.0, -1.0, 3.0, 0.5], [0.2, 3.0]
    body = {"keys": keys, "values": values, "queries": queries, "widths": [1.0, 5.5]}
    answer = post(client, "nadaraya_watson", body)
    for n, w in enumerate([1.0, 5.5]):
        pooled, weights = nadaraya_watson(*map(torch.tensor, (queries, keys, values, [w])))
        assert answer["pooled"][n] == pooled.tolist()
        assert answer["weights"][n] == weights.tolist()
    assert answer["weights"][1][0][0] > answer["weights"][0][0][0]  # narrower: closer keys count


def test_the_masked_softmax_chapter_answers_the_librarys_weights(client) -> None:
    scores = [[2.0, 1.0, 0.5, 3.0], [0.0, 1, -1.0, 0.5], [1.0, 1.0, 1.0, 1.0]]
    weights = post(client, "masked_softmax", {"scores": scores, "valid_lens": [2, 4, 0]})["weights"]
    expected = masked_softmax(torch.tensor([scores]), torch.tensor([[2, 4, 0]]))[0]
    assert weights == expected.tolist()  # the float32 values themselves
    assert weights[0][2:] == [0.0, 0.0] and weights[2] == [0.0] * 4  # masked: exactly 0
    assert sum(weights[0]) == pytest.approx(1.0, abs=1e-6)


def test_seeded_weights_depend_on_the_seed_alone() -> None:
    state = torch.get_rng_state()
    with torch.device("meta"):
        modules = [AdditiveAttention(2, 2, 4) for _ in range(3)]
    first, again, other = (seeded(m, seed) for m, seed in zip(modules, (7, 7, 8), strict=True))
    assert torch.equal(torch.get_rng_state(), state)  # the process's random state is untouched
    assert torch.equal(first.query_proj.weight, again.query_proj.weight)
    assert not torch.equal(first.query_proj.weight, other.query_proj.weight)
    assert first.key_proj.weight.abs().max() <= 1 / 2**0.5  # within ±1/sqrt(fan_in)


def test_scoring_answers_both_modules_scores_and_weights(client) -> None:
    queries = [[1.0, 0.0], [0.0, 2.0]]
    keys = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    answer = post(client, "scoring", {"queries": queries, "keys": keys, "seed": 3})
    q, k = torch.tensor([queries]), torch.tensor([keys])
    with torch.device("meta"):
        additive = AdditiveAttention(2, 2, 8)
    additive = seeded(additive, 3)
    with torch.no_grad():
        projected = additive.project_keys(k)
        _, weights = additive(q, projected, k, None)
        assert answer["additive"]["weights"] == weights[0].tolist()
        assert answer["additive"]["scores"] == additive.score(q, projected)[0].tolist()
        _, weights = DotProductAttention()(q, k, k, None)
    assert answer["dot_product"]["weights"] == weights[0].tolist()
    # q^T k / sqrt(2) for query 1 = (0, 2): 0, 2 / sqrt(2), 2 / sqrt(2)
    assert answer["dot_product"]["scores"][1] == pytest.approx([0.0, 2**0.5, 2**0.5], abs=1e-6)


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_multi_head_steps_give_the_modules_own_output(client, heads: int) -> None:
    body = {"length": 5, "dim": 8, "heads": heads, "seed": 1, "input_seed": 2}
    answer = post(client, "multi_head", body)
    with torch.device("meta"):
        attention = MultiHeadAttention(8, heads)
    attention = seeded(attention, 1)
    x = torch.tensor([answer["inputs"]])
    assert x.shape == (1, 5, 8)
    assert torch.equal(x[0], torch.randn(5, 8, generator=torch.Generator().manual_seed(2)))
    with torch.no_grad():
        output, weights = attention(x, x, None, need_weights=True)
    assert torch.allclose(torch.tensor(answer["output"]), output[0], atol=1e-6)
    assert answer["weights"] == weights[0].tolist()
    shape = [len(answer["context"]), len(answer["context"][0]), len(answer["context"][0][0])]
    assert shape == [heads, 5, 8 // heads]
    merged = torch.tensor(answer["merged"])  # the heads side by side: head h in columns h*d...
    assert torch.equal(merged[:, : 8 // heads], torch.tensor(answer["context"][0]))


def test_self_attention_with_pe_is_the_models_first_encoder_layer(client) -> None:
    answer = post(client, "self_attention", {"text": SENTENCE})
    inference = load_model(EN_DE)
    ids = inference.src_tokenizer.encode([SENTENCE])[0]
    src = torch.tensor([[*ids, EOS_ID]])
    assert answer["pieces"][-1] == "</s>" and len(answer["pieces"]) == src.shape[1]
    assert answer["model"] == EN_DE.name and answer["models"] == [EN_DE.name]  # no GRU
    with torch.no_grad():
        maps = inference.model.attention_maps(src, torch.tensor([src.shape[1]]), src[:, :1])
        encodings = inference.model.positional(torch.arange(src.shape[1]))
    expected = maps["encoder_self"][0, 0]  # (H, S, S) of layer 0
    assert torch.allclose(torch.tensor(answer["with_pe"]), expected, atol=1e-6)
    assert answer["positional"] == encodings.tolist()
    # Without positions, self-attention cannot tell two copies of a word apart: "a" (pieces
    # 0 and 3 of "A dog sees a cat ...") attends alike wherever it stands, with PE it does not.
    without = torch.tensor(answer["without_pe"])
    repeated = [i for i, piece in enumerate(answer["pieces"]) if piece == "▁a"]
    assert len(repeated) >= 2
    first, second = repeated[:2]
    assert torch.allclose(without[:, first], without[:, second], atol=1e-6)
    assert not torch.allclose(torch.tensor(answer["with_pe"])[:, first], expected[:, second])


@pytest.mark.parametrize(
    ("chapter", "body", "message"),
    [
        ("masked_softmax", {"scores": [[1.0, 2.0], [1.0]], "valid_lens": [1, 1]}, "scores: rows"),
        ("masked_softmax", {"scores": [[1.0, 2.0]], "valid_lens": [1, 1]}, "valid_lens: 2 len"),
        ("masked_softmax", {"scores": [[1.0, 2.0]], "valid_lens": [3]}, "valid_lens: each from"),
        ("nadaraya_watson/fit", {"n_train": 1}, "n_train: Input should be greater"),
        ("nadaraya_watson/fit", {"epochs": 10_000}, "epochs: Input should be less"),
        (
            "nadaraya_watson",
            {"keys": [1.0], "values": [1.0, 2.0], "queries": [0.0], "widths": [1.0]},
            "values: 2 values for 1 keys",
        ),
        (
            "nadaraya_watson",
            {"keys": [1.0], "values": [1.0], "queries": [0.0], "widths": [0.0]},
            "widths[0]: Input should be greater than 0",
        ),
        (
            "nadaraya_watson",
            {"keys": [0.0] * 201, "values": [0.0] * 201, "queries": [0.0], "widths": [1.0]},
            "keys: List should have at most 200 items",
        ),
        ("scoring", {"queries": [[1.0, 2.0]], "keys": [[1.0]]}, "keys: 1 numbers each"),
        ("scoring", {"queries": [[1.0] * 9], "keys": [[1.0] * 9]}, "queries: rows of 1 to 8"),
        ("scoring", {"queries": [[1.0]], "keys": [[1.0]], "seed": -1}, "seed: Input should be"),
        ("scoring", {"queries": [[1.0]], "keys": [[1.0]], "extra": 1}, "extra: Extra inputs"),
        ("multi_head", {"dim": 8, "heads": 3}, "heads: 3 does not divide dim (8)"),
        ("multi_head", {"length": 17}, "length: Input should be less than or equal to 16"),
        ("self_attention", {"text": " "}, "text: empty"),
        ("self_attention", {"text": "x" * 201}, "text: 201 characters, over this chapter's"),
        ("self_attention", {"text": "a", "model": "gru-random.multi30k.en-de"}, "model: gru-"),
    ],
)
def test_bad_input_gets_422_and_one_line(client, chapter: str, body: dict, message: str) -> None:
    answer = client.post(f"/v1/chapters/{chapter}", json=body)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error.startswith(message) and "\n" not in error


def test_a_number_that_is_not_finite_gets_422(client) -> None:
    body = '{"scores": [[NaN, 1.0]], "valid_lens": [1]}'
    answer = client.post(
        "/v1/chapters/masked_softmax", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"].startswith("scores[0][0]: Input should be a finite number")


def test_an_unknown_model_gets_404(client) -> None:
    answer = client.post("/v1/chapters/self_attention", json={"text": "a", "model": "nope"})
    assert answer.status_code == 404 and answer.json()["error"].startswith("model: no model")
