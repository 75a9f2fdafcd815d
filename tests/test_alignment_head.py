"""An alignment head (Garg et al. 2019): the teacher's links (eflomal, as piece links stored with
a prepared corpus), the loss of one cross-attention head against them, and its training."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from reversal import tiny_overrides
from tiny import tiny_model

from seq2seq.config_file import load_config
from seq2seq.data.align_teacher import eflomal_links
from seq2seq.data.batching import Example, collate
from seq2seq.data.corpora import UserFiles
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData, prepare_command
from seq2seq.data.word_links import piece_links
from seq2seq.errors import UserError
from seq2seq.training import distributed, run_data
from seq2seq.training import run as training_run
from seq2seq.training.loss import alignment_loss, token_losses

NO_FILES = {
    f"{split}_{kind}": None
    for split in ("train", "valid", "test")
    for kind in ["src", "tgt", "tsv"]
}


def test_eflomal_links_the_words_that_always_go_together() -> None:
    # every English word has one German word, the same in every sentence, in the same place
    words = {"red": "rot", "dog": "hund", "cat": "katze", "big": "groß", "old": "alt"}
    rng = np.random.default_rng(0)
    pairs = [list(rng.permutation(list(words))[: rng.integers(2, 5)]) for _ in range(300)]
    src = [" ".join(pair) + "\n" for pair in pairs]
    tgt = [" ".join(words[word] for word in pair) + "\n" for pair in pairs]
    links = eflomal_links(src, tgt)
    right = sum(
        found == {(i, i) for i in range(len(pair))}
        for found, pair in zip(links, pairs, strict=True)
    )
    assert right >= 290


def test_word_links_become_links_of_every_piece_of_both_words() -> None:
    # source words: pieces 0 1 | 2 | EOS; target words: piece 0 | pieces 1 2 | EOS
    src_words, tgt_words = [0, 0, 1], [0, 1, 1]
    assert piece_links({(0, 1), (1, 0)}, src_words, tgt_words) == [
        (0, 1),
        (0, 2),
        (1, 1),
        (1, 2),
        (2, 0),
    ]
    assert piece_links(set(), src_words, tgt_words) == []


def test_the_loss_is_the_cross_entropy_to_the_normalised_links_over_linked_pieces() -> None:
    attention = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]]])
    two_links = torch.tensor([[0, 0, 0], [0, 0, 1]])  # target piece 0 to source pieces 0 and 1
    first = -(0.5 * math.log(0.5) + 0.5 * math.log(0.25))
    assert alignment_loss(attention, two_links).item() == pytest.approx(first)
    three = torch.cat([two_links, torch.tensor([[0, 1, 2]])])  # piece 1 to source piece 2
    mean = (first - math.log(0.7)) / 2  # piece 2 has no link: not counted
    assert alignment_loss(attention, three).item() == pytest.approx(mean)
    assert alignment_loss(attention, torch.zeros(0, 3, dtype=torch.long)).item() == 0.0


def batch_with_links():
    """Two pairs of the tiny vocabulary, each target piece linked to the source piece at its
    place read backwards (the reversal task's alignment)."""
    src = [np.array([5, 6, 7, 3], np.int32), np.array([8, 9, 3], np.int32)]
    tgt = [np.array([2, 7, 6, 5, 3], np.int32), np.array([2, 9, 8, 3], np.int32)]
    links = [np.array([[2, 0], [1, 1], [0, 2]]), np.array([[1, 0], [0, 1]])]

    return collate(
        [Example(i, s, t, k) for i, (s, t, k) in enumerate(zip(src, tgt, links, strict=True))]
    )


def test_a_batch_carries_its_links_by_row_and_target_piece() -> None:
    batch = batch_with_links()
    assert batch.links.tolist() == [[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1], [1, 1, 0]]


def test_the_head_is_the_one_the_maps_show_and_the_logits_are_unchanged() -> None:
    batch = batch_with_links()
    plain, fast = (tiny_model("transformer", fast=f, dropout=0.0).eval() for f in (False, True))
    args = batch.src, batch.src_lens, batch.tgt_in
    with torch.no_grad():
        logits, head = plain(*args, alignment_head=(1, 2))
        maps = plain.attention_maps(*args)
        assert torch.equal(logits, plain(*args))  # bit for bit
        assert torch.equal(head, maps["cross"][:, 1, 2])
        fast_logits, fast_head = fast(*args, alignment_head=(1, 2))
    torch.testing.assert_close(fast_head, head)
    torch.testing.assert_close(fast_logits, logits)
    assert alignment_loss(fast_head, batch.links) == pytest.approx(
        alignment_loss(head, batch.links).item()
    )


def test_weight_0_computes_no_head_and_the_same_loss() -> None:
    batch = batch_with_links()
    model = tiny_model("transformer", dropout=0.0, attention_dropout=0.0)
    without = token_losses(model, batch, 0.1, None)
    with_head = token_losses(model, batch, 0.1, None, alignment_head=(0, 1))
    assert without[2] is None and with_head[2] is not None
    assert torch.equal(without[0], with_head[0]) and torch.equal(without[1], with_head[1])


def test_training_with_the_head_lowers_its_alignment_loss() -> None:
    batch, model = batch_with_links(), tiny_model("transformer", dropout=0.0, attention_dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(8):
        loss, _, alignment = token_losses(model, batch, 0.1, None, alignment_head=(1, 0))
        optimizer.zero_grad()
        (loss / batch.num_tgt_tokens + alignment).backward()
        optimizer.step()
        losses.append(alignment.item())
    assert losses[-1] < 0.25 * losses[0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["train.alignment_head=[2, 0]"],
            r"train\.alignment_head=\[2, 0\], model\.decoder_layers=2",
        ),
        (["train.alignment_head=[0, 4]"], r"the head in \[0, num_heads\)$"),
        (["model.name=gru"], r"a head of the Transformer's cross-attention$"),
        (["train.data_on_device=true"], r"set train\.data_on_device=false$"),
        (["train.alignment_weight=-1"], r"train\.alignment_weight=-1(\.0)?: must be >= 0$"),
    ],
)
def test_bad_alignment_settings_are_one_line(overrides: list[str], message: str) -> None:
    tiny = ["model.decoder_layers=2", "model.num_heads=4", "train.alignment_weight=0.5"]
    with pytest.raises(UserError, match=message) as caught:
        load_config(None, [*tiny, *overrides])
    assert "\n" not in str(caught.value)


def test_prepare_stores_the_teachers_piece_links(small_corpus: Path, tmp_path: Path) -> None:
    files = UserFiles.from_options("en", "de", str(small_corpus), NO_FILES)
    out = prepare(
        "files", "en", "de", tmp_path / "p", vocab_size=40, byte_fallback=False, files=files,
        align_teacher="eflomal",
    )  # fmt: skip
    data = PreparedData.load(out)
    record = data.manifest["align_teacher"]
    assert data.manifest["settings"]["align_teacher"] == "eflomal"
    assert record["combine"] == "intersection" and record["aligner"].startswith("eflomal ")
    assert {"train.links", "train.links.offsets"} <= set(data.manifest["files"])
    dataset = data.dataset("train", links=True)
    examples = [dataset[i] for i in range(len(dataset))]
    assert sum(len(example.links) for example in examples) == record["links"]
    for example in examples:  # every link inside its pair's pieces (no EOS, no BOS)
        if len(example.links):
            assert example.links[:, 0].max() < len(example.src) - 1
            assert example.links[:, 1].max() < len(example.tgt) - 2
    with pytest.raises(UserError, match="has no teacher links; prepare it again"):
        PreparedData.load(
            prepare("files", "en", "de", tmp_path / "q", vocab_size=40, byte_fallback=False,
                    files=files)
        ).dataset("train", links=True)  # fmt: skip


class Prepared(Exception):
    """Raised by a stand-in for `prepare`, with the options it was given."""


@pytest.mark.parametrize(("weight", "teacher"), [(0.0, ""), (0.05, "eflomal")])
def test_train_prepare_adds_the_teachers_links_when_the_run_trains_a_head(
    weight: float, teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def record(*args: object, **options: object) -> None:
        raise Prepared(options)

    monkeypatch.setattr(run_data, "prepare", record)
    config = load_config(None, [f'data.prepared="{tmp_path}"', f"train.alignment_weight={weight}"])
    with pytest.raises(Prepared) as prepared:
        run_data.load_data(config, True, distributed.Dist())
    assert prepared.value.args[0]["align_teacher"] == teacher


def test_a_run_on_a_folder_without_links_names_the_command_that_adds_them(
    reversal: Path, tmp_path: Path
) -> None:
    corpus = ['data.corpus="files"', 'data.src="src"', 'data.tgt="tgt"']
    head = ["model.num_heads=4", "train.alignment_weight=0.5"]
    overrides = [*tiny_overrides("transformer", reversal, tmp_path), *corpus, *head]
    config = load_config(None, overrides)
    command = prepare_command(config)
    assert command == (
        "seq2seq prepare --corpus files --src src --tgt tgt --data-dir DIR --vocab-size 32 "
        f"--align-teacher eflomal --out {reversal}"
    )
    with pytest.raises(UserError) as refused:
        training_run.set_up(config, True, torch.device("cpu"), distributed.Dist())
    assert str(refused.value) == (
        f"train.alignment_weight: {reversal} has no teacher links; prepare it with `{command}`"
    )
