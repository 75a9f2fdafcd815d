"""The record of one trained model: its test scores and how it was made (results/models/*.json).

A model result, e.g. results/models/transformer-tiny.en-de.json:

    {
      "name": "Transformer tiny, 5 checkpoints averaged",
      "model": "transformer-tiny", "direction": "en-de", "corpus": "multi30k", "split": "test",
      "parameters": 2349568,
      "bleu": 38.1, "bleu_lc": 39.0, "chrf": 64.2,
      "signatures": {"bleu": "nrefs:1|case:mixed|...", "bleu_lc": "...", "chrf": "..."},
      "beam_size": 5, "averaged_checkpoints": 5,
      "train_steps": 30000, "train_hours": 1.5, "device": "1x NVIDIA H100",
      "commands": ["make data", "make train MODEL=transformer", "..."],
      "git_revision": "0123abc...", "decode_precision": "fp32",
      "domain": "Flickr image captions (Multi30k: 29,000 training pairs describing photos)",
      "limits": [{"problem": "changes numbers and names",
                  "source": "Julia Schmidt paid 19.99 euros.", "output": "Juma-9-9-9 ..."}]
    }

`seq2seq evaluate --record FILE` writes one: the scores, signatures, beam, model, corpus,
parameter count, step, number of averaged checkpoints and decoding precision come from the
evaluation and the checkpoint, the domain from the corpus (`seq2seq.data.corpora.domain_of`); the
name, training time, device and commands are given as options. `seq2seq evaluate --split entities
--record FILE` adds the entity test's scores and copy accuracy to an existing record
(`entity_test`, see seq2seq.data.entity_copy), `--split realistic` the realistic test's
(`realistic_entity_test`), and `seq2seq align --gold GOLD --record FILE` the alignment error
rate of the model's attention against human gold (`alignment_test`, see
seq2seq.commands.align). The commands are ones that run
today from the repository root: make targets, the scripts of scripts/ and `seq2seq` commands,
with the configurations they name (tests/test_results_table.py checks every record and card).

The limits, what the model gets wrong with a real example of each (its output at the card's beam
and precision), are written into a shipped model's card by hand; the prompt and GET /v1/models
show them with the domain (`domain_and_limits`).
"""

import json
import subprocess
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, get_origin

from seq2seq.data.corpora import domain_of
from seq2seq.errors import UserError
from seq2seq.files import parse_json, read_small_file, write_atomically

NOT_RECORDED = "not recorded"  # a field that older records lack
MAX_CARD_BYTES = 1 << 20  # a larger card is refused before it is read
LIMIT_KEYS = ("problem", "source", "output")  # one limit: what goes wrong, and an example
# The models shipped with the package: one folder each, its card (a ModelResult) in card.json.
SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "shipped_models"


def shipped_model_names(models_dir: Path = SHIPPED_MODELS) -> list[str]:
    """The names of the shipped models (their folders), found without loading any."""
    return sorted(card.parent.name for card in models_dir.glob("*/card.json"))


@dataclass
class ModelResult:
    """One trained model's test scores and how it was made (see the module docstring)."""

    name: str  # the row's label
    model: str  # the model preset (model.name)
    direction: str  # e.g. "en-de"
    corpus: str  # e.g. "multi30k"
    split: str  # the scored split, e.g. "test"
    parameters: int
    bleu: float  # sacreBLEU, cased
    bleu_lc: float  # sacreBLEU, lowercased
    chrf: float
    signatures: dict[str, str]  # sacreBLEU signatures of "bleu", "bleu_lc" and "chrf"
    beam_size: int
    averaged_checkpoints: int  # checkpoints averaged into the weights; 1: a single checkpoint
    train_steps: int
    train_hours: float
    device: str  # what it was trained on
    commands: list[str]  # every command, from preparing the data to evaluating
    git_revision: str  # the commit that evaluated it, "-dirty" if tracked files differed
    decode_precision: str = NOT_RECORDED  # what decoding computed in: fp32, bf16, fp16 or int8
    keep_numbers: bool = False  # decoded with the number guard (decode.keep_numbers)
    # a folder exported for CTranslate2 without the number guard its scores were decoded with
    # (seq2seq export --no-keep-numbers): why keep_numbers is false; "": no such folder
    number_guard: str = ""
    domain: str = NOT_RECORDED  # the text it knows and its training data, in one line
    # What it gets wrong: {"problem": ..., "source": ..., "output": ...}, each with a real output
    limits: list[dict[str, str]] = field(default_factory=list)
    # the entity test's scores and copy accuracy (seq2seq evaluate --split entities --record);
    # {}: not run
    entity_test: dict[str, Any] = field(default_factory=dict)
    # the realistic entity test's, likewise (seq2seq evaluate --split realistic --record)
    realistic_entity_test: dict[str, Any] = field(default_factory=dict)
    # AER, precision and recall against word alignment gold (seq2seq align --gold --record)
    alignment_test: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> "ModelResult":
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UserError(f"{path}: not readable JSON ({err})") from None
        known = {f.name: f for f in fields(cls)}
        needed = {
            f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
        }
        got = values.keys() if isinstance(values, dict) else set()
        if not needed <= got <= known.keys():
            wrong = sorted(needed - got) + sorted(set(got) - set(known))
            raise UserError(f"{path}: missing or unknown keys: {', '.join(wrong) or 'all'}")
        for name, value in values.items():
            kind = get_origin(known[name].type) or known[name].type
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not (number if kind is float else isinstance(value, kind)):
                raise UserError(f"{path}: {name} should be a {kind.__name__}, not {value!r}")
        return cls(**values)

    def save(self, path: Path) -> None:
        """Write the result as indented JSON, atomically."""
        text = json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"
        try:
            write_atomically(path, lambda tmp: tmp.write(text.encode("utf-8")))
        except OSError as err:
            raise UserError(f"{path}: cannot write ({err.strerror})") from None


def add_to_record(path: Path, key: str, section: dict[str, Any]) -> None:
    """Add `section` and the git revision that computed it to the record at `path` under `key`,
    leaving the rest as it was (`--record FILE` of evaluate's entity tests and of align)."""
    ModelResult.load(path)  # a record: refused with a line naming what is wrong
    values = json.loads(path.read_text(encoding="utf-8"))
    values[key] = {**section, "git_revision": git_revision()}
    text = json.dumps(values, indent=2, ensure_ascii=False) + "\n"
    try:
        write_atomically(path, lambda file: file.write(text.encode("utf-8")))
    except OSError as err:
        raise UserError(f"--record {path}: cannot write ({err.strerror})") from None


def read_card(path: Path) -> dict[str, Any]:
    """The fields of a model card (card.json) as JSON gives them; a card that is not a JSON
    object is a UserError naming it."""
    try:
        card = parse_json(read_small_file(path, MAX_CARD_BYTES))
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: unreadable model card ({err})") from None
    if not isinstance(card, dict):
        raise UserError(f"{path}: unreadable model card (not a JSON object)")
    return card


def domain_and_limits(card: Path | None, corpus: str) -> tuple[str, list[dict[str, str]]]:
    """What a model translates well and what it gets wrong, as the prompt and GET /v1/models
    say: its card's domain and limits; without a card (a checkpoint), or one that lacks them,
    the domain of its corpus (`seq2seq.data.corpora.domain_of`) and no limits."""
    values = read_card(card) if card is not None and card.is_file() else {}
    domain, limits = values.get("domain", NOT_RECORDED), values.get("limits", [])
    valid = isinstance(limits, list) and all(
        isinstance(limit, dict)
        and sorted(limit) == sorted(LIMIT_KEYS)
        and all(isinstance(text, str) for text in limit.values())
        for limit in limits
    )
    if not (isinstance(domain, str) and valid):
        raise UserError(
            f"{card}: domain should be a line and limits a list of {{{', '.join(LIMIT_KEYS)}}}"
        )
    return (domain_of(corpus) if domain == NOT_RECORDED else domain), limits


def git_state() -> tuple[str | None, bool | None]:
    """The commit checked out and whether tracked files differ from it (None outside git)."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        result = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()

    try:
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return None, None


def git_revision() -> str:
    """The commit checked out, "-dirty" if tracked files differ, as records keep it."""
    revision, dirty = git_state()
    return (revision or "unknown") + ("-dirty" if dirty else "")
