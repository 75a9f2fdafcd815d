"""Prepare a corpus for training (`seq2seq.data.prepared_corpus` loads the folder it writes).

`prepare` fetches a corpus (see `seq2seq.data.corpora`, `seq2seq.data.download`), normalises every
split, filters the training pairs (`seq2seq.data.clean`), trains sentencepiece on them
(`seq2seq.data.tokenizer`) and writes one folder, by default `data/<corpus>.<src>-<tgt>/`, in the
format of `seq2seq.data.manifest`.

The folder is built in a temporary folder beside it and renamed into place at the end, so a
failure never leaves a half-written folder and never damages a good one. Preparing again with
the same settings verifies the folder and reuses it; other settings rebuild it.

Preparing streams: the text is encoded in chunks, and sentencepiece trains on a random sample of
the training sentences (`spm_sample`), so memory does not grow with the corpus for those steps.
"""

import gc
import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from itertools import chain, islice
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_connections
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import sentencepiece
from tqdm import tqdm

from seq2seq.data.align_teacher import check_teacher, write_teacher_links
from seq2seq.data.augment import (
    AUGMENT_SETTINGS,
    AUGMENT_VERSION,
    COPY_TEACHING_SHARES,
    EntityAugmenter,
)
from seq2seq.data.clean import MAX_RATIO, MAX_WORDS, CleanReport, normalize
from seq2seq.data.concatenate import Concatenator
from seq2seq.data.corpora import (
    BOTH_SIDES,
    OLDER_SPLIT_RULE,
    SPLITS,
    USER_CORPUS,
    Pair,
    Tatoeba,
    UserFiles,
    get_corpus,
)
from seq2seq.data.download import fetch, removing_new_empty_dirs, resolve_mirror
from seq2seq.data.entities import MONTHS
from seq2seq.data.manifest import (
    FORMAT_VERSION,
    ID_DTYPES,
    MANIFEST,
    OFFSETS_DTYPE,
    OLDER_TOKENIZATION,
    array_files,
)
from seq2seq.data.tokenizer import (
    BYTE_PIECES,
    MIN_BYTE_FALLBACK_VOCAB,
    MODEL_TYPES,
    SAMPLE,
    SEED,
    SETTINGS,
    Tokenizer,
)
from seq2seq.errors import UserError
from seq2seq.files import (
    check_output_location,
    iter_lines,
    recover_folder,
    replace_folder,
    sha256_file,
    staging_folder,
)

T = TypeVar("T")
MIN_VOCAB_SIZE = 16
MAX_VOCAB_SIZE = 1_000_000
MIN_SPM_SAMPLE = 1000
CHUNK_LINES = 10_000  # lines encoded at a time


def default_out(corpus: str, src: str, tgt: str) -> Path:
    return Path("data") / f"{corpus}.{src}-{tgt}"


def prepare(
    corpus: str,
    src: str,
    tgt: str,
    out: str | Path | None = None,
    mirror: str | None = None,
    vocab_size: int = 8000,
    joint: bool = True,
    model_type: str = "unigram",
    max_words: int = MAX_WORDS,
    max_ratio: float = MAX_RATIO,
    files: UserFiles | None = None,
    cache_dir: str | Path | None = None,
    spm_sample: int = SAMPLE,
    mirror_option: str | None = None,
    split_digits: bool = True,
    byte_fallback: bool = True,
    augment_entities: float = 0.0,
    augment_numbers: float = 0.0,
    augment_repeated_digits: float = 0.0,
    augment_world_names: float = 0.0,
    augment_codes: float = 0.0,
    augment_contacts: float = 0.0,
    augment_months: float = 0.0,
    concat_share: float = 0.0,
    augment_seed: int = 1,
    split_rule: str = BOTH_SIDES,
    align_teacher: str = "",
) -> Path:
    """Write (or reuse) the prepared folder for `corpus` from `src` to `tgt`; returns its path.

    corpus: a name from `seq2seq.data.corpora`, or "files" with `files` giving the user's corpus.
    mirror: a folder or URL standing in for upstream (default `$SEQ2SEQ_DATA_MIRROR`).
    joint: one sentencepiece model for both languages (else one per language).
    cache_dir: downloads go here (default: `downloads/` beside the prepared folder).
    spm_sample: sentencepiece trains on a random sample of this many training sentences.
    split_digits, byte_fallback: sentencepiece's options (`seq2seq.data.tokenizer`): every digit
        a piece of its own; characters outside the vocabulary spelled as UTF-8 byte pieces.
    mirror_option: how the user gives a mirror, for a failed download's error (`mirror_advice`).
    augment_entities, augment_numbers, augment_seed: the copy-teaching pairs added on average
        per training pair sharing a name or number, per pair sharing a number (0: as many as
        augment_entities), and the seed of their draws (see `seq2seq.data.augment`).
    augment_repeated_digits ... concat_share: copy-teaching's other shares and concatenation's
        (`seq2seq.data.concatenate`), seeded by augment_seed, each recorded only when not 0.
    split_rule: how Tatoeba is split (`seq2seq.data.corpora.SPLIT_RULES`), recorded for it.
    align_teacher: "eflomal": the teacher's links too (`seq2seq.data.align_teacher`); "": none.
    """
    shares = (augment_entities, augment_numbers, augment_repeated_digits, augment_world_names)
    shares += (augment_codes, augment_contacts, augment_months, concat_share)
    augmentation = dict(zip(AUGMENT_SETTINGS, shares, strict=True))
    _check_options(corpus, src, tgt, vocab_size, model_type, max_words, max_ratio, files)
    _check_pieces_and_copy_teaching(vocab_size, byte_fallback, spm_sample, augmentation, src, tgt)
    out = _check_out(Path(out) if out else default_out(corpus, src, tgt))
    settings: dict[str, Any] = {
        "corpus": corpus,
        "src": src,
        "tgt": tgt,
        "vocab_size": vocab_size,
        "joint_vocab": joint,
        "model_type": model_type,
        "max_words": max_words,
        "max_ratio": float(max_ratio),
        "spm_sample": spm_sample,
        "split_digits": split_digits,
        "byte_fallback": byte_fallback,
    }
    settings |= _optional_settings(
        corpus, augmentation, augment_seed, files, split_rule, align_teacher
    )
    if _up_to_date(out, settings):
        print(f"{out}: already prepared with these settings (files verified); reusing it")
        return out
    started = time.perf_counter()
    cache_dir = Path(cache_dir) if cache_dir else out.parent / "downloads"
    with removing_new_empty_dirs([out.parent, cache_dir]), _staging(out) as tmp:
        manifest = _build(tmp, settings, files, mirror, cache_dir, mirror_option)
    lines = ", ".join(f"{split} {count}" for split, count in manifest["lines"].items())
    print(f"prepared {out} in {time.perf_counter() - started:.1f} s: {lines} pairs")
    return out


def _check_out(out: Path) -> Path:
    """Refuse an --out that no folder may be written to or that holds something else than a
    prepared folder; finish or undo there what an interrupted build left. Returns `out`."""
    check_output_location("--out", out)
    if out.parent.is_dir():
        for line in recover_folder(out, "building"):
            print(line)
    if out.exists() and not ((out / MANIFEST).is_file() or _is_empty_dir(out)):
        raise UserError(
            f"--out {out} exists and is not a prepared folder (no {MANIFEST}); "
            "give another --out or remove it"
        )
    return out


def _check_options(
    corpus: str,
    src: str,
    tgt: str,
    vocab_size: int,
    model_type: str,
    max_words: int,
    max_ratio: float,
    files: UserFiles | None,
) -> None:
    if corpus == USER_CORPUS:
        if files is None:
            raise UserError("--corpus files needs its files (see seq2seq prepare --help)")
    else:
        get_corpus(corpus).check_pair(src, tgt)
        if files is not None:
            raise ValueError(f"files are only read for corpus {USER_CORPUS!r}, not {corpus!r}")
    if not MIN_VOCAB_SIZE <= vocab_size <= MAX_VOCAB_SIZE:
        raise UserError(
            f"--vocab-size {vocab_size}: must be between {MIN_VOCAB_SIZE} and {MAX_VOCAB_SIZE}"
        )
    if model_type not in MODEL_TYPES:
        raise UserError(f"--model-type {model_type}: must be one of {', '.join(MODEL_TYPES)}")
    if max_words < 1:
        raise UserError(f"--max-words {max_words}: must be >= 1")
    if max_ratio < 1:
        raise UserError(f"--max-ratio {max_ratio}: must be >= 1")


def _check_pieces_and_copy_teaching(
    vocab_size: int,
    byte_fallback: bool,
    spm_sample: int,
    augmentation: dict[str, float],
    src: str,
    tgt: str,
) -> None:
    """Refuse copy-teaching's other settings without copy-teaching, its months in a language
    whose month names it lacks, byte fallback in too small a vocabulary, and too small a
    sentencepiece sample."""
    for key in COPY_TEACHING_SHARES:
        if augmentation[key] and not (
            augmentation["augment_entities"] or augmentation["augment_numbers"]
        ):
            raise UserError(
                f"--{key.replace('_', '-')} {augmentation[key]}: copy-teaching is off; give "
                "--augment-entities or --augment-numbers too"
            )
    if augmentation["augment_months"] and not {src, tgt} <= MONTHS.keys():
        raise UserError(
            f"--augment-months {augmentation['augment_months']}: copy-teaching knows the months of "
            f"{', '.join(MONTHS)}, not {src}-{tgt}"
        )
    if byte_fallback and vocab_size < MIN_BYTE_FALLBACK_VOCAB:
        raise UserError(
            f"--vocab-size {vocab_size}: byte fallback takes {BYTE_PIECES} pieces (one per byte) "
            f"besides the special ones; give --vocab-size {MIN_BYTE_FALLBACK_VOCAB} or more, "
            "or --no-byte-fallback"
        )
    if spm_sample < MIN_SPM_SAMPLE:
        raise UserError(f"--spm-sample {spm_sample}: must be >= {MIN_SPM_SAMPLE}")


def _optional_settings(
    corpus: str,
    augmentation: dict[str, float],
    augment_seed: int,
    files: UserFiles | None,
    split_rule: str,
    align_teacher: str,
) -> dict[str, Any]:
    """The settings a prepared folder records only when they apply: copy-teaching's when it is
    on (so folders prepared without it stay valid), the user's files with their sha256,
    Tatoeba's split rule, and the alignment teacher (checked: known and installed)."""
    settings: dict[str, Any] = {}
    if align_teacher:
        check_teacher(align_teacher)
        settings["align_teacher"] = align_teacher
    if any(augmentation.values()):
        settings |= {key: float(value) for key, value in augmentation.items() if value}
        settings["augment_seed"] = augment_seed
        settings["augment_version"] = AUGMENT_VERSION
    if files is not None:
        settings["inputs"] = {str(p.resolve()): sha256_file(p) for p in files.paths()}
    if corpus == Tatoeba.name:
        settings["split_rule"] = split_rule
    return settings


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def _up_to_date(out: Path, settings: dict[str, Any]) -> bool:
    """True when `out` was prepared with `settings` and all its files are intact."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict):
        return False
    if manifest.get("format_version") != FORMAT_VERSION:
        print(f"{out}: prepared by an older version; rebuilding it")
        return False
    recorded = manifest.get("settings")
    older = {
        **OLDER_TOKENIZATION,
        **({"split_rule": OLDER_SPLIT_RULE} if "split_rule" in settings else {}),
    }
    if not isinstance(recorded, dict) or {**older, **recorded} != settings:
        print(f"{out}: prepared with other settings; rebuilding it")
        return False
    for name, sha256 in manifest.get("files", {}).items():
        if not (out / name).is_file() or sha256_file(out / name) != sha256:
            print(f"{out}: {name} is missing or changed; rebuilding it")
            return False
    return True


@contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A temporary folder beside `out` that replaces `out` if the block succeeds and is deleted
    if it fails (the old `out`, if any, is left as it was)."""
    tmp = staging_folder(out, "building")
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.chmod(0o755)
    replace_folder(tmp, out)


def _read_corpus(
    settings: dict[str, Any],
    files: UserFiles | None,
    mirror: str | None,
    cache_dir: Path,
    mirror_option: str | None,
) -> tuple[Iterator[Pair], list[Path], str]:
    """The raw line pairs of every split (read as they are consumed), the source files they
    come from, and the corpus's licence line."""
    src, tgt = settings["src"], settings["tgt"]
    if files is not None:
        return files.pairs(), files.paths(), "your own corpus: its own terms apply"
    corpus = get_corpus(settings["corpus"])
    mirror = resolve_mirror(mirror)
    paths = {
        file.name: fetch(file, corpus.mirror_folder, cache_dir, mirror, mirror_option)
        for file in corpus.remote_files(src, tgt)
    }
    pairs = corpus.pairs(src, tgt, paths, settings.get("split_rule", BOTH_SIDES))
    return pairs, list(paths.values()), corpus.licence


def _build(
    folder: Path,
    settings: dict[str, Any],
    files: UserFiles | None,
    mirror: str | None,
    cache_dir: Path,
    mirror_option: str | None,
) -> dict[str, Any]:
    """Write every file of a prepared folder into `folder`; returns the manifest."""
    src, tgt = settings["src"], settings["tgt"]
    pairs, sources, licence = _read_corpus(settings, files, mirror, cache_dir, mirror_option)
    augmenter, concatenator = _augmenters(settings)
    lines, report, copies = _write_text(folder, pairs, settings, augmenter, concatenator)
    src_tok, tgt_tok, src_model, tgt_model = _train_tokenizers(folder, settings, copies)
    dtype = ID_DTYPES[0] if max(src_tok.vocab_size, tgt_tok.vocab_size) <= 1 << 16 else ID_DTYPES[1]
    jobs = [
        (folder, f"{split}.{lang}", folder / model, dtype)
        for split in SPLITS
        for lang, model in ((src, src_model), (tgt, tgt_model))
    ]
    print(f"encoding {sum(lines.values()):,} pairs into token arrays")
    _run_in_children(_write_ids, jobs, processes=len(os.sched_getaffinity(0)))
    teacher = settings.get("align_teacher")
    if teacher:
        links = write_teacher_links(folder, (src, tgt), (src_tok, tgt_tok), dtype)
    vocab_size, model_type = settings["vocab_size"], settings["model_type"]
    manifest = {
        "format_version": FORMAT_VERSION,
        "corpus": settings["corpus"],
        "src": src,
        "tgt": tgt,
        "licence": licence,
        "settings": settings,
        "sources": [{"path": str(path), "sha256": sha256_file(path)} for path in sources],
        "lines": lines,
        "cleaning": report.to_dict(),
        **({"augmentation": augmenter.report.to_dict()} if augmenter else {}),
        **({"concatenation": {"examples_added": concatenator.added}} if concatenator else {}),
        **({"align_teacher": links} if teacher else {}),
        "tokenizer": {
            "joint": settings["joint_vocab"],
            "model_type": model_type,
            "vocab_size": vocab_size,
            "src_model": src_model,
            "tgt_model": tgt_model,
            "src_vocab_size": src_tok.vocab_size,
            "tgt_vocab_size": tgt_tok.vocab_size,
            "sentencepiece_version": sentencepiece.__version__,
            "seed": SEED,
            "sample": settings["spm_sample"],
            "split_digits": settings["split_digits"],
            "byte_fallback": settings["byte_fallback"],
            **SETTINGS,
        },
        "ids": {"dtype": dtype, "offsets_dtype": OFFSETS_DTYPE},
        "files": {path.name: sha256_file(path) for path in sorted(folder.iterdir())},
        "sizes": {path.name: path.stat().st_size for path in sorted(folder.iterdir())},
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _augmenters(settings: dict[str, Any]) -> tuple[EntityAugmenter | None, Concatenator | None]:
    """Copy-teaching's augmenter and the concatenator that `settings` turn on, else None."""
    shares = {key: settings.get(key, 0.0) for key in COPY_TEACHING_SHARES}
    rate, number_rate = settings.get("augment_entities", 0.0), settings.get("augment_numbers", 0.0)
    augmenter = concatenator = None
    if rate or number_rate:
        augmenter = EntityAugmenter(
            rate,
            settings["augment_seed"],
            languages=(settings["src"], settings["tgt"]),
            number_rate=number_rate,
            repeated_digits=shares["augment_repeated_digits"],
            world_names=shares["augment_world_names"],
            codes=shares["augment_codes"],
            contacts=shares["augment_contacts"],
            months=shares["augment_months"],
        )
    if settings.get("concat_share"):
        concatenator = Concatenator(settings["concat_share"], settings["augment_seed"])
    return augmenter, concatenator


def _write_text(
    folder: Path,
    pairs: Iterator[Pair],
    settings: dict[str, Any],
    augmenter: EntityAugmenter | None = None,
    concatenator: Concatenator | None = None,
) -> tuple[dict[str, int], CleanReport, bytearray]:
    """Normalise every pair, clean the training pairs, and write the `<split>.<lang>` text files,
    one pair at a time, each training pair followed by the copy-teaching pairs that `augmenter`
    gives and the example that `concatenator` joins. Returns the pairs written per split, the
    cleaning report, and which training lines are copy-teaching's or concatenation's (1) rather
    than the corpus's own (0)."""
    counts = dict.fromkeys(SPLITS, 0)
    copies = bytearray()
    report = CleanReport(settings["max_words"], settings["max_ratio"])
    with ExitStack() as stack:
        outputs = {
            (split, lang): stack.enter_context(
                open(folder / f"{split}.{lang}", "w", encoding="utf-8", newline="\n")
            )
            for split in SPLITS
            for lang in (settings["src"], settings["tgt"])
        }
        # in a terminal, a count of the pairs read so far (a large corpus takes minutes)
        bar = tqdm(pairs, "cleaning", unit=" pairs", unit_scale=True, leave=False, disable=None)
        for split, raw_src, raw_tgt in bar:
            src_line, tgt_line = normalize(raw_src), normalize(raw_tgt)
            if split == "train" and not report.keep(src_line, tgt_line):
                continue
            extra = augmenter(src_line, tgt_line) if augmenter and split == "train" else []
            if concatenator and split == "train":
                extra += concatenator(src_line, tgt_line)
            for src_text, tgt_text in [(src_line, tgt_line), *extra]:
                outputs[split, settings["src"]].write(src_text + "\n")
                outputs[split, settings["tgt"]].write(tgt_text + "\n")
                counts[split] += 1
            if split == "train":
                copies += b"\0" + b"\1" * len(extra)
    print(f"cleaning: {report}")
    if not counts["train"]:
        raise UserError("no training pairs are left after cleaning")
    if not counts["valid"]:
        raise UserError(
            "the valid split is empty: training validates and saves on it; "
            "give a valid split with at least one pair"
        )
    return counts, report, copies


def _train_tokenizers(
    folder: Path, settings: dict[str, Any], copies: bytes
) -> tuple[Tokenizer, Tokenizer, str, str]:
    """Train sentencepiece on the training text in `folder`, less the copy-teaching pairs
    (`copies`, as `_write_text` returns it): (src, tgt tokenizer, model names).

    Copy-teaching puts each given name it uses in some 18 pairs, enough for sentencepiece to make
    many of them pieces of their own; a model would then learn to copy one piece, while a name it
    has never seen comes in three to five pieces. Learnt from the corpus's own pairs, the
    vocabulary is the one the corpus alone gives and cuts the names of copy-teaching as it cuts
    any other name.
    """
    src, tgt = settings["src"], settings["tgt"]
    vocab_size, model_type = settings["vocab_size"], settings["model_type"]
    kind = "joint" if settings["joint_vocab"] else "separate"
    options = [name for name in OLDER_TOKENIZATION if settings[name]]
    extras = "".join(f", {name.replace('_', ' ')}" for name in options)
    print(f"training sentencepiece ({model_type}, {kind} vocabulary of {vocab_size}{extras})")
    texts = {lang: folder / f"train.{lang}" for lang in (src, tgt)}
    if settings["joint_vocab"]:
        joint = [texts[src], texts[tgt]]
        tokenizer = _train_in_child(joint, copies, folder / "spm.model", settings)
        return tokenizer, tokenizer, "spm.model", "spm.model"
    src_model, tgt_model = f"spm.{src}.model", f"spm.{tgt}.model"
    src_tok = _train_in_child([texts[src]], copies, folder / src_model, settings)
    tgt_tok = _train_in_child([texts[tgt]], copies, folder / tgt_model, settings)
    return src_tok, tgt_tok, src_model, tgt_model


def _own_lines(path: Path, copies: bytes) -> Iterator[str]:
    """The lines of `path` that are the corpus's own: those where `copies` holds 0."""
    return (line for line, copy in zip(iter_lines(path), copies, strict=True) if not copy)


def _train_from_files(
    texts: list[Path], copies: bytes, path: Path, settings: dict[str, Any]
) -> int:
    """Train a tokenizer on the corpus's own lines of `texts` (run in a child process); its
    vocabulary size."""
    return Tokenizer.train(
        chain.from_iterable(_own_lines(text, copies) for text in texts),
        path,
        settings["vocab_size"],
        settings["model_type"],
        sample=settings["spm_sample"],
        split_digits=settings["split_digits"],
        byte_fallback=settings["byte_fallback"],
    ).vocab_size


def _train_in_child(
    texts: list[Path], copies: bytes, path: Path, settings: dict[str, Any]
) -> Tokenizer:
    """`Tokenizer.train` in a child process (see `_run_in_children`)."""
    [pieces] = _run_in_children(_train_from_files, [(texts, copies, path, settings)], processes=1)
    if pieces < settings["vocab_size"]:
        raise UserError(
            f"--vocab-size {settings['vocab_size']}: the training text yields at most {pieces} "
            f"pieces; give --vocab-size {pieces} or less"
        )
    return Tokenizer.load(path)


def _run_in_children(function: Callable[..., T], calls: list[tuple], processes: int) -> list[T]:
    """`function(*args)` for every `args` of `calls`, each in a forked child process, up to
    `processes` at a time; the results in the order of `calls`.

    The children are terminated as soon as this process is interrupted or fails, so Ctrl-C
    stops sentencepiece at once (its training and encoding do not return to Python, which
    handles the signal, until they are done). A child that dies without answering (killed, or
    aborted inside sentencepiece) stops the run with an error, where `multiprocessing.Pool`
    would wait for its answer forever.
    """
    context = multiprocessing.get_context("fork")
    results: list[Any] = [None] * len(calls)
    waiting = list(enumerate(calls))
    running: dict[Connection, tuple[int, BaseProcess]] = {}  # answer pipe -> (call, child)
    try:
        while waiting or running:
            while waiting and len(running) < processes:
                index, args = waiting.pop(0)
                answer, send = context.Pipe(duplex=False)
                child = context.Process(target=_answer, args=(send, function, args), daemon=True)
                child.start()
                send.close()
                running[answer] = (index, child)
            for answer in wait_for_connections(list(running), timeout=0.1):
                index, child = running.pop(answer)
                results[index] = _received(answer, child)
        return results
    finally:
        for _, child in running.values():
            child.terminate()


def _answer(send: Connection, function: Callable[..., Any], args: tuple) -> None:
    """A child's work: `function(*args)`, or the exception it raised, sent back. The child runs
    without the garbage collector: it would collect the objects it inherits, and an object whose
    thread stayed behind in the parent aborts the child when collected."""
    gc.disable()
    try:
        send.send((True, function(*args)))
    except Exception as error:
        send.send((False, error))


def _received(answer: Connection, child: BaseProcess) -> Any:
    """What `child` sent on `answer`: its result, or the exception it raised, raised here."""
    try:
        done, value = answer.recv()
    except EOFError:  # the child closed the pipe unanswered: it died
        child.join()
        raise UserError(
            f"prepare: a child process died (exit code {child.exitcode}: a negative code is the "
            "signal that killed it, -9 often the out-of-memory killer); the folder is left as it "
            "was"
        ) from None
    finally:
        answer.close()
    child.join()
    if not done:
        raise value
    return value


def _write_ids(folder: Path, name: str, model: Path, dtype: str) -> None:
    """Encode the text file `name` in chunks with the sentencepiece `model` into `<name>.ids`,
    the token ids of all its lines end to end (`dtype`), and `<name>.offsets`, where line i's
    ids start (int64, one more than the lines: the last is the end)."""
    tokenizer = Tokenizer.load(model)
    end = 0
    ids_file, offsets_file = array_files(name)
    with open(folder / ids_file, "wb") as ids, open(folder / offsets_file, "wb") as offsets:
        offsets.write(np.zeros(1, dtype=OFFSETS_DTYPE).tobytes())
        text = iter_lines(folder / name)
        while chunk := list(islice(text, CHUNK_LINES)):
            encoded = tokenizer.encode(chunk, normalized=True)
            lens = np.fromiter(map(len, encoded), dtype=OFFSETS_DTYPE, count=len(encoded))
            flat = np.fromiter(chain.from_iterable(encoded), dtype=dtype, count=int(lens.sum()))
            ids.write(flat.tobytes())
            offsets.write((end + np.cumsum(lens)).tobytes())
            end += int(lens.sum())
