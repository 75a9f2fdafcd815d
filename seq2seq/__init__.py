"""seq2seq: neural machine translation with attention, written to be read.

Data flow, one module per step:
    corpora -> download -> clean -> tokenizer -> prepare -> batching
    -> attention / models -> loss (train) / search -> metrics

Importing it changes nothing in the process; the scripts tune it (`seq2seq.cli.tune_process`).
"""

__version__ = "0.1.0"
