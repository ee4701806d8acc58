"""The translation of ``aten.mean.dim`` over every dim (``dim=None``, which realify's rules write
for a complex mean's parts): torch.onnx's own reshapes the ``dim`` argument, absent there, and
writes a Reshape with no input (ONNX Runtime: INVALID_GRAPH)."""

from __future__ import annotations

from .graph_helpers import _ints
from .optional_imports import op


def mean_dim(x, dim=None, keepdim: bool = False, dtype: int = -1):
    """The mean over ``dim``, or over every dim where ``dim`` is None or empty (ATen's
    convention), in ``dtype`` where one is given: torch.onnx's own translations, the mean over
    every dim taken as ``aten.mean``'s (a 0-dim result, given back its dims of size 1 for
    ``keepdim``)."""
    from onnxscript.function_libs.torch_lib.ops import core

    if dim or len(x.shape) == 0:
        return core.aten_mean_dim(x, dim, keepdim, dtype)
    mean = core.aten_mean(x, dtype)
    return op.Reshape(mean, _ints([1] * len(x.shape))) if keepdim else mean
