"""Complex-specific ops: parts, conjugation, magnitude/phase, layout views, copies, casts."""

from __future__ import annotations

import builtins

import torch

from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import real_dtype
from ..runtime.ops import fusion_barrier, stop_gradient, straight_through
from . import register, register_each
from ._derivative import C
from ._operands import complex_like, make_complex, on_device, parts, partwise, stacked_pairs
from ._registry import lookup

aten = torch.ops.aten


@register(aten.real.default)
def real(self):
    return parts(self)[0]


@register(aten.imag.default)
def imag(self):
    return parts(self)[1]


@register(aten.conj.default, aten._conj.default, aten.conj_physical.default, aten._conj_physical.default,
          aten._conj_copy.default)
def conj(self):
    # conj(a + bi) = a - bi
    if isinstance(self, builtins.complex):  # AOTAutograd's backward of a product with a Python scalar
        return self.conjugate()
    re, im = parts(self)
    return ComplexTensor(re, -im)


@register(aten.resolve_conj.default, aten.resolve_neg.default, aten.alias.default, aten.lift_fresh.default)
def identity(self):
    # planar tensors never carry lazy conj/neg bits
    return self


@register(aten._neg_view.default, aten._neg_view_copy.default)
def neg_view(self):
    re, im = parts(self)
    return ComplexTensor(-re, -im)


# each part through the op: detach, copy, a fusion barrier, a stop-gradient (realify/runtime/ops.py)
register_each((aten.detach.default, aten.alias_copy.default, aten.lift_fresh_copy.default, fusion_barrier._opoverload,
               stop_gradient._opoverload), partwise)


@register(straight_through._opoverload)
def straight_through_parts(value, source):
    # value's parts, each with its gradient going to the same part of source (an exact zero part
    # of source takes none; one of value is a zero that passes the gradient on)
    (vr, vi), (sr, si) = parts(value), parts(source)
    re, im = (v if s is None else straight_through(torch.zeros_like(s) if v is None else v, s)
              for v, s in ((vr, sr), (vi, si)))
    return ComplexTensor(re, im)


@register(aten.clone.default)
def clone(self, *, memory_format=None):
    re, im = parts(self)
    return ComplexTensor(re.clone(memory_format=memory_format), im.clone(memory_format=memory_format))


def _magnitude(re, im):
    # |a + bi| = hypot(a, b): no overflow for |a|, |b| near the float max;
    # at 0 both parts are swapped for (1, 0) before hypot and the result selected back to 0
    # ("double where"), so that derivative formulas using |z| are not 0/0 there
    zero = (re == 0) & (im == 0)
    magnitude = torch.hypot(torch.where(zero, 1.0, re), torch.where(zero, 0.0, im))
    return torch.where(zero, 0.0, magnitude)


def _abs_derivative(g, z, w):
    # eager's formula: g sgn(z), the real g promoted to complex (so nan where |z| is infinite)
    return C(g, torch.zeros_like(g)) * lookup(aten.sgn.default).of(z)


register(aten.abs.default, derivative=_abs_derivative, real_operand=torch.abs)(_magnitude)


def _angle_derivative(g, z, w):
    # eager's formula: 0 at z = 0, else g z / |z|^2 i (so nan where |z| is infinite)
    magnitude = _magnitude(z.re, z.im)
    out = C(g, torch.zeros_like(g)) * z / C(magnitude * magnitude, torch.zeros_like(g)) * 1j
    zero = (z.re == 0) & (z.im == 0)
    return C(torch.where(zero, 0.0, out.re), torch.where(zero, 0.0, out.im))


@register(aten.angle.default, derivative=_angle_derivative, real_operand=lambda x: torch.atan2(torch.zeros_like(x), x))
def _angle(re, im):
    # arg(a + bi) = atan2(b, a), signed zeros on the branch cut as in C99
    return torch.atan2(im, re)


def _sgn_derivative(g, z, s):
    # eager's formula: (g - s^2 conj(g)) / (2 |z|), and 0 at z = 0
    magnitude = _magnitude(z.re, z.im)
    out = (g - (s * s) * g.conj()) / C(2.0 * magnitude, torch.zeros_like(magnitude))
    zero = magnitude == 0
    return C(torch.where(zero, 0.0, out.re), torch.where(zero, 0.0, out.im))


@register(aten.sgn.default, derivative=_sgn_derivative)
def _sgn(re, im):
    # sgn(z) = z / |z|, and 0 for z = 0
    magnitude = torch.hypot(re, im)
    zero = magnitude == 0
    safe = torch.where(zero, 1.0, magnitude)
    return torch.where(zero, 0.0, re / safe), torch.where(zero, 0.0, im / safe)


@register(aten.polar.default)
def polar(abs, angle):
    # polar(r, t) = r cos t + (r sin t) i
    return ComplexTensor(abs * torch.cos(angle), abs * torch.sin(angle))


@register(aten.complex.default)
def complex(real, imag):
    return make_complex(real, imag)


@register(aten.view_as_real.default, aten.view_as_real_copy.default)
def view_as_real(self):
    # (..., ) complex -> (..., 2) real, interleaved (the pairs themselves where known)
    return stacked_pairs(self)


@register(aten.view_as_complex.default, aten.view_as_complex_copy.default)
def view_as_complex(self):
    # (..., 2) real -> (...) complex
    if self.dim() == 0 or self.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex needs a last dimension of size 2, got shape {tuple(self.shape)}")
    return ComplexTensor.from_pairs(self)


@register(aten.copy_.default)
def copy_(self, src, non_blocking=False):
    if isinstance(self, ComplexTensor):
        re, im = parts(src, self.re.dtype)
        self.re.copy_(re)
        if im is None:
            self.im.zero_()
        else:
            self.im.copy_(im)
        return self
    if self.dtype.is_complex:  # an ordinary complex destination
        return self.copy_(src.to_complex() if isinstance(src, ComplexTensor) else src)
    # complex -> real copy keeps the real part, as eager does
    return self.copy_(parts(src)[0])


@register(aten.copy.default)
def copy(self, src, non_blocking=False):
    # functional copy: values of src (a tensor of any dtype, or a number) with the dtype/shape of self
    dtype = self.dtype
    part_dtype = real_dtype(dtype) if dtype.is_complex else None
    # src's values move to self's device, as copy_ moves them
    re, im = (p if p is None else on_device(p, self.device, non_blocking) if isinstance(p, torch.Tensor)
              else torch.full((), p, dtype=part_dtype, device=self.device) for p in parts(src, part_dtype))
    if not dtype.is_complex:
        # a real destination takes the real part; where() keeps the overwritten tensor in
        # autograd's graph with a zero gradient, eager's connection (aten.copy has no derivative)
        keep_src = torch.ones((), dtype=torch.bool, device=self.device)
        return torch.where(keep_src, re.to(dtype), self).expand(self.shape).clone()
    return complex_like(re.expand(self.shape), None if im is None else im.expand(self.shape), dtype, self)


@register(aten._to_copy.default)
def to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
            memory_format=None):
    re, im = parts(self)
    target = dtype or self.dtype
    kw = {k: v for k, v in dict(device=device, memory_format=memory_format).items() if v is not None}
    if target.is_complex:
        rd = real_dtype(target)
        re = re.to(dtype=rd, **kw)
        im = torch.zeros_like(re) if im is None else im.to(dtype=rd, **kw)
        return ComplexTensor(re, im)
    if target == torch.bool:
        # a complex number is truthy when either part is nonzero
        return (re != 0) | (im != 0)
    # complex -> real keeps the real part (eager warns that the imaginary part is discarded)
    return re.to(dtype=target, **kw)


@register(aten.isreal.default)
def isreal(self):
    return parts(self)[1] == 0




@register(aten.sym_size.int)
def sym_size(self, dim):
    return parts(self)[0].size(dim)


@register(aten.sym_numel.default)
def sym_numel(self):
    return parts(self)[0].numel()


@register(aten.sym_stride.int)
def sym_stride(self, dim):
    return self.stride(dim)


@register(aten.sym_storage_offset.default)
def sym_storage_offset(self):
    return 0


_PYTHON_KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)


def _inplace_view(func):
    def rule(self, *args):
        # an in-place view changes metadata only: apply it to both parts, and to the wrapper's
        # own sizes/strides with the Python key excluded (the plain metadata kernel runs)
        func(self.re, *args)
        func(self.im, *args)
        with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEY):
            func(self, *args)
        return self

    return rule


register_each((aten.transpose_.default, aten.squeeze_.default, aten.squeeze_.dim, aten.squeeze_.dims,
               aten.unsqueeze_.default, aten.t_.default, aten.swapdims_.default, aten.swapaxes_.default),
              _inplace_view)


@register(aten._local_scalar_dense.default)
def item(self):
    # z.item() -> Python complex
    re, im = parts(self)
    return builtins.complex(re.item(), 0.0 if im is None else im.item())


@register(aten.equal.default)
def equal(self, other):
    # equal shapes and equal parts (a real operand has a zero imaginary part)
    a, b = parts(self), parts(other)
    if tuple(self.shape) != tuple(other.shape):
        return False
    zeros = torch.zeros_like(a[0])
    return bool(torch.equal(a[0], b[0]) and torch.equal(a[1] if a[1] is not None else zeros,
                                                       b[1] if b[1] is not None else zeros))
