"""From a corpus to batches of token ids.

    corpora -> download -> clean -> tokenizer -> prepare -> prepared_corpus -> batching

The modules, in that order:

    corpora.py          the corpora known by name and their files; the user's own corpus
    download.py         fetching a corpus file from upstream or a mirror, checksums verified
    clean.py            normalising every split and filtering the training pairs
    tokenizer.py        training and applying sentencepiece
    prepare.py          writing a prepared folder (or reusing one prepared the same way)
    align_teacher.py    word alignments of the training split as piece links (--align-teacher)
    word_links.py       words of pieces; word links of two directions combined
    concatenate.py      training examples of 2 to 4 pairs joined (data.concat_share)
    manifest.py         the prepared folder's format, shared by its writer and its reader
    prepared_corpus.py  reading a prepared folder back, for training and evaluation
    batching.py         padded batches of similar lengths under a token budget
    specials.py         the special token ids that every other stage shares

Names and numbers:

    entities.py         the names and numbers a translation copies, split between training
                        and testing
    augment.py          the copy-teaching pairs that `prepare` writes (data.augment_entities)
    entity_copy.py      the entity test, built and scored (`seq2seq evaluate --split entities`)
"""
