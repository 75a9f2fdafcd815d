"""The valid values of every configuration key (`RULES`).

`seq2seq.config` checks a configuration against them when it is loaded (and the rules between
keys, `seq2seq.config.cross_checks`); the command line uses the same ranges for its options
(`seq2seq.commands.cli.number`).
"""

import math
from dataclasses import dataclass
from typing import Any

PRECISIONS = ("auto", "bf16", "fp16", "fp32")  # train.precision
DECODE_PRECISIONS = (*PRECISIONS, "int8")  # decode.precision


@dataclass(frozen=True)
class Range:
    """The values a number may take: above `low` and below `high` (None: no bound), each
    bound included unless `low_open` / `high_open`."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        if math.isnan(value) or math.isinf(value):
            return False
        above = self.low is None or value > self.low or (value == self.low and not self.low_open)
        below = (
            self.high is None or value < self.high or (value == self.high and not self.high_open)
        )
        return above and below

    def __str__(self) -> str:
        low, high = _number(self.low), _number(self.high)
        if self.high is None:
            return f"must be {'>' if self.low_open else '>='} {low}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"must be in {left}{low}, {high}{right}"


def _number(value: float | None) -> str:
    """1 for 1.0, 4294967295 for 2**32 - 1, 0.5 for 0.5."""
    return str(int(value)) if value is not None and float(value).is_integer() else f"{value}"


AT_LEAST_1 = Range(1)
AT_LEAST_0 = Range(0)
POSITIVE = Range(0, low_open=True)
PROBABILITY = Range(0, 1, high_open=True)

# The valid values of every number and every string with fixed choices; a test checks that each
# numeric field of the dataclasses of seq2seq/config.py has its entry here.
RULES: dict[str, Range | tuple[str, ...]] = {
    "data.vocab_size": Range(16),
    "model.arch": ("transformer", "gru"),
    "model.embed_dim": AT_LEAST_1,
    "model.hidden_size": AT_LEAST_1,
    "model.ffn_size": AT_LEAST_1,
    "model.num_heads": AT_LEAST_1,
    "model.encoder_layers": AT_LEAST_1,
    "model.decoder_layers": AT_LEAST_1,
    "model.dropout": PROBABILITY,
    "model.attention_dropout": PROBABILITY,
    "model.attention_layer": Range(),  # checked against model.decoder_layers below
    "train.seed": Range(0, 2**32 - 1),
    "train.precision": PRECISIONS,
    "train.max_tokens": AT_LEAST_1,
    "train.accum_steps": AT_LEAST_1,
    "train.max_steps": AT_LEAST_0,
    "train.max_epochs": AT_LEAST_1,
    "train.optimizer_betas": PROBABILITY,
    "train.lr": POSITIVE,
    "train.weight_decay": AT_LEAST_0,
    "train.schedule": ("inverse_sqrt", "plateau"),
    "train.warmup_steps": AT_LEAST_0,
    "train.plateau_factor": Range(0, 1, low_open=True, high_open=True),
    "train.plateau_patience": AT_LEAST_0,
    "train.plateau_threshold": AT_LEAST_0,
    "train.min_lr": AT_LEAST_0,
    "train.label_smoothing": PROBABILITY,
    "train.clip_norm": AT_LEAST_0,
    "train.log_every": AT_LEAST_1,
    "train.log_every_seconds": AT_LEAST_0,
    "train.valid_every": AT_LEAST_1,
    "train.save_every": AT_LEAST_0,
    "train.save_every_minutes": AT_LEAST_0,
    "train.valid_max_sentences": AT_LEAST_0,
    "train.patience": AT_LEAST_0,
    "train.keep_last": AT_LEAST_0,
    "train.attention_samples": AT_LEAST_0,
    "train.max_bad_steps": AT_LEAST_1,
    "train.num_workers": AT_LEAST_0,
    "decode.beam_size": AT_LEAST_1,
    "decode.length_penalty": AT_LEAST_0,
    "decode.max_len_ratio": POSITIVE,
    "decode.max_len_const": AT_LEAST_0,
    "decode.no_repeat_ngram": AT_LEAST_0,
    "decode.max_piece_repeat": AT_LEAST_0,
    "decode.batch_size": AT_LEAST_1,
    "decode.precision": DECODE_PRECISIONS,
    "decode.valid_beam_size": AT_LEAST_1,
    "decode.max_src_pieces": AT_LEAST_1,
}


def check_rule(value: Any, rule: Range | tuple[str, ...]) -> str | None:
    """Why `value` breaks `rule`, or None when it keeps it."""
    if isinstance(rule, tuple):
        return None if value in rule else f"must be one of {', '.join(rule)}"
    values = value if isinstance(value, tuple) else (value,)
    return None if all(v in rule for v in values) else str(rule)
