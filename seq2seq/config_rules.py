"""The valid values of every configuration key (`RULES`), the one place each range is written.

Every other place derives its check from them:

    seq2seq.config_file            a configuration file or override (`check_rule`), and the
                                   rules between keys (`cross_checks`)
    seq2seq.commands.cli           each option's type and help (`number`, `ranged`)
    seq2seq.api                    each argument of `Model.translate` (`checked`, `line_problem`)
    seq2seq.serving.schemas        each field of an HTTP request (`Range.bounds`)

`ARGUMENTS` names the decoding values that the command line, the Python API and the HTTP API
share: the same name in all three, the same range as the configuration key it sets.
"""

import math
from dataclasses import dataclass
from typing import Any

from seq2seq.data.corpora import SPLIT_RULES

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

    def interval(self) -> str:
        """The values as a help text shows them: ">= 1", "> 0" or "in [0, 1)"."""
        low, high = _number(self.low), _number(self.high)
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {low}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{low}, {high}{right}"

    def __str__(self) -> str:
        return f"must be {self.interval()}"

    def bounds(self) -> dict[str, float]:
        """The range as the constraints of a pydantic `Field`: ge or gt, le or lt."""
        bounds = {}
        if self.low is not None:
            bounds["gt" if self.low_open else "ge"] = self.low
        if self.high is not None:
            bounds["lt" if self.high_open else "le"] = self.high
        return bounds


def _number(value: float | None) -> str:
    """1 for 1.0, 4294967295 for 2**32 - 1, 0.5 for 0.5."""
    return str(int(value)) if value is not None and float(value).is_integer() else f"{value}"


AT_LEAST_1 = Range(1)
AT_LEAST_0 = Range(0)
POSITIVE = Range(0, low_open=True)
PROBABILITY = Range(0, 1, high_open=True)
# The beams a search may keep (its time and memory grow with the beam). A beam is also at most
# the target vocabulary, which the translator checks against the model.
BEAM_SIZES = Range(1, 256)
# GNMT's alpha: ((5 + n) / 6) ** alpha stays a finite float32 up to alpha = 5 for every output
# length n allowed below (max_len_ratio x max_src_pieces + max_len_const = 101,000); usual values
# are 0.6 to 2.
LENGTH_PENALTIES = Range(0, 5)

# The valid values of every number and every string with fixed choices; a test checks that each
# numeric field of the dataclasses of seq2seq/config.py has its entry here.
RULES: dict[str, Range | tuple[str, ...]] = {
    "data.vocab_size": Range(16),
    "data.augment_entities": Range(0, 10),
    "data.augment_numbers": Range(0, 50),  # higher: few pairs share a number
    "data.augment_repeated_digits": Range(0, 1),
    "data.augment_world_names": Range(0, 1),
    "data.augment_codes": Range(0, 1),
    "data.augment_contacts": Range(0, 1),
    "data.augment_months": Range(0, 50),  # higher: few pairs name a month
    "data.concat_share": Range(0, 1),
    "data.split_rule": SPLIT_RULES,
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
    "train.length_buckets": Range(2),  # a target row holds at least BOS and EOS
    "train.max_tokens": AT_LEAST_1,
    "train.accum_steps": AT_LEAST_1,
    "train.max_steps": AT_LEAST_0,
    "train.max_epochs": AT_LEAST_1,
    "train.optimizer_betas": PROBABILITY,
    "train.lr": Range(0, 1, low_open=True),
    "train.weight_decay": AT_LEAST_0,
    "train.schedule": ("inverse_sqrt", "linear", "plateau"),
    "train.warmup_steps": AT_LEAST_0,
    "train.plateau_factor": Range(0, 1, low_open=True, high_open=True),
    "train.plateau_patience": AT_LEAST_0,
    "train.plateau_threshold": AT_LEAST_0,
    "train.min_lr": Range(0, 1),
    "train.label_smoothing": PROBABILITY,
    "train.alignment_head": Range(),  # checked against the model below
    "train.alignment_weight": AT_LEAST_0,
    "train.clip_norm": AT_LEAST_0,
    "train.log_every": AT_LEAST_1,
    "train.log_every_seconds": AT_LEAST_0,
    "train.valid_every": AT_LEAST_1,
    "train.valid_every_minutes": AT_LEAST_0,
    "train.save_every": AT_LEAST_0,
    "train.save_every_minutes": AT_LEAST_0,
    "train.valid_max_sentences": AT_LEAST_0,
    "train.valid_batch_tokens": AT_LEAST_0,
    "train.patience": AT_LEAST_0,
    "train.keep_last": AT_LEAST_0,
    "train.attention_samples": AT_LEAST_0,
    "train.attention_history": AT_LEAST_0,
    "train.max_bad_steps": AT_LEAST_1,
    "train.num_workers": AT_LEAST_0,
    "decode.beam_size": BEAM_SIZES,
    "decode.length_penalty": LENGTH_PENALTIES,
    "decode.max_len_ratio": Range(0, 10, low_open=True),  # output tokens per source piece
    "decode.max_len_const": Range(0, 1000),
    "decode.no_repeat_ngram": Range(0, 100),
    "decode.max_piece_repeat": Range(0, 1000),
    "decode.batch_size": Range(1, 100_000),
    "decode.precision": DECODE_PRECISIONS,
    "decode.valid_beam_size": BEAM_SIZES,
    "decode.max_src_pieces": Range(1, 10_000),
}

# The values that `seq2seq translate` (--beam, --nbest, ...), `Model.translate` (beam=, ...)
# and POST /v1/translate ("beam", ...) all take, by that name: the rule of each. nbest is the
# length of the n-best list, at most the beam (checked where both are known).
ARGUMENTS: dict[str, Range] = {
    "beam": RULES["decode.beam_size"],
    "nbest": BEAM_SIZES,
    "length_penalty": RULES["decode.length_penalty"],
    "max_len_ratio": RULES["decode.max_len_ratio"],
}


def check_rule(value: Any, rule: Range | tuple[str, ...]) -> str | None:
    """Why `value` breaks `rule`, or None when it keeps it."""
    if isinstance(rule, tuple):
        return None if value in rule else f"must be one of {', '.join(rule)}"
    values = value if isinstance(value, tuple) else (value,)
    return None if all(v in rule for v in values) else str(rule)


def checked(name: str, value: Any, kind: type[int] | type[float]) -> Any:
    """`value` of the Python API's argument `name` (a key of ARGUMENTS) as `kind`; a one-line
    ValueError naming the argument unless it is a `kind` (an int does for a float) in its range."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or (kind is int and not isinstance(value, int)):
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"{name}: {value!r} is not {what}")
    if value not in ARGUMENTS[name]:
        raise ValueError(f"{name}: {value!r}: {ARGUMENTS[name]}")
    return kind(value)


def checked_flag(name: str, value: Any) -> bool:
    """`value` of the Python API's on/off argument `name`; a one-line ValueError naming the
    argument unless it is True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: {value!r} is not True or False")
    return value


def line_problem(line: Any) -> str | None:
    """Why `line` is no text to translate, or None: not a str, or a str holding a lone surrogate
    (a code point of U+D800..U+DFFF, which no UTF-8 text holds; JSON's "\\ud800" gives one)."""
    if not isinstance(line, str):
        return f"expected a str, got {type(line).__name__}"
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as err:
        where = f"U+{ord(line[err.start]):04X} at character {err.start + 1}"
        return f"a lone surrogate ({where}) is not text"
    return None
