"""The prepared folder's format, shared by its writer (`seq2seq.data.prepare`) and its reader
(`seq2seq.data.prepared_corpus`), so that neither imports the other.

    train.en train.de valid.en valid.de test.en test.de    normalised text, one sentence a line
    train.en.ids train.en.offsets ...     the token ids of each of those files end to end
                                          (uint16, or int32 for vocabularies over 65,536) and
                                          where each line's ids start (int64, lines + 1)
    spm.model spm.vocab                   the joint sentencepiece model and its pieces
                                          (separate vocabularies: spm.en.model, spm.de.model, ...)
    train.links train.links.offsets       with --align-teacher: the teacher's piece links of
                                          each training pair (seq2seq.data.align_teacher)
    manifest.json                         corpus, settings, licence, line counts, cleaning
                                          report, SHA256 of the source files, SHA256 and size
                                          of every file

The settings record how sentencepiece split the text: `split_digits` and `byte_fallback`
(`seq2seq.data.tokenizer`). A folder prepared before these options existed lacks both keys: its
tokenizer has neither (`OLDER_TOKENIZATION`). A Tatoeba folder's settings record how it was
split, `split_rule`; one prepared before the rules existed lacks it and was split by the English
side (`seq2seq.data.corpora.OLDER_SPLIT_RULE`).
"""

FORMAT_VERSION = 2  # 2: token ids as arrays
MANIFEST = "manifest.json"
ID_DTYPES = ("uint16", "int32")  # token ids: the first when the vocabulary fits
OFFSETS_DTYPE = "int64"
TEACHER_LINKS = ("train.links", "train.links.offsets")  # seq2seq.data.align_teacher
LINKS_DTYPE = "uint16"  # a source piece and a target piece per link
# The tokenization options of a folder whose settings do not name them: prepared without either.
OLDER_TOKENIZATION = {"split_digits": False, "byte_fallback": False}


def array_files(text_file: str) -> tuple[str, str]:
    """The names of the token-id array and the line-offset array of a text file (`train.en`)."""
    return f"{text_file}.ids", f"{text_file}.offsets"


def tokenization_options(settings: dict) -> str:
    """The `seq2seq prepare` options of a folder's tokenization, e.g.
    "--vocab-size 8000 --split-digits --byte-fallback", from its manifest's settings."""
    recorded = {**OLDER_TOKENIZATION, **settings}
    flags = [("" if recorded[key] else "no-") + key.replace("_", "-") for key in OLDER_TOKENIZATION]
    return " ".join([f"--vocab-size {recorded['vocab_size']}", *(f"--{flag}" for flag in flags)])
