"""Configuration files, overrides, presets and their one-line errors."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

from seq2seq.config import MODEL_PRESETS, Config, config_from_dict, dump_toml, load_config
from seq2seq.config_rules import RULES, Range
from seq2seq.errors import UserError

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_committed_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.model.name in MODEL_PRESETS
    assert cfg.data.prepared.endswith(f"{cfg.data.src}-{cfg.data.tgt}")


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
        ("train.log_every=0", "train.log_every=0: must be >= 1"),
        ("train.keep_last=-1", "train.keep_last=-1: must be >= 0"),
        ("decode.batch_size=0", "decode.batch_size=0: must be >= 1"),
        ("model.ffn_size=0", "model.ffn_size=0: must be >= 1"),
        ("train.lr=nan", "train.lr=nan: must be > 0"),
        ("decode.length_penalty=inf", "decode.length_penalty=inf: must be >= 0"),
        ("train.optimizer_betas=[0.9, 1.0]", "train.optimizer_betas=[0.9, 1.0]: must be in [0, 1)"),
        ("model.attention_layer=4", "model.attention_layer=4, model.decoder_layers=4"),
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
