"""Indexing, gathering and scattering: index, gather, take, scatter, index_put, masked ops, nonzero.

Gathers move elements: op(a + bi) = op(a) + op(b) i. Scatters write or accumulate a complex
source into a complex base; writes and sums act on each part separately
(sum (a_k + b_k i) = sum a_k + (sum b_k) i), so :func:`~realify.rules.shape.partwise_at` splits base and source.
A real source has an exactly-zero imaginary part. Products of complex numbers do not split
into parts: ``scatter(reduce="multiply")`` and ``scatter_reduce("prod")`` get their own rule.
"""

from __future__ import annotations

import torch

from ..runtime.complex_tensor import ComplexTensor
from . import register, register_each
from ._algebra import cmul
from ._operands import parts
from .reductions import on_nonzero
from .shape import both_parts, functional_overloads, partwise_at

aten = torch.ops.aten

# gathers: the index arguments are real
register_each(functional_overloads(aten.index, aten._unsafe_index, aten.index_select, aten.gather, aten.take,
                                   aten.masked_scatter_backward), partwise_at)

# scatters of a source given at argument 2 or 3 (a tensor or a scalar fill value)
register_each(functional_overloads(aten.index_put, aten._unsafe_index_put, aten.masked_scatter, aten.put),
              partwise_at, 0, 2)
register_each([*functional_overloads(aten.index_copy, aten.index_fill, aten.scatter_add, aten._unsafe_masked_index,
                                    aten._unsafe_masked_index_put_accumulate),
               aten.scatter.src, aten.scatter.value],
              partwise_at, 0, 3)


@register(aten.index_add.default)
def index_add(self, dim, index, source, *, alpha=1):
    # self[index] += alpha * source, alpha possibly complex: (c + di)(sr + si i)
    if alpha != 1:
        sr, si = parts(source)
        ar, ai = parts(alpha)
        source = _assemble(*cmul(sr, si, ar, ai), like=sr)
    return partwise_at(aten.index_add.default, 0, 3)(self, dim, index, source)


def _assemble(re, im, like):
    if im is None:
        return re
    return ComplexTensor(re if isinstance(re, torch.Tensor) else torch.full_like(like, re), im)


_PRODUCT_REDUCTIONS = {"multiply", "prod"}


@register(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(self, dim, index, src, *, reduce):
    # reduce="add": sum of complex values = sums of the parts
    if reduce in _PRODUCT_REDUCTIONS:
        return _scatter_product(self, dim, index, src, include_self=True)
    op = aten.scatter.reduce if isinstance(src, torch.Tensor) else aten.scatter.value_reduce
    return partwise_at(op, 0, 3)(self, dim, index, src, reduce=reduce)


@register(aten.scatter_reduce.two)
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    # "sum" and "mean" are linear in the values: reduce each part
    if reduce in _PRODUCT_REDUCTIONS:
        return _scatter_product(self, dim, index, src, include_self=include_self)
    if reduce not in ("sum", "mean"):
        raise RuntimeError(f"scatter_reduce(reduce={reduce!r}) is not defined for complex tensors "
                           "(complex numbers have no order); use 'sum', 'mean' or 'prod'")
    return partwise_at(aten.scatter_reduce.two, 0, 3)(self, dim, index, src, reduce, include_self=include_self)


def _scatter_product(self, dim, index, src, *, include_self):
    """self[index[i]] *= src[i] for complex values, duplicates included.

    A product of complex numbers is the product of the magnitudes times cis(sum of angles):
    prod (r_k e^{i t_k}) = (prod r_k) e^{i sum t_k}; both reduce per position with real
    scatter ops. Positions that some index reaches get self * that product, (a + bi)(c + di)
    (or the product alone without include_self); the others keep self exactly.
    """
    base_r, base_i = both_parts(self, self.re.dtype if isinstance(self, ComplexTensor) else self.dtype)
    sr, si = both_parts(src, base_r.dtype)
    if not isinstance(sr, torch.Tensor):
        sr, si = (torch.full(index.shape, p, dtype=base_r.dtype, device=index.device) for p in (sr, si))
    magnitude = torch.hypot(sr, si)
    zero = magnitude == 0
    # atan2(0, 0) has no finite gradient: take the angle of 1 there (the magnitude is 0 anyway)
    angle = torch.atan2(torch.where(zero, 0.0, si), torch.where(zero, 1.0, sr))
    product = torch.ones_like(base_r).scatter_reduce(dim, index, magnitude, "prod")
    turn = torch.zeros_like(base_r).scatter_add(dim, index, angle)
    pr, pi = product * torch.cos(turn), product * torch.sin(turn)
    if include_self:
        pr, pi = cmul(base_r, base_i, pr, pi)
    touched = torch.zeros_like(base_r, dtype=torch.bool).scatter(dim, index, True)
    return ComplexTensor(torch.where(touched, pr, base_r), torch.where(touched, pi, base_i))


# nonzero elements of a complex tensor: (a != 0) | (b != 0), see reductions._nonzero
register_each(functional_overloads(aten.nonzero, aten.nonzero_static, aten.argwhere), on_nonzero)


@register(aten.masked_select.default)
def masked_select(self, mask):
    # masked_select(z, m) = the parts of z read at the flat positions masked_select(p, m) picks
    # from p, the positions of z's elements (p and m broadcast): one real masked_select, whose
    # kernel broadcasts and checks sizes at run time as eager's does (a size that may be 1 is
    # not fixed), and one data-dependent length, where a masked_select per part would give two
    # a trace cannot prove equal
    positions = torch.arange(self.numel(), device=self.device).reshape(self.shape)
    return partwise_at(aten.index_select.default)(self.reshape(-1), 0, aten.masked_select.default(positions, mask))
