"""Validation during training: loss and perplexity, BLEU and chrF of real decoding, sample
translations and their attention maps for TensorBoard, every map of a few valid sentences for
the run's attention history; and the attention maps a run shows at its first step, long before
its first validation."""

import math

import torch
from tqdm import tqdm

from seq2seq.config import Config
from seq2seq.data.batching import ParallelDataset, TokenBatchSampler, make_loader
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.attention_maps import head_figures, shown_cross_attention, teacher_forced_maps
from seq2seq.decoding.evaluation import evaluate
from seq2seq.decoding.line_translator import MAX_BATCH_TOKENS, pieces
from seq2seq.decoding.torch_translator import Translator
from seq2seq.models.base import Seq2SeqModel
from seq2seq.training.attention_history import add_snapshot, choose_sentences, history_path
from seq2seq.training.loss import token_losses
from seq2seq.training.run import Run, cross_entropy_of
from seq2seq.training.run_log import RunLog


@torch.no_grad()
def valid_loss(
    model: Seq2SeqModel,
    dataset: ParallelDataset,
    max_tokens: int,
    device: torch.device,
    dtype: torch.dtype | None,
    count: int | None = None,
) -> tuple[float, float]:
    """Mean NLL per target token on the first `count` pairs of `dataset` (None: all) and its
    perplexity."""
    src_lens, tgt_lens = dataset.src_lens[:count], dataset.tgt_lens[:count]
    sampler = TokenBatchSampler(src_lens, tgt_lens, max_tokens, shuffle=False)
    total_nll, total_tokens = 0.0, 0
    cross_entropy = cross_entropy_of(model)
    for batch in make_loader(dataset, sampler):
        batch = batch.to(device)
        _, nll, _ = token_losses(model, batch, 0.0, dtype, cross_entropy)
        total_nll += nll.item()
        total_tokens += batch.num_tgt_tokens
    mean = total_nll / max(total_tokens, 1)
    return mean, math.exp(min(mean, 100.0))


@torch.no_grad()
def log_attention_maps(
    run: Run,
    log: RunLog,
    step: int,
    sources: list[str],
    hypotheses: list[list[int]],
    forced: str = "its translation",
) -> None:
    """Cross-attention of a few fixed valid sentences: per sentence, one image of the mean over
    heads and one of each head.

    The weights come from teacher-forcing each of `hypotheses` (the model's own translations,
    or what `forced` names) through `Seq2SeqModel.attention_maps`, so every target piece (and
    the final </s>) has its row; a Transformer shows decoder layer model.attention_layer.
    """
    src_tokenizer, tgt_tokenizer = run.data.src_tokenizer, run.data.tgt_tokenizer
    for n, (source, hyp) in enumerate(zip(sources, hypotheses, strict=True)):
        src_ids = src_tokenizer.encode([source])[0]
        maps = teacher_forced_maps(run.raw_model, src_ids, hyp, run.device)
        weights = shown_cross_attention(maps, run.cfg.model.attention_layer)  # (H, T, S)
        src_pieces, tgt_pieces = pieces(src_tokenizer, src_ids), pieces(tgt_tokenizer, hyp)
        title = f"valid sentence {n} on {forced}, step {step}"
        for tag_end, figure in head_figures(weights, src_pieces, tgt_pieces, title).items():
            log.figure(step, f"valid/attention_sentence{n}{tag_end}", figure)


@torch.no_grad()
def log_first_attention(run: Run, log: RunLog, step: int) -> None:
    """The attention images of a run's first step, under the tags a validation writes: the
    first `train.attention_samples` valid sentences teacher-forced on their references (one
    forward pass each, nothing decoded), and the first snapshot of the attention history.
    Flushed, so TensorBoard shows them and the first scalars at once."""
    sources, references = run.valid_lines
    shown = min(run.cfg.train.attention_samples, len(sources))
    run.raw_model.eval()
    if shown:
        targets = run.data.tgt_tokenizer.encode(references[:shown])
        log_attention_maps(run, log, step, sources[:shown], targets, "the reference")
    record_attention_history(run, log, step)
    run.raw_model.train()
    log.flush()


@torch.no_grad()
def record_attention_history(run: Run, log: RunLog, step: int) -> None:
    """Add step `step` to the run's attention history (`seq2seq.training.attention_history`):
    every map of the first `train.attention_history` short valid sentences, teacher-forced on
    their references."""
    count = run.cfg.train.attention_history
    if count:
        tokenizers = run.data.src_tokenizer, run.data.tgt_tokenizer
        sentences = choose_sentences(*tokenizers, run.valid_lines, count)
        if sentences:
            path = history_path(run.run_dir)
            if note := add_snapshot(path, step, run.raw_model, sentences, run.device):
                log.line(note)


@torch.no_grad()
def validate(run: Run, log: RunLog, step: int) -> dict[str, float]:
    """Valid loss and perplexity, BLEU and chrF of decoded output, maps and samples, on the
    valid pairs of `run.valid_lines` (the first train.valid_max_sentences)."""
    cfg, model, device, dtype = run.cfg, run.raw_model, run.device, run.dtype
    model.eval()
    sources, references = run.valid_lines
    log.line(f"validating at step {step}: {len(sources)} sentences")
    nll, ppl = valid_loss(model, run.valid_set, cfg.train.max_tokens, device, dtype, len(sources))
    translator = validation_translator(cfg, model, run.data, device)
    beam_size = cfg.decode.valid_beam_size
    # in a terminal, a bar of its own under the training bar; nothing in a log file
    bar = tqdm(total=len(sources), desc="validating", unit="sentence", leave=False, disable=None)
    with bar, torch.autocast(device.type, dtype=dtype or torch.float32, enabled=bool(dtype)):
        result = evaluate(translator, sources, references, beam_size, on_batch=bar.update)
    metrics = {"valid/nll": nll, "valid/ppl": ppl, "valid/bleu": result.bleu}
    metrics["valid/chrf"] = result.chrf
    log.scalars(step, {**metrics, "valid/sentences_per_second": result.sentences_per_second})
    shown = min(cfg.train.attention_samples, len(sources))
    samples = "\n\n".join(
        f"**source:** {sources[i]}  \n**reference:** {references[i]}  \n"
        f"**model:** {result.hypotheses[i]}"
        for i in range(shown)
    )
    log.text(step, "samples", samples)
    if shown:
        log_attention_maps(run, log, step, sources[:shown], result.hypothesis_ids[:shown])
    record_attention_history(run, log, step)
    log.line(
        f"validation step {step}: nll {nll:.4f} ppl {ppl:.2f} BLEU {result.bleu:.2f} "
        f"chrF {result.chrf:.2f} ({result.sentences} sentences, {result.seconds:.1f}s)"
    )
    model.train()
    return metrics


def validation_translator(
    cfg: Config, model: Seq2SeqModel, data: PreparedData, device: torch.device
) -> Translator:
    """The translator of validation: the whole valid set sorted by length, longest first, in
    batches of at most decode.batch_size sentences and train.valid_batch_tokens padded source
    tokens times beams (0: MAX_BATCH_TOKENS, as any decoding). A GPU decodes it in a few large
    batches; the translations are those of any batch size (tests/test_compile.py)."""
    budget = cfg.train.valid_batch_tokens or MAX_BATCH_TOKENS
    languages = (cfg.data.src, cfg.data.tgt)  # for decode.keep_numbers
    return Translator(
        model, data.src_tokenizer, data.tgt_tokenizer, cfg.decode, device, budget, languages
    )
