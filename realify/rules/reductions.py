"""Reductions: sum, mean, prod, cumsum, cumprod, var/std (and *_mean), vector norms, dist,
all/any/count_nonzero, logsumexp, trace.

Sums are linear, so they reduce each part separately. Products of complex numbers are not:
``prod`` is ``realify::complex_prod``, whose order of factors (which decides its special
values) each graph's target chooses (realify/passes/product_order.py), and ``cumprod`` is
eager's running product up to 32 entries and a log-step (Hillis–Steele) scan beyond, with
static shapes only, so it traces with make_fx. The variance of complex
data is real: ``var(z) = var(re) + var(im)`` (eager computes it that way too). Norms work on
``|z| = hypot(re, im)``. See docs/numerics.md, "Reductions".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import real_dtype
from ..runtime.ops import complex_prod
from ..runtime.products import FOLD_LIMIT, times_one
from . import register, register_each
from ._algebra import cmul, psub
from ._operands import filled_parts, parts, partwise, promoted

aten = torch.ops.aten


# ---- helpers --------------------------------------------------------------------------------


def _cast(self: Any, dtype: torch.dtype | None) -> Any:
    """The input of a reduction with ``dtype=``: eager casts first; a real dtype keeps the real part."""
    if dtype is None:
        return self
    re, im = parts(self, real_dtype(dtype))
    if not dtype.is_complex:
        return re
    return ComplexTensor(re, torch.zeros_like(re) if im is None else im)


def _abs(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    # |a + bi| = hypot(a, b) (no overflow), with a zero gradient at 0 (eager's sgn(0) = 0)
    # instead of hypot's 0/0: the "double where" keeps NaN out of the unselected lane.
    zero = (re == 0) & (im == 0)
    return torch.where(zero, 0.0, torch.hypot(torch.where(zero, 1.0, re), im))


def _nonzero(self: Any) -> torch.Tensor:
    # a complex number is "nonzero" when either part is (so all(1j) is True)
    re, im = parts(self)
    return re != 0 if im is None else (re != 0) | (im != 0)


def _dims(dim: Any, ndim: int) -> list[int]:
    """Reduced dims as a sorted list of non-negative ints (None or [] means all)."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted(d % max(ndim, 1) for d in dims)


def _narrow_parts(re: torch.Tensor, im: torch.Tensor, dim: int, start: int, length: int):
    return re.narrow(dim, start, length), im.narrow(dim, start, length)


# ---- sums ---------------------------------------------------------------------------------


def _with_dtype(op) -> Callable:
    """Rule for a sum-like (linear) reduction ``op(self, ..., dtype=None)``: partwise."""
    each_part = partwise(op)

    def rule(self, *args, dtype=None, **kwargs):
        x = _cast(self, dtype)
        if not isinstance(x, ComplexTensor):
            return op(x, *args, **kwargs)
        # op(a + bi) = op(a) + op(b) i  for a linear op
        return each_part(x, *args, **kwargs)

    rule.__name__ = f"reduction_{op}"
    return rule


register_each((aten.sum.default, aten.sum.dim_IntList, aten.mean.default, aten.mean.dim, aten.cumsum.default),
              _with_dtype)

# trace(A) = trace(re A) + trace(im A) i
register(aten.trace.default)(partwise(aten.trace.default))


# ---- products ------------------------------------------------------------------------------


@register(aten.prod.default, aten.prod.dim_int)
def prod(self, dim=None, keepdim=False, *, dtype=None):
    x = _cast(self, dtype)
    if not isinstance(x, ComplexTensor):
        return x.prod(dtype=dtype) if dim is None else x.prod(dim, keepdim, dtype=dtype)
    re, im = x.re, x.im
    if dim is None:
        re, im, dim, keepdim = re.reshape(-1), im.reshape(-1), 0, False
    scalar = re.dim() == 0
    if scalar:
        re, im = re.reshape(1), im.reshape(1)
    dim = dim % re.dim()
    # the order of the factors decides special values and depends on the device: the op is
    # expanded into real ops by each graph's target (realify/passes/product_order.py)
    re, im = complex_prod(re, im, dim)
    if scalar:
        re, im = re.reshape(()), im.reshape(())
    elif not keepdim:
        re, im = re.squeeze(dim), im.squeeze(dim)
    return ComplexTensor(re, im)


@register(aten.cumprod.default)
def cumprod(self, dim, *, dtype=None):
    # Up to FOLD_LIMIT entries: eager's running product. Longer: a Hillis–Steele scan: after
    # the round with offset s, entry k holds z_{k-2s+1} ... z_k; z_k <- z_k * z_{k-s} for
    # k >= s, so log2(n) rounds of complex multiplication.
    x = _cast(self, dtype)
    if not isinstance(x, ComplexTensor):
        return x.cumprod(dim)
    re, im = x.re, x.im
    dim = dim % max(re.dim(), 1)
    n = re.shape[dim] if re.dim() else 0
    if n == 0:
        # empty, or a 0-d tensor, which eager copies (no multiplication by 1 + 0i)
        return ComplexTensor(re.clone(), im.clone())
    # eager's running product starts at 1 + 0i: z_0 -> (1 + 0i) z_0 (see times_one)
    fr, fi = times_one(*_narrow_parts(re, im, dim, 0, 1))
    if n <= FOLD_LIMIT:
        # eager's order, ((1 z0) z1) z2 ..., so that infinite and NaN parts come out as eager's
        # (realify/runtime/products.py); one step per entry
        outs = [(fr, fi)]
        for k in range(1, n):
            outs.append(cmul(*outs[-1], *_narrow_parts(re, im, dim, k, 1)))
        return ComplexTensor(torch.cat([o[0] for o in outs], dim), torch.cat([o[1] for o in outs], dim))
    re, im = torch.cat([fr, re.narrow(dim, 1, n - 1)], dim), torch.cat([fi, im.narrow(dim, 1, n - 1)], dim)
    offset = 1
    while offset < n:
        hr, hi = _narrow_parts(re, im, dim, 0, offset)  # the first entries are already final
        # (a + bi)(c + di) = (ac - bd) + (ad + bc)i
        tr, ti = cmul(*_narrow_parts(re, im, dim, offset, n - offset), *_narrow_parts(re, im, dim, 0, n - offset))
        re, im = torch.cat([hr, tr], dim), torch.cat([hi, ti], dim)
        offset *= 2
    return ComplexTensor(re, im)


# ---- variance ----------------------------------------------------------------------------


def _variance(self, dim, correction, keepdim) -> torch.Tensor:
    # var(z) = sum |z - mean z|^2 / (N - correction) = var(re) + var(im)
    re, im = filled_parts(self)
    return (torch.var(re, dim, correction=correction, keepdim=keepdim)
            + torch.var(im, dim, correction=correction, keepdim=keepdim))


def _mean(self, dim, keepdim) -> ComplexTensor:
    re, im = filled_parts(self)
    return ComplexTensor(torch.mean(re, dim, keepdim=keepdim), torch.mean(im, dim, keepdim=keepdim))


@register(aten.var.correction)
def var(self, dim=None, *, correction=None, keepdim=False):
    return _variance(self, dim, correction, keepdim)


@register(aten.std.correction)
def std(self, dim=None, *, correction=None, keepdim=False):
    # std(z) = sqrt(var(re) + var(im))
    return torch.sqrt(_variance(self, dim, correction, keepdim))


@register(aten.var_mean.correction)
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    return var(self, dim, correction=correction, keepdim=keepdim), _mean(self, dim, keepdim)


@register(aten.std_mean.correction)
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    return std(self, dim, correction=correction, keepdim=keepdim), _mean(self, dim, keepdim)


# ---- norms -------------------------------------------------------------------------------


def _check_norm_dtype(dtype: torch.dtype | None) -> None:
    if dtype is not None and not dtype.is_complex:
        raise RuntimeError(f"linalg.vector_norm: dtype should be complex for complex inputs, but got {dtype}")


def _vector_norm_of_parts(re, im, ord, dim, keepdim) -> torch.Tensor:
    # ||z||_p = || |z| ||_p with |z| = hypot(re, im); every ord (inf, -inf, 0, fractional,
    # negative) is then the real norm of the magnitudes.
    return torch.linalg.vector_norm(_abs(re, im), ord, dim, keepdim)


@register(aten.linalg_vector_norm.default)
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    _check_norm_dtype(dtype)
    rd = real_dtype(dtype or self.dtype)
    re, im = parts(self, rd)
    if im is None:
        im = torch.zeros_like(re)
    return _vector_norm_of_parts(re, im, ord, dim, keepdim)


@register(aten.norm.Scalar, aten.norm.ScalarOpt_dim, aten.norm.ScalarOpt_dtype, aten.norm.ScalarOpt_dim_dtype)
def norm(self, p=2, dim=None, keepdim=False, *, dtype=None):
    return linalg_vector_norm(self, 2 if p is None else p, dim, keepdim, dtype=dtype)


@register(aten.dist.default)
@promoted("self", "other", complex_result=False)
def dist(self, other, p=2):
    # dist(a, b) = ||a - b||_p over all entries
    (ar, ai), (br, bi) = self, other
    re, im = torch.broadcast_tensors(psub(ar, br), _zero_if_none(psub(ai, bi), ar, br))
    return _vector_norm_of_parts(re, im, p, None, False)


def _zero_if_none(p, *likes) -> torch.Tensor:
    if p is not None:
        return p
    return torch.zeros(torch.broadcast_shapes(*(x.shape for x in likes)), dtype=likes[0].dtype, device=likes[0].device)


# ---- truth reductions ------------------------------------------------------------------


def on_nonzero(op) -> Callable:
    def rule(self, *args, **kwargs):
        return op(_nonzero(self), *args, **kwargs)

    rule.__name__ = f"nonzero_{op}"
    return rule


register_each((aten.all.default, aten.all.dim, aten.all.dims, aten.any.default, aten.any.dim, aten.any.dims,
               aten.count_nonzero.default, aten.count_nonzero.dim_IntList), on_nonzero)


# ---- logsumexp -------------------------------------------------------------------------


@register(aten.logsumexp.default)
def logsumexp(self, dim, keepdim=False):
    # log sum exp(z) = m + log sum exp(z - m) with m = max re z (0 where it is infinite),
    # exp(x + yi) = e^x cos y + (e^x sin y) i,
    # log(s) = log|s| + arg(s) i
    re, im = filled_parts(self)
    dims = _dims(dim, re.dim())
    if re.numel() == 0:
        shift = torch.zeros_like(re.sum(dims, keepdim=True))
    else:
        shift = torch.amax(re, dims, keepdim=True) if re.dim() else re
        shift = torch.where(torch.isinf(shift), 0.0, shift)
    magnitude = torch.exp(re - shift)
    er = magnitude * torch.cos(im)
    # an infinite real term stays real: exp(inf + 0i) = inf + 0i, not inf * sin(0) = nan
    # (selected only there, so finite lanes keep the gradient e^x cos y)
    ei = torch.where((im == 0) & torch.isinf(magnitude), im, magnitude * torch.sin(im))
    sr, si = er.sum(dims, keepdim=keepdim), ei.sum(dims, keepdim=keepdim)
    if not keepdim:
        shift = shift.reshape(sr.shape)
    return ComplexTensor(torch.log(torch.hypot(sr, si)) + shift, torch.atan2(si, sr))


