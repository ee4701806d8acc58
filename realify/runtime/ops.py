"""realify's custom ops: FFTs and a complex product that work on (re, im) pairs.

A real-only graph still needs FFTs. These ops take and return real tensors, so a graph
holding them has no complex dtype anywhere, and a real-only compiler sees them as opaque
(extern) kernels. A complex *input* is one real ``(..., 2)`` tensor of (re, im) pairs, the
``torch.view_as_real`` layout that the FFT libraries read natively: the kernel that computes
it writes the pairs directly (stride-2 stores keep the kernel vectorized). A complex *output*
comes back planar, as contiguous real and imaginary parts: consumers of an FFT are often
heavy pointwise kernels (an STFT mask's abs, angle and exp), and a stride-2 load of pairs
would make Inductor's CPU code run the whole fused kernel as a scalar loop (the STFT mask
model's training step; docs/benchmarks.md, "Measurements behind design choices").

- ``realify::fft_c2c(x, dim, normalization, forward) -> (re, im)``        (aten._fft_c2c)
- ``realify::fft_r2c(x, dim, normalization, onesided) -> (re, im)``       (aten._fft_r2c)
- ``realify::fft_c2r(x, dim, normalization, last_dim_size) -> real``      (aten._fft_c2r)
- ``realify::fft_c2c_pairs``, ``realify::fft_r2c_pairs``: the same transforms with the result
  as contiguous pairs, where nothing but pairs is made of it (realify/passes/layout.py decides: an
  FFT whose result leaves the graph, through a graph break for instance, costs no copy)
- ``realify::cmul_pairs(a, b, conj_a, conj_b) -> pairs``                   (complex product)
- ``realify::cmm_pairs(a, b, conj_a, conj_b) -> pairs``        (complex matrix product, mm/bmm)
- ``realify::complex_prod(re, im, dim) -> (re, im)``  (complex product along ``dim``, kept)
- ``realify::fusion_barrier(x) -> x``         (a value Inductor stores rather than recomputes)
- ``realify::snapshot(x) -> x``                (a copy no compiler pass removes as a no-op)
- ``realify::stop_gradient(x) -> x``           (no gradient flows back: the program's detach)
- ``realify::straight_through(value, source) -> value``  (the gradient goes to ``source``)

``dim`` counts the dimensions of the complex value (the trailing pair dimension excluded) and
``normalization`` is aten's code: 0 none, 1 by 1/sqrt(n), 2 by 1/n (whatever the direction).
The arguments otherwise mirror the aten ops that every ``torch.fft`` function lowers to.

Each op has a fake implementation (tracing, export) and an autograd formula written with these
same ops, so backward graphs stay real as well. Gradients follow PyTorch's convention for
complex values: the gradient of a real loss with respect to a complex value ``z`` is
``dL/dRe z + i dL/dIm z``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .products import neutral_product

aten = torch.ops.aten

__all__ = [
    "cmm_pairs",
    "cmul_pairs",
    "complex_prod",
    "fft_c2c",
    "fft_c2c_pairs",
    "fft_c2r",
    "fft_r2c",
    "fft_r2c_pairs",
    "fusion_barrier",
    "snapshot",
    "stop_gradient",
    "straight_through",
]


def _as_pairs(x: torch.Tensor) -> torch.Tensor:
    """x (..., 2) viewable as complex: unit last stride, even other strides and offset."""
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        x = x.contiguous()
    return x


def _to_pairs(z: torch.Tensor) -> torch.Tensor:
    """A complex result as contiguous pairs (the layout the fake implementations promise;
    the FFT libraries may return other strides)."""
    return torch.view_as_real(z).contiguous()


def _fresh_parts(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous real and imaginary parts of a complex result (fresh copies: custom op
    outputs may not alias each other)."""
    parts = torch.view_as_real(z)
    return (parts[..., 0].clone(memory_format=torch.contiguous_format),
            parts[..., 1].clone(memory_format=torch.contiguous_format))


def _pair(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    return torch.stack([re, im], dim=-1)


def _wrap(ndim: int, dim: Sequence[int]) -> list[int]:
    # the aten primitives expect non-negative dims (torch.fft.* wraps them before lowering)
    return [d % ndim for d in dim]


def _last(ndim: int, dim: Sequence[int]) -> int:
    """The (wrapped) last transformed dimension."""
    return dim[-1] % ndim


def _onesided_size(n):
    return n // 2 + 1


# ---- c2c ------------------------------------------------------------------------------------


@torch.library.custom_op("realify::fft_c2c", mutates_args=())
def fft_c2c(x: torch.Tensor, dim: list[int], normalization: int,
            forward: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # X[k] = scale * sum_n x[n] exp(-+2 pi i k n / N) over each dim in ``dim``
    z = torch.view_as_complex(_as_pairs(x))
    return _fresh_parts(aten._fft_c2c.default(z, _wrap(z.dim(), dim), normalization, forward))


@fft_c2c.register_fake
def _(x, dim, normalization, forward):
    return x.new_empty(x.shape[:-1]), x.new_empty(x.shape[:-1])


def _c2c_setup(ctx, inputs, output):
    _, ctx.dim, ctx.normalization, ctx.forward = inputs


def _c2c_backward(ctx, grad_re, grad_im):
    # y = s F x is C-linear with F symmetric, so grad_x = conj(s F)^T grad_y = s conj(F) grad_y:
    # the transform in the other direction with the same (real) normalization, whose pairs
    # are the gradient of the pairs x.
    return fft_c2c_pairs(_pair(grad_re, grad_im), ctx.dim, ctx.normalization, not ctx.forward), None, None, None


fft_c2c.register_autograd(_c2c_backward, setup_context=_c2c_setup)


@torch.library.custom_op("realify::fft_c2c_pairs", mutates_args=())
def fft_c2c_pairs(x: torch.Tensor, dim: list[int], normalization: int, forward: bool) -> torch.Tensor:
    # fft_c2c, the result as (re, im) pairs
    z = torch.view_as_complex(_as_pairs(x))
    return _to_pairs(aten._fft_c2c.default(z, _wrap(z.dim(), dim), normalization, forward))


@fft_c2c_pairs.register_fake
def _(x, dim, normalization, forward):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _c2c_pairs_backward(ctx, grad):
    # as fft_c2c's: the transform in the other direction, same normalization
    return fft_c2c_pairs(grad, ctx.dim, ctx.normalization, not ctx.forward), None, None, None


fft_c2c_pairs.register_autograd(_c2c_pairs_backward, setup_context=_c2c_setup)


# ---- r2c ------------------------------------------------------------------------------------


@torch.library.custom_op("realify::fft_r2c", mutates_args=())
def fft_r2c(x: torch.Tensor, dim: list[int], normalization: int,
            onesided: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # X[k] = scale * sum_n x[n] exp(-2 pi i k n / N); onesided keeps k = 0 .. N//2 of the last dim
    return _fresh_parts(aten._fft_r2c.default(x, _wrap(x.dim(), dim), normalization, onesided))


def _r2c_shape(x: torch.Tensor, dim: Sequence[int], onesided: bool) -> list:
    shape = list(x.shape)
    if onesided:
        last = _last(x.dim(), dim)
        shape[last] = _onesided_size(shape[last])
    return shape


@fft_r2c.register_fake
def _(x, dim, normalization, onesided):
    shape = _r2c_shape(x, dim, onesided)
    return x.new_empty(shape), x.new_empty(shape)


def _r2c_setup(ctx, inputs, output):
    x, ctx.dim, ctx.normalization, ctx.onesided = inputs
    ctx.last_size = x.shape[_last(x.dim(), ctx.dim)]


def _r2c_backward(ctx, grad):
    # r2c is the full c2c of a real signal (onesided: bins N//2+1 .. N-1 of the last dim
    # dropped), so grad_x = Re(s conj(F) G), G the gradient zero-padded back to N bins. The
    # real part of that sum counts each bin once; c2r (same normalization) computes it for
    # G's Hermitian completion, which counts bins 1 .. N - (N//2 + 1) twice (with their
    # mirror images) and takes only the real part of the others: so grad_x = c2r(G / 2 on
    # those bins). Half the work of the padded c2c, and a real result.
    if not ctx.onesided:
        g_re, _ = fft_c2c(grad, ctx.dim, ctx.normalization, False)
        return g_re, None, None, None
    half = _mirrored_bins_scale(grad, ctx.dim, ctx.last_size, 0.5)
    return fft_c2r(grad * half, ctx.dim, ctx.normalization, ctx.last_size), None, None, None


def _mirrored_bins_scale(pairs: torch.Tensor, dim: Sequence[int], full: int, value: float) -> torch.Tensor:
    """``value`` on the bins of the last transformed dim that onesided storage holds for two
    bins of the full spectrum (1 .. full - half, each with its mirror image; not bin 0, nor bin
    full/2 for even ``full``), 1 elsewhere; shaped to broadcast against ``pairs`` (``half``
    bins, then the pair dim)."""
    last = _last(pairs.dim() - 1, dim)
    half = pairs.shape[last]
    index = torch.arange(half, device=pairs.device)
    mirrored = (index >= 1) & (index <= full - half)
    scale = torch.where(mirrored, value, 1.0).to(pairs.dtype)
    return scale.reshape([half] + [1] * (pairs.dim() - 1 - last))


fft_r2c.register_autograd(lambda ctx, grad_re, grad_im: _r2c_backward(ctx, _pair(grad_re, grad_im)),
                          setup_context=_r2c_setup)


@torch.library.custom_op("realify::fft_r2c_pairs", mutates_args=())
def fft_r2c_pairs(x: torch.Tensor, dim: list[int], normalization: int, onesided: bool) -> torch.Tensor:
    # fft_r2c, the result as (re, im) pairs
    return _to_pairs(aten._fft_r2c.default(x, _wrap(x.dim(), dim), normalization, onesided))


@fft_r2c_pairs.register_fake
def _(x, dim, normalization, onesided):
    return x.new_empty([*_r2c_shape(x, dim, onesided), 2])


fft_r2c_pairs.register_autograd(_r2c_backward, setup_context=_r2c_setup)


# ---- c2r ------------------------------------------------------------------------------------


@torch.library.custom_op("realify::fft_c2r", mutates_args=())
def fft_c2r(x: torch.Tensor, dim: list[int], normalization: int, last_dim_size: int) -> torch.Tensor:
    # x[n] = scale * sum_k X[k] exp(2 pi i k n / N) with X completed by Hermitian symmetry
    # X[N-k] = conj(X[k]) from the onesided input; N = last_dim_size, the result is real.
    # The input may hold fewer than N//2 + 1 bins along the last dim: the rest are zeros (as
    # torch.fft.irfft's ``n`` pads; realify/passes/fft_bands.py hands over only a band).
    # contiguous, as the fake implementation promises (aten's c2r may return other strides)
    z = torch.view_as_complex(_as_pairs(x))
    last = _last(z.dim(), dim)
    missing = _onesided_size(last_dim_size) - z.shape[last]
    if missing > 0:
        z = aten.constant_pad_nd.default(z, [0, 0] * (z.dim() - 1 - last) + [0, missing], 0.0)
    return aten._fft_c2r.default(z, _wrap(z.dim(), dim), normalization, last_dim_size).contiguous()


@fft_c2r.register_fake
def _(x, dim, normalization, last_dim_size):
    shape = list(x.shape[:-1])
    shape[_last(len(shape), dim)] = last_dim_size
    return x.new_empty(shape)


def _c2r_setup(ctx, inputs, output):
    x, ctx.dim, ctx.normalization, _ = inputs
    ctx.bins = x.shape[_last(x.dim() - 1, ctx.dim)]


def _c2r_backward(ctx, grad):
    # c2r = (fill the other half by conjugate symmetry) then backward c2c, keep the real part.
    # Adjoint: forward r2c of the (real) gradient, then accumulate the mirrored half onto the
    # bins it came from: bins 1 .. N - (N//2 + 1) appear twice in the full spectrum, so their
    # gradient doubles (bin 0, and bin N/2 for even N, are their own mirror images). Bins the
    # op padded with zeros are no input: their gradient is dropped.
    g = fft_r2c_pairs(grad, ctx.dim, ctx.normalization, True)
    full = grad.shape[_last(grad.dim(), ctx.dim)]
    g = g * _mirrored_bins_scale(g, ctx.dim, full, 2.0)
    return g.narrow(_last(g.dim() - 1, ctx.dim), 0, ctx.bins), None, None, None


fft_c2r.register_autograd(_c2r_backward, setup_context=_c2r_setup)


# ---- complex product on interleaved pairs ---------------------------------------------------
# Real-only compilers vectorize planar arithmetic well but not the stride-2 loads of
# interleaved (re, im) pairs (Inductor's CPU code runs them as scalar loops). Where both
# operands of a complex product already sit interleaved in memory — the rotary-embedding
# pattern view_as_complex(x) * freqs -> view_as_real — this op runs the product on the pairs
# with ATen's vectorized complex kernel instead (realify/passes/layout.py decides when).


@torch.library.custom_op("realify::cmul_pairs", mutates_args=())
def cmul_pairs(a: torch.Tensor, b: torch.Tensor, conj_a: bool, conj_b: bool) -> torch.Tensor:
    # a', b' = conj(a) if conj_a else a, likewise b;  a' b' = (ar br - ai bi) + (ar bi + ai br) i,
    # broadcast; a and b are real (..., 2) tensors of (re, im) pairs, so is the result
    za, zb = torch.view_as_complex(_as_pairs(a)), torch.view_as_complex(_as_pairs(b))
    za, zb = (za.conj() if conj_a else za), (zb.conj() if conj_b else zb)
    return _to_pairs((za * zb).resolve_conj())


@cmul_pairs.register_fake
def _(a, b, conj_a, conj_b):
    shape = torch.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    return a.new_empty((*shape, 2), dtype=torch.promote_types(a.dtype, b.dtype))


def _cmul_pairs_setup(ctx, inputs, output):
    a, b, ctx.conj_a, ctx.conj_b = inputs
    ctx.save_for_backward(a, b)


def _grad_conj_flags(conj_self: bool, conj_other: bool) -> tuple[bool, bool]:
    """For y = x' o' (C-linear in each, x' = conj(x) if conj_self, o' likewise): grad_x' =
    g conj(o'), and grad_x = conj(grad_x') where x' = conj(x), i.e. conj(g) o'. The flags of
    (g, o) in that product: (conj_self, conj_other) if conj_self, else (False, not conj_other)."""
    return (True, conj_other) if conj_self else (False, not conj_other)


def _cmul_pairs_backward(ctx, grad):
    # grad_a = g conj(b') (or conj(g) b'), likewise for b; broadcast dimensions summed back
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = cmul_pairs(grad, b, *_grad_conj_flags(ctx.conj_a, ctx.conj_b)).sum_to_size(a.shape)
    if ctx.needs_input_grad[1]:
        grad_b = cmul_pairs(grad, a, *_grad_conj_flags(ctx.conj_b, ctx.conj_a)).sum_to_size(b.shape)
    return grad_a, grad_b, None, None


cmul_pairs.register_autograd(_cmul_pairs_backward, setup_context=_cmul_pairs_setup)


# ---- complex matrix product on interleaved pairs ------------------------------------------
# Below a measured size, a complex GEMM costs less as BLAS's complex GEMM on the pairs than as
# real GEMMs on planes: splitting the operands into planes and interleaving the result move
# every element through memory, which the 3M method's saved multiplication repays only for
# large products (realify/passes/layout.py decides when).


@torch.library.custom_op("realify::cmm_pairs", mutates_args=())
def cmm_pairs(a: torch.Tensor, b: torch.Tensor, conj_a: bool, conj_b: bool) -> torch.Tensor:
    # a' @ b' with a' = conj(a) if conj_a else a, likewise b: mm on (m, k, 2) and (k, n, 2)
    # pairs, bmm on (batch, m, k, 2) and (batch, k, n, 2); the result is (…, m, n, 2) pairs
    za, zb = torch.view_as_complex(_as_pairs(a)), torch.view_as_complex(_as_pairs(b))
    za, zb = (za.conj() if conj_a else za), (zb.conj() if conj_b else zb)
    return _to_pairs(torch.matmul(za, zb).resolve_conj())


@cmm_pairs.register_fake
def _(a, b, conj_a, conj_b):
    return a.new_empty((*a.shape[:-2], b.shape[-2], 2), dtype=torch.promote_types(a.dtype, b.dtype))


def _cmm_pairs_backward(ctx, grad):
    # y = a' @ b': grad_a = g @ conj(b')^T (or conj(g) @ b'^T), grad_b = conj(a')^T @ g (or
    # a'^T @ conj(g)): the flags of the elementwise product, the factors transposed
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = cmm_pairs(grad, b.transpose(-3, -2), *_grad_conj_flags(ctx.conj_a, ctx.conj_b))
    if ctx.needs_input_grad[1]:
        conj_grad, conj_a = _grad_conj_flags(ctx.conj_b, ctx.conj_a)
        grad_b = cmm_pairs(a.transpose(-3, -2), grad, conj_a, conj_grad)
    return grad_a, grad_b, None, None


cmm_pairs.register_autograd(_cmm_pairs_backward, setup_context=_cmul_pairs_setup)


# ---- complex product along a dimension ------------------------------------------------------
# The order of a product's factors decides its infinite and NaN parts (realify/runtime/products.py),
# and eager's order depends on the device that runs it. The prod rule leaves the product as this
# op; each traced graph expands it into real ops in the order its target asks for
# (realify/passes/product_order.py: the device-neutral order, or eager CPU's vector lanes where
# the compile backend targets a CPU). Run eagerly (the eager front end), it is the device's own
# complex prod.


@torch.library.custom_op("realify::complex_prod", mutates_args=())
def complex_prod(re: torch.Tensor, im: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    if re.dtype in (torch.float32, torch.float64):
        product = torch.view_as_real(torch.complex(re, im).prod(dim, keepdim=True))
        return product[..., 0].clone(), product[..., 1].clone()
    # parts with no complex dtype of their own (bfloat16) or no complex prod kernel (float16)
    return tuple(part.clone() for part in neutral_product(re, im, dim))


@complex_prod.register_fake
def _(re, im, dim):
    shape = list(re.shape)
    shape[dim] = 1
    return re.new_empty(shape), im.new_empty(shape)


def _complex_prod_setup(ctx, inputs, output):
    re, im, ctx.dim = inputs
    ctx.save_for_backward(re, im)


def _complex_prod_backward(ctx, grad_re, grad_im):
    # the derivative of the neutral order's formula (orders differ only where a part is
    # infinite or NaN, where no derivative exists)
    re, im = ctx.saved_tensors
    with torch.enable_grad():
        re, im = re.detach().requires_grad_(), im.detach().requires_grad_()
        grads = torch.autograd.grad(neutral_product(re, im, ctx.dim), (re, im), (grad_re, grad_im))
    return (*grads, None)


complex_prod.register_autograd(_complex_prod_backward, setup_context=_complex_prod_setup)


# ---- fusion barrier -------------------------------------------------------------------------
# Inductor inlines a pointwise value into every reader of it, up to thresholds on reads and
# op counts. A log-depth scan (associative_scan, 2 log2(n) combine steps, each step reading
# the previous one's result twice) makes each inlined value twice as large per level: code
# generation time grows with it, to minutes on a linear recurrence of a few hundred steps. The
# results of a vmapped function (each combine step) pass through this op, which Inductor
# lowers to a stored buffer (realify/inductor.py) and every other consumer drops
# (decompose keeps the op only when asked to, as the compile backend does for Inductor).


def _copy_op(name: str) -> torch._library.custom_ops.CustomOpDef:
    """``realify::<name>(x) -> x``: the value of x in memory of its own (a custom op's output
    may not alias its input); its gradient passes through unchanged. What makes two such ops
    differ is what the compilers do with them."""
    def copy(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    op = torch.library.custom_op(f"realify::{name}", copy, mutates_args=())
    op.register_fake(torch.empty_like)
    op.register_autograd(lambda ctx, grad: grad)
    return op


fusion_barrier = _copy_op("fusion_barrier")


# ---- snapshot ------------------------------------------------------------------------------
# A copy of a value for backward to keep when the value's own memory is written after the
# call (realify/passes/input_writes.py). Inductor removes aten.clone of a graph input as a no-op
# before partitioning, which would leave backward keeping the input itself; this op is not
# removed, and Inductor lowers it to a clone it may still fold into the reads where nothing
# keeps it (realify/inductor.py).


snapshot = _copy_op("snapshot")


# ---- autograd semantics of the captured program --------------------------------------------
# A value the program cut from the gradient path (``detach``, computed with grad disabled)
# passes through ``stop_gradient``; the planarizing trace records it as this op (make_fx
# records ``aten.detach`` as ``aten.alias``, which autograd differentiates through), and
# decompose hands the inner compiler ``aten.detach`` in its place. A write that autograd does
# not see (``with torch.no_grad(): w.mul_(0.9)`` on a tensor that requires grad) leaves the
# tensor's gradient path as it was: its new value reaches later readers through
# ``straight_through(new, old)``, whose gradient goes to the old value unchanged, as eager's
# does (realify/engine/grad_semantics.py).


@torch.library.custom_op("realify::stop_gradient", mutates_args=())
def stop_gradient(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


stop_gradient.register_fake(torch.empty_like)
stop_gradient.register_autograd(lambda ctx, grad: None)


@torch.library.custom_op("realify::straight_through", mutates_args=())
def straight_through(value: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    return value.clone()


@straight_through.register_fake
def _(value, source):
    return torch.empty_like(value)


straight_through.register_autograd(lambda ctx, grad: (None, grad))
