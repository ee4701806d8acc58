"""The translation of ``aten.roll`` with shifts read from dynamic sizes (``fft.fftshift`` and
``ifftshift`` shift by ``n // 2``): torch.onnx's own writes each shift as a constant attribute,
which a symbolic value cannot be (a TypeError), for real programs too. Shifts that are numbers
keep torch.onnx's translation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .graph_helpers import _ints
from .optional_imports import op


def roll(x, shifts: Sequence[Any], dims: Sequence[int] = ()):
    """``out[..., i, ...] = x[..., (i - shift) mod n, ...]`` along each dim: the last
    ``shift mod n`` entries, then the others (two Slices and a Concat), with ``(-shift) mod n``
    computed in the graph where the shift is a value of it."""
    from onnxscript.function_libs.torch_lib.ops import core

    shifts = [shifts] if not isinstance(shifts, Sequence) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    rank = len(x.shape)
    if all(isinstance(s, int) for s in shifts) or rank == 0 or 0 in x.shape:
        return core.aten_roll(x, shifts, dims)
    if not dims:  # one shift of the flattened tensor, then its shape again
        flat = op.Reshape(x, _ints([-1]))
        return op.Reshape(_rolled(flat, shifts[0], 0), op.Shape(x), allowzero=1)
    result = x
    for shift, dim in zip(shifts, dims):
        result = _rolled(result, shift, dim % rank)
    return result


def _rolled(x, shift, dim: int):
    length = op.Shape(x, start=dim, end=dim + 1)
    negated = _ints([-shift]) if isinstance(shift, int) else op.Neg(op.Reshape(op.Cast(shift, to=7), _ints([-1])))
    cut = op.Mod(negated, length)  # the entries before the cut go last
    axis = _ints([dim])
    return op.Concat(op.Slice(x, cut, length, axis), op.Slice(x, _ints([0]), cut, axis), axis=dim)
