"""The attention explorer's API: POST /v1/explain answers with the model's own weights, words
and alignment, the page's files are served, and bad input gets one line; and every route that
decodes tokenizes a request's lines once."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from explorer_models import DE_EN, EN_DE, GRU_NAME
from fastapi.testclient import TestClient

from seq2seq.data.specials import BOS_ID, EOS_ID
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.data.word_links import word_of_piece
from seq2seq.decoding.explain import first_view, word_alignment
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.models.positional import PositionalEncoding
from seq2seq.serving.app import create_app
from seq2seq.serving.explorer import MAX_TEXT_CHARS, STATIC
from seq2seq.serving.registry import ServedModel, served_model

SENTENCE = "A man in a blue shirt is standing on a ladder ."
ROUNDING = 5e-4  # the API rounds weights to 3 decimals


@pytest.fixture(scope="module")
def models(random_gru: Path) -> dict[str, ServedModel]:
    return {
        folder.name: served_model(folder.name, load_model(folder), torch.device("cpu"))
        for folder in (EN_DE, DE_EN, random_gru)
    }


@pytest.fixture(scope="module")
def client(models: dict[str, ServedModel]) -> Iterator[TestClient]:
    with TestClient(create_app(models)) as client:
        yield client


def expected_maps(served: ServedModel, text: str, tokens: list[int]) -> dict[str, torch.Tensor]:
    translator = served.translator
    src = torch.tensor([[*translator.src_tokenizer.encode([text])[0], EOS_ID]])
    with torch.no_grad():
        maps = translator.model.attention_maps(
            src, torch.tensor([src.shape[1]]), torch.tensor([[BOS_ID, *tokens]])
        )
    return {name: weights[0] for name, weights in maps.items()}


def test_word_of_piece_starts_a_word_at_each_marked_piece() -> None:
    pieces = ["▁Ein", "▁Mann", "es", "▁.", "</s>"]
    assert word_of_piece(pieces) == (["Ein", "Mannes", ".", "</s>"], [0, 1, 1, 2, 3])


def test_word_alignment_sums_source_pieces_and_averages_target_pieces() -> None:
    # target words: [0, 0] [1] </s>; source words: [0] [1, 1] </s>
    attention = torch.tensor(
        [
            [0.5, 0.25, 0.25, 0.0],  # word 0 -> word 1 (0.5 summed) ties word 0 (0.5) ...
            [0.1, 0.3, 0.3, 0.3],  # ... and this piece makes word 1 win: (0.5 + 0.6) / 2
            [0.7, 0.1, 0.1, 0.1],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )
    links = word_alignment(attention, [0, 1, 1, 2], [0, 0, 1, 2])
    assert links == [[0, 1, 0.55], [1, 0, 0.7]]


def test_first_view_is_the_last_layers_head_of_lowest_row_entropy() -> None:
    uniform = torch.full((2, 3), 1 / 3)  # (T, S): entropy log 3 per row
    sharp = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])  # entropies 0 and log 2
    sharper_in_layer_0 = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # entropy 0
    cross = torch.stack(
        [
            torch.stack([sharper_in_layer_0, uniform, uniform]),
            torch.stack([uniform, uniform, sharp]),
        ]
    )  # (L=2, H=3, T=2, S=3)
    assert first_view({"cross": cross}) == {"view": "cross", "layer": 1, "head": 2}
    assert first_view({"bahdanau": uniform}) == {"view": "bahdanau", "layer": 0, "head": 0}


def test_transformer_maps_are_the_models_teacher_forced_weights(client, models) -> None:
    name = EN_DE.name
    body = {"model": name, "text": SENTENCE, "beam": 3, "nbest": 3, "hypothesis": 1}
    answer = client.post("/v1/explain", json=body)
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    assert payload["model"] == name and payload["arch"] == "transformer"
    cross = torch.tensor(payload["hypotheses"][1]["maps"]["cross"])
    assert payload["first_view"] == first_view({"cross": cross})  # of the hypothesis shown
    assert len(payload["hypotheses"]) == 3
    assert ["maps" in h for h in payload["hypotheses"]] == [False, True, False]
    chosen = payload["hypotheses"][1]
    source = payload["source"]
    S, T = len(source["pieces"]), len(chosen["pieces"])
    assert source["pieces"][-1] == chosen["pieces"][-1] == "</s>"
    tokens = models[name].translator.tgt_tokenizer.encode([chosen["text"]])[0]
    expected = expected_maps(models[name], SENTENCE, tokens)
    shapes = {"encoder_self": (4, 4, S, S), "decoder_self": (4, 4, T, T), "cross": (4, 4, T, S)}
    for view, shape in shapes.items():
        weights = torch.tensor(chosen["maps"][view])
        assert weights.shape == shape
        torch.testing.assert_close(weights, expected[view].float(), rtol=0, atol=ROUNDING)
    # One link per target word but </s>, to a source word but </s>.
    assert [u for u, _, _ in chosen["alignment"]] == list(range(len(chosen["words"]) - 1))
    assert all(0 <= v < len(source["words"]) - 1 for _, v, _ in chosen["alignment"])
    positional = torch.tensor(payload["positional"])
    assert positional.shape == (max(S, *(len(h["pieces"]) for h in payload["hypotheses"])), 128)
    encodings = PositionalEncoding(128)(torch.arange(len(positional)))
    torch.testing.assert_close(positional, encodings, rtol=0, atol=ROUNDING)


def test_the_answer_is_compact_json_as_pythons_encoder_writes_it(client) -> None:
    """orjson writes the answer: the same bytes as json.dumps, non-ASCII text kept as it is."""
    body = {"model": DE_EN.name, "text": "Ein Mädchen läuft über die Straße .", "all_maps": True}
    answer = client.post("/v1/explain", json={**body, "beam": 2, "nbest": 2})
    assert answer.status_code == 200
    payload = answer.json()
    assert "ä" in json.dumps(payload["source"], ensure_ascii=False)
    assert answer.content == json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def test_gru_answers_one_bahdanau_map_per_step(client, models) -> None:
    answer = client.post("/v1/explain", json={"model": GRU_NAME, "text": SENTENCE, "beam": 2})
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    (hypothesis,) = payload["hypotheses"]
    assert payload["arch"] == "gru" and payload["positional"] is None
    assert payload["first_view"] == {"view": "bahdanau", "layer": 0, "head": 0}
    assert payload["alignment_rule"].startswith("the Bahdanau weights; pieces summed")
    assert list(hypothesis["maps"]) == ["bahdanau"]
    weights = torch.tensor(hypothesis["maps"]["bahdanau"])
    assert weights.shape == (len(hypothesis["pieces"]), len(payload["source"]["pieces"]))
    tokens = models[GRU_NAME].translator.tgt_tokenizer.encode([hypothesis["text"]])[0]
    if len(tokens) + 1 == len(hypothesis["pieces"]):  # the text re-encodes to the same pieces
        expected = expected_maps(models[GRU_NAME], SENTENCE, tokens)["bahdanau"]
        torch.testing.assert_close(weights, expected, rtol=0, atol=ROUNDING)
    torch.testing.assert_close(weights.sum(1), torch.ones(len(weights)), rtol=0, atol=0.01)


def test_a_target_is_teacher_forced_in_place_of_the_search(client, models) -> None:
    target = "Ein Mann steht auf der Leiter ."
    body = {"model": EN_DE.name, "text": SENTENCE, "beam": 2, "nbest": 2, "beam_tree": True}
    payload = client.post("/v1/explain", json={**body, "target": target}).json()
    (forced,) = payload["hypotheses"]
    assert forced["text"] == target and forced["score"] is None and "beam_tree" not in payload
    tokens = models[EN_DE.name].translator.tgt_tokenizer.encode([target])[0]
    assert len(forced["pieces"]) == len(tokens) + 1 and forced["words"][:-1] == target.split()
    cross = torch.tensor(forced["maps"]["cross"])
    expected = expected_maps(models[EN_DE.name], SENTENCE, tokens)["cross"].float()
    torch.testing.assert_close(cross, expected, rtol=0, atol=ROUNDING)


def test_all_maps_gives_every_hypothesis_its_maps(client) -> None:
    body = {"model": DE_EN.name, "text": "Ein Hund rennt .", "beam": 2, "nbest": 2}
    payload = client.post("/v1/explain", json={**body, "all_maps": True}).json()
    assert all(
        set(h["maps"]) == {"encoder_self", "decoder_self", "cross"} for h in payload["hypotheses"]
    )


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"text": "   "}, 422, "text: empty"),
        (
            {"text": "x" * 5000},
            413,
            f"5000 characters, over the explorer's limit of {MAX_TEXT_CHARS}",
        ),
        ({"text": "a \ud800 b"}, 422, "text: not valid UTF-8 at character 3"),
        ({"text": "hi", "model": "nope"}, 404, "model: no model named 'nope'"),
        ({"text": "hi", "beam": 2, "nbest": 2, "hypothesis": 2}, 422, "hypothesis: 2 is not below"),
        ({"text": "hi", "beam": 0}, 422, "beam:"),
        ({"text": "hi", "target": " "}, 422, "target: empty"),
        ({"text": "hi", "target": "x" * 401}, 413, "target: 401 characters, over the explorer's"),
        ({"text": "hi", "target": "a \ud800"}, 422, "target: not valid UTF-8 at character 3"),
    ],
)
def test_bad_requests_get_one_line(client, body, status, message) -> None:
    # json.dumps escapes the lone surrogate, as a browser's JSON.stringify does.
    headers = {"Content-Type": "application/json"}
    answer = client.post("/v1/explain", content=json.dumps(body), headers=headers)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert message in error and "\n" not in error


def test_page_and_its_files_are_served_and_self_contained(client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for name, kind in [
        ("common.js", "text/javascript"),
        ("explorer.js", "text/javascript"),
        ("explorer.css", "text/css"),
    ]:
        assert f"/explorer/{name}" in page.text
        answer = client.get(f"/explorer/{name}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
    chapter = client.get("/explorer/masked_softmax.html")
    assert chapter.status_code == 200 and chapter.headers["content-type"].startswith("text/html")
    assert client.get("/explorer/masked_softmax.js").status_code == 200
    assert '<a href="/explorer/masked_softmax.html">' in page.text
    assert client.get("/explorer/..%2Fexplorer.py").status_code == 404
    # Nothing is fetched from elsewhere: the page works offline. (The SVG namespace is a name.)
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")
        assert "http:" not in text and "https:" not in text and "//cdn" not in text


@pytest.mark.parametrize(
    ("path", "body", "lines"),
    [
        ("/v1/translate", {"lines": ["A dog runs .", "Two men ."], "beam": 2}, 2),
        ("/translate", {"q": "A dog runs .\nTwo men .", "source": "en", "target": "de"}, 2),
        ("/v1/explain", {"model": EN_DE.name, "text": SENTENCE, "beam": 2}, 1),
    ],
)
def test_a_request_is_tokenized_once_per_line(client, monkeypatch, path, body, lines) -> None:
    encoded: list[str] = []
    encode = Tokenizer.encode

    def counting_encode(tokenizer: Tokenizer, lines: list[str], normalized: bool = False):
        encoded.extend(lines)
        return encode(tokenizer, lines, normalized)

    monkeypatch.setattr(Tokenizer, "encode", counting_encode)
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    assert len(encoded) == lines and len(set(encoded)) == lines


def test_a_text_of_several_sentences_is_explained_a_sentence_at_a_time(client) -> None:
    sentences = ["A dog runs in the snow.", "Two men sit on a bench."]
    body = {"model": EN_DE.name, "text": "  ".join(sentences), "beam": 1}
    alone = client.post("/v1/explain", json={**body, "text": sentences[1]}).json()
    second = client.post("/v1/explain", json={**body, "sentence": 1}).json()
    assert second["sentences"] == sentences and second["sentence"] == 1
    assert second["hypotheses"] == alone["hypotheses"] and second["source"] == alone["source"]
    first = client.post("/v1/explain", json=body).json()
    assert first["sentence"] == 0 and first["hypotheses"] != second["hypotheses"]
    answer = client.post("/v1/explain", json={**body, "sentence": 2})
    assert answer.status_code == 422
    assert answer.json() == {"error": "sentence: 2, but the text has 2 sentences (counted from 0)"}
