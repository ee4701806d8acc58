"""Indexing ops torch.onnx has no translation for, in ops it has, as decompositions applied to
the ExportedProgram before translation. realify's rules write a complex ``put`` as a real
``put`` of each part (realify/rules), which torch.onnx cannot translate, for real programs
too."""

from __future__ import annotations

import torch


def _put(x: torch.Tensor, index: torch.Tensor, source: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
    """``put``: ``x`` read as flat, with ``source`` written (or added, ``accumulate``) at
    ``index`` (negative indices counting from the end), as an ``index_put`` of the flat view
    (ONNX ``ScatterND``)."""
    flat = x.reshape(-1)
    index = index.reshape(-1)
    index = torch.where(index < 0, index + flat.shape[0], index)
    return flat.index_put((index,), source.reshape(-1), accumulate).reshape(x.shape)


def indexing_decompositions() -> dict:
    """``aten.put`` as an ``index_put``, for ``ExportedProgram.run_decompositions``."""
    return {torch.ops.aten.put.default: _put}
