"""The translation of ``aten.masked_select``, which torch.onnx lacks (for real programs too):
realify's rule writes a complex masked_select as one real masked_select of its elements'
positions (realify/rules/indexing.py), to read both parts there."""

from __future__ import annotations

from .graph_helpers import _ints
from .optional_imports import op


def masked_select(x, mask):
    """The elements of ``x`` where ``mask`` holds, both broadcast, in row-major order: each
    operand expanded to the other's shape (ONNX's Expand broadcasts both ways, as torch does,
    at run time), then a flat Compress."""
    values = op.Expand(x, op.Shape(mask))
    keep = op.Expand(mask, op.Shape(values))
    return op.Compress(op.Reshape(values, _ints([-1])), op.Reshape(keep, _ints([-1])))
