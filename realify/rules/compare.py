"""Predicates, comparisons and selection on complex operands.

A complex number is nan/inf when either part is, finite when both are; equal when both parts
are; "true" (logical ops) when either part is nonzero. Predicates and comparisons return real
bool tensors. Selection (where, masked_fill, fill) acts on both parts with the same mask.
(Truth reductions ``all``/``any`` live with the reductions.)
"""

from __future__ import annotations

import torch

from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import real_dtype
from . import register
from ._operands import complex_like, holds_values, parts, promoted, result_dtype

aten = torch.ops.aten


def _zero_if_none(p):
    return 0.0 if p is None else p


def _either(op):
    """Predicate true when ``op`` holds for the real or the imaginary part."""

    def rule(self):
        re, im = parts(self)
        return op(re) if im is None else op(re) | op(im)

    rule.__name__ = f"either_{op.__name__}"
    return rule


register(aten.isnan.default)(_either(torch.isnan))  # nan when either part is nan
register(aten.isinf.default)(_either(torch.isinf))  # inf when either part is inf (the other may be nan)


@register(aten.isfinite.default)
def isfinite(self):
    # finite when both parts are finite
    re, im = parts(self)
    return torch.isfinite(re) if im is None else torch.isfinite(re) & torch.isfinite(im)


@register(aten.isposinf.default, aten.isneginf.default)
def isposinf(self):
    raise RuntimeError("isposinf/isneginf do not support complex inputs (eager PyTorch rejects them too); "
                       "use torch.isinf(z.real) or torch.isinf(z.imag)")


@promoted("self", "other", complex_result=False)
def _equal_parts(self, other):
    (ar, ai), (br, bi) = self, other
    return ar == br, torch.as_tensor(_zero_if_none(ai) == _zero_if_none(bi))


@register(aten.eq.Tensor, aten.eq.Scalar)
def eq(self, other):
    # a + bi == c + di  <=>  a == c and b == d  (nan in either part: not equal)
    re_eq, im_eq = _equal_parts(self, other)
    return re_eq & im_eq


@register(aten.ne.Tensor, aten.ne.Scalar)
def ne(self, other):
    # a + bi != c + di  <=>  a != c or b != d
    re_eq, im_eq = _equal_parts(self, other)
    return ~(re_eq & im_eq)


@register(aten.nan_to_num.default)
def nan_to_num(self, nan=None, posinf=None, neginf=None):
    # applied to each part separately, as eager does
    re, im = parts(self)
    return ComplexTensor(torch.nan_to_num(re, nan, posinf, neginf), torch.nan_to_num(im, nan, posinf, neginf))


# ---- selection --------------------------------------------------------------------------


def _select(condition, a, b, dtype):
    """where(condition, a, b) of two complex-or-real operands, as a ComplexTensor of ``dtype``."""
    rd = real_dtype(dtype)
    (ar, ai), (br, bi) = parts(a, rd), parts(b, rd)
    like = next(t for t in (condition, ar, br) if isinstance(t, torch.Tensor))

    def part(p):
        # a tensor keeps its device (a 0-d CPU operand beside an accelerator's, as eager takes it)
        if isinstance(p, torch.Tensor):
            return p.to(rd)
        return torch.as_tensor(_zero_if_none(p), dtype=rd, device=like.device)

    re = torch.where(condition, part(ar), part(br))
    im = torch.where(condition, part(ai), part(bi))
    return complex_like(re, im, dtype)


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(condition, self, other):
    # where(c, a + bi, x + yi) = where(c, a, x) + where(c, b, y) i
    return _select(condition, self, other, result_dtype(self, other))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(self, mask, value):
    # the fill value (possibly complex) where mask holds; the dtype stays self's. A tensor value
    # is 0-d, as eager checks (a selection would broadcast it)
    if isinstance(value, torch.Tensor) and value.dim() != 0:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.dim()} dimension(s).")
    if not self.dtype.is_complex:
        return torch.where(mask, _as_scalar_of(value, self.dtype).to(self.device), self)
    return _select(mask, value, self, self.dtype)


def _as_scalar_of(value, dtype: torch.dtype) -> torch.Tensor:
    # a complex value converted to a real (integer, boolean) dtype as eager converts a scalar:
    # true where either part is nonzero for bool; else the real part, refusing a nonzero
    # imaginary part ("overflow"), which only a value read here can show (a trace's fake
    # kernel raises there itself, as eager does)
    vr, vi = parts(value)
    if dtype is torch.bool:
        return torch.as_tensor(_truth(value))
    if vi is not None and _known_nonzero(vi):
        raise RuntimeError(f"value cannot be converted to type {_C_TYPE_NAMES.get(dtype, dtype)} without overflow")
    return torch.as_tensor(vr).to(dtype)


# the C++ names eager's conversion error gives dtypes
_C_TYPE_NAMES = {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
                 torch.bfloat16: "c10::BFloat16", torch.int64: "int64_t", torch.int32: "int", torch.int16: "int16_t",
                 torch.int8: "int8_t", torch.uint8: "uint8_t"}


def _known_nonzero(x) -> bool:
    # a number, or a tensor holding a value (not a trace's fake or proxied one), that is nonzero
    if not isinstance(x, torch.Tensor):
        return x != 0
    return holds_values(x) and bool(x != 0)


@register(aten.fill.Scalar, aten.fill.Tensor)
def fill(self, value):
    # every element the value, in self's dtype: a real self takes a complex value's real part,
    # as eager's cast does (the rule meets a real self where the value alone is complex)
    re, im = parts(self)
    vr, vi = parts(value, re.dtype)
    if im is None:
        return torch.zeros_like(re) + vr
    return complex_like(torch.zeros_like(re) + vr, torch.zeros_like(im) + _zero_if_none(vi), self.dtype)


@register(aten.zero.default)
def zero(self):
    re, im = parts(self)
    return ComplexTensor(torch.zeros_like(re), torch.zeros_like(im))


# ---- logical ops: a complex number is true when either part is nonzero --------------------


def _truth(x):
    re, im = parts(x)
    if not isinstance(re, torch.Tensor):
        return bool(re) or bool(im)
    return re != 0 if im is None else (re != 0) | (im != 0)


def _logical(op):
    def rule(self, other):
        return op(torch.as_tensor(_truth(self)), torch.as_tensor(_truth(other)))

    rule.__name__ = op.__name__
    return rule


register(aten.logical_and.default)(_logical(torch.logical_and))
register(aten.logical_or.default)(_logical(torch.logical_or))
register(aten.logical_xor.default)(_logical(torch.logical_xor))


@register(aten.logical_not.default)
def logical_not(self):
    return ~_truth(self)


@register(aten.allclose.default)
def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    # all(isclose(a, b)) as a Python bool: depends on the data, so it runs eagerly only
    return bool(torch.isclose(self, other, rtol, atol, equal_nan).all())
