"""Transcendental pointwise functions: exp/log families, powers, trigonometric and hyperbolic
functions and their inverses, sigmoid, logaddexp, sinc.

The reference is eager PyTorch, whose CPU kernels call the C library (glibc: C99 Annex G)
or c10's own formulas (log1p, expm1, log2, logaddexp, sinc). Each kernel below works on the
planar parts ``(x, y)`` of ``z = x + iy`` and follows the same special values (inf, nan, signed
zeros, branch cuts), while avoiding intermediate overflow (exp(x) or sinh(x) alone overflowing
where the product with cos y does not) and loss of relative precision near 0 and near |z| = 1.

Functions that C99 defines through one another keep doing so, so that their signed zeros
agree with eager: sin z = -i sinh(iz), cos z = cosh(iz), tan z = -i tanh(iz),
asinh z = -i asin(iz), atan z = -i atanh(iz); with iz = -y + ix and w = A + Bi,
-i w = B - Ai.

Branch selection always uses the "double where": the lanes a branch does not own are fed a
harmless input (0 or 1), so that an unselected inf/nan never turns a gradient into NaN.
"""

from __future__ import annotations

import math
import numbers

import torch

from ..runtime.dtypes import real_dtype
from . import register
from ._algebra import cdiv, cmul
from ._derivative import C, Formula, apply, select
from ._operands import complex_like, parts, promoted, result_dtype
from ._registry import lookup

aten = torch.ops.aten


# Special-value predicates as plain comparisons: Inductor's CPU backend vectorizes these,
# while torch.isinf/isnan/signbit become a scalar loop over each vector's lanes (measured on
# the docs chain, atan(cos(a*b)/sin(a+b)): the predicates were a large share of the kernel).
def _isnan(x):
    return x != x  # noqa: PLR0124  (NaN is the value unequal to itself)


def _isinf(x):
    return torch.abs(x) == math.inf


def _isfinite(x):
    return torch.abs(x) < math.inf


def _signbit(x):
    # sign bit of x, including -0.0 and -nan: copysign moves it onto 1.0
    return torch.copysign(torch.ones_like(x), x) < 0

LN2 = math.log(2.0)
LN10 = math.log(10.0)
PI = math.pi
HALF_PI = math.pi / 2


# ---- operands ---------------------------------------------------------------------------


def _xy(z, rd=None):
    """Planar parts of a complex operand as two tensors (a real operand gets a +0 imaginary part,
    as eager promotes it before calling the complex kernel)."""
    return _filled(parts(z, rd))


def _filled(z) -> C:
    """Promoted planar parts as a complex value, a real operand's missing imaginary part as
    +0 (eager's promotion before the complex kernel)."""
    x, y = z
    return C(x, torch.zeros_like(x) if y is None else y)


def _function(op):
    """``op``'s function of a complex value with its declared derivative, for derivatives that
    use other functions (their second derivatives are then the function's too)."""
    return lambda z: lookup(op.default).of(z)


# Each derivative below is eager's formula for the op on complex inputs (grad_z = g conj(f'(z)),
# with the same operations in the same order, so that infinities and zeros meet as in eager),
# evaluated by functions that carry their own derivatives: second derivatives are right too.
_exp, _log, _sin, _cos, _sinh, _cosh, _rsqrt = map(
    _function, (aten.exp, aten.log, aten.sin, aten.cos, aten.sinh, aten.cosh, aten.rsqrt))


def _rotated(kernel):
    """The kernel of -i f(iz): iz = -y + ix, and -i (A + Bi) = B - Ai."""

    def rotated(x, y):
        a, b = kernel(-y, x)
        return b, -a

    return rotated


def _log_max(t: torch.Tensor) -> float:
    """log of the largest finite value of t's dtype (exp overflows beyond it)."""
    return math.log(torch.finfo(t.dtype).max)


def _mantissa_bits(fi: torch.finfo) -> int:
    return round(-math.log2(fi.eps))


def _copysign0(sign_of: torch.Tensor) -> torch.Tensor:
    """±0 with the sign of ``sign_of``."""
    return torch.copysign(torch.zeros_like(sign_of), sign_of)


# ---- exp, log, sqrt ---------------------------------------------------------------------


def _scaled_exp(x: torch.Tensor):
    """c -> exp(x) * c, also where exp(x) overflows but the product does not: beyond
    log(max) it is (exp(x/2) c) exp(x/2); one exp either way."""
    big = x > _log_max(x)
    e = torch.exp(torch.where(big, 0.5 * x, x))
    return lambda c: torch.where(big, (e * c) * e, e * c)


def _times_zero(times, y):
    """e^x * y for y = ±0: exactly ±0, with the derivative e^x (returning y itself would give
    d/dy = 1); where e^x overflows (inf * 0 = nan) the value is y."""
    scaled = times(y)
    return torch.where(_isnan(scaled), y, scaled)


@register(aten.exp.default, derivative=lambda g, z, w: g * w.conj())
def _cexp(x, y):
    # exp(x + iy) = e^x cos y + (e^x sin y) i
    # y = ±0: exactly e^x ± 0i (no inf * 0 = nan for large x: exp(100+0j) = inf+0j);
    # x = ±inf with y = inf/nan: +inf + nan i, or ±0 ± 0i (C99 G.6.3.1, glibc)
    times = _scaled_exp(x)
    re = times(torch.cos(y))
    im = torch.where(y == 0, _times_zero(times, y), times(torch.sin(y)))
    inf_x = _isinf(x) & ~_isfinite(y)
    re = torch.where(inf_x, torch.where(x > 0, x, 0.0), re)
    im = torch.where(inf_x, torch.where(x > 0, y - y, _copysign0(y)), im)
    return re, im


def _log_abs(x, y):
    """log|x + iy|: log(hypot) with exact power-of-2 scaling for huge and subnormal |z|;
    near |z| = 1, 0.5 log1p((m-1)(m+1) + n^2) (m = max(|x|,|y|), n = min) keeps the relative
    precision of the small result."""
    fi = torch.finfo(x.dtype)
    ax, ay = torch.abs(x), torch.abs(y)
    m, n = torch.maximum(ax, ay), torch.minimum(ax, ay)
    up = 2.0 ** (_mantissa_bits(fi) + 2)
    scale = torch.where(m < fi.tiny, up, torch.where(m > fi.max / 4, 0.25, 1.0))
    h = torch.hypot(x * scale, y * scale)
    far = torch.log(h) - torch.log(scale)
    near = (m > 0.5) & (m < 2.0) & (n < 1.0)
    ms, ns = torch.where(near, m, 1.0), torch.where(near, n, 0.0)
    close = 0.5 * torch.log1p((ms - 1.0) * (ms + 1.0) + ns * ns)
    return torch.where(near, close, far)


@register(aten.log.default, derivative=lambda g, z, w: g / z.conj())
def _clog(x, y):
    # log(x + iy) = log|z| + atan2(y, x) i   (branch cut on the negative real axis: ±0 picks ±pi)
    return _log_abs(x, y), torch.atan2(y, x)


@register(aten.sqrt.default, derivative=lambda g, z, w: g / (2 * w.conj()))
def _csqrt(x, y):
    # Kahan: t = sqrt((|x| + hypot(x, y)) / 2);
    #   x >= 0: sqrt z = t + (y / 2t) i;   x < 0: sqrt z = |y| / 2t + copysign(t, y) i
    # scaled by 1/4 (t x 2) near the float max and by 4^k (t x 2^-k) for subnormals;
    # z = ±0 ± 0i gives +0 ± 0i; y = ±inf gives +inf ± inf i for every x (C99 G.6.4.2)
    fi = torch.finfo(x.dtype)
    ax = torch.abs(x)
    m = torch.maximum(ax, torch.abs(y))
    k = (_mantissa_bits(fi) + 3) // 2
    scale = torch.where(m < fi.tiny, 4.0**k, torch.where(m > fi.max / 4, 0.25, 1.0))
    back = torch.where(m < fi.tiny, 2.0**-k, torch.where(m > fi.max / 4, 2.0, 1.0))
    t = torch.sqrt((ax * scale + torch.hypot(x * scale, y * scale)) * 0.5) * back
    zero = t == 0
    half = y / (2.0 * torch.where(zero, 1.0, t))
    right = x >= 0
    re = torch.where(right, t, torch.abs(half))
    im = torch.where(right, half, torch.copysign(t, y))
    inf_y = _isinf(y)
    re = torch.where(inf_y, torch.abs(y), re)
    im = torch.where(inf_y, y, im)
    return re, im


def _crecip(x, y):
    # 1 / (x + iy), Smith's division as eager's complex division
    return cdiv(torch.ones_like(x), None, x, y)


@register(aten.rsqrt.default, derivative=lambda g, z, w: -0.5 * g * (w * w * w).conj())
def _crsqrt(x, y):
    # rsqrt z = 1 / sqrt z  (eager: one divided by the complex sqrt)
    return _crecip(*_csqrt(x, y))


@register(aten.log1p.default, derivative=lambda g, z, w: g / (z + 1).conj())
def _clog1p(x, y):
    # eager's CPU formula (c10, after numpy and Kahan): u = 1 + z, then
    #   log1p z = z where u == 1;  log u where u - 1 == z exactly;
    #   otherwise log(u) * (z / (u - 1)): the quotient corrects the rounding of 1 + z,
    # so |z| ~ 1e-8 keeps full relative precision
    ux = 1.0 + x
    dx = ux - 1.0
    one = (ux == 1) & (y == 0)
    exact = (dx == x) & (y == y)  # noqa: PLR0124  (y == y: y is not NaN, vectorized as above)
    lr, li = _clog(ux, y)
    qr, qi = cdiv(x, y, torch.where(one, 1.0, dx), y)
    cr, ci = cmul(lr, li, qr, qi)
    re = torch.where(one, x, torch.where(exact, lr, cr))
    im = torch.where(one, y, torch.where(exact, li, ci))
    return re, im


@register(aten.expm1.default, derivative=lambda g, z, w: g * (w.conj() + 1))
def _cexpm1(x, y):
    # expm1(z) = (expm1(x) cos y - 2 sin^2(y/2)) + (e^x sin y) i   (c10's formula: no cancellation
    # near 0); y = ±0 gives exactly ±0i; beyond log(max), expm1(x) = e^x (scaled, no overflow)
    times = _scaled_exp(x)
    big = x > _log_max(x)
    s = torch.sin(0.5 * y)
    re = torch.where(big, times(torch.cos(y)), torch.expm1(torch.where(big, 0.0, x)) * torch.cos(y) - 2.0 * s * s)
    im = torch.where(y == 0, _times_zero(times, y), times(torch.sin(y)))
    return re, im


@register(aten.exp2.default, derivative=lambda g, z, w: g * w.conj() * LN2)
def _cexp2(x, y):
    # 2^z = exp(z ln 2)  (eager: exp of ln2 * z)
    return _cexp(LN2 * x, LN2 * y)


def _clog_base(base_log: float):
    def kernel(x, y):
        # log_b z = log z / ln b, each part divided by the real ln b
        re, im = _clog(x, y)
        return re / base_log, im / base_log

    return kernel


register(aten.log2.default, derivative=lambda g, z, w: g / (z.conj() * LN2))(_clog_base(LN2))
register(aten.log10.default, derivative=lambda g, z, w: g / (z.conj() * LN10))(_clog_base(LN10))


# ---- hyperbolic and trigonometric --------------------------------------------------------


def _hyp_times(x, c, odd: bool):
    """sinh(x) c (odd) or cosh(x) c, with no overflow of sinh/cosh where the product is finite.

    One expm1 serves both (a complex sin/cos needs sinh and cosh of the same x, and the
    compiler computes the shared expm1 once): with m = expm1(|x|) and e = m + 1,
    sinh|x| = (m + m/e) / 2 (no cancellation near 0) and cosh x = (e + 1/e) / 2. Beyond
    log(max), |sinh x| = cosh x = e^|x| / 2, computed as (e' c/2) e' with e' = e^(|x|/2)."""
    ax = torch.abs(x)
    big = ax > _log_max(x) - LN2
    m = torch.expm1(torch.where(big, 0.5 * ax, ax))
    e = m + 1.0
    inverse = 1.0 / torch.where(big, 1.0, e)
    if odd:
        plain = torch.copysign(0.5 * (m + m * inverse), x) * c
    else:
        plain = (0.5 * (e + inverse)) * c
    half = torch.where(big, e, 1.0)  # e^(|x|/2) on the big lanes; 1 elsewhere (double where)
    scaled = (half * (0.5 * c)) * half
    if odd:
        scaled = torch.where(x < 0, -scaled, scaled)
    return torch.where(big, scaled, plain)


def _nonfinite_inf_x(x, y):
    # x = ±inf and y = inf/nan: sinh, cosh = +inf + nan i (C99: ±inf, sign unspecified)
    return _isinf(x) & ~_isfinite(y)


@register(aten.sinh.default, derivative=lambda g, z, w: g * _cosh(z).conj())
def _csinh(x, y):
    # sinh(x + iy) = sinh x cos y + (cosh x sin y) i
    # y = ±0: exactly ±0i; x = ±0 with y inf/nan: ±0 + nan i (glibc)
    re = _hyp_times(x, torch.cos(y), odd=True)
    im = torch.where(y == 0, y, _hyp_times(x, torch.sin(y), odd=False))
    re = torch.where((x == 0) & ~_isfinite(y), x, re)
    special = _nonfinite_inf_x(x, y)
    return torch.where(special, torch.abs(x), re), torch.where(special, y - y, im)


@register(aten.cosh.default, derivative=lambda g, z, w: g * _sinh(z).conj())
def _ccosh(x, y):
    # cosh(x + iy) = cosh x cos y + (sinh x sin y) i
    # y = ±0: imaginary part ±0 with the sign of sinh(x) * y (nan x: y); x = ±0 with y inf/nan:
    # nan + 0i (glibc)
    re = _hyp_times(x, torch.cos(y), odd=False)
    im = _hyp_times(x, torch.sin(y), odd=True)
    negative_x = _signbit(x) & ~_isnan(x)
    im = torch.where(y == 0, torch.where(negative_x, -y, y), im)
    im = torch.where((x == 0) & ~_isfinite(y), torch.zeros_like(y), im)
    special = _nonfinite_inf_x(x, y)
    return torch.where(special, torch.abs(x), re), torch.where(special, y - y, im)


@register(aten.tanh.default, derivative=lambda g, z, w: g * (1 - w * w).conj())
def _ctanh(x, y):
    # tanh(x + iy) = (sinh x cosh x + (sin y cos y) i) / (sinh^2 x + cos^2 y)     (glibc's form;
    # sinh^2 x is dropped where it is below cos^2 y * eps); for |x| > log(max)/2:
    # sign(x) + (4 sin y cos y e^(-2|x|)) i, so tanh(50) = 1 exactly, never inf/inf.
    # x = ±0: real part x; y = ±0: imaginary part y; x = ±inf with y inf/nan: ±1 ± 0i (glibc)
    fi = torch.finfo(x.dtype)
    s, c = torch.sin(y), torch.cos(y)
    ax = torch.abs(x)
    big = ax > 0.5 * _log_max(x)
    xs = torch.where(big, 0.0, x)
    sh, ch = torch.sinh(xs), torch.cosh(xs)
    den = torch.where(torch.abs(sh) > torch.abs(c) * fi.eps, sh * sh + c * c, c * c)
    re = torch.where(big, torch.copysign(torch.ones_like(x), x), sh * ch / den)
    im = torch.where(big, 4.0 * s * c * torch.exp(-2.0 * ax), s * c / den)
    im = torch.where(_isinf(x) & ~_isfinite(y), _copysign0(y), im)
    # nan x, or finite x with y inf/nan: nan + nan i (glibc)
    undefined = ~_isinf(x) & ~(_isfinite(x) & _isfinite(y))
    re, im = torch.where(undefined, torch.nan, re), torch.where(undefined, torch.nan, im)
    return torch.where(x == 0, x, re), torch.where(y == 0, y, im)




@register(aten.sin.default, derivative=lambda g, z, w: g * _cos(z).conj())
def _csin(x, y):
    # sin z = -i sinh(iz); where C99 leaves the sign of an infinite imaginary part open
    # (nan real part), glibc's csin gives +inf
    re, im = _rotated(_csinh)(x, y)
    return re, torch.where(_isnan(re) & _isinf(im), torch.abs(im), im)


# tan z = -i tanh(iz)
register(aten.tan.default, derivative=lambda g, z, w: g * (1 + w * w).conj())(_rotated(_ctanh))


@register(aten.cos.default, derivative=lambda g, z, w: g * -_sin(z).conj())
def _ccos(x, y):
    # cos z = cosh(iz), iz = -y + ix
    return _ccosh(-y, x)


# ---- inverse functions ------------------------------------------------------------------


def _big(x, y):
    """Lanes where |z| is so large (or inf/nan) that the inverse functions use their
    asymptotic forms (error ~1/|z|^2, far below eps); the others get x = y = 0."""
    limit = 2.0 ** (math.ceil(math.log2(torch.finfo(x.dtype).max)) // 2 - 2)
    big = ~(torch.maximum(torch.abs(x), torch.abs(y)) <= limit)
    return big, torch.where(big, 0.0, x), torch.where(big, 0.0, y)


def _log2z(big, x, y):
    """log|2z| on the big lanes (the others get log 2)."""
    return _log_abs(torch.where(big, x, 1.0), torch.where(big, y, 0.0)) + LN2


@register(aten.asin.default, derivative=lambda g, z, w: g * _rsqrt(-z * z + 1).conj())
def _casin(x, y):
    # Kahan: asin z = atan2(x, Re(sqrt(1-z) sqrt(1+z))) + asinh(Im(conj(sqrt(1-z)) sqrt(1+z))) i
    # (1 - z = (1-x) - yi keeps the signed zero of y, which selects the side of the branch cut:
    # asin(2+0j) = pi/2 + 1.317i, asin(2-0j) = pi/2 - 1.317i);
    # |z| huge, inf or nan: asin z = atan2(x, |y|) + copysign(log|2z|, y) i  (C99 casin)
    big, xn, yn = _big(x, y)
    ar, ai = _csqrt(1.0 - xn, -yn)
    br, bi = _csqrt(1.0 + xn, yn)
    re = torch.atan2(xn, ar * br - ai * bi)
    im = torch.asinh(ar * bi - ai * br)
    big_re = torch.where(x == 0, x, torch.atan2(x, torch.abs(y)))
    big_im = torch.copysign(_log2z(big, x, y), y)
    return torch.where(big, big_re, re), torch.where(big, big_im, im)


@register(aten.acos.default, derivative=lambda g, z, w: g * -_rsqrt(-z * z + 1).conj())
def _cacos(x, y):
    # Kahan: acos z = 2 atan2(Re sqrt(1-z), Re sqrt(1+z)) + asinh(Im(conj(sqrt(1+z)) sqrt(1-z))) i
    # |z| huge, inf or nan: acos z = atan2(|y|, x) - copysign(log|2z|, y) i  (pi/2 where x = 0)
    big, xn, yn = _big(x, y)
    ar, ai = _csqrt(1.0 - xn, -yn)
    br, bi = _csqrt(1.0 + xn, yn)
    re = 2.0 * torch.atan2(ar, br)
    im = torch.asinh(br * ai - bi * ar)
    big_re = torch.where(x == 0, torch.full_like(x, HALF_PI), torch.atan2(torch.abs(y), x))
    big_im = -torch.copysign(_log2z(big, x, y), y)
    return torch.where(big, big_re, re), torch.where(big, big_im, im)


@register(aten.acosh.default, derivative=lambda g, z, w: g * (_rsqrt(z + 1) * _rsqrt(z - 1)).conj())
def _cacosh(x, y):
    # Kahan: acosh z = asinh(Re(conj(sqrt(z-1)) sqrt(z+1))) + 2 atan2(Im sqrt(z-1), Re sqrt(z+1)) i
    # |z| huge, inf or nan: acosh z = log|2z| + atan2(y, x) i  (pi/2 for ±0 + nan i)
    big, xn, yn = _big(x, y)
    ar, ai = _csqrt(xn - 1.0, yn)
    br, bi = _csqrt(xn + 1.0, yn)
    re = torch.asinh(ar * br + ai * bi)
    im = 2.0 * torch.atan2(ai, br)
    big_im = torch.where((x == 0) & _isnan(y), torch.full_like(y, HALF_PI), torch.atan2(y, x))
    return torch.where(big, _log2z(big, x, y), re), torch.where(big, big_im, im)


@register(aten.atanh.default, derivative=lambda g, z, w: g * 1 / (1 - z * z).conj())
def _catanh(x, y):
    # atanh z = log(((1+x)^2 + y^2) / ((1-x)^2 + y^2)) / 4 + atan2(2y, (1-x)(1+x) - y^2) / 2 i
    # real part as glibc: 0.25 log(f) where the quotient f < 1/2, else 0.25 log1p(4x / den)
    # (no cancellation near z = 0 or near -1); y^2 below eps^4 dropped, and for |x| = 1 with
    # |y| < eps^2 (y^2 would underflow): sign(x) (ln 2 - log|y|) / 2.  atanh(1+0j) = inf + 0i;
    # ±0 in y picks the side of the cut beyond ±1.
    # |z| huge, inf or nan: atanh z = 1/z + copysign(pi/2, y) i, Re(1/z) = (x/|z|)/|z| (C99 catanh)
    eps = torch.finfo(x.dtype).eps
    big, xn, yn = _big(x, y)
    tiny_y = torch.abs(yn) < eps * eps
    y2 = torch.where(tiny_y, 0.0, yn * yn)
    one_minus, one_plus = 1.0 - xn, 1.0 + xn
    num, den = one_plus * one_plus + y2, one_minus * one_minus + y2
    f = num / den
    small_f = f < 0.5
    pole = (torch.abs(xn) == 1) & tiny_y
    # one log serves the pole lanes (log|y|) and the other small-f lanes (log f)
    logged = torch.log(torch.where(pole, torch.abs(yn), torch.where(small_f, f, 1.0)))
    re = 0.25 * torch.where(small_f, logged, torch.log1p(4.0 * xn / torch.where(small_f, 1.0, den)))
    re = torch.where(pole, torch.copysign(torch.full_like(x, 0.5), xn) * (LN2 - logged), re)
    im = 0.5 * torch.atan2(2.0 * yn, one_minus * one_plus - yn * yn)
    h = torch.hypot(torch.where(big, x, 1.0), torch.where(big, y, 0.0))
    big_re = torch.where(_isinf(h), _copysign0(x), (x / h) / h)
    nan_im = (_isnan(x) & ~_isinf(y)) | _isnan(y)
    big_im = torch.where(nan_im, torch.nan, torch.copysign(torch.full_like(y, HALF_PI), y))
    re = torch.where(big, big_re, re)
    return torch.where(x == 0, x, re), torch.where(big, big_im, im)


# asinh z = -i asin(iz)
register(aten.asinh.default, derivative=lambda g, z, w: g * _rsqrt(z * z + 1).conj())(_rotated(_casin))
# atan z = -i atanh(iz)
register(aten.atan.default, derivative=lambda g, z, w: g / (z * z + 1).conj())(_rotated(_catanh))


# ---- sigmoid, sinc ---------------------------------------------------------------------


@register(aten.sigmoid.default, derivative=lambda g, z, w: g * ((1 - w) * w).conj())
def _sigmoid(x, y):
    # sigmoid(z) = 1 / (1 + exp(-z))
    er, ei = _cexp(-x, -y)
    return cdiv(torch.ones_like(er), None, 1.0 + er, ei)


def _sinc_derivative(g, z, w):
    # (pi z cos(pi z) - sin(pi z)) / (pi z^2), and 0 at z = 0
    pz, sq = z * PI, z * z * PI
    out = g * ((pz * _cos(pz) - _sin(pz)) / sq).conj()
    return select((sq.re == 0) & (sq.im == 0), 0.0, out)


@register(aten.sinc.default, derivative=_sinc_derivative)
def _sinc(x, y):
    # sinc(z) = sin(pi z) / (pi z), and 1 at z = 0 (eager's kernel)
    zero = (x == 0) & (y == 0)
    px, py = PI * torch.where(zero, 1.0, x), PI * y
    re, im = cdiv(*_csin(px, py), px, py)
    return torch.where(zero, 1.0, re), torch.where(zero, 0.0, im)


def logaddexp_parts(ax, ay, bx, by):
    # (also each step of logcumsumexp, realify/rules/reductions.py)
    # log(e^a + e^b) = max + log1p(exp(min - max)), min/max by real part (eager's kernel);
    # any nan: nan + nan i; equal infinite real parts: min for -inf, log(e^a + e^b) for +inf
    a_min = ax < bx
    lo_x, lo_y = torch.where(a_min, ax, bx), torch.where(a_min, ay, by)
    hi_x, hi_y = torch.where(a_min, bx, ax), torch.where(a_min, by, ay)
    same_inf = _isinf(lo_x) & (lo_x == hi_x)
    safe = ~same_inf
    dx, dy = torch.where(safe, lo_x - hi_x, 0.0), torch.where(safe, lo_y - hi_y, 0.0)
    lr, li = _clog1p(*_cexp(dx, dy))
    re, im = lr + hi_x, li + hi_y
    # +inf == +inf: log(exp(a) + exp(b))
    e1, e2 = _cexp(torch.where(safe, 0.0, lo_x), lo_y), _cexp(torch.where(safe, 0.0, hi_x), hi_y)
    inf_re, inf_im = _clog(e1[0] + e2[0], e1[1] + e2[1])
    re = torch.where(same_inf, torch.where(lo_x < 0, lo_x, inf_re), re)
    im = torch.where(same_inf, torch.where(lo_x < 0, lo_y, inf_im), im)
    nan = _isnan(ax) | _isnan(ay) | _isnan(bx) | _isnan(by)
    return torch.where(nan, torch.nan, re), torch.where(nan, torch.nan, im)


def _logaddexp_grad(inputs, w, g, _):
    # eager's formulas: g / conj(1 + exp(b - a)) for a, g / conj(1 + exp(a - b)) for b
    a, b = inputs
    return [g / (1 + _exp(b - a)).conj(), g / (1 + _exp(a - b)).conj()]


_LOGADDEXP = Formula("logaddexp", lambda parts, _: logaddexp_parts(*parts), _logaddexp_grad)


@register(aten.logaddexp.default)
@promoted("self", "other")
def logaddexp(self, other):
    return apply(_LOGADDEXP, _filled(self), _filled(other))


# ---- powers -----------------------------------------------------------------------------


def _cmul_c99(a, b, c, d):
    """(a + bi)(c + di) with C99 Annex G's recovery of infinities (gcc's __muldc3), which the
    C library's cpow uses: where both parts come out nan although a factor is infinite (or a
    product overflowed), infinite factors are boxed to ±1, nan parts set to ±0 and the
    product recomputed times inf."""
    x, y = a * c - b * d, a * d + b * c
    z_inf = _isinf(a) | _isinf(b)
    w_inf = _isinf(c) | _isinf(d)

    def box(p, cond):  # an infinite factor's parts become ±1/±0
        return torch.where(cond, torch.copysign(_isinf(p).to(p.dtype), p), p)

    def zero_nan(p, cond):  # the other factor's nan parts become ±0
        return torch.where(cond & _isnan(p), _copysign0(p), p)

    a, b, c, d = box(a, z_inf), box(b, z_inf), zero_nan(c, z_inf), zero_nan(d, z_inf)
    a, b, c, d = zero_nan(a, w_inf), zero_nan(b, w_inf), box(c, w_inf), box(d, w_inf)
    overflow = ~(z_inf | w_inf) & (_isinf(a * c) | _isinf(b * d) | _isinf(a * d) | _isinf(b * c))
    a, b, c, d = (zero_nan(p, overflow) for p in (a, b, c, d))
    recalc = _isnan(x) & _isnan(y) & (z_inf | w_inf | overflow)
    # the recovered values are ±inf/nan: no gradient flows through them (inf * 0 would be nan)
    rx, ry = (math.inf * (a * c - b * d)).detach(), (math.inf * (a * d + b * c)).detach()
    return torch.where(recalc, rx, x), torch.where(recalc, ry, y)


def _cpow(lr, li, wr, wi):
    # z^w = exp(w log z)  (the C library's cpow, which eager calls; no special case for z = 0:
    # pow(0j, 0j tensor) = nan + nan i); parts are tensors of one shape or Python numbers
    ref = next(p for p in (wr, wi, lr, li) if isinstance(p, torch.Tensor))
    wr, wi, lr, li = (p if isinstance(p, torch.Tensor) else torch.full_like(ref, p) for p in (wr, wi, lr, li))
    return _cexp(*_cmul_c99(wr, wi, lr, li))


def _pow_number(x, y, exponent):
    """z^e for a Python number e. Eager's special cases: z^0 = 1 (even for nan z), z^1 = z;
    exponents 1/2, -1/2, -1 use the sqrt/rsqrt/reciprocal kernels; 2, 3, -2 multiply out:
    z*z, z*z*z, 1/(z*z)."""
    special = {0.5: _csqrt, -0.5: _crsqrt, -1: _crecip}
    if exponent == 0:
        return torch.ones_like(x), torch.zeros_like(x)
    if exponent == 1:
        return x, y
    for value, kernel in special.items():
        if exponent == value:
            return kernel(x, y)
    if exponent in (2, 3, -2):
        re, im = cmul(x, y, x, y)
        if exponent == 3:
            re, im = cmul(re, im, x, y)
        if exponent == -2:
            re, im = _crecip(re, im)
        return re, im
    e = complex(exponent)
    return _cpow(*_clog(x, y), e.real, e.imag)


def _pow_number_grad(inputs, w, g, constants):
    # eager's formula: 0 for e = 0, else g conj(e z^(e-1))
    (z,), e = inputs, complex(*constants)
    if e == 0:
        return [C(torch.zeros_like(g.re), torch.zeros_like(g.im))]
    return [g * (e * apply(_POW_NUMBER, z, constants=((e - 1).real, (e - 1).imag))).conj()]


def _pow_grad(inputs, w, g, _):
    # eager's formulas: base: 0 where e = 0, else g conj(e z^(e-1));
    # exponent: g conj(w log z), and 0 where z = 0 and e is real and >= 0
    z, e = inputs
    base = select((e.re == 0) & (e.im == 0), 0.0, g * (e * apply(_POW, z, e - 1)).conj())
    zero_base = (z.re == 0) & (z.im == 0) & (e.im == 0) & (e.re >= 0)
    return [base, g * select(zero_base, 0.0, w * _log(z)).conj()]


def _pow_base_grad(inputs, w, g, log_base):
    # eager's formula for number ** tensor: g conj(w log(number)), 0 where the number is 0 and
    # e is real and >= 0
    (e,) = inputs
    zero_base = (log_base[0] == -math.inf) & (e.im == 0) & (e.re >= 0)
    return [g * select(zero_base, 0.0, w * C(*log_base)).conj()]


_POW_NUMBER = Formula("pow_number", lambda parts, e: _pow_number(*parts, complex(*e)), _pow_number_grad)
_POW = Formula("pow", lambda parts, _: _cpow(*_clog(*parts[:2]), *parts[2:]), _pow_grad)
_POW_BASE = Formula("pow_base", lambda parts, log_base: _cpow(*log_base, *parts), _pow_base_grad)


def _ones(like, dtype):
    rd = real_dtype(dtype)
    shape_of = parts(like)[0]
    return complex_like(torch.ones_like(shape_of, dtype=rd), torch.zeros_like(shape_of, dtype=rd), dtype)


@register(aten.pow.Tensor_Tensor)
@promoted("self", "exponent")
def pow_tensor_tensor(self, exponent):
    return apply(_POW, _filled(self), _filled(exponent))


@register(aten.pow.Tensor_Scalar)
@promoted("self", "exponent")
def pow_tensor_scalar(self, exponent):
    er, ei = exponent
    return apply(_POW_NUMBER, _filled(self), constants=(er, 0.0 if ei is None else ei))


@register(aten.pow.Scalar)
def pow_scalar(self, exponent):
    # number ^ tensor: 1^w = 1, otherwise exp(w log(number))
    dtype = result_dtype(self, exponent)
    if isinstance(self, numbers.Number) and self == 1:
        return _ones(exponent, dtype)
    # log of the number, in double precision (eager rounds the number to the tensor's dtype first)
    b = complex(self)
    magnitude = abs(b)
    log_base = (math.log(magnitude) if magnitude != 0 else -math.inf, math.atan2(b.imag, b.real))
    return complex_like(*apply(_POW_BASE, C(*_xy(exponent, real_dtype(dtype))), constants=log_base), dtype)
