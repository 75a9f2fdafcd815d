"""Configuration: typed dataclasses, one per section of a configuration file, and the model
presets. Reading a file and overrides into them is seq2seq/config_file.py.

    [data]    which prepared corpus to train on (and how to prepare it when missing)
    [model]   a named preset (`name = "transformer-tiny"`) plus any field to override
    [train]   optimisation, batching, validation and checkpointing
    [decode]  beam search settings used for validation and evaluation
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from seq2seq.data.augment import AUGMENT_SETTINGS
from seq2seq.data.corpora import BOTH_SIDES
from seq2seq.errors import UserError


@dataclass
class DataConfig:
    prepared: str = "data/multi30k.en-de"  # folder written by seq2seq prepare
    corpus: str = "multi30k"  # used to prepare the folder when it is missing
    src: str = "en"
    tgt: str = "de"
    vocab_size: int = 8000
    joint_vocab: bool = True
    # How the folder is tokenized when it is prepared here (seq2seq prepare's --split-digits
    # and --byte-fallback); a run resumes only on the tokens it started with.
    split_digits: bool = True
    byte_fallback: bool = True
    # copy-teaching when the folder is prepared (seq2seq.data.augment): extra pairs, on average,
    # per training pair sharing a name or number, with them swapped for others; 0: off
    augment_entities: float = 0.0
    # the same, per training pair sharing a number (numbers are rare in everyday sentences);
    # 0: as many as augment_entities
    augment_numbers: float = 0.0
    # the share of the numbers put in that have two equal digits side by side ("7714", "19.99"),
    # which a model copies worst; 0: only those drawn so by chance
    augment_repeated_digits: float = 0.0
    # the share of the names put in from names_world.tsv (many alphabets, with their accents)
    augment_world_names: float = 0.0
    # the share of the numbers put in that are codes instead ("INV-2025-00417", "SW1A 1AA")
    augment_codes: float = 0.0
    # the share of the names put in that are e-mail addresses or URLs instead
    augment_contacts: float = 0.0
    # extra pairs, on average, per training pair naming the same month on both sides, with another
    # month, each side in its own language ("in August" / "en août" -> "in March" / "en mars";
    # English, French and German); 0: off
    augment_months: float = 0.0
    # the share of training pairs followed by an example joining them to the 1 to 3 before
    # (seq2seq.data.concatenate); 0: off
    concat_share: float = 0.0
    # how a corpus with no split of its own (Tatoeba) is split when the folder is prepared
    # (seq2seq.data.corpora.SPLIT_RULES); a saved configuration without it used "english-side"
    split_rule: str = BOTH_SIDES

    @property
    def augmentation(self) -> dict[str, float]:
        """The copy-teaching settings, by the names `seq2seq prepare`'s options and a prepared
        folder's manifest give them (`seq2seq.data.augment.AUGMENT_SETTINGS`)."""
        return {key: getattr(self, key) for key in AUGMENT_SETTINGS}


@dataclass
class ModelConfig:
    """Hyperparameters of both model families; each family reads the fields it needs."""

    name: str = "transformer-tiny"  # the preset this configuration started from
    arch: str = "transformer"  # "transformer" or "gru"
    embed_dim: int = 128  # token embedding size (the Transformer's d_model)
    hidden_size: int = 256  # GRU: decoder hidden size (the encoder uses half per direction)
    ffn_size: int = 256  # Transformer: position-wise feed-forward inner size
    num_heads: int = 4  # Transformer: attention heads
    encoder_layers: int = 4
    decoder_layers: int = 4
    dropout: float = 0.3
    attention_dropout: float = 0.1
    pre_norm: bool = True  # Transformer: layer norm before each sublayer (False: post-norm)
    share_embeddings: bool = True  # one embedding for source and target (joint vocabulary only)
    tie_output: bool = True  # output projection shares the target embedding's weights
    attention_layer: int = -1  # Transformer: decoder layer whose cross-attention is shown
    fast: bool = True  # the fast twins of seq2seq.fast; false: the textbook modules alone


MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "gru": dict(
        arch="gru",
        embed_dim=256,
        hidden_size=512,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.3,
        share_embeddings=False,
        tie_output=False,
    ),
    "transformer-tiny": dict(
        arch="transformer",
        embed_dim=128,
        ffn_size=256,
        num_heads=4,
        encoder_layers=4,
        decoder_layers=4,
        dropout=0.3,
    ),
    "transformer-small": dict(
        arch="transformer",
        embed_dim=256,
        ffn_size=1024,
        num_heads=4,
        encoder_layers=3,
        decoder_layers=3,
        dropout=0.3,
    ),
    "transformer-base": dict(
        arch="transformer",
        embed_dim=512,
        ffn_size=2048,
        num_heads=8,
        encoder_layers=6,
        decoder_layers=6,
        dropout=0.1,
    ),
}


@dataclass
class TrainConfig:
    run_dir: str = ""  # default: checkpoints/<run_name>
    run_name: str = "run"
    seed: int = 1
    init_from: str = ""  # a shipped model's name, an exported folder or a checkpoint: a new
    # run starts from its weights (optimizer, schedule and step fresh); "": random weights
    device: str = "auto"  # "auto" (CUDA when present), "cpu", "cuda", "cuda:1", ...
    precision: str = "auto"  # "auto" (bf16 on CUDA, fp16 where bf16 is missing; on a CPU bf16
    # with AVX512_BF16 or AMX, else fp32), or "bf16", "fp16" (with a gradient scaler; on a CPU
    # slow, for checking that GPU path), "fp32"
    compile: bool = False  # torch.compile the model
    # GPU speed recipe (docs/training.md, "Training fast on a GPU"); both off by default.
    length_buckets: tuple[int, ...] = ()  # pad every batch to (max_tokens // L, L) for the
    # smallest bucket L >= its longest row: a few fixed shapes, compiled once each; (): off
    fused_optimizer: bool = False  # AdamW(fused=True): one kernel per update on a GPU, which
    # also skips a non-finite update without the host reading the loss
    data_on_device: bool = False  # the training corpus copied to the device once, batches
    # gathered there (seq2seq.data.batching.DeviceCorpus)
    max_tokens: int = 4096  # token budget per batch, padding included
    accum_steps: int = 1  # gradient accumulation
    max_steps: int = 0  # 0: no limit
    max_epochs: int = 100
    optimizer_betas: tuple[float, float] = (0.9, 0.98)
    lr: float = 5e-4
    weight_decay: float = 0.0001
    schedule: str = "inverse_sqrt"  # "inverse_sqrt" (warmup then 1/sqrt decay), "linear"
    # (warmup then linear decay to 0 at max_steps) or "plateau"
    warmup_steps: int = 4000
    plateau_factor: float = 0.5  # "plateau": lr *= factor when valid BLEU stalls
    plateau_patience: int = 2  # validations without improvement before the lr drops
    plateau_threshold: float = 0.0  # "plateau": BLEU points a validation must gain to count
    min_lr: float = 1e-6
    label_smoothing: float = 0.1
    # An alignment head (Garg et al. 2019; docs/align.md): the cross-attention head (decoder
    # layer, from 0 or from the end when negative, and head) that learns the teacher's links of
    # seq2seq prepare --align-teacher, with this weight on its loss; 0: off
    alignment_head: tuple[int, int] = (-2, 0)  # the penultimate layer's first head
    alignment_weight: float = 0.0
    clip_norm: float = 1.0  # 0: no clipping
    log_every: int = 100  # steps between log lines (and TensorBoard points)
    log_every_seconds: float = 30.0  # also a log line when this long since the last one; 0: off
    valid_every: int = 1000  # steps between validations (each writes last.pt)
    valid_every_minutes: float = 0.0  # also validate when this long since the last validation
    # (or the start); 0: by steps only
    save_every: int = 0  # steps between extra writes of last.pt; 0: only at validations
    save_every_minutes: float = 10.0  # also write last.pt when this long since the last save
    valid_max_sentences: int = 0  # validate on the first N valid pairs; 0: the whole split
    valid_batch_tokens: int = 0  # validation decodes in batches of at most this many padded
    # source tokens times beams (and decode.batch_size sentences); 0: as any decoding (16,000)
    patience: int = 0  # validations without BLEU improvement before stopping; 0: never stop
    keep_last: int = 0  # also keep the last K validation checkpoints (for averaging)
    attention_samples: int = 3  # valid sentences whose attention maps go to TensorBoard
    attention_history: int = 4  # valid sentences whose every map each validation adds to
    # <run>/attention_history.safetensors (seq2seq explore --run); 0: off
    max_bad_steps: int = 10  # consecutive NaN/inf losses before the run stops
    num_workers: int = 0


@dataclass
class DecodeConfig:
    beam_size: int = 5
    length_penalty: float = 1.0  # GNMT alpha
    max_len_ratio: float = 1.5  # max output length = ratio * source length + max_len_const
    max_len_const: int = 10
    no_repeat_ngram: int = 0  # ban a token that would repeat an n-gram of the output (0: off)
    max_piece_repeat: int = 0  # ban the same piece more than this many times in a row (0: off)
    stop_early: bool = False  # beam: a sentence stops when its best candidate ends (else: K ended)
    keep_numbers: bool = False  # numbers only as the source's, characters whole (number_guard.py)
    batch_size: int = 128  # sentences per decoding batch
    precision: str = "auto"  # as train.precision: bf16 autocast on a GPU or a CPU with bf16
    # instructions (AVX512_BF16 or AMX), else fp32, but int8 for a single line on a CPU
    # (Translator.precision_for); or "bf16", "fp16" (slow on a CPU), "fp32", or "int8" (CPU
    # only: int8 linear layers, the rest fp32; seq2seq/decoding/quantize.py)
    valid_beam_size: int = 1  # beam used for BLEU during training validation
    max_src_pieces: int = 256  # a longer input line is refused (decoding/line_translator.py)...
    truncate_src: bool = False  # ...or, when true, cut to max_src_pieces with a warning


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trained_alignment_head(cfg: Config) -> tuple[int, int] | None:
    """The (layer, head) that train.alignment_weight trains, the layer counted from 0; None
    when it is 0."""
    if not cfg.train.alignment_weight:
        return None
    layer, head = cfg.train.alignment_head
    return layer % cfg.model.decoder_layers, head


def model_preset(name: str) -> ModelConfig:
    """The named model configuration, e.g. `model_preset("transformer-tiny")`."""
    if name not in MODEL_PRESETS:
        raise UserError(f"model.name: unknown preset {name!r}; known: {', '.join(MODEL_PRESETS)}")
    return ModelConfig(name=name, **MODEL_PRESETS[name])


def model_shape(model: ModelConfig) -> str:
    """A model's shape in one line, as `seq2seq train --help` and the docs give it, e.g.
    "Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads" (encoder + decoder layers)."""
    layers = f"{model.encoder_layers}+{model.decoder_layers} layers"
    if model.arch == "gru":
        attention = "GRU with Bahdanau attention"
        return f"{attention} {layers}, embeddings {model.embed_dim}, hidden {model.hidden_size}"
    return (
        f"Transformer {layers}, d_model {model.embed_dim}, FFN {model.ffn_size}, "
        f"{model.num_heads} heads"
    )
