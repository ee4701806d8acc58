"""Arithmetic on complex parts where a part may be None (an exact zero) or a Python number.

Treating a missing imaginary part as an exact zero lets real*complex cost two real
multiplications instead of four, and keeps signed zeros the way eager PyTorch computes them
once the operands are promoted (eager multiplies by a literal +0.0 imaginary part, so the
zero-skipping shortcut is only used where the result is identical: see ``mul``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

Part = Any


def padd(a: Part, b: Part) -> Part:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def psub(a: Part, b: Part) -> Part:
    if b is None:
        return a
    if a is None:
        return -b
    return a - b


def pneg(a: Part) -> Part:
    return None if a is None else -a


def pselect(condition: torch.Tensor, a: Part, b: Part) -> Part:
    """``torch.where(condition, a, b)`` on parts that may be exact zeros (None)."""
    if a is None and b is None:
        return None
    if a is None:
        return b.masked_fill(condition, 0.0)
    if b is None:
        return a.masked_fill(~condition, 0.0)
    return torch.where(condition, a, b)


def padjoint(x: tuple[Part, Part]) -> tuple[Part, Part]:
    """The parts of X^H = conj(X)^T."""
    return x[0].mT, pneg(None if x[1] is None else x[1].mT)


def pmul(a: Part, b: Part) -> Part:
    if a is None or b is None:
        return None
    return a * b


def complex_product(product: Callable[[Any, Any], Any], a: tuple[Part, Part], b: tuple[Part, Part]
                    ) -> tuple[Part, Part]:
    """Planar parts of ``a ⋆ b`` for a bilinear real product ``⋆`` (elementwise, matrix,
    convolution, cross; ``None`` parts are exact zeros)."""
    (ar, ai), (br, bi) = a, b
    # (Ar + Ai i)(Br + Bi i) = (Ar Br - Ai Bi) + (Ar Bi + Ai Br) i; a None part's products vanish
    re = psub(product(ar, br), _product(product, ai, bi))
    return re, padd(_product(product, ar, bi), _product(product, ai, br))


def _product(product: Callable[[Any, Any], Any], x: Part, y: Part) -> Part:
    return None if x is None or y is None else product(x, y)


def cmul(ar: Part, ai: Part, br: Part, bi: Part) -> tuple[Part, Part]:
    """The elementwise complex product of planar parts."""
    return complex_product(pmul, (ar, ai), (br, bi))


def cdiv(ar: Part, ai: Part, br: Part, bi: Part) -> tuple[Part, Part]:
    """(ar + ai i) / (br + bi i) with Smith's algorithm (no overflow in |b|^2).

    With |c| >= |d|:  r = d/c, s = c + d r,  result = ((a + b r) + (b - a r) i) / s
    otherwise:        r = c/d, s = d + c r,  result = ((a r + b) + (b r - a) i) / s
    c = d = 0 gives a/|c| + (b/|d|) i (inf or nan), as eager PyTorch does.
    Both parts are divided by s (not multiplied by 1/s, one rounding less): normwise relative
    error 1.41 eps in complex64 on random pairs, against 1.71 eps with the reciprocal and 1.48
    for eager's own division (tests/test_numerics.py).
    Each branch is evaluated on safe operands so that unselected lanes never produce
    inf/nan that would poison gradients (the "double where" rule).
    """
    if bi is None:
        # real divisor: (a + b i) / c = a/c + (b/c) i
        return _div_real(ar, br), _div_real(ai, br)
    if not isinstance(br, torch.Tensor) and not isinstance(bi, torch.Tensor):
        # Python complex divisor: multiply by its reciprocal (computed in double precision)
        inverse = 1 / complex(br, bi)
        return cmul(ar, ai, inverse.real, inverse.imag)
    a = ar
    b = 0.0 if ai is None else ai
    c, d = br, bi
    abs_c, abs_d = torch.abs(c), torch.abs(d)
    c_larger = abs_c >= abs_d
    big = torch.where(c_larger, c, d)
    small = torch.where(c_larger, d, c)
    both_zero = (c == 0) & (d == 0)
    ratio = small / torch.where(both_zero, 1.0, big)
    denominator = big + small * ratio
    re = torch.where(c_larger, a + b * ratio, a * ratio + b) / denominator
    im = torch.where(c_larger, b - a * ratio, b * ratio - a) / denominator
    # a / +0 is a * inf (±inf, or nan for a = ±0 or nan): a multiplication, not a division
    infinite = torch.where(both_zero, math.inf, 1.0)
    re = torch.where(both_zero, a * infinite, re)
    im = torch.where(both_zero, b * infinite, im)
    return re, im


def _div_real(a: Part, c: Part) -> Part:
    return None if a is None else a / c
