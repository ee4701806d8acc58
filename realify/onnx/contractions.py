"""Translations of the contractions torch.onnx has none for."""

from __future__ import annotations

from .optional_imports import op


def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """aten._trilinear (what nn.Bilinear lowers to in realify's trace): sum over ``sumdim`` of i1 * i2 * i3.

    Each input is first unsqueezed at its ``expand`` dims, which brings the three to one rank
    where they broadcast. ``unroll_dim`` only chooses how ATen loops; it does not change the
    result.
    """
    product = op.Mul(op.Mul(_unsqueezed(i1, expand1), _unsqueezed(i2, expand2)), _unsqueezed(i3, expand3))
    if not sumdim:
        return product
    return op.ReduceSum(product, op.Constant(value_ints=list(sumdim)), keepdims=0)


def _unsqueezed(x, dims):
    # ATen unsqueezes at each listed dim in increasing order: ONNX's Unsqueeze with the sorted axes
    return op.Unsqueeze(x, op.Constant(value_ints=sorted(dims))) if dims else x
