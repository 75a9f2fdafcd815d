"""The prepared folder's format, shared by its writer (`seq2seq.data.prepare`) and its reader
(`seq2seq.data.prepared_corpus`), so that neither imports the other.

    train.en train.de valid.en valid.de test.en test.de    normalised text, one sentence a line
    train.en.ids train.en.offsets ...     the token ids of each of those files end to end
                                          (uint16, or int32 for vocabularies over 65,536) and
                                          where each line's ids start (int64, lines + 1)
    spm.model spm.vocab                   the joint sentencepiece model and its pieces
                                          (separate vocabularies: spm.en.model, spm.de.model, ...)
    manifest.json                         corpus, settings, licence, line counts, cleaning
                                          report, SHA256 of the source files, SHA256 and size
                                          of every file
"""

FORMAT_VERSION = 2  # 2: token ids as arrays
MANIFEST = "manifest.json"
ID_DTYPES = ("uint16", "int32")  # token ids: the first when the vocabulary fits
OFFSETS_DTYPE = "int64"


def array_files(text_file: str) -> tuple[str, str]:
    """The names of the token-id array and the line-offset array of a text file (`train.en`)."""
    return f"{text_file}.ids", f"{text_file}.offsets"
