"""Joins torch.onnx translates wrongly at zero sizes, for real programs too."""

from __future__ import annotations

from .optional_imports import op


def cat(tensors, dim: int = 0):
    """``torch.cat`` as ONNX ``Concat``, which takes inputs of zero size.

    torch.onnx's translation drops every input with a zero size and fails where none is left
    (a program on an empty batch). Only what ``torch.cat`` itself skips is dropped here: a 1-d
    empty tensor beside inputs of another rank (the legacy ``torch.tensor([])``).
    """
    tensors = [t for t in tensors if t is not None]
    ranks = {len(t.shape) for t in tensors if t.shape is not None}
    kept = [t for t in tensors if not (ranks != {1} and t.shape is not None and len(t.shape) == 1 and t.shape[0] == 0)]
    return op.Concat(*kept, axis=dim)
