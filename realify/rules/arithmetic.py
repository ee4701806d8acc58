"""Arithmetic: add, sub, rsub, mul, div, neg, reciprocal, square, addcmul, addcdiv, lerp.

Mixed real/complex operands follow C99 Annex G: a real operand has no imaginary part
(not a +0.0 one), so ``x * (c + di) = xc + (xd)i`` — two multiplications, and no NaN
from ``0 * inf`` in a phantom imaginary part (docs/numerics.md).
"""

from __future__ import annotations

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from . import register
from ._algebra import cdiv, cmul, padd, pneg, psub
from ._derivative import C, Formula, apply
from ._operands import complex_like, parts, promoted

aten = torch.ops.aten


def _scaled(p, alpha):
    # alpha may itself be complex: (br + bi i) * alpha
    if alpha is None or alpha == 1:
        return p
    ar, ai = parts(alpha)
    return cmul(p[0], p[1], ar, ai)


@register(aten.add.Tensor, aten.add.Scalar)
@promoted("self", "other")
def add(self, other, *, alpha=None):
    # (a + bi) + alpha (c + di)
    b = _scaled(other, alpha)
    return padd(self[0], b[0]), padd(self[1], b[1])


@register(aten.sub.Tensor, aten.sub.Scalar)
@promoted("self", "other")
def sub(self, other, *, alpha=None):
    # (a + bi) - alpha (c + di)
    b = _scaled(other, alpha)
    return psub(self[0], b[0]), psub(self[1], b[1])


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(self, other, *, alpha=None):
    # other - alpha * self
    return sub(other, self, alpha=alpha)


@register(aten.mul.Tensor, aten.mul.Scalar)
@promoted("self", "other")
def mul(self, other):
    # (a + bi)(c + di) = (ac - bd) + (ad + bc)i  (on (re, im) pairs where realify/passes/layout.py says so)
    return cmul(*self, *other)


@register(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
@promoted("self", "other")
def div(self, other, *, rounding_mode=None):
    if rounding_mode is not None:
        raise RuntimeError(
            f"div with rounding_mode={rounding_mode!r} is not defined for complex tensors "
            "(eager PyTorch rejects it too); use rounding_mode=None"
        )
    # Smith's division, see _algebra.cdiv; between two complex tensors with eager's gradient
    if all(isinstance(p, torch.Tensor) for p in (*self, *other)):
        return tuple(apply(_DIVISION, C(*self), C(*other)))
    return cdiv(*self, *other)


def _division_grad(inputs, quotient, g, _):
    # eager's formulas: g / conj(w) for z, -g conj((z / w) / w) for w (z / w recomputed, as eager
    # does: the quotient's special values are not its own at a zero or infinite divisor)
    z, w = inputs
    return [g / w.conj(), -g * ((z / w) / w).conj()]


_DIVISION = Formula("div", lambda parts, _: cdiv(*parts), _division_grad)


@register(aten.true_divide.Tensor)
def true_divide(self, other):
    return div(self, other)


@register(aten.neg.default)
def neg(self):
    # -(a + bi) = -a - bi
    re, im = parts(self)
    return complex_like(-re, pneg(im), self.dtype, self)


def _real_reciprocal(x):
    # 1 / x of a real operand, as a complex result (the value of 1 / (x + 0i) with no phantom
    # imaginary part: C99 Annex G)
    return complex_like(*_reciprocal(x, None), x.dtype, x)


@register(aten.reciprocal.default, derivative=lambda g, z, w: -g * (w * w).conj(), real_operand=_real_reciprocal)
def _reciprocal(x, y):
    # 1 / (a + bi), through Smith's division so that tiny/huge |z| neither over- nor underflows
    return cdiv(torch.ones_like(x), None, x, y)


@register(aten.square.default)
def square(self):
    # (a + bi)^2 = (a^2 - b^2) + 2ab i, computed as z*z like eager
    return mul(self, self)


@register(aten.addcmul.default)
def addcmul(self, tensor1, tensor2, *, value=1):
    # self + value * tensor1 * tensor2, every operand first in the three's common dtype, as eager
    # computes (a complex32 product is not rounded to half precision before the sum)
    self, tensor1, tensor2 = _in_common_dtype(self, tensor1, tensor2)
    return add(self, mul(tensor1, tensor2), alpha=value)


@register(aten.addcdiv.default)
def addcdiv(self, tensor1, tensor2, *, value=1):
    # self + value * tensor1 / tensor2, in the three's common dtype
    self, tensor1, tensor2 = _in_common_dtype(self, tensor1, tensor2)
    return add(self, div(tensor1, tensor2), alpha=value)


@register(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(self, end, weight):
    # self + weight * (end - self), in the operands' common dtype
    self, end, weight = _in_common_dtype(self, end, weight)
    return add(self, mul(weight, sub(end, self)))


def _in_common_dtype(*operands):
    # eager's elementwise promotion over all operands at once (0-d tensors and numbers take part
    # by category), each tensor cast to it; a real operand to its real counterpart (it stays
    # real: C99's real operand has no imaginary part)
    _, dtype = elementwise_dtypes(*operands, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)

    def cast(x):
        if not isinstance(x, torch.Tensor):
            return x
        target = dtype if x.dtype.is_complex or not dtype.is_complex else dtype.to_real()
        return x.to(target) if x.dtype != target else x

    return [cast(x) for x in operands]
