"""Both model families: masking, causality, incremental decoding, gradients, and learning."""

import pytest
import torch
import torch.nn.functional as F
from tiny import TINY, VOCAB, tiny_config, tiny_model

from seq2seq.config import ModelConfig
from seq2seq.data.specials import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding.attention_maps import shown_cross_attention
from seq2seq.models import GRUSeq2Seq, Seq2SeqModel, TransformerSeq2Seq, build_model, select_rows


def make_batch(lens: list[int], width: int | None = None, bos: bool = False) -> torch.Tensor:
    """Random ids (B, width) with rows of the given lengths, PAD-padded; BOS first when asked."""
    width = width or max(lens)
    ids = torch.full((len(lens), width), PAD_ID)
    for row, n in enumerate(lens):
        ids[row, :n] = torch.randint(4, VOCAB, (n,))
        if bos:
            ids[row, 0] = BOS_ID
    return ids


@pytest.fixture
def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    src_lens = torch.tensor([7, 3, 5])
    return make_batch(src_lens.tolist()), src_lens, make_batch([6, 6, 6], bos=True)


KINDS = ["gru", "transformer", "transformer-post-norm"]


def assert_distributions(weights: torch.Tensor, valid: torch.Tensor) -> None:
    """Rows of `weights` (..., Q, K) sum to 1 over the keys where the boolean `valid`
    (broadcastable) is True, and are exactly 0 elsewhere."""
    valid = valid.expand_as(weights)
    assert torch.all(weights[~valid] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


@pytest.mark.parametrize("kind", KINDS)
def test_attention_maps_are_named_shaped_and_masked(kind: str, batch) -> None:
    model = tiny_model(kind).eval()
    src, src_lens, tgt_in = batch
    assert model(src, src_lens, tgt_in).shape == (3, 6, VOCAB)
    with torch.no_grad():
        maps = model.attention_maps(src, src_lens, tgt_in)
    source = (torch.arange(7) < src_lens[:, None])[:, None, None, None, :]  # (B, 1, 1, 1, S)
    if kind == "gru":
        assert list(maps) == ["bahdanau"] and maps["bahdanau"].shape == (3, 6, 7)
        assert_distributions(maps["bahdanau"], source[:, 0, 0])
        return
    assert {name: tuple(w.shape) for name, w in maps.items()} == {
        "encoder_self": (3, 2, 4, 7, 7),
        "decoder_self": (3, 2, 4, 6, 6),
        "cross": (3, 2, 4, 6, 7),
    }
    # Padded source keys and future target positions get exactly zero weight.
    assert_distributions(maps["encoder_self"], source)
    assert_distributions(maps["cross"], source)
    assert_distributions(maps["decoder_self"], torch.ones(6, 6, dtype=torch.bool).tril())


def record_calls(modules: list[torch.nn.Module]) -> dict[torch.nn.Module, tuple]:
    """Hook `modules` to keep the input and output of each one's last call."""
    calls: dict[torch.nn.Module, tuple] = {}
    for module in modules:
        module.register_forward_hook(lambda m, args, out: calls.__setitem__(m, (args, out)))
    return calls


def test_transformer_outputs_recomputed_from_returned_weights(batch) -> None:
    """Each attention's output in the model's own forward pass equals W_o [A_h V_h]_h with the
    returned weights A and the values V = x W_v that the pass projected."""
    model = tiny_model("transformer").eval()
    src, src_lens, tgt_in = batch
    attentions = {
        "encoder_self": [layer.self_attn for layer in model.encoder_layers],
        "decoder_self": [layer.self_attn for layer in model.decoder_layers],
        "cross": [layer.cross_attn for layer in model.decoder_layers],
    }
    modules = [a for group in attentions.values() for a in group]
    calls = record_calls([m.v_proj for m in modules] + [m.out_proj for m in modules])
    with torch.no_grad():
        model(src, src_lens, tgt_in)
        calls = dict(calls)  # the forward pass's calls, before attention_maps runs
        maps = model.attention_maps(src, src_lens, tgt_in)
        for name, group in attentions.items():
            for layer, attention in enumerate(group):
                values = attention.split_heads(calls[attention.v_proj][1])  # (B, H, K, d)
                context = maps[name][:, layer] @ values  # (B, H, Q, d)
                recomputed = attention.out_proj(attention.merge_heads(context))
                expected = calls[attention.out_proj][1]
                torch.testing.assert_close(recomputed, expected, rtol=1e-5, atol=1e-6)


def test_gru_contexts_recomputed_from_returned_weights(batch) -> None:
    """Each step's context c_t in the model's forward pass equals sum_j a_tj h_j with the
    returned weights a and the encoder outputs h."""
    model = tiny_model("gru").eval()
    src, src_lens, tgt_in = batch
    contexts = []
    model.attention.register_forward_hook(lambda m, args, out: contexts.append(out[0]))
    with torch.no_grad():
        model(src, src_lens, tgt_in)
        memory = model.encode(src, src_lens)["memory"]  # (B, S, Hd)
        weights = model.attention_maps(src, src_lens, tgt_in)["bahdanau"]  # (B, T, S)
    expected = torch.cat(contexts[: tgt_in.shape[1]], dim=1)  # (B, T, Hd), the forward's steps
    torch.testing.assert_close(weights @ memory, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_changing_a_later_target_token_leaves_earlier_outputs_unchanged(kind: str, batch) -> None:
    model = tiny_model(kind).eval()
    src, src_lens, tgt_in = batch
    changed = tgt_in.clone()
    changed[:, 4] = torch.where(tgt_in[:, 4] == 5, 6, 5)
    with torch.no_grad():
        before, after = model(src, src_lens, tgt_in), model(src, src_lens, changed)
    # Output t reads inputs 0..t: outputs 0..3 must not move, outputs 4 and 5 must.
    torch.testing.assert_close(after[:, :4], before[:, :4], rtol=0, atol=1e-6)
    assert not torch.allclose(after[:, 4], before[:, 4])
    assert not torch.allclose(after[:, 5], before[:, 5])


@pytest.mark.parametrize("kind", KINDS)
def test_padding_changes_no_real_output(kind: str) -> None:
    model = tiny_model(kind).eval()
    torch.manual_seed(2)
    tgt_lens = [3, 5]
    src_lens = torch.tensor([4, 2])
    src, tgt_in = make_batch(src_lens.tolist()), make_batch(tgt_lens, bos=True)
    # The same two rows with extra padding columns and a longer batch-mate.
    padded_src = torch.full((3, 9), PAD_ID)
    padded_src[:2, :4], padded_src[2] = src, make_batch([9])[0]
    padded_tgt = torch.full((3, 8), PAD_ID)
    padded_tgt[:2, :5], padded_tgt[2] = tgt_in, make_batch([8], bos=True)[0]
    with torch.no_grad():
        alone = model(src, src_lens, tgt_in)
        padded = model(padded_src, torch.tensor([4, 2, 9]), padded_tgt)
    for row, n in enumerate(tgt_lens):
        torch.testing.assert_close(padded[row, :n], alone[row, :n], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_incremental_decoding_reproduces_forward(kind: str, batch) -> None:
    model = tiny_model(kind).eval()
    src, src_lens, tgt_in = batch
    with torch.no_grad():
        expected = F.log_softmax(model(src, src_lens, tgt_in), dim=-1)
        maps = model.attention_maps(src, src_lens, tgt_in)
        expected_attention = shown_cross_attention(maps, -1)
        state = model.encode(src, src_lens)
        cache = model.init_cache(state)
        order = torch.arange(3)
        for t in range(tgt_in.shape[1]):
            if t == 3:  # beam search reorders and repeats rows between steps
                order = torch.tensor([2, 0, 0, 1])
                state, cache = select_rows(state, order), select_rows(cache, order)
            out = model.decode_step(state, tgt_in[order, t], cache, need_attention=True)
            cache = out.cache
            assert out.log_probs.dtype == torch.float32
            torch.testing.assert_close(out.log_probs, expected[order, t], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(
                out.attention, expected_attention[order, :, t], rtol=1e-5, atol=1e-6
            )
    assert model.decode_step(state, tgt_in[order, 0], cache).attention is None


@pytest.mark.parametrize("kind", KINDS)
def test_beams_read_one_encoder_state_row_per_sentence(kind: str, batch) -> None:
    """A cache with G rows per sentence (beam search's beams) decodes exactly as if the encoder
    state were copied G times: the beams share the sentence's source keys and values."""
    model = tiny_model(kind).eval()
    src, src_lens, tgt_in = batch
    rows = torch.arange(3).repeat_interleave(2)  # G = 2 beams per sentence
    token_rows = torch.tensor([0, 1, 1, 2, 2, 0])  # the beams of a sentence differ
    with torch.no_grad():
        state = model.encode(src, src_lens)
        shared = select_rows(model.init_cache(state), rows)
        copied_state = select_rows(state, rows)
        copied = model.init_cache(copied_state)
        for t in range(3):
            ours = model.decode_step(state, tgt_in[token_rows, t], shared, need_attention=True)
            reference = model.decode_step(
                copied_state, tgt_in[token_rows, t], copied, need_attention=True
            )
            torch.testing.assert_close(ours.log_probs, reference.log_probs, rtol=0, atol=1e-6)
            torch.testing.assert_close(ours.attention, reference.attention, rtol=0, atol=1e-6)
            shared, copied = ours.cache, reference.cache


def test_transformer_cache_grows_one_position_per_step(batch) -> None:
    model = tiny_model("transformer").eval()
    src, src_lens, tgt_in = batch
    state = model.encode(src, src_lens)
    assert [k.shape for k in state["cross_k"]] == [(3, 4, 7, 8)] * 2
    cache = model.init_cache(state)
    for t in range(3):
        cache = model.decode_step(state, tgt_in[:, t], cache).cache
        assert [k.shape for k in cache["self_k"]] == [(3, 4, t + 1, 8)] * 2
        assert torch.equal(cache["step"], torch.full((3,), t + 1))


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_reach_every_parameter(kind: str, batch) -> None:
    model = tiny_model(kind, share_embeddings=False, tie_output=False).train()
    src, src_lens, tgt_in = batch
    logits = model(src, src_lens, tgt_in)
    F.cross_entropy(logits.flatten(0, 1), torch.randint(4, VOCAB, (18,))).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert param.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_shared_and_tied_weights(kind: str) -> None:
    shared = tiny_model(kind, share_embeddings=True, tie_output=True)
    assert shared.src_embed.weight is shared.tgt_embed.weight
    assert shared.output.weight is shared.tgt_embed.weight
    separate = tiny_model(kind, share_embeddings=False, tie_output=False)
    assert separate.src_embed.weight is not separate.tgt_embed.weight
    assert separate.output.weight is not separate.tgt_embed.weight
    embed = TINY[kind]["embed_dim"]
    assert separate.num_parameters() - shared.num_parameters() == 2 * VOCAB * embed
    # Without a joint vocabulary the embeddings cannot be shared.
    cfg = tiny_config(kind, share_embeddings=True)
    disjoint = build_model(cfg, VOCAB + 5, VOCAB, joint_vocab=False, verbose=False)
    assert disjoint.src_embed.weight.shape == (VOCAB + 5, embed)


def test_build_model_prints_parameter_count(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ModelConfig(name="transformer-tiny")
    model = build_model(cfg, 100, 100, True)
    assert isinstance(model, TransformerSeq2Seq)
    assert (
        capsys.readouterr().out
        == f"model transformer-tiny: {model.num_parameters():,} parameters\n"
    )
    assert isinstance(build_model(ModelConfig(arch="gru"), 100, 100, True, False), GRUSeq2Seq)


@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_bf16_autocast_gives_float32_log_probs(kind: str, batch) -> None:
    model = tiny_model(kind).eval()
    src, src_lens, tgt_in = batch
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, src_lens, tgt_in)
        state = model.encode(src, src_lens)
        out = model.decode_step(state, tgt_in[:, 0], model.init_cache(state))
    assert logits.dtype == torch.bfloat16
    assert out.log_probs.dtype == torch.float32
    assert torch.isfinite(out.log_probs).all()


def greedy(model: Seq2SeqModel, src: torch.Tensor, src_lens: torch.Tensor, steps: int):
    state = model.encode(src, src_lens)
    cache = model.init_cache(state)
    tokens = torch.full((src.shape[0],), BOS_ID)
    outputs = []
    for _ in range(steps):
        out = model.decode_step(state, tokens, cache)
        cache, tokens = out.cache, out.log_probs.argmax(-1)
        outputs.append(tokens)
    return torch.stack(outputs, 1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_tiny_model_overfits_a_few_pairs(kind: str) -> None:
    """8 random pairs are memorised: low loss, and greedy decoding reproduces every target."""
    model = tiny_model(kind, encoder_layers=1, decoder_layers=1, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(3)
    src_lens = torch.randint(3, 8, (8,))
    src = make_batch(src_lens.tolist())
    src[torch.arange(8), src_lens - 1] = EOS_ID
    tgt_lens = torch.randint(4, 9, (8,))
    target = make_batch(tgt_lens.tolist(), bos=True)
    target[torch.arange(8), tgt_lens - 1] = EOS_ID
    tgt_in, tgt_out = target[:, :-1], target[:, 1:]
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, foreach=True)
    for _ in range(100):
        logits = model(src, src_lens, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    model.eval()
    with torch.no_grad():
        decoded = greedy(model, src, src_lens, tgt_out.shape[1])
    real = tgt_out != PAD_ID
    assert torch.equal(decoded[real], tgt_out[real])
