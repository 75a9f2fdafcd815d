"""seq2seq: neural machine translation with attention, written to be read.

Data flow, one module per step:
    corpora -> download -> clean -> tokenizer -> prepare -> batching
    -> attention / models -> loss (train) / search -> metrics

Importing it changes nothing in the process; the command line tunes it
(`seq2seq.fast.process.tune_process`).
"""

__version__ = "0.1.0"
