"""seq2seq: neural machine translation with attention, written to be read.

Data flow, one module per step:
    corpora -> download -> clean -> tokenizer -> prepare -> batching
    -> attention / models -> loss (train) / search -> metrics
"""

import os

from seq2seq.allocator import keep_freed_memory

# oneDNN, which runs torch's bf16 matrix multiplies on a CPU, keeps a compiled kernel for every
# shape it has seen, up to 1,024 by default. Token-budget batches bring new shapes almost every
# step, and that cache grew a bf16 training process of transformer-small from about 1,430 to
# 1,830 MiB peak RSS; with 16 entries a step was as fast on 1 thread and about 4% slower on 2
# (within the run-to-run spread). Read once, at oneDNN's first kernel; a value set in the
# environment is kept.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")

keep_freed_memory()

__version__ = "0.1.0"
