"""The translation of ``aten.mean.dim``: over every dim (``dim=None``, which realify's rules write
for a complex mean's parts), torch.onnx's own reshapes the ``dim`` argument, absent there, and
writes a Reshape with no input (ONNX Runtime: INVALID_GRAPH); over dims that may be empty,
its ReduceMean gives 0 in ONNX Runtime where eager's mean of nothing is NaN (0 / 0), for real
programs too."""

from __future__ import annotations

from .graph_helpers import _constant_like, _ints
from .optional_imports import op


def mean_dim(x, dim=None, keepdim: bool = False, dtype: int = -1):
    """The mean over ``dim``, or over every dim where ``dim`` is None or empty (ATen's
    convention), in ``dtype`` where one is given: torch.onnx's own translations, the mean over
    every dim taken as ``aten.mean``'s (a 0-dim result, given back its dims of size 1 for
    ``keepdim``)."""
    from onnxscript.function_libs.torch_lib.ops import core

    if dim or len(x.shape) == 0:
        mean = core.aten_mean_dim(x, dim, keepdim, dtype)
        dims = [dim] if isinstance(dim, int) else list(dim or ())
        if not dims or all(isinstance(x.shape[d], int) and x.shape[d] > 0 for d in dims):
            return mean
        # the mean of no elements: NaN, as eager's 0 / 0
        count = op.ReduceProd(op.Gather(op.Shape(x), _ints(dims)), keepdims=0)
        return op.Where(op.Equal(count, op.Constant(value_int=0)), _constant_like(float("nan"), mean), mean)
    mean = core.aten_mean(x, dtype)
    return op.Reshape(mean, _ints([1] * len(x.shape))) if keepdim else mean
