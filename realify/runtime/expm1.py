"""expm1 without cancellation near 0, for ONNX (realify.onnx.pointwise.expm1): ONNX has no Expm1
operator, and torch.onnx translates ``expm1`` as ``exp(x) - 1``, which cancels near 0:
``expm1(1e-8)`` comes out 0 in float32 and keeps 8 of 16 digits in float64, and realify's
rules need expm1 for small arguments (``sinh``/``cosh`` of the imaginary part in complex
``sin``/``cos``, and ``expm1`` itself).

realify's translation uses::

    expm1(x) = x (1 + x (1/2! + x (1/3! + ... + x/n!)))   where |x| < ln(2)/2
             = exp(x) - 1                                 elsewhere

Taylor's series through ``x^n/n!`` in Horner's form, ``n`` = 8 for float32 (and narrower)
and 14 for float64: the first term left out, ``|x|^n/(n+1)!`` relative to ``x``, is below
half an ulp for ``|x| < ln(2)/2``. Beyond that bound ``e^x / |e^x - 1| < 3.4``, so the
subtraction magnifies exp's rounding at most 3.4 times. Measured over the range (the same
formula compiled by Inductor): at most 1.5 eps of relative error in float32 and 1.2 eps in
float64, with eager's values at 0, -0, ±inf and nan. The series costs a few multiply-adds;
Kahan's ``(u - 1) x / log u``, ``u = exp(x)``, is as accurate and costs a log and a
division.
"""

from __future__ import annotations

import math

SERIES_BOUND = math.log(2) / 2


def series_coefficients(double: bool) -> list[float]:
    """Horner's coefficients, innermost first: ``1/n!, 1/(n-1)!, ..., 1/1!``."""
    n = 14 if double else 8
    return [1.0 / math.factorial(k) for k in range(n, 0, -1)]
