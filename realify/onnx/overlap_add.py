"""The translation of ``aten.unfold_backward``, the overlap-add of istft (and the gradient of
``unfold``), in Pad and Add: torch.onnx's own is one ScatterND per frame position, with int32
indices ONNX Runtime refuses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .graph_helpers import _ints
from .optional_imports import ir, op


def unfold_backward(frames, input_sizes: Sequence[Any], dim: int, size: int, step: int):
    """The overlap-add of ``size``-long windows taken every ``step`` along ``dim`` (istft's,
    and the gradient of ``unfold``): ``out[..., i*step + k, ...] += frames[..., i, ..., k]``.

    With each window zero-padded to ``r*step`` (``r = ceil(size/step)``) and cut into ``r``
    chunks of ``step``, chunk ``j`` of window ``i`` lands on block ``i + j`` of the output: so
    the output's blocks are the sum over ``j`` of chunk ``j`` of every window, shifted by ``j``
    blocks (a Pad each), ``r`` additions in all; then the length is fitted to the input's
    (a Pad, negative where the blocks run past it)."""
    rank = len(input_sizes) + 1  # the frames: input_sizes with dim -> frame count, then size
    dim %= rank - 1
    r = -(-size // step)
    # frames to (..., frame, window): the frame axis next to last
    order = [a for a in range(rank - 1) if a != dim] + [dim, rank - 1]
    x = op.Transpose(frames, perm=order)
    x = op.Pad(x, _ints([0] * rank + [0] * (rank - 1) + [r * step - size]))
    x = op.Reshape(x, _ints([0] * (rank - 1) + [r, step]))
    total = None
    for j in range(r):
        chunk = op.Squeeze(op.Slice(x, _ints([j]), _ints([j + 1]), _ints([rank - 1])), _ints([rank - 1]))
        before, after = [0] * rank, [0] * rank
        before[rank - 2], after[rank - 2] = j, r - 1 - j
        shifted = op.Pad(chunk, _ints(before + after))
        total = shifted if total is None else op.Add(total, shifted)
    signal = op.Reshape(total, _ints([0] * (rank - 2) + [-1]))  # blocks -> samples
    length = input_sizes[dim]
    if isinstance(length, int):
        length = _ints([length])
    else:  # a symbolic size: the input's own dimension, as a 1-element int64 tensor
        length = op.Reshape(op.Cast(length, to=ir.DataType.INT64), _ints([1]))
    excess = op.Sub(length, op.Gather(op.Shape(signal), _ints([rank - 2]), axis=0))
    signal = op.Pad(signal, op.Concat(_ints([0] * (2 * rank - 3)), excess, axis=0))
    back = [0] * (rank - 1)  # the sample axis (last now) returns to dim
    for position, axis in enumerate(order[:-1]):
        back[axis] = position
    return op.Transpose(signal, perm=back)
