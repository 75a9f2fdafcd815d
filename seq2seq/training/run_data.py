"""The prepared corpus a run trains on: loaded (prepared first when missing), and checked
against the values of the configuration that only the data can refute."""

from pathlib import Path

from seq2seq.config import Config
from seq2seq.data.batching import ParallelDataset
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData, teacher_of
from seq2seq.decoding.line_translator import source_limit
from seq2seq.errors import UserError
from seq2seq.training import distributed


def load_data(
    cfg: Config, prepare_missing: bool, env: distributed.Dist, verify: bool = False
) -> PreparedData:
    """The prepared folder of `cfg`, checked (file sizes; every checksum when `verify`), and
    prepared first when missing and `prepare_missing` (with the teacher's links when `cfg`
    trains an alignment head)."""
    folder = Path(cfg.data.prepared)
    augmentation = cfg.data.augmentation
    if not (folder / "manifest.json").is_file():
        if not prepare_missing:
            raise UserError(
                f"data.prepared: {folder} is not a prepared corpus; run `make data` or "
                "seq2seq prepare, or pass --prepare"
            )
        if env.is_main:
            prepare(
                cfg.data.corpus,
                cfg.data.src,
                cfg.data.tgt,
                folder,
                vocab_size=cfg.data.vocab_size,
                joint=cfg.data.joint_vocab,
                split_digits=cfg.data.split_digits,
                byte_fallback=cfg.data.byte_fallback,
                **augmentation,
                augment_seed=cfg.train.seed,
                split_rule=cfg.data.split_rule,
                align_teacher=teacher_of(cfg),
            )
        distributed.barrier(env)
    data = PreparedData.load(folder)
    if verify:
        data.verify()
    data.check_vocabulary(cfg.data.vocab_size, cfg.data.joint_vocab)
    data.check_augmentation(augmentation)
    data.check_split_rule(cfg)
    # The checkpoints' configuration names the corpus the folder holds, whatever data.corpus
    # said: the model's domain is read from it (seq2seq.data.corpora.domain_of).
    cfg.data.corpus = data.manifest["corpus"]
    return data


def check_against_data(
    cfg: Config, train_set: ParallelDataset, valid_set: ParallelDataset, tgt_vocab_size: int
) -> None:
    """The values of `cfg` that only the data can refute: a batch must hold the longest training
    sentence, a beam cannot be wider than the target vocabulary, and validation must be able to
    translate every valid sentence it uses."""
    longest = int(max(train_set.src_lens.max(), train_set.tgt_lens.max()))
    if cfg.train.max_tokens < longest:
        raise UserError(
            f"train.max_tokens={cfg.train.max_tokens}: smaller than the longest training "
            f"sentence ({longest} tokens, special tokens included); set it to at least {longest}"
        )
    buckets = cfg.train.length_buckets
    if buckets and longest > buckets[-1]:
        raise UserError(
            f"train.length_buckets={list(buckets)}: the longest training sentence has {longest} "
            f"tokens (special tokens included); add a bucket of at least {longest}"
        )
    if buckets and cfg.train.max_tokens < buckets[-1]:
        raise UserError(
            f"train.max_tokens={cfg.train.max_tokens}: smaller than the largest of "
            f"train.length_buckets ({buckets[-1]}); a batch of that bucket could hold no sentence"
        )
    for key in ("beam_size", "valid_beam_size"):
        beam = getattr(cfg.decode, key)
        if beam > tgt_vocab_size:
            raise UserError(
                f"decode.{key}={beam}: larger than the target vocabulary ({tgt_vocab_size} pieces)"
            )
    used = valid_set.src_lens[: cfg.train.valid_max_sentences or None] - 1  # pieces, no EOS
    limit = source_limit(cfg.decode, cfg.decode.valid_beam_size)
    if not cfg.decode.truncate_src and len(used) and used.max() > limit:
        line = int(used.argmax()) + 1
        raise UserError(
            f"decode.max_src_pieces={cfg.decode.max_src_pieces}: valid sentence {line} has "
            f"{int(used.max())} pieces, more than validation can take ({limit}); raise "
            "decode.max_src_pieces or set decode.truncate_src=true"
        )
