"""int8 linear layers without the per-call cost of PyTorch's Python wrapper.

`seq2seq/decoding/quantize.py` makes an int8 copy of a model with PyTorch's dynamic quantization,
whose linear module (`torch.ao.nn.quantized.dynamic.Linear`) calls its kernel through the operator
packet `torch.ops.quantized.linear_dynamic`. On each call that packet checks every argument, in
Python, for the stand-ins of script objects that tracing uses; with the module's own attribute
lookups this is a large part of each call for the small products of decoding one sentence
(docs/benchmarks.md). `Int8Linear` calls the kernel's C++ entry (`_op`, which the
packet calls after its check) with the same weights and the same arguments: the results are
bitwise the same. A model being traced is never an int8 copy, so the check has nothing to find.
"""

import torch
from torch import Tensor
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

LINEAR_DYNAMIC = getattr(torch.ops.quantized.linear_dynamic.default, "_op", None)


class Int8Linear(DynamicQuantizedLinear):
    """`torch.ao.nn.quantized.dynamic.Linear` with int8 weights, calling its kernel directly."""

    def forward(self, x: Tensor) -> Tensor:
        packed = self._packed_params
        if packed.dtype != torch.qint8 or LINEAR_DYNAMIC is None:  # the wrapper's own path
            return super().forward(x)
        # reduce_range=True: the wrapper's choice for the modules it makes (version 4 and up).
        y = LINEAR_DYNAMIC(x, packed._packed_params, True)
        return y if y.dtype == x.dtype else y.to(x.dtype)
