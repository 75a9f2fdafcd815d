"""From a corpus to batches of token ids.

    corpora -> download -> clean -> tokenizer -> prepare -> prepared_corpus -> batching

`corpora` names the corpora and their files, `download` fetches them (checksums verified),
`clean` normalises and filters the pairs, `tokenizer` trains and applies sentencepiece, `prepare`
writes a prepared folder (its layout: `manifest`), `prepared_corpus` reads it back, and
`batching` groups its pairs into padded batches under a token budget. `specials` holds the
special token ids that every other stage shares.

Names and numbers: `entities` splits them between training and testing, `augment` adds the
copy-teaching pairs that `prepare` writes (data.augment_entities), and `entity_test` builds and
scores the entity test (`seq2seq evaluate --split entities`).
"""
