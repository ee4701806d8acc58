"""Indexing ops torch.onnx has no translation for, or one ONNX Runtime refuses, in ops it runs,
as decompositions applied to the ExportedProgram before translation, for real programs too:
realify's rules write a complex ``put`` as a real ``put`` of each part (realify/rules), which
torch.onnx cannot translate, and torch.onnx writes ``masked_scatter`` as a ``ScatterND``, which
ONNX Runtime refuses on a 0-d tensor."""

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


def _masked_scatter(x: torch.Tensor, mask: torch.Tensor, source: torch.Tensor):
    """``masked_scatter`` of a 0-d ``x``: of ``x`` as one element, read back as 0-d (ONNX
    ``ScatterND`` takes no 0-d data); other ranks are torch.onnx's own."""
    if x.dim() > 0 or mask.dim() > 0:
        return NotImplemented
    return torch.masked_scatter(x.reshape(1), mask.reshape(1), source).reshape(())


def indexing_decompositions() -> dict:
    """``aten.put`` as an ``index_put`` and a 0-d ``masked_scatter`` as a 1-d one, for
    ``ExportedProgram.run_decompositions``."""
    return {torch.ops.aten.put.default: _put, torch.ops.aten.masked_scatter.default: _masked_scatter}
