"""The translation of ``aten.im2col`` (``nn.functional.unfold``'s sliding blocks): torch.onnx's
own ends in a Reshape to ``(N, C*kh*kw, -1)``, which ONNX Runtime refuses where N is 0 (a -1
beside a 0 has no size to infer). An input with no elements (N or C of 0, fixed at export:
torch.export specializes sizes 0 and 1) gives its empty result without a Reshape; written out
in a Reshape's target, the sizes would come back as a -1 from onnxscript's optimizer."""

from __future__ import annotations

from collections.abc import Sequence

from .graph_helpers import _constant_like, _ints
from .optional_imports import op


def _scalar(value: int):
    return op.Constant(value_int=value)


def _block_indices(padded_size, kernel: int, dilation: int, stride: int):
    """The (kernel, blocks) indices along one spatial dim of the padded input: block ``l``
    starts at ``l * stride``, its entry ``k`` is ``l * stride + k * dilation``, for the blocks
    that fit, ``l * stride <= padded_size - dilation * (kernel - 1) - 1``."""
    fitting = op.Sub(padded_size, _scalar(dilation * (kernel - 1)))
    starts = op.Range(_scalar(0), fitting, _scalar(stride))
    offsets = op.Range(_scalar(0), _scalar(kernel * dilation), _scalar(dilation))
    return op.Add(op.Unsqueeze(starts, _ints([0])), op.Unsqueeze(offsets, _ints([1])))


def im2col(x, kernel_size: Sequence[int], dilation: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
           stride: Sequence[int] = (1, 1)):
    """``out[n, (c*kh + i)*kw + j, lh*Lw + lw] = padded[n, c, lh*sh + i*dh, lw*sw + j*dw]`` for a
    4-dim input ``(N, C, H, W)``: two Gathers of the padded input, then the blocks flattened to
    ``(N, C*kh*kw, Lh*Lw)``."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel_size, dilation, padding, stride
    padded = op.Pad(x, _ints([0, 0, ph, pw, 0, 0, ph, pw])) if ph or pw else x
    shape = op.Shape(padded)
    rows = _block_indices(op.Gather(shape, _scalar(2), axis=0), kh, dh, sh)  # (kh, Lh)
    cols = _block_indices(op.Gather(shape, _scalar(3), axis=0), kw, dw, sw)  # (kw, Lw)
    blocks = op.Gather(op.Gather(padded, rows, axis=2), cols, axis=4)  # (N, C, kh, Lh, kw, Lw)
    blocks = op.Transpose(blocks, perm=[0, 1, 2, 4, 3, 5])  # (N, C, kh, kw, Lh, Lw)
    sizes = op.Shape(blocks)
    target = op.Concat(op.Slice(sizes, _ints([0]), _ints([1])),
                       op.ReduceProd(op.Slice(sizes, _ints([1]), _ints([4])), keepdims=1),
                       op.ReduceProd(op.Slice(sizes, _ints([4]), _ints([6])), keepdims=1), axis=0)
    if any(isinstance(size, int) and size == 0 for size in x.shape[:2]):
        return op.Expand(_constant_like(0.0, x), target)
    return op.Reshape(blocks, target)
