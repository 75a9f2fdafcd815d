"""Prepare a parallel corpus for training: fetch, clean, train sentencepiece, write a folder.

seq2seq prepare --corpus multi30k --src en --tgt de --mirror ../shared/data
seq2seq prepare --corpus tatoeba --src en --tgt fr
seq2seq prepare --corpus files --src en --tgt de --data-dir my_corpus/
seq2seq prepare --corpus tatoeba --src en --tgt fr --augment-entities 2 --augment-numbers 20
"""

import argparse

from seq2seq.commands.cli import command_parser, ranged
from seq2seq.config_rules import RULES
from seq2seq.data.augment import AUGMENT_SETTINGS
from seq2seq.data.clean import MAX_RATIO, MAX_WORDS
from seq2seq.data.corpora import BOTH_SIDES, CORPORA, SPLIT_RULES, SPLITS, USER_CORPUS, UserFiles
from seq2seq.data.download import MIRROR_ENV
from seq2seq.data.tokenizer import MODEL_TYPES, SAMPLE
from seq2seq.errors import UserError

TUNE = False  # tune the process first (seq2seq.fast.process.tune_process)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("prepare", __doc__)
    add_corpus_options(parser)
    add_tokenizer_options(parser)
    add_cleaning_options(parser)
    add_copy_teaching_options(parser)
    add_user_corpus_options(parser)
    return parser.parse_args(argv)


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """Add the corpus, its languages, the output folder and the mirror to `parser`."""
    parser.add_argument(
        "--corpus", default="multi30k", help=f"{', '.join(CORPORA)} or {USER_CORPUS}"
    )
    parser.add_argument("--src", default="en", help="source language")
    parser.add_argument("--tgt", default="de", help="target language")
    parser.add_argument("--out", help="prepared folder (default: data/<corpus>.<src>-<tgt>)")
    parser.add_argument(
        "--mirror",
        help=f"folder or http(s) URL laid out as <mirror>/<corpus>/<file>, used instead of "
        f"upstream (default: ${MIRROR_ENV})",
    )
    parser.add_argument(
        "--split-rule",
        choices=SPLIT_RULES,
        default=BOTH_SIDES,
        help="tatoeba: pairs sharing a side in one split (both-sides, the default), or split "
        "by the English side alone (english-side: the shipped Tatoeba models' split)",
    )


def add_tokenizer_options(parser: argparse.ArgumentParser) -> None:
    """Add sentencepiece's options to `parser`."""
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument(
        "--spm-sample",
        type=int,
        default=SAMPLE,
        help="sentencepiece trains on a random sample of this many training sentences",
    )
    parser.add_argument(
        "--separate-vocab", action="store_true", help="one sentencepiece model per language"
    )
    parser.add_argument("--model-type", default="unigram", help=" or ".join(MODEL_TYPES))
    parser.add_argument(
        "--split-digits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every digit a piece of its own, so numbers are copied digit by digit",
    )
    parser.add_argument(
        "--byte-fallback",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="spell characters the vocabulary lacks as UTF-8 byte pieces instead of <unk> "
        "(takes 256 pieces of the vocabulary)",
    )
    parser.add_argument(
        "--align-teacher",
        choices=["eflomal"],
        default="",
        help="also write the word aligner's links of the training pairs, the teacher of an "
        "alignment head (train.alignment_weight; needs pip install 'seq2seq[align]')",
    )


def add_cleaning_options(parser: argparse.ArgumentParser) -> None:
    """Add the filters of the training pairs to `parser`."""
    parser.add_argument(
        "--max-words", type=int, default=MAX_WORDS, help="drop longer training pairs"
    )
    parser.add_argument(
        "--max-ratio",
        type=float,
        default=MAX_RATIO,
        help="drop training pairs whose "
        "longer side has more than this many times the words of the shorter",
    )


def add_copy_teaching_options(parser: argparse.ArgumentParser) -> None:
    """Add the rates of copy-teaching's pairs (seq2seq.data.augment) and its seed to `parser`."""
    for option, metavar, what, default in (
        ("--augment-entities", "RATE", "copy-teaching pairs added on average per training pair "
         "sharing a name or number", "0, off"),
        ("--augment-numbers", "RATE", "copy-teaching pairs added on average per training pair "
         "sharing a number (sharing a name too: the larger rate)",
         "0, as many as --augment-entities"),
        ("--augment-repeated-digits", "SHARE", "the share of copy-teaching's numbers drawn with "
         "two equal digits side by side", "0, as they come"),
        ("--augment-world-names", "SHARE", "the share of copy-teaching's names drawn from many "
         "alphabets", "0, off"),
        ("--augment-codes", "SHARE", "the share of copy-teaching's numbers that are codes "
         "instead", "0, off"),
        ("--augment-contacts", "SHARE", "the share of copy-teaching's names that are e-mails or "
         "URLs", "0, off"),
        ("--augment-months", "RATE", "copy-teaching pairs added on average per training pair "
         "naming the same month on both sides, with another month", "0, off"),
        ("--concat-share", "SHARE", "the share of training pairs followed by an example joining "
         "them to the 1 to 3 pairs before", "0, off"),
    ):  # fmt: skip
        rule = RULES["data." + option.removeprefix("--").replace("-", "_")]
        parser.add_argument(
            option, metavar=metavar, default=0.0, **ranged(float, rule, what, default)
        )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of copy-teaching's and concatenation's draws"
    )


def add_user_corpus_options(parser: argparse.ArgumentParser) -> None:
    """Add the files of the user's own corpus (--corpus files) to `parser`, in a group."""
    files = parser.add_argument_group(
        f"--corpus {USER_CORPUS}: your own corpus, plain text or .gz, one sentence a line"
    )
    files.add_argument("--data-dir", help="folder with {train,valid,test}.{SRC,TGT}")
    for split in SPLITS:
        files.add_argument(f"--{split}-src", help=f"{split} split, source side")
        files.add_argument(f"--{split}-tgt", help=f"{split} split, target side")
        files.add_argument(f"--{split}-tsv", help=f"{split} split as source<TAB>target lines")


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    from seq2seq.data.prepare import prepare  # imports numpy: not for --help

    options = {
        f"{split}_{kind}": getattr(args, f"{split}_{kind}")
        for split in SPLITS
        for kind in ("src", "tgt", "tsv")
    }
    user_files = None
    if args.corpus == USER_CORPUS:
        user_files = UserFiles.from_options(args.src, args.tgt, args.data_dir, options)
    elif args.data_dir or any(options.values()):
        raise UserError(
            f"--data-dir and the --<split>-src/-tgt/-tsv files need --corpus {USER_CORPUS}"
        )
    prepare(
        args.corpus,
        args.src,
        args.tgt,
        out=args.out,
        mirror=args.mirror,
        vocab_size=args.vocab_size,
        joint=not args.separate_vocab,
        model_type=args.model_type,
        max_words=args.max_words,
        max_ratio=args.max_ratio,
        files=user_files,
        spm_sample=args.spm_sample,
        mirror_option="--mirror DIR_OR_URL",
        split_digits=args.split_digits,
        byte_fallback=args.byte_fallback,
        **{key: getattr(args, key) for key in AUGMENT_SETTINGS},
        augment_seed=args.seed,
        split_rule=args.split_rule,
        align_teacher=args.align_teacher,
    )
