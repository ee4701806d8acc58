"""Translations of the pointwise ops whose default ONNX translations lose what realify's rules
rely on: the sign of zero (signbit, copysign, and a Where that keeps a selected -0), hypot
without overflow, expm1 and log1p without cancellation near 0, atan2 with C99's signed zeros and
infinities; and realify::straight_through."""

from __future__ import annotations

import math

from ..runtime.expm1 import SERIES_BOUND, series_coefficients
from .graph_helpers import _constant_like
from .optional_imports import ir, op

# ---- sign of zero ------------------------------------------------------------------------------


def signbit(x):
    """signbit(x) = x < 0, or x == 0 and 1/x < 0 (1/-0.0 = -inf). ONNX (opset 20) cannot read
    the sign bit of a NaN: signbit(-nan) is False here, True in PyTorch."""
    zero = op.CastLike(op.Constant(value_float=0.0), x)
    return op.Or(op.Less(x, zero), _is_negative_zero(x))


def copysign(a, b):
    """copysign(a, b) = -|a| where signbit(b), else |a|."""
    magnitude = op.Abs(a)
    return _negated_where(magnitude, signbit(op.CastLike(b, a)))


def straight_through(value, source):
    """``realify::straight_through(value, source)`` is ``value``; only its gradient reads ``source``."""
    return op.Identity(value)


def hypot(x, y):
    """hypot(x, y) = m * sqrt(1 + (n/m)^2) with m = max(|x|, |y|), n = min(|x|, |y|): no overflow
    or underflow of x^2 + y^2. C99: inf if either is infinite (even with a NaN), else NaN if
    either is NaN; 0 when both are 0."""
    # every selection here is of nonnegative values or +inf: plain Where cannot lose a -0
    ax, ay = op.Abs(x), op.Abs(op.CastLike(y, x))
    big, small = op.Max(ax, ay), op.Min(ax, ay)
    zero, one = op.CastLike(op.Constant(value_float=0.0), x), op.CastLike(op.Constant(value_float=1.0), x)
    ratio = op.Div(small, op.Where(op.Equal(big, zero), one, big))
    result = op.Mul(big, op.Sqrt(op.Add(one, op.Mul(ratio, ratio))))
    result = op.Where(op.Or(op.IsNaN(ax), op.IsNaN(ay)), op.Add(ax, ay), result)
    infinite = op.Or(op.IsInf(ax), op.IsInf(ay))
    return op.Where(infinite, op.CastLike(op.Constant(value_float=float("inf")), x), result)


def expm1(x):
    """expm1 with no cancellation near 0: Taylor's series below ln(2)/2, Exp(x) - 1 above
    (realify/runtime/expm1.py; the default translation's Exp(x) - 1 gives expm1(1e-8) = 0 in float32)."""
    inner, *coefficients = series_coefficients(x.dtype == ir.DataType.DOUBLE)
    series = _constant_like(inner, x)
    for c in coefficients:
        series = op.Add(op.Mul(x, series), _constant_like(c, x))
    one = op.CastLike(op.Constant(value_float=1.0), x)
    near_zero = op.Less(op.Abs(x), op.CastLike(op.Constant(value_float=SERIES_BOUND), x))
    return where(near_zero, op.Mul(x, series), op.Sub(op.Exp(x), one))


def where(condition, x, y):
    """Where(condition, x, y), with the sign of a selected zero on every runtime. Every
    selection in this module's translations that may pick a -0 goes through it.

    ONNX Runtime's CPU Where merges its two selections by value, so a -0 taken from ``x``
    can come out +0 (``Where(True, -0.0, 1.0) = 0.0``; a -0 from ``y`` is kept). realify's
    rules select signed zeros on branch cuts: through ONNX Runtime, ``asin``, ``acos``,
    ``atan``, their hyperbolic forms and ``log`` came out on the wrong side of their cuts
    (``acos(2 - 0i)`` gave ``-1.317i`` for ``+1.317i``). The selection is negated exactly
    where it should be -0 (the side selected holds a -0) and is +0, so a runtime whose Where
    keeps -0 gets the same values. Integer selections (an index chosen per row) have no -0."""
    x = op.CastLike(x, y)
    selected = op.Where(condition, x, y)
    if y.dtype is not None and not y.dtype.is_floating_point():
        return selected
    should_be_negative_zero = op.Or(op.And(condition, _is_negative_zero(x)),
                                    op.And(op.Not(condition), _is_negative_zero(y)))
    zero = op.CastLike(op.Constant(value_float=0.0), y)
    is_positive_zero = op.And(op.Equal(selected, zero), op.Greater(op.Reciprocal(selected), zero))
    return _negated_where(selected, op.And(should_be_negative_zero, is_positive_zero))


def _negated_where(x, mask):
    """-x where ``mask``, x elsewhere, without a Where: ``x * (1 - 2 mask)`` (exact: a
    multiplication by ±1; -0 for +0, nan stays nan)."""
    one, two = op.CastLike(op.Constant(value_float=1.0), x), op.CastLike(op.Constant(value_float=2.0), x)
    return op.Mul(x, op.Sub(one, op.Mul(two, op.CastLike(mask, x))))


def _is_negative_zero(x):
    zero = op.CastLike(op.Constant(value_float=0.0), x)
    return op.And(op.Equal(x, zero), op.Less(op.Reciprocal(x), zero))


def log1p(x):
    """log1p(x) = x log(u) / (u - 1) with u = 1 + x (Goldberg, "What every computer scientist
    should know about floating-point arithmetic", Theorem 4: the rounding of u cancels between
    log u and u - 1); x where u == 1 (keeps -0 and tiny x), log u where u is 0 or inf."""
    one = op.CastLike(op.Constant(value_float=1.0), x)
    u = op.Add(one, x)
    log_u = op.Log(u)
    result = where(op.Equal(u, one), x, op.Div(op.Mul(x, log_u), op.Sub(u, one)))
    saturated = op.Or(op.IsInf(u), op.Equal(u, op.CastLike(op.Constant(value_float=0.0), x)))
    return where(saturated, log_u, result)


def atan2(y, x):
    """atan2(y, x) with C99's signed zeros and infinities:
    atan(y/x), plus copysign(pi, y) where x < 0 or x = -0 (signbit(x));
    where y and x are both zero: y if x is +0, copysign(pi, y) if x is -0;
    where both are infinite: copysign(pi/4, y) if x > 0, copysign(3 pi/4, y) if x < 0.
    NaN in either gives NaN (y/x is NaN and no case above applies)."""
    x = op.CastLike(x, y)
    zero = op.CastLike(op.Constant(value_float=0.0), y)
    half_turn = copysign(_constant_like(math.pi, y), y)
    base = op.Atan(op.Div(y, x))
    result = where(signbit(x), op.Add(base, half_turn), base)
    both_zero = op.And(op.Equal(y, zero), op.Equal(x, zero))
    result = where(both_zero, where(signbit(x), half_turn, y), result)
    # nonzero constants: a plain Where
    corner = op.Where(op.Greater(x, zero), _constant_like(math.pi / 4, y), _constant_like(3 * math.pi / 4, y))
    both_infinite = op.And(op.IsInf(y), op.IsInf(x))
    return where(both_infinite, copysign(corner, y), result)
