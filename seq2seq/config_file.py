"""Reading a configuration: a TOML file and `section.key=value` overrides onto the dataclasses
of seq2seq/config.py, every value checked; writing one back (`dump_toml`); rebuilding one saved
in a checkpoint (`config_from_dict`).

Every unknown key, wrong type or impossible value is a `UserError` naming the key; the valid
values are in `seq2seq.config_rules`.
"""

import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from seq2seq.config import Config, ModelConfig, model_preset
from seq2seq.config_rules import RULES, check_rule
from seq2seq.data.corpora import OLDER_SPLIT_RULE
from seq2seq.errors import UserError

# Dynamo's default recompile_limit: past it, a compiled model silently runs uncompiled.
MAX_LENGTH_BUCKETS = 8


def _coerce(where: str, value: Any, default: Any) -> Any:
    """Check `value` against the type of the field's default, converting int to float."""
    kind = type(default)
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is tuple and not default and isinstance(value, list | tuple):  # a list of ints
        return tuple(_coerce(where, v, 0) for v in value)
    if kind is tuple and isinstance(value, list | tuple) and len(value) == len(default):
        return tuple(_coerce(where, v, d) for v, d in zip(value, default, strict=True))
    if kind is float and is_number:
        return float(value)
    if kind is int and is_number and isinstance(value, int):
        return value
    if kind in (bool, str) and isinstance(value, kind):
        return value
    got = type(value).__name__
    expected = kind.__name__
    if kind is tuple:
        expected = f"a list of {len(default)} numbers" if default else "a list of integers"
    raise UserError(f"{where}: expected {expected}, got {got} {value!r}")


def _parse_value(text: str) -> Any:
    """Parse the right side of `key=value` as a TOML value, or as a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply(
    section_obj: Any, section: str, values: dict[str, Any], source: str, sources: dict[str, str]
) -> None:
    """Set `values` in `section_obj`, recording in `sources` where each key came from."""
    known = {f.name: f for f in fields(section_obj)}
    for key, value in values.items():
        if key not in known:
            raise UserError(
                f"{source}: unknown key {section}.{key}; known: {', '.join(sorted(known))}"
            )
        default = getattr(section_obj, key)
        setattr(section_obj, key, _coerce(f"{source}: {section}.{key}", value, default))
        sources.pop(f"{section}.{key}", None)  # keep the keys in the order they were last set
        sources[f"{section}.{key}"] = source


def cross_checks(cfg: Config) -> list[tuple[tuple[str, ...], str]]:
    """Rules between keys: (the keys involved, the problem) for each one broken."""
    model, train, buckets = cfg.model, cfg.train, cfg.train.length_buckets
    rules = [
        (model.arch == "transformer" and model.embed_dim % model.num_heads,
         "model.embed_dim model.num_heads", "embed_dim must be divisible by num_heads"),
        (model.arch == "gru" and model.hidden_size % 2, "model.hidden_size",
         "must be even (the bidirectional encoder uses half per direction)"),
        (not -model.decoder_layers <= model.attention_layer < model.decoder_layers,
         "model.attention_layer model.decoder_layers",
         "attention_layer must be in [-decoder_layers, decoder_layers)"),
        (train.schedule == "linear" and train.max_steps <= train.warmup_steps,
         "train.schedule train.max_steps train.warmup_steps",
         "the linear schedule decays to 0 at max_steps, which must exceed warmup_steps"),
        (list(buckets) != sorted(set(buckets)) or len(buckets) > MAX_LENGTH_BUCKETS,
         "train.length_buckets", f"must be increasing, at most {MAX_LENGTH_BUCKETS} lengths (one "
         "compiled graph each, within Dynamo's recompile_limit)"),
    ]  # fmt: skip
    if train.alignment_weight:
        layer, head = train.alignment_head
        rules += [
            (model.arch != "transformer", "train.alignment_weight model.arch",
             "an alignment head is a head of the Transformer's cross-attention"),
            (not (-model.decoder_layers <= layer < model.decoder_layers
                  and 0 <= head < model.num_heads),
             "train.alignment_head model.decoder_layers model.num_heads",
             "the layer must be in [-decoder_layers, decoder_layers), the head in [0, num_heads)"),
            (train.data_on_device, "train.alignment_weight train.data_on_device",
             "the teacher's links are batched on the host; set train.data_on_device=false"),
        ]  # fmt: skip
    return [(tuple(keys.split()), problem) for broken, keys, problem in rules if broken]


def _validate(cfg: Config, sources: dict[str, str]) -> None:
    """Check every value against RULES and the rules between keys; the first problem is a
    UserError naming the key, its value and where it was set (file, override or default)."""

    def where(*names: str) -> str:
        """The source that set the last of `names` to be set."""
        last = [name for name in sources if name in names]
        return sources[last[-1]] if last else "default"

    def shown(name: str) -> str:
        section, _, key = name.partition(".")
        return f"{name}={_toml_value(getattr(getattr(cfg, section), key))}"

    for name, rule in RULES.items():
        section, _, key = name.partition(".")
        problem = check_rule(getattr(getattr(cfg, section), key), rule)
        if problem:
            raise UserError(f"{where(name)}: {shown(name)}: {problem}")
    problems = cross_checks(cfg)
    if problems:
        names, problem = problems[0]
        raise UserError(f"{where(*names)}: {', '.join(map(shown, names))}: {problem}")


def load_config(path: str | Path | None, overrides: list[str] = ()) -> Config:
    """Read a TOML configuration file and apply `section.key=value` overrides.

    The model section starts from the preset named by `model.name` (from the file, or from an
    override), then the file's and the overrides' model keys are applied on top.
    """
    file_values: dict[str, dict[str, Any]] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: configuration file not found")
        try:
            file_values = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise UserError(f"{path}: not valid TOML: {err}") from None
    override_values: dict[str, dict[str, Any]] = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise UserError(f"override {item!r}: expected section.key=value, e.g. train.lr=1e-3")
        override_values.setdefault(section, {})[name] = _parse_value(text.strip())

    sources = [(str(path), file_values), ("override", override_values)]
    known_sections = {f.name for f in fields(Config)}
    for source, values in sources:
        for section, body in values.items():
            if section not in known_sections:
                raise UserError(f"{source}: unknown section [{section}]")
            if not isinstance(body, dict):
                raise UserError(f"{source}: {section} must be a table of keys")

    preset = override_values.get("model", {}).get("name", file_values.get("model", {}).get("name"))
    cfg = Config(model=model_preset(preset if preset is not None else ModelConfig.name))
    set_by: dict[str, str] = {}
    for source, values in sources:
        for section, body in values.items():
            _apply(getattr(cfg, section), section, body, source, set_by)
    _validate(cfg, set_by)
    return cfg


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


def dump_toml(values: dict[str, dict[str, Any]]) -> str:
    """Write a configuration dictionary (`Config.to_dict()`) as TOML that `load_config` reads."""
    lines: list[str] = []
    for section, body in values.items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in body.items())
        lines.append("")
    return "\n".join(lines)


def config_from_dict(values: dict[str, Any], source: str = "saved configuration") -> Config:
    """Rebuild a `Config` saved with `Config.to_dict()` (in a checkpoint, or a model folder's
    model.json), its values checked as `load_config` checks them; errors name `source`. One
    saved before data.split_rule existed was prepared by the older rule."""
    cfg, set_by = Config(), {}
    cfg.data.split_rule = OLDER_SPLIT_RULE
    for section, body in values.items():
        _apply(getattr(cfg, section), section, body, source, set_by)
    _validate(cfg, set_by)
    return cfg
