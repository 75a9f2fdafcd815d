"""From a trained model to translations, scores and attention maps.

The modules, from a model on disk to its scores:

    model_folder.py    a model folder's files, read without torch: description, tokenizers,
                       weights as numpy arrays
    open_pytorch.py    opening a model to translate with on PyTorch: a checkpoint, a model
                       folder or a shipped model (`load_model`, the one loader)
    line_translator.py what both engines share without torch: a translation, the input rules,
                       from ids back to text (`LineTranslator`)
    sentences.py       cutting input lines into sentences before translation (sentencex),
                       and joining the outputs back with the lines' own spacing
    torch_translator.py  from lines to translations with our PyTorch search (`Translator`)
    search.py          greedy and beam search through the model's incremental interface
    number_guard.py    the number guard: an output's numbers are the source's, each whole
    quantize.py        int8 decoding on a CPU: the model's matrix products in 8-bit integers
    evaluation.py      translating a test set and scoring it
    scores.py          BLEU and chrF with sacreBLEU, on detokenized text
    model_result.py    the record of one trained model: its test scores and how it was made

What a model attended to:

    attention_maps.py  which source pieces each output piece looked at, as text or a figure
    explain.py         everything the attention explorer shows about one sentence
    alignment.py       word alignment from cross-attention, two directions combined, AER
    markup.py          HTML through translation: tags taken out, put back around the output
                       words aligned to the source words they enclosed
    beam_trace.py      what the beam search did at each step, for the explorer's beam tree

Exporting, and translating with CTranslate2:

    export.py          writing a model folder that translates on its own, with no pickle
    ct2_engine.py      the engine a model decodes with: PyTorch or CTranslate2 (`use_ctranslate2`)
    ct2_convert.py     converting our Transformer's weights to CTranslate2, in memory or a folder
    ct2_folder.py      a CTranslate2 folder: its files, its format and its checks
    ct2_translator.py  translating with CTranslate2 (`CTranslate2Translator`)
    open_ctranslate2.py  opening a model on CTranslate2 without importing torch
"""
