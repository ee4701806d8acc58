"""Constants in ONNX graphs, shared by realify.onnx's translations (onnxscript, traced at
export time)."""

from __future__ import annotations

from .optional_imports import ir, np, op


def _int32(value: int):
    return op.Constant(value=ir.tensor(np.array(value, dtype=np.int32)))


def _constant_like(value: float, x):
    """``value`` in x's dtype, rounded once from float64 (``value_float`` would round to float32)."""
    return op.CastLike(op.Constant(value=ir.tensor(np.array(value, dtype=np.float64))), x)


def _ints(values: list[int]):
    return op.Constant(value_ints=values)


def _shape(sizes):
    """A 1-d int64 tensor of ``sizes``: Python ints, or the graph's values of dynamic sizes."""
    return op.Concat(*(_ints([s]) if isinstance(s, int) else op.Reshape(op.Cast(s, to=7), _ints([-1]))
                       for s in sizes), axis=0)
