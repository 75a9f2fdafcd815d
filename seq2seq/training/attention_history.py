"""The attention of a run through its training: at its first step and at each validation, every
attention map of a few fixed valid sentences goes into one small file of the run folder,
`attention_history.safetensors`, which `seq2seq explore --run RUN_FOLDER` shows with a step
slider. docs/training.md ("Attention through training") says which sentences, why their maps
are teacher-forced on the reference, and how the file stays under MAX_BYTES (`fitted`).

The file is safetensors: tensors and a JSON header, nothing that runs when it is read. One fp16
tensor per step, sentence and map, named "step{step}/sentence{n}/{map}", with the shapes of
`seq2seq.decoding.attention_maps` (S = source pieces, T = target pieces, both with EOS):

    encoder_self (L_enc, H, S, S)   decoder_self (L_dec, H, T, T)   cross (L_dec, H, T, S)
    bahdanau (T, S)                 (the GRU's one map)

The header's metadata "index" is JSON: {"format": FORMAT, "arch": "transformer" or "gru",
"maps": [map names], "sentences": [{"source", "reference", "src_ids", "tgt_ids", "src_pieces",
"tgt_pieces"}], "steps": [steps, increasing]}. A snapshot replaces those of its step and later:
a run resumed from an earlier last.pt redoes those steps.
"""

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import Tensor

from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.attention_maps import teacher_forced_maps
from seq2seq.decoding.line_translator import pieces
from seq2seq.errors import UserError
from seq2seq.files import parse_json, read_small_file, write_atomically
from seq2seq.models import Seq2SeqModel, TransformerSeq2Seq

FILE_NAME = "attention_history.safetensors"
FORMAT = "seq2seq attention history 1"
MAX_PIECES = 20  # a sentence's source and reference, EOS not counted
MAX_BYTES = 2_000_000  # the file's bound, kept as long as two snapshots fit in it
MAX_READ_BYTES = 64_000_000  # a file larger than this is refused before it is read


@dataclass
class Sentence:
    """A valid sentence whose maps the history keeps; pieces end with EOS, ids do not."""

    source: str
    reference: str
    src_ids: list[int]
    tgt_ids: list[int]
    src_pieces: list[str]
    tgt_pieces: list[str]


@dataclass
class AttentionHistory:
    """What the file holds: the model's architecture, the sentences, and by step, for each
    sentence, its maps by name (fp16, shapes in the module docstring)."""

    arch: str
    sentences: list[Sentence]
    snapshots: dict[int, list[dict[str, Tensor]]]

    @property
    def steps(self) -> list[int]:
        return sorted(self.snapshots)


def history_path(run_dir: Path) -> Path:
    return run_dir / FILE_NAME


def choose_sentences(
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    valid_lines: tuple[list[str], list[str]],
    count: int,
) -> list[Sentence]:
    """The first `count` valid pairs (sources, references) of at most MAX_PIECES pieces each."""
    chosen = []
    for source, reference in zip(*valid_lines, strict=True):
        if len(chosen) == count:
            break
        src_ids = src_tokenizer.encode([source])[0]
        tgt_ids = tgt_tokenizer.encode([reference])[0]
        if 0 < len(src_ids) <= MAX_PIECES and len(tgt_ids) <= MAX_PIECES:
            src_pieces, tgt_pieces = pieces(src_tokenizer, src_ids), pieces(tgt_tokenizer, tgt_ids)
            chosen.append(Sentence(source, reference, src_ids, tgt_ids, src_pieces, tgt_pieces))
    return chosen


def architecture(model: Seq2SeqModel) -> str:
    return "transformer" if isinstance(model, TransformerSeq2Seq) else "gru"


@torch.no_grad()
def snapshot(
    model: Seq2SeqModel, sentences: list[Sentence], device: torch.device
) -> list[dict[str, Tensor]]:
    """Every map of each sentence, teacher-forced on its reference, in fp16."""
    maps = [teacher_forced_maps(model, s.src_ids, s.tgt_ids, device) for s in sentences]
    return [{name: weights.half() for name, weights in each.items()} for each in maps]


def kept_steps(steps: list[int], stride: int) -> list[int]:
    """Of `steps` (increasing), the first, the latest, and those between that are multiples of
    `stride`."""
    between = [step for step in steps[1:-1] if step % stride == 0]
    return [steps[0], *between, steps[-1]] if len(steps) > 1 else steps


def encode(history: AttentionHistory) -> bytes:
    """The file's bytes: every snapshot's tensors, and the index as the header's metadata."""
    index = {
        "format": FORMAT,
        "arch": history.arch,
        "maps": sorted(history.snapshots[history.steps[0]][0]),
        "sentences": [asdict(sentence) for sentence in history.sentences],
        "steps": history.steps,
    }
    tensors = {
        f"step{step}/sentence{n}/{name}": weights.contiguous()
        for step, per_sentence in history.snapshots.items()
        for n, maps in enumerate(per_sentence)
        for name, weights in maps.items()
    }
    return save_tensors(tensors, metadata={"index": json.dumps(index, ensure_ascii=False)})


def fitted(history: AttentionHistory, max_bytes: int) -> bytes:
    """The bytes of `history` once thinned to at most `max_bytes`: the steps between the first
    and the latest are kept at a stride, their greatest common divisor (the validation interval)
    doubled until the file fits, so that they stay evenly spread over the run; the first and the
    latest stay whatever the size."""
    data = encode(history)
    stride = math.gcd(*history.steps[1:-1])
    while len(data) > max_bytes and len(history.snapshots) > 2:
        stride *= 2
        kept = kept_steps(history.steps, stride)
        history.snapshots = {step: history.snapshots[step] for step in kept}
        data = encode(history)
    return data


def add_snapshot(
    path: Path,
    step: int,
    model: Seq2SeqModel,
    sentences: list[Sentence],
    device: torch.device,
    max_bytes: int = MAX_BYTES,
) -> str | None:
    """Add the maps of `sentences` at `step` to the history file `path`, dropping those of
    `step` and later, and write it again (thinned to `max_bytes`). Returns a line for the run's
    log when the file there could not be continued, and is started again; else None."""
    history, note = AttentionHistory(architecture(model), sentences, {}), None
    if path.exists():
        try:
            saved = load_history(path)
        except UserError as err:
            saved, note = None, f"{err}; starting it again"
        if saved is not None and (saved.arch, saved.sentences) != (history.arch, sentences):
            note = f"{path}: holds other sentences or another model; starting it again"
        elif saved is not None:
            history = saved
    for later in [s for s in history.snapshots if s >= step]:
        del history.snapshots[later]
    history.snapshots[step] = snapshot(model, sentences, device)
    data = fitted(history, max_bytes)
    write_atomically(path, lambda file: file.write(data))
    return note


# --- Reading --------------------------------------------------------------------------------


def load_history(path: Path, name: str | None = None) -> AttentionHistory:
    """The history in the file `path`, every tensor checked against the index; anything else
    (a damaged or foreign file) is a one-line UserError naming the file `name` (by default
    its path)."""
    name = name or str(path)
    data = read_small_file(path, MAX_READ_BYTES, name)
    try:
        return checked_history(read_index(data), load_tensors(data))
    except (SafetensorError, ValueError, KeyError, TypeError) as err:
        reason = f"no {err}" if isinstance(err, KeyError) else str(err).splitlines()[0]
        raise UserError(f"{name}: not an attention history of seq2seq ({reason})") from None


def read_index(data: bytes) -> dict:
    """The index in the header of the safetensors bytes `data` (8 bytes of header size, then
    the header's JSON)."""
    if len(data) < 8:
        raise ValueError(f"{len(data)} bytes, shorter than a safetensors header")
    size = int.from_bytes(data[:8], "little")
    if 8 + size > len(data):
        raise ValueError(f"a header of {size:,} bytes in a file of {len(data):,}")
    header = parse_json(data[8 : 8 + size])
    index = header.get("__metadata__", {}).get("index") if isinstance(header, dict) else None
    if not isinstance(index, str):
        raise ValueError("no index in its header")
    return parse_json(index)


def checked_history(index: dict, tensors: dict[str, Tensor]) -> AttentionHistory:
    """The history that `index` describes, built from `tensors`; ValueError, KeyError or
    TypeError when they disagree in anything (format, counts, names, dtypes, shapes). The
    counts are checked first, so an index that claims more than the file holds builds
    nothing."""
    if index["format"] != FORMAT or index["arch"] not in ("transformer", "gru"):
        raise ValueError(f"not the format and architecture of {FORMAT!r}")
    steps, names = index["steps"], index["maps"]
    counts = [len(steps), len(index["sentences"]), len(names)]
    if not all(counts) or len(tensors) != math.prod(counts):
        shape = " x ".join(map(str, counts))
        raise ValueError(f"{len(tensors)} tensors for its {shape} steps x sentences x maps")
    if steps != sorted(set(steps)) or not all(isinstance(s, int) for s in steps):
        raise ValueError("its steps are not increasing integers")
    sentences = [Sentence(**fields) for fields in index["sentences"]]
    snapshots = {
        step: [
            {name: tensors[f"step{step}/sentence{n}/{name}"] for name in names}
            for n in range(len(sentences))
        ]
        for step in steps
    }
    for step, per_sentence in snapshots.items():
        for n, (sentence, maps) in enumerate(zip(sentences, per_sentence, strict=True)):
            for name, weights in maps.items():
                if weights.dtype != torch.float16 or not fits(name, weights.shape, sentence):
                    where = f"step{step}/sentence{n}/{name}"
                    raise ValueError(f"{where}: {weights.dtype} {tuple(weights.shape)}")
    return AttentionHistory(index["arch"], sentences, snapshots)


def fits(name: str, shape: torch.Size, sentence: Sentence) -> bool:
    """Whether map `name` of `sentence` may have `shape` (see the module docstring)."""
    src, tgt = len(sentence.src_pieces), len(sentence.tgt_pieces)
    if src != len(sentence.src_ids) + 1 or tgt != len(sentence.tgt_ids) + 1:
        return False
    if name == "bahdanau":
        return tuple(shape) == (tgt, src)
    rows_columns = {"encoder_self": (src, src), "decoder_self": (tgt, tgt), "cross": (tgt, src)}
    return name in rows_columns and len(shape) == 4 and tuple(shape[2:]) == rows_columns[name]


def run_history_file(option: str, given: str) -> Path:
    """The attention history named on the command line: a run folder (its FILE_NAME) or the
    file itself, read and checked once (`load_history`) so that a bad one stops at the start."""
    path = Path(given)
    if path.is_dir():
        path = history_path(path)
        if not path.exists():
            raise UserError(
                f"{option} {given}: no {FILE_NAME} in it (a run writes one at its first step "
                "unless train.attention_history = 0)"
            )
    try:
        load_history(path)
    except UserError as err:
        raise UserError(f"{option} {err}") from None
    return path
