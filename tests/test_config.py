"""Configuration files, overrides, presets and their one-line errors; the ranges that the
configuration, the command line, the Python API and the HTTP API share."""

import math
import re
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import ValidationError

from seq2seq.commands import train as train_command
from seq2seq.config import MODEL_PRESETS, Config, model_preset, model_shape
from seq2seq.config_file import config_from_dict, dump_toml, load_config
from seq2seq.config_rules import ARGUMENTS, RULES, Range, checked, line_problem
from seq2seq.decoding.model_folder import read_description
from seq2seq.decoding.model_result import SHIPPED_MODELS
from seq2seq.errors import UserError
from seq2seq.serving.schemas import TranslateRequest

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_committed_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.model.name in MODEL_PRESETS
    assert cfg.data.prepared.endswith(f"{cfg.data.src}-{cfg.data.tgt}")


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
@pytest.mark.parametrize("corpus", ["tatoeba", "tatoeba-v2", "tatoeba-months"])
def test_the_tatoeba_configs_build_the_shipped_models_not_their_preset(
    corpus: str, direction: str
) -> None:
    """The Tatoeba configurations, the first models', v2's and the months fine-tunes', give
    exactly the shipped models' architecture, 4+2 layers and FFN 512, which is not the shape of
    the preset they are named after (3+3 layers, FFN 1024)."""
    model = load_config(CONFIGS[0].parent / f"transformer.{corpus}.{direction}.toml").model
    shipped = read_description(SHIPPED_MODELS / f"transformer-small.tatoeba.{direction}")
    assert model == shipped.config.model and model.name == "transformer-small"
    assert model_shape(model) == "Transformer 4+2 layers, d_model 256, FFN 512, 4 heads"
    assert model_shape(model_preset(model.name)) == (
        "Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads"
    )


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_the_next_tatoeba_configs_change_the_data_alone(direction: str) -> None:
    """configs/transformer.tatoeba-v2.* (benchmarks/tatoeba_gpu.sh) train as the shipped
    models' configurations do, on Tatoeba split by both sides, with their copy-teaching and more:
    names of many alphabets, codes, contacts and concatenation; and an alignment head, whose
    links make the batches on the host."""
    shipped, new = (
        load_config(CONFIGS[0].parent / f"transformer.{corpus}.{direction}.toml")
        for corpus in ("tatoeba", "tatoeba-v2")
    )
    assert (shipped.data.split_rule, new.data.split_rule) == ("english-side", "both-sides")
    added = ("augment_world_names", "augment_codes", "augment_contacts", "concat_share")
    for key, value in shipped.data.augmentation.items():
        assert getattr(new.data, key) == value or (
            key in added and value == 0 < getattr(new.data, key)
        )
    assert (new.model, new.decode) == (shipped.model, shipped.decode)
    assert new.train.run_name == f"transformer.tatoeba-v2.{direction}"
    new.train.run_name = shipped.train.run_name
    head = ("alignment_weight", "data_on_device")
    assert [getattr(new.train, key) for key in head] == [0.05, False]
    assert [getattr(shipped.train, key) for key in head] == [0.0, True]
    new.train.alignment_weight, new.train.data_on_device = 0.0, True
    assert new.train == shipped.train


@pytest.mark.parametrize("direction", ["en-fr", "fr-en"])
def test_the_months_configs_fine_tune_the_v2_models_with_months(direction: str) -> None:
    """configs/transformer.tatoeba-months.* start from the exported v2 model and change, beside
    the folder, the months copy-taught, the run's name and its schedule alone: 1000 steps at
    lr 0.0007 after 100 of warm-up, validated on 500 pairs every 250 steps."""
    v2, months = (
        load_config(CONFIGS[0].parent / f"transformer.{corpus}.{direction}.toml")
        for corpus in ("tatoeba-v2", "tatoeba-months")
    )
    assert months.data.prepared == f"data/tatoeba-months.{direction}"
    assert (v2.data.augment_months, months.data.augment_months) == (0.0, 20.0)
    months.data.prepared, months.data.augment_months = v2.data.prepared, 0.0
    assert (months.data, months.model, months.decode) == (v2.data, v2.model, v2.decode)
    schedule = {
        "run_name": f"transformer.tatoeba-months.{direction}",
        "init_from": f"exported/transformer-small.tatoeba-v2.{direction}",
        "max_steps": 1000,
        "lr": 0.0007,
        "warmup_steps": 100,
        "valid_every": 250,
        "valid_max_sentences": 500,
        "log_every": 50,
    }
    assert {key: getattr(months.train, key) for key in schedule} == schedule
    for key in schedule:
        setattr(months.train, key, getattr(v2.train, key))
    assert months.train == v2.train


def test_train_help_gives_each_presets_shape_and_the_configs_that_change_it(
    capsys: pytest.CaptureFixture,
) -> None:
    with pytest.raises(SystemExit):
        train_command.main(["--help"])
    assert capsys.readouterr().out.endswith(train_command.presets_help() + "\n")
    changed = "    transformer-small as Transformer 4+2 layers, d_model 256, FFN 512, 4 heads"
    assert train_command.presets_help().splitlines() == [
        "model presets (model.name; a configuration's [model] keys change them):",
        "  gru                GRU with Bahdanau attention 1+1 layers, embeddings 256, hidden 512",
        "  transformer-tiny   Transformer 4+4 layers, d_model 128, FFN 256, 4 heads",
        "  transformer-small  Transformer 3+3 layers, d_model 256, FFN 1024, 4 heads",
        "  transformer-base   Transformer 6+6 layers, d_model 512, FFN 2048, 8 heads",
        "committed configurations that change their preset's shape:",
        "  configs/gru-small.multi30k.en-de.toml:",
        "    gru as GRU with Bahdanau attention 1+1 layers, embeddings 192, hidden 256",
        "  configs/transformer.tatoeba-months.en-fr.toml:",
        changed,
        "  configs/transformer.tatoeba-months.fr-en.toml:",
        changed,
        "  configs/transformer.tatoeba-v2.en-fr.toml:",
        changed,
        "  configs/transformer.tatoeba-v2.fr-en.toml:",
        changed,
        "  configs/transformer.tatoeba.en-fr.toml:",
        changed,
        "  configs/transformer.tatoeba.fr-en.toml:",
        changed,
    ]


def test_preset_then_file_then_override(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[model]\nname = "transformer-small"\ndropout = 0.2\n[train]\nlr = 0.001\n')
    cfg = load_config(path, ["train.lr=2e-4", "model.encoder_layers=2", 'train.run_name="x"'])
    assert cfg.model.embed_dim == 256 and cfg.model.ffn_size == 1024  # from the preset
    assert cfg.model.dropout == 0.2  # from the file
    assert cfg.model.encoder_layers == 2 and cfg.train.lr == 2e-4  # from the overrides
    assert cfg.train.run_name == "x"


def test_override_picks_the_preset() -> None:
    cfg = load_config(None, ["model.name=gru"])
    assert cfg.model.arch == "gru" and cfg.model.hidden_size == MODEL_PRESETS["gru"]["hidden_size"]


def test_dump_and_reload_round_trip(tmp_path: Path) -> None:
    cfg = load_config(None, ["train.optimizer_betas=[0.8, 0.9]", 'data.src="fr"'])
    path = tmp_path / "saved.toml"
    path.write_text(dump_toml(cfg.to_dict()))
    assert load_config(path) == cfg
    assert config_from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.nope=1", "unknown key train.nope"),
        ("nope.lr=1", "unknown section [nope]"),
        ("train.lr=fast", "train.lr: expected float, got str"),
        ("train.max_tokens=10.5", "train.max_tokens: expected int, got float"),
        ("train.compile=1", "train.compile: expected bool, got int"),
        ("model.dropout=1.5", "override: model.dropout=1.5: must be in [0, 1)"),
        ("model.num_heads=3", "model.embed_dim=128, model.num_heads=3: embed_dim must be divis"),
        ("model.name=huge", "unknown preset 'huge'"),
        ("train.precision=fp8", 'train.precision="fp8": must be one of'),
        ('train.precision="int8"', 'train.precision="int8": must be one of auto, bf16, fp16, fp32'),
        ('decode.precision="int4"', "must be one of auto, bf16, fp16, fp32, int8"),
        ("model.num_heads=0", "override: model.num_heads=0: must be >= 1"),
        ("train.seed=-1", "override: train.seed=-1: must be in [0, 4294967295]"),
        ("train.num_workers=-1", "train.num_workers=-1: must be >= 0"),
        ("train.clip_norm=-1", "train.clip_norm=-1.0: must be >= 0"),
        ("train.valid_every_minutes=-1", "train.valid_every_minutes=-1.0: must be >= 0"),
        ("train.log_every=0", "train.log_every=0: must be >= 1"),
        ("train.keep_last=-1", "train.keep_last=-1: must be >= 0"),
        ("decode.batch_size=0", "decode.batch_size=0: must be in [1, 100000]"),
        ("model.ffn_size=0", "model.ffn_size=0: must be >= 1"),
        ("train.lr=nan", "train.lr=nan: must be in (0, 1]"),
        ("decode.length_penalty=inf", "decode.length_penalty=inf: must be in [0, 5]"),
        ("decode.length_penalty=1000", "override: decode.length_penalty=1000.0: must be in [0, 5]"),
        ("decode.max_len_ratio=1e6", "decode.max_len_ratio=1000000.0: must be in (0, 10]"),
        ("decode.max_len_ratio=0", "decode.max_len_ratio=0.0: must be in (0, 10]"),
        ("decode.beam_size=0", "override: decode.beam_size=0: must be in [1, 256]"),
        ("decode.beam_size=257", "decode.beam_size=257: must be in [1, 256]"),
        ("decode.valid_beam_size=1000", "decode.valid_beam_size=1000: must be in [1, 256]"),
        ("decode.max_src_pieces=100000", "decode.max_src_pieces=100000: must be in [1, 10000]"),
        ("decode.max_len_const=-1", "decode.max_len_const=-1: must be in [0, 1000]"),
        ("train.lr=2", "train.lr=2.0: must be in (0, 1]"),
        ("train.optimizer_betas=[0.9, 1.0]", "train.optimizer_betas=[0.9, 1.0]: must be in [0, 1)"),
        ("model.attention_layer=4", "model.attention_layer=4, model.decoder_layers=4"),
        ("train.length_buckets=[1, 8]", "train.length_buckets=[1, 8]: must be >= 2"),
        ("train.length_buckets=[16, 8]", "train.length_buckets=[16, 8]: must be increasing"),
        ("train.length_buckets=[8.5]", "train.length_buckets: expected int, got float 8.5"),
        ("train.length_buckets=8", "length_buckets: expected a list of integers, got int 8"),
        ("lr=1", "expected section.key=value"),
    ],
)
def test_bad_values_name_the_key(override: str, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        load_config(None, [override])


def test_int8_is_a_decoding_precision() -> None:
    assert load_config(None, ['decode.precision="int8"']).decode.precision == "int8"


def test_bad_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="configuration file not found"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[train\nlr = 1\n")
    with pytest.raises(UserError, match=r"broken\.toml: not valid TOML"):
        load_config(broken)


def test_every_number_has_a_valid_range() -> None:
    numeric = {
        f"{section.name}.{key.name}"
        for section in fields(Config)
        for key in fields(section.type)
        if key.type in (int, float, tuple[float, float])
    }
    assert numeric - set(RULES) == set()
    assert all(isinstance(RULES[name], Range) for name in numeric)


def test_the_error_names_the_file_that_set_the_value(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[train]\nwarmup_steps = -5\n")
    with pytest.raises(UserError, match=re.escape(f"{path}: train.warmup_steps=-5: must be >= 0")):
        load_config(path)
    with pytest.raises(UserError, match=re.escape("override: train.warmup_steps=-6")):
        load_config(path, ["train.warmup_steps=-6"])
    assert load_config(path, ["train.warmup_steps=0"]).train.warmup_steps == 0


# The configuration key that each value shared by the command line, the Python API and the HTTP
# API sets (nbest sets none).
SHARED_KEYS = {
    "beam": "decode.beam_size",
    "length_penalty": "decode.length_penalty",
    "max_len_ratio": "decode.max_len_ratio",
}


def probes(rule: Range, kind: type) -> list[float]:
    """The bounds of `rule`, values just outside and inside them, and (for a float) the values
    that overflow or are not numbers."""
    step = 1 if kind is int else 1e-9
    values = [0, 1] if kind is int else [0.0, 1.0, 1e308, -1e308, math.nan, math.inf]
    for bound in (rule.low, rule.high):
        if bound is not None:
            values += [kind(bound - step), kind(bound), kind(bound + step)]
    return values


def accepted_by_the_option(name: str, value: float) -> bool:
    from seq2seq.commands import translate

    try:
        translate.parse_args(["--model", "m", f"--{name.replace('_', '-')}", repr(value)])
    except SystemExit:
        return False
    return True


def accepted_by_the_http_schema(name: str, value: float) -> bool:
    try:
        TranslateRequest.model_validate({"lines": ["a"], name: value})
    except ValidationError:
        return False
    return True


def accepted_by_the_python_api(name: str, value: float, kind: type) -> bool:
    try:
        checked(name, value, kind)
    except ValueError:
        return False
    return True


def accepted_by_the_configuration(key: str, value: float) -> bool:
    try:
        load_config(None, [f"{key}={value!r}"])
    except UserError:
        return False
    return True


@pytest.mark.parametrize("name", list(ARGUMENTS))
def test_a_shared_value_has_the_same_range_everywhere(name: str, capsys) -> None:
    """The option, the HTTP field, the Python API's argument and the configuration key accept
    exactly the values of the one rule, on both sides of each bound."""
    kind = int if name in ("beam", "nbest") else float
    rule = ARGUMENTS[name]
    assert name not in SHARED_KEYS or RULES[SHARED_KEYS[name]] == rule
    for value in probes(rule, kind):
        expected = value in rule
        assert accepted_by_the_option(name, value) == expected, (name, value)
        assert accepted_by_the_http_schema(name, value) == expected, (name, value)
        assert accepted_by_the_python_api(name, value, kind) == expected, (name, value)
        if name in SHARED_KEYS and not math.isnan(value) and not math.isinf(value):
            assert accepted_by_the_configuration(SHARED_KEYS[name], value) == expected
    capsys.readouterr()  # the options' error lines


def test_the_http_schema_states_the_ranges() -> None:
    """The OpenAPI schema shows the bounds of each shared field, as derived from ARGUMENTS."""
    fields = TranslateRequest.model_json_schema()["properties"]
    assert fields["nbest"]["minimum"] == 1 and fields["nbest"]["maximum"] == 256
    [number, _] = fields["max_len_ratio"]["anyOf"]
    assert (number["exclusiveMinimum"], number["maximum"]) == (0, 10)
    [number, _] = fields["length_penalty"]["anyOf"]
    assert (number["minimum"], number["maximum"]) == (0, 5)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("a dog", None),
        ("a \ud800 b", "a lone surrogate (U+D800 at character 3) is not text"),
        ("\udfff", "a lone surrogate (U+DFFF at character 1) is not text"),
        ("😀", None),
        (3, "expected a str, got int"),
        (None, "expected a str, got NoneType"),
    ],
)
def test_line_problem(line: object, problem: str | None) -> None:
    assert line_problem(line) == problem
