"""Reductions: sum, mean, prod, cumsum, cumprod, logcumsumexp, var/std (and *_mean), vector
norms, dist, all/any/count_nonzero, logsumexp, trace.

Sums are linear, so they reduce each part separately. Products of complex numbers are not:
``prod`` is ``realify::complex_prod``, whose order of factors (which decides its special
values) each graph's target chooses (realify/passes/product_order.py), and ``cumprod`` is
eager's running product up to 32 entries and a log-step (Hillis–Steele) scan beyond, with
static shapes only, so it traces with make_fx. The variance of complex
data is real: ``var(z) = var(re) + var(im)`` (eager computes it that way too). Norms work on
``|z| = hypot(re, im)``. See docs/numerics.md, "Reductions".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import canonicalize_dim

from ..runtime.complex_lapack import pairs_op
from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import real_dtype
from ..runtime.ops import complex_prod
from ..runtime.products import FOLD_LIMIT, times_one
from . import register, register_each
from ._algebra import cmul, psub
from ._derivative import C, Formula, apply, select
from ._operands import filled_parts, parts, partwise, promoted
from ._registry import lookup
from .pointwise import logaddexp_parts

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


def inclusive_scan(step: Callable, state: tuple[torch.Tensor, ...], dim: int) -> tuple[torch.Tensor, ...]:
    """A Hillis–Steele scan along ``dim`` of tensors that step together (the parts of one
    value): after the round with offset s, entry k holds the step-fold of entries k-2s+1 ... k,
    through s_k <- step(s_k, s_{k-s}) for k >= s (the later operand first). log2(n) rounds of
    whole-tensor ops, which trace, fuse and export; ``step`` must be associative."""
    n = state[0].shape[dim]
    offset = 1
    while offset < n:
        later = step(*(t.narrow(dim, offset, n - offset) for t in state),
                     *(t.narrow(dim, 0, n - offset) for t in state))
        # the first ``offset`` entries are already final
        state = tuple(torch.cat([t.narrow(dim, 0, offset), u], dim) for t, u in zip(state, later))
        offset *= 2
    return state


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
    if not isinstance(re.shape[dim], int):
        re, im = _on_symbolic_size(aten.prod.dim_int, re, im, dim, True)
    else:
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
    x = _cast(self, dtype)
    if not isinstance(x, ComplexTensor):
        return x.cumprod(dim)
    re, im = x.re, x.im
    dim = dim % max(re.dim(), 1)
    n = re.shape[dim] if re.dim() else 0
    if not isinstance(n, int):
        return ComplexTensor(*_on_symbolic_size(aten.cumprod.default, re, im, dim))
    if n == 0:
        # empty, or a 0-d tensor, which eager copies (no multiplication by 1 + 0i)
        return ComplexTensor(re.clone(), im.clone())
    out = apply(_CUMPROD, C(re, im), constants=[dim])
    assert isinstance(out, C)
    return ComplexTensor(out.re, out.im)


def _cumprod_kernel(parts: Any, constants: Any) -> list[torch.Tensor]:
    # Up to FOLD_LIMIT entries: eager's running product. Longer: a scan of complex
    # multiplication (inclusive_scan: log2(n) rounds).
    (re, im), dim = parts, int(constants[0])
    n = re.shape[dim]
    # eager's running product starts at 1 + 0i: z_0 -> (1 + 0i) z_0 (see times_one)
    fr, fi = times_one(*_narrow_parts(re, im, dim, 0, 1))
    if n <= FOLD_LIMIT:
        # eager's order, ((1 z0) z1) z2 ..., so that infinite and NaN parts come out as eager's
        # (realify/runtime/products.py); one step per entry
        outs = [(fr, fi)]
        for k in range(1, n):
            outs.append(cmul(*outs[-1], *_narrow_parts(re, im, dim, k, 1)))
        return [torch.cat([o[0] for o in outs], dim), torch.cat([o[1] for o in outs], dim)]
    re, im = torch.cat([fr, re.narrow(dim, 1, n - 1)], dim), torch.cat([fi, im.narrow(dim, 1, n - 1)], dim)
    # (a + bi)(c + di) = (ac - bd) + (ad + bc)i
    return list(inclusive_scan(cmul, (re, im), dim))


def _reversed_cumsum(z: C, dim: int) -> C:
    return C(z.re.flip(dim).cumsum(dim).flip(dim), z.im.flip(dim).cumsum(dim).flip(dim))


def _cumprod_grad(inputs: Any, w: Any, g: Any, constants: Any) -> list[C]:
    # eager's cumprod_backward, out_j = prod_{i<=j} x_i, its zeros special-cased:
    # - one entry: the gradient itself;
    # - before a row's first zero: dL/dx_i = sum_{j>=i} g_j conj(out_j) / conj(x_i);
    # - at the first zero k: conj(prod_{i<k} x_i) sum_{j>=k} g_j conj(prod_{k<i<=j} x_i);
    # - after it: 0 (no 0 * inf: an infinite entry after a zero leaves the gradient 0).
    # The products run through the op itself, so second derivatives are the function's too.
    (x,), dim = inputs, int(constants[0])
    if x.re.shape[dim] == 1:
        return [g]
    zero = (x.re == 0) & (x.im == 0)
    zeros_so_far = zero.to(torch.int32).cumsum(dim)
    before, first = zeros_so_far == 0, zero & (zeros_so_far == 1)
    suffix = _reversed_cumsum(select(before, g * w.conj(), 0.0), dim)
    grad_before = suffix / select(before, x, 1.0).conj()
    later = apply(_CUMPROD, select((zeros_so_far >= 1) & ~first, x, 1.0), constants=[dim])
    assert isinstance(later, C)
    terms = select(zeros_so_far >= 1, g * later.conj(), 0.0)
    total = C(terms.re.sum(dim, keepdim=True), terms.im.sum(dim, keepdim=True))
    # the product of the entries before each one: out shifted by one, 1 + 0i first
    n = w.re.shape[dim]
    earlier = C(torch.cat([torch.ones_like(w.re.narrow(dim, 0, 1)), w.re.narrow(dim, 0, n - 1)], dim),
                torch.cat([torch.zeros_like(w.im.narrow(dim, 0, 1)), w.im.narrow(dim, 0, n - 1)], dim))
    return [select(before, grad_before, select(first, earlier.conj() * total, 0.0))]


# one realify::pointwise op, as logcumsumexp's: the running product for the values, eager's
# formula for autograd
_CUMPROD = Formula("cumprod", _cumprod_kernel, _cumprod_grad)


def _on_symbolic_size(op, re: torch.Tensor, im: torch.Tensor, dim: int, *args) -> tuple[torch.Tensor, torch.Tensor]:
    """A product along a dim of symbolic size as eager's own kernel on the pairs
    (realify/runtime/complex_lapack.py): eager's values and derivative at every size. The
    real forms above unroll over the entries (eager's order), which a symbolic size cannot
    give without fixing it; realify.onnx has no form for it (NO_ONNX_FORM)."""
    out = pairs_op(op)([True], torch.stack([re, im], -1), dim, *args)
    return out[..., 0], out[..., 1]


def _affine(a2, b2, a1, b1):
    # m -> a2 (a1 m + b1) + b2: the composition of two steps of m_k = a_k m_(k-1) + b_k
    return a2 * a1, a2 * b1 + b2


def logcumsumexp_parts(re: torch.Tensor, im: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Complex logcumsumexp along ``dim`` (of size >= 1) in real arithmetic, for runtimes that
    cannot call eager's kernel (realify.onnx).

    out_k = log(e^x_0 + ... + e^x_k). Eager's loop: c = -inf + 0i, c <- logaddexp(x_k, c),
    out_k = c, where logaddexp(a, b) = max + log1p(exp(min - max)), min/max by real part
    (logaddexp_parts is eager's step, nan and infinities included). On finite values the step
    is associative, so here it is a scan (log2(n) rounds) in the input's precision (ONNX
    Runtime has no double-precision Atan, in which eager's CPU loop accumulates complex64),
    the first entry meeting -inf + 0i first as in eager. Then the imaginary parts are moved
    to eager's branch (_eagers_branch), and a nan part spreads to every later entry as in
    eager's loop. With a +inf real part or an infinite imaginary part the step is not
    associative: past such an entry non-finite results may differ from eager's
    (docs/numerics.md)."""
    head_re = re.narrow(dim, 0, 1)
    start = (torch.full_like(head_re, float("-inf")), torch.zeros_like(head_re))
    first = logaddexp_parts(*_narrow_parts(re, im, dim, 0, 1), *start)
    n = re.shape[dim]
    scanned = tuple(torch.cat([head, part.narrow(dim, 1, n - 1)], dim) for head, part in zip(first, (re, im)))
    out_re, out_im = inclusive_scan(logaddexp_parts, scanned, dim)
    out_im = _eagers_branch(re, im, out_re, out_im, start, dim)
    # eager's step gives nan + nan i once its running value holds a nan part (inf + nan i
    # from two infinite terms, say): every entry after the first such one
    has_nan = (out_re.isnan() | out_im.isnan()).to(out_re.dtype)
    after_nan = (torch.cumsum(has_nan, dim) - has_nan) > 0
    out_re, out_im = torch.where(after_nan, math.nan, out_re), torch.where(after_nan, math.nan, out_im)
    return out_re, out_im


def _eagers_branch(x_re, x_im, out_re, out_im, start, dim: int) -> torch.Tensor:
    """The scan's imaginary parts moved by the multiple of 2 pi that gives eager's.

    A logarithm's imaginary part is fixed only up to 2 pi, and eager's running value picks it
    by its path: each step's result is the larger term's imaginary part (by real part) plus
    the angle of 1 + exp(min - max), which lies in [-pi/2, pi/2]. So out_k is within pi/2 of
    x_k's imaginary part where x_k is the larger term (a reset) and of out_(k-1)'s otherwise,
    which the scan's values, grouped differently, need not be. Eager's out_k is the scan's plus
    2 pi m_k, where m_k = t_k at a reset and m_(k-1) + t_k otherwise, t_k the whole turns from
    the scan's out_k to that reference: a recurrence m_k = a_k m_(k-1) + t_k (a_k = 0 at a
    reset, 1 otherwise), itself a scan. Where the real parts tie to rounding and the phases
    differ by more than pi, the two steps give values 2 pi apart, and which one eager takes is
    decided by its rounding."""
    prev_re = torch.cat([start[0], out_re.narrow(dim, 0, out_re.shape[dim] - 1)], dim)
    prev_im = torch.cat([start[1], out_im.narrow(dim, 0, out_im.shape[dim] - 1)], dim)
    # eager's min/max: x_k is the larger term unless its real part is below the running
    # value's; -inf meeting -inf gives the running value (eager's min)
    reset = (x_re >= prev_re) & (x_re > float("-inf"))
    reference = torch.where(reset, x_im, prev_im)
    turns = torch.round((reference - out_im) / (2 * math.pi))
    turns = torch.where(turns.isfinite(), turns, 0.0)  # nan and inf parts take no branch
    _, m = inclusive_scan(_affine, ((~reset).to(turns.dtype), turns), dim)
    return out_im + (2 * math.pi) * m


def _logcumsumexp_kernel(parts: Any, constants: Any) -> list[torch.Tensor]:
    # eager's own kernel on the pairs (realify/runtime/complex_lapack.py): its sequential loop
    # fixes the imaginary part's multiple of 2 pi and every special value, and a scan cannot
    # reproduce the loop where infinities meet (logcumsumexp_parts). realify.onnx writes the
    # op as logcumsumexp_parts
    re, im = parts
    out = pairs_op(aten.logcumsumexp.default)([True], torch.stack([re, im], -1), int(constants[0]))
    # two new tensors: the parts of one pairs tensor alias each other, which a custom op's
    # outputs may not (a one-element part is contiguous, so .contiguous() would not copy it)
    return [part.clone(memory_format=torch.contiguous_format) for part in out.unbind(-1)]


def _flip(z: C, dim: int) -> C:
    return C(z.re.flip(dim), z.im.flip(dim))


def _logcumsumexp_grad(inputs: Any, w: Any, g: Any, constants: Any) -> list[C]:
    # dL/dx_j = sum_{k>=j} g_k conj(exp(x_j - out_k)), as eager's logcumsumexp_backward computes
    # it: conj(exp(reversed_logcumsumexp(log(conj g) - out) + x)), a reversed scan of the same
    # rule (so second derivatives are the function's too); g = 0 gives log 0 = -inf, exp -> 0.
    (z,), dim = inputs, int(constants[0])
    exp, log = lookup(aten.exp.default).of, lookup(aten.log.default).of
    reversed_scan = _flip(apply(_LOGCUMSUMEXP, _flip(log(g.conj()) - w, dim), constants=[dim]), dim)
    return [exp(reversed_scan + z).conj()]


# one realify::pointwise op (not pointwise, but its kernel maps the parts to the parts): eager's
# kernel for the values, eager's derivative formula for autograd, written with the op itself so
# that second derivatives are eager's too
_LOGCUMSUMEXP = Formula("logcumsumexp", _logcumsumexp_kernel, _logcumsumexp_grad)


@register(aten.logcumsumexp.default)
def logcumsumexp(self, dim):
    if not isinstance(self, ComplexTensor):
        return self.logcumsumexp(dim)
    re, im = self.re, self.im
    dim = canonicalize_dim(re.dim(), dim)  # eager's IndexError for a dim out of range
    if re.dim() == 0 or re.numel() == 0:
        # a 0-d tensor is copied (no step with -inf + 0i), as eager does; empty stays empty
        return ComplexTensor(re.clone(), im.clone())
    out = apply(_LOGCUMSUMEXP, C(re, im), constants=[dim])
    assert isinstance(out, C)
    return ComplexTensor(out.re, out.im)


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
    # std(z) = sqrt(var(re) + var(im)), whose derivative eager takes as 0 where std = 0 (a
    # constant row: sqrt' is infinite there and var's is 0, their product NaN): the root of a
    # variance of 0 is taken of 1 and replaced by 0, so that no infinity reaches the product
    variance = _variance(self, dim, correction, keepdim)
    zero = variance == 0
    return torch.where(zero, 0.0, torch.sqrt(torch.where(zero, 1.0, variance)))


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


