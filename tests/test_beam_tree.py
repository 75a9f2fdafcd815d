"""The beam tree: a `BeamTrace` records what `beam_search` did, exactly, under the plain and the
fast models; `POST /v1/explain` with `beam_tree` answers it as JSON, within bounds; and the
explorer draws that answer (Debian's chromium, driven by Playwright)."""

import asyncio
import json
from collections.abc import Iterator

import pytest
import torch
from explore import post, serve
from explorer_models import EN_DE
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Page
from tiny import tiny_model

import seq2seq
from seq2seq.data.specials import EOS_ID
from seq2seq.decoding.beam_trace import BeamTrace
from seq2seq.decoding.explain import beam_tree, rounded, traced_tree
from seq2seq.decoding.line_translator import gnmt_penalty
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.search import beam_search, max_output_lengths
from seq2seq.decoding.torch_translator import Translator
from seq2seq.models.base import Seq2SeqModel
from seq2seq.serving.app import create_app
from seq2seq.serving.explorer import MAX_TREE_BEAM
from seq2seq.serving.limits import Limits
from seq2seq.serving.prometheus import Metrics
from seq2seq.serving.registry import ServedModel, served_model
from seq2seq.serving.worker import DeadlineExceeded, DecodeOptions, DecodingWorker

ARCHS = ["transformer", "gru"]
SENTENCE = "A man in a blue shirt is standing on a ladder ."


def new_model(arch: str, fast: bool = True) -> Seq2SeqModel:
    return tiny_model(arch, fast=fast, dropout=0.0, attention_dropout=0.0).eval()


def source(seed: int = 0, length: int = 7) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One random source sentence (1, S) with EOS, its length (1,) and maximum output length."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.cat(
        [torch.randint(4, 40, (1, length), generator=generator), torch.tensor([[2]])], 1
    )
    src_lens = torch.tensor([length + 1])
    return src, src_lens, max_output_lengths(src_lens, 1.0, 2)


def traced(model: Seq2SeqModel, k: int, alpha: float, seed: int = 0, **options):
    src, src_lens, max_lens = source(seed)
    trace = BeamTrace()
    (nbest,) = beam_search(
        model, src, src_lens, k, max_lens, length_penalty=alpha, nbest=k, trace=trace, **options
    )
    return nbest, trace


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_finished_hypotheses_are_the_nbest_list_exactly(arch: str, fast: bool, alpha: float):
    for seed in range(3):
        nbest, trace = traced(new_model(arch, fast), 4, alpha, seed)
        finished = trace.finished()[: len(nbest)]
        assert [f.tokens for f in finished] == [h.tokens for h in nbest]
        assert [f.score for f in finished] == [h.score for h in nbest]  # float32, bit for bit


@pytest.mark.parametrize("arch", ARCHS)
def test_kept_are_the_k_best_and_pruned_the_other_candidates(arch: str) -> None:
    k = 3
    _, trace = traced(new_model(arch), k, 0.6, no_repeat_ngram=2)
    assert len(trace.steps) > 2
    for step in trace.steps:
        live = step.beam_scores.isfinite()
        assert step.tokens.shape == (k, 2 * k)
        scores = step.scores[live]  # (live beams, C)
        assert torch.equal(scores, step.beam_scores[live, None] + step.log_probs[live])
        ends = step.tokens[live] == EOS_ID
        continuing = scores.masked_fill(ends, float("-inf"))
        best = continuing.flatten().topk(k).values
        kept = step.next_beam[live] >= 0
        assert sorted(scores[kept].tolist()) == sorted(best[best.isfinite()].tolist())
        assert sorted(step.next_beam[live][kept].tolist()) == list(range(int(kept.sum())))
        # The hypotheses that end: EOS among the K best candidates of all.
        k_best = scores.flatten().topk(min(k, scores.numel())).values[-1]
        finished = step.finished[live]
        assert torch.equal(finished, ends & (scores >= k_best) & scores.isfinite())
        assert not (kept & finished).any()  # the rest of the candidates are the pruned ones


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_length_penalty_numbers_are_gnmt_penalty(alpha: float) -> None:
    _, trace = traced(new_model("transformer"), 4, alpha)
    for number, step in enumerate(trace.steps):
        assert step.penalty == gnmt_penalty(number + 1, alpha)
    for hypothesis in trace.finished():
        assert hypothesis.penalty == gnmt_penalty(hypothesis.step + 1, alpha)
        assert hypothesis.score == float(torch.tensor(hypothesis.raw_score) / hypothesis.penalty)


@pytest.mark.parametrize("arch", ARCHS)
def test_plain_and_fast_models_trace_alike(arch: str) -> None:
    (_, plain), (_, fast) = (traced(new_model(arch, fast), 4, 0.6) for fast in (False, True))
    assert len(plain.steps) == len(fast.steps)
    for plain_step, fast_step in zip(plain.steps, fast.steps, strict=True):
        for name in ("parents", "tokens", "next_beam", "finished"):
            assert torch.equal(getattr(plain_step, name), getattr(fast_step, name)), name
        for name in ("beam_scores", "log_probs", "scores", "attention"):
            torch.testing.assert_close(getattr(plain_step, name), getattr(fast_step, name))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_trace_changes_nothing_and_follows_the_attention_of_each_hypothesis(arch: str):
    model = new_model(arch)
    src, src_lens, max_lens = source(1)
    plain = beam_search(model, src, src_lens, 4, max_lens, nbest=4, need_attention=True)[0]
    nbest, trace = traced(model, 4, 1.0, seed=1)
    assert [(h.tokens, h.score) for h in nbest] == [(h.tokens, h.score) for h in plain]
    for hypothesis, finished in zip(plain, trace.finished(), strict=False):
        # Walk back from where the hypothesis ended: each step's row is the beam's attention.
        rows, step, beam = [], finished.step, finished.beam
        while step >= 0:
            rows.append(trace.steps[step].attention[beam])
            beam = int(trace.steps[step].parents[beam, 0])
            step -= 1
        assert torch.equal(torch.stack(rows[::-1]), hypothesis.attention)


def test_a_trace_records_one_sentence() -> None:
    src = torch.tensor([[5, 6, 2], [7, 2, 0]])
    with pytest.raises(ValueError, match="a trace records one sentence, got 2"):
        beam_search(
            new_model("gru"), src, torch.tensor([3, 2]), 2, torch.tensor([4, 4]), trace=BeamTrace()
        )


# --- POST /v1/explain with beam_tree --------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> ServedModel:
    return served_model(EN_DE.name, load_model(EN_DE), torch.device("cpu"))


@pytest.fixture(scope="module")
def client(served: ServedModel) -> Iterator[TestClient]:
    with TestClient(create_app({EN_DE.name: served})) as client:
        yield client


def test_the_api_tree_is_the_traced_search_of_the_served_translator(client, served) -> None:
    body = {"text": SENTENCE, "beam": 4, "nbest": 3, "beam_tree": True}
    answer = client.post("/v1/explain", json=body)
    assert answer.status_code == 200
    payload = answer.json()
    tree = payload["beam_tree"]
    assert tree["beam"] == 4 and tree["nbest"] == 3
    assert tree["length_penalty"] == served.pytorch.decode_cfg.length_penalty
    top = tree["finished"][:3]
    assert [f["text"] for f in top] == [h["text"] for h in payload["hypotheses"]]
    assert [f["score"] for f in top] == [h["score"] for h in payload["hypotheses"]]
    trace = BeamTrace()
    src_ids = served.pytorch.src_tokenizer.encode([SENTENCE])[0]
    served.pytorch.translate_ids([src_ids], 4, 3, trace=trace)
    source_pieces = len(payload["source"]["pieces"])
    assert len(tree["steps"]) == len(trace.steps)
    for shown, step in zip(tree["steps"], trace.steps, strict=True):
        live = step.beam_scores.isfinite().nonzero().squeeze(1).tolist()
        assert [beam["beam"] for beam in shown["beams"]] == live
        assert shown["penalty"] == round(step.penalty, 4)
        for beam in shown["beams"]:
            b, count = beam["beam"], len(beam["tokens"])
            assert beam["tokens"] == step.tokens[b, :count].tolist()
            assert beam["log_probs"] == pytest.approx(step.log_probs[b, :count].tolist(), abs=5e-5)
            assert beam["next_beam"] == step.next_beam[b, :count].tolist()
            assert len(beam["attention"]) == source_pieces
            assert all(len(piece) > 0 for piece in beam["pieces"])
    for finished in tree["finished"]:
        assert finished["score"] == pytest.approx(
            finished["raw_score"] / finished["penalty"], abs=2e-4
        )


def test_the_tree_numbers_are_the_traces_rounded(served) -> None:
    trace = BeamTrace()
    src_ids = served.pytorch.src_tokenizer.encode([SENTENCE])[0]
    served.pytorch.translate_ids([src_ids], 3, 3, trace=trace)
    tree = traced_tree(served.pytorch, trace, 3, 3)
    for shown, step in zip(tree["steps"], trace.steps, strict=True):
        for beam in shown["beams"]:
            b, count = beam["beam"], len(beam["tokens"])
            assert beam["score"] == round(float(step.beam_scores[b]), 4)
            assert beam["attention"] == rounded(step.attention[b])
            assert beam["log_probs"] == rounded(step.log_probs[b, :count], 4)
            assert beam["scores"] == rounded(step.scores[b, :count], 4)
            assert beam["finished"] == step.finished[b, :count].tolist()
            assert all(isinstance(p, float) for p in beam["log_probs"] + beam["attention"])


def test_a_tree_request_is_decoded_once_and_its_tree_gives_the_answers_nbest(
    client, monkeypatch
) -> None:
    calls = []
    translate_ids = Translator.translate_ids

    def counted(self, sources, *args, **kwargs):
        calls.append((len(sources), kwargs.get("trace") is not None))
        return translate_ids(self, sources, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate_ids", counted)
    body = {"text": SENTENCE, "beam": 4, "nbest": 4, "beam_tree": True}
    payload = client.post("/v1/explain", json=body).json()
    assert calls == [(1, True)]  # one search, traced, of the one line
    top = payload["beam_tree"]["finished"][:4]
    hypotheses = payload["hypotheses"]
    assert [(f["text"], f["score"]) for f in top] == [(h["text"], h["score"]) for h in hypotheses]


def decode_in_worker(
    served: ServedModel, trace: BeamTrace, limits: Limits, cancel: bool = False
) -> tuple[list | None, BaseException | None]:
    """Queue the sentence for a worker (not started) with `trace`, cancel it if asked (its
    client left), decode the batch the worker takes; the job's result or error."""

    async def run() -> tuple[list | None, BaseException | None]:
        worker = DecodingWorker({EN_DE.name: served}, limits, Metrics())
        ids = served.pytorch.src_tokenizer.encode([SENTENCE])[0]
        options = DecodeOptions(beam=4, nbest=4, length_penalty=0.6, max_len_ratio=1.5)
        future = worker.submit(EN_DE.name, [ids], options, trace)
        batch = worker._next_batch()
        assert batch is not None and len(batch) == 1
        if cancel:
            future.cancel()
        worker._decode(batch)
        await asyncio.sleep(0)  # the worker settles the future in the loop
        if future.cancelled():
            return None, None
        return (future.result(), None) if future.exception() is None else (None, future.exception())

    return asyncio.run(run())


def test_the_worker_traces_the_search_that_finds_the_nbest(served) -> None:
    trace = BeamTrace()
    (nbest,), error = decode_in_worker(served, trace, Limits())
    assert error is None and len(nbest) == 4
    finished = trace.finished()[:4]
    assert [f.tokens for f in finished] == [t.tokens for t in nbest]
    assert [f.score for f in finished] == [t.score for t in nbest]  # bit for bit: one search


def test_a_traced_request_past_its_time_limit_or_left_is_not_decoded(served) -> None:
    late = BeamTrace()
    result, error = decode_in_worker(served, late, Limits(timeout_s=0.0))
    assert result is None and isinstance(error, DeadlineExceeded)
    left = BeamTrace()
    assert decode_in_worker(served, left, Limits(), cancel=True) == (None, None)
    assert late.steps == [] and left.steps == []  # the search stopped before its first step


def test_a_traced_job_is_decoded_alone(served) -> None:
    async def batches() -> list[int]:
        worker = DecodingWorker({EN_DE.name: served}, Limits(batch_wait_s=0.0), Metrics())
        options = DecodeOptions(beam=4, nbest=1, length_penalty=0.6, max_len_ratio=1.5)
        ids = served.pytorch.src_tokenizer.encode([SENTENCE])[0]
        worker.submit(EN_DE.name, [ids], options)
        worker.submit(EN_DE.name, [ids], options, BeamTrace())
        worker.submit(EN_DE.name, [ids], options)
        sizes = []
        while worker.queued_lines:
            sizes.append(len(worker._next_batch() or []))
        return sizes

    assert asyncio.run(batches()) == [2, 1]
    with pytest.raises(ValueError, match="a trace records one line, got 2"):
        asyncio.run(two_traced_lines(served))


async def two_traced_lines(served: ServedModel) -> None:
    worker = DecodingWorker({EN_DE.name: served}, Limits(), Metrics())
    options = DecodeOptions(beam=4, nbest=1, length_penalty=0.6, max_len_ratio=1.5)
    worker.submit(EN_DE.name, [[5], [6]], options, BeamTrace())


def test_the_gru_tree_rows_are_its_bahdanau_weights_and_beam_one_is_greedy(random_gru) -> None:
    translator = Translator.from_inference(load_model(random_gru), "cpu")
    src_ids = translator.src_tokenizer.encode([SENTENCE])[0]
    tree = beam_tree(translator, src_ids, 1, 1)
    assert tree["attention"] == "the Bahdanau weights"
    assert all(len(step["beams"]) == 1 for step in tree["steps"])  # K = 1: one beam, 2 candidates
    assert all(len(step["beams"][0]["tokens"]) <= 2 for step in tree["steps"])
    (greedy,) = translator.translate_ids([src_ids], 1)[0]
    assert tree["finished"][0]["text"] == greedy.text


def test_the_tree_is_left_out_unless_asked_for(client) -> None:
    answer = client.post("/v1/explain", json={"text": SENTENCE, "beam": 2})
    assert answer.status_code == 200 and "beam_tree" not in answer.json()


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            {"beam": MAX_TREE_BEAM + 1},
            422,
            f"beam: 9, over the beam tree's limit of {MAX_TREE_BEAM}",
        ),
        ({"beam_tree": "yes"}, 422, "beam_tree"),
        ({"text": "a " * 199}, 413, "its maps and beam tree could hold"),
    ],
)
def test_bad_tree_requests_get_one_line(client, body: dict, status: int, message: str) -> None:
    request = {"text": SENTENCE, "beam_tree": True, **body}
    answer = client.post("/v1/explain", json=request)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert message in error and "\n" not in error


def test_the_page_loads_beam_tree_js(client) -> None:
    assert '<script src="/explorer/beam_tree.js">' in client.get("/").text
    answer = client.get("/explorer/beam_tree.js")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/javascript")


# --- The explorer's beam tree in a browser (as tests/test_explorer_browser.py) ------------------


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """seq2seq serve with the shipped en-de Transformer on a free port of 127.0.0.1."""
    with serve([str(EN_DE)]) as started:
        yield started.url


@pytest.fixture
def page(browser: Browser, server_url: str) -> Iterator[Page]:
    """The explorer, loaded in Debian's chromium; the test fails on any console or page error."""
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server_url + "/")
    page.wait_for_selector("#model option", state="attached")
    yield page
    page.close()
    assert errors == []


def drawn_nodes(page: Page) -> list[dict]:
    """Every candidate node of the tree drawn: its numbers, as the page holds them."""
    return page.eval_on_selector_all(
        "#beam-tree g.tree-node:not(.root)",
        "nodes => nodes.map(n => ({step: Number(n.dataset.step), beam: Number(n.dataset.beam),"
        " candidate: Number(n.dataset.candidate), token: Number(n.dataset.token),"
        " log_prob: Number(n.dataset.logProb), score: Number(n.dataset.score),"
        " fate: n.dataset.fate, best: n.classList.contains('best')}))",
    )


def expected_nodes(tree: dict) -> list[dict]:
    """The nodes of the API's tree, in the page's order, with their fate and n-best paths."""
    on_path = set()
    for finished in tree["finished"][: tree["nbest"]]:
        step, beam, candidate = finished["step"], finished["beam"], finished["candidate"]
        while True:
            on_path.add((step, beam, candidate))
            parent = next(b for b in tree["steps"][step]["beams"] if b["beam"] == beam)["parent"]
            if parent is None:
                break
            (beam, candidate), step = parent, step - 1
    nodes = []
    for step, shown in enumerate(tree["steps"]):
        for beam in shown["beams"]:
            for c, token in enumerate(beam["tokens"]):
                fate = "finished" if beam["finished"][c] else "pruned"
                fate = "kept" if beam["next_beam"][c] >= 0 else fate
                nodes.append(
                    {
                        "step": step,
                        "beam": beam["beam"],
                        "candidate": c,
                        "token": token,
                        "log_prob": beam["log_probs"][c],
                        "score": beam["scores"][c],
                        "fate": fate,
                        "best": (step, beam["beam"], c) in on_path,
                    }
                )
    return nodes


@pytest.mark.slow  # serves in another process to a browser
def test_the_tree_drawn_is_the_apis_and_a_click_shows_its_attention_row(page: Page, server_url):
    page.fill("#text", SENTENCE)
    page.wait_for_function(
        "text => document.getElementById('result').dataset.text === text"
        " && document.getElementById('status').textContent === ''",
        arg=SENTENCE,
    )
    assert page.locator("#beam-tree g.tree-node").count() == 0  # asked for once opened only
    page.click("#beam-tree-section summary")
    page.wait_for_selector("#beam-tree g.tree-node.best")
    body = {"model": EN_DE.name, "text": SENTENCE, "beam": 4, "nbest": 4, "beam_tree": True}
    tree = json.loads(post(server_url + "/v1/explain", body))["beam_tree"]
    nodes = drawn_nodes(page)
    assert nodes == expected_nodes(tree)
    assert {node["fate"] for node in nodes} == {"kept", "pruned", "finished"}
    finished = page.locator("#tree-finished li").all_inner_texts()
    assert len(finished) == len(tree["finished"])
    for shown, hypothesis in zip(finished, tree["finished"], strict=True):
        numbers = f"{hypothesis['raw_score']:.4f} / {hypothesis['penalty']:.4f}"
        assert shown.startswith(hypothesis["text"]) and numbers in shown
    assert page.locator("#tree-finished li.best").count() == 4

    for fate in ("pruned", "finished"):
        node = page.locator(f"#beam-tree g.tree-node[data-fate='{fate}']").last
        node.click()
        step, beam = int(node.get_attribute("data-step")), int(node.get_attribute("data-beam"))
        row = next(b for b in tree["steps"][step]["beams"] if b["beam"] == beam)["attention"]
        values = page.eval_on_selector_all(
            "#tree-attention .piece", "chips => chips.map(c => Number(c.dataset.value))"
        )
        assert values == row  # the beam's row at that step, over every source piece
        top = page.eval_on_selector("#tree-legend .legend", "box => Number(box.dataset.max)")
        assert top == max(row)
        assert page.inner_text("#tree-node").startswith(f"Step {step + 1}, beam {beam} ")


def test_the_python_api_gives_the_tree_of_the_translation() -> None:
    model = seq2seq.load("transformer-tiny.multi30k.en-de", device="cpu")
    tree = model.beam_tree(SENTENCE, beam=3, nbest=2)
    best = model.translate([SENTENCE], beam=3, nbest=2)[0]
    assert [f["text"] for f in tree["finished"][:2]] == [t.text for t in best]
    assert [f["score"] for f in tree["finished"][:2]] == [round(t.score, 4) for t in best]
    assert (tree["beam"], tree["nbest"]) == (3, 2)
    with pytest.raises(ValueError, match="nbest: 4 is more than the beam size"):
        model.beam_tree(SENTENCE, beam=3, nbest=4)
    with pytest.raises(ValueError, match="line: expected a str, got int"):
        model.beam_tree(7)
