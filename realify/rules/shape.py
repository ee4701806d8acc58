"""Views, layout ops, concatenation, padding and the view-inverse ``*_scatter`` ops.

Every op here moves elements without combining them (or combines them linearly, like
``constant_pad_nd`` or ``index_add``), so the rule is the same op on the real and on the
imaginary part:  op(a + bi) = op(a) + op(b) i.  :func:`partwise_at` builds such a rule for ops
that take several complex-capable operands (a base and a source, a list of tensors, a fill
value); the real operands among them get an exactly-zero imaginary part.

Functionalized graphs (what :func:`realify.decompose` sees) use the ``*_copy`` and
``*_scatter`` variants, so each view op is registered together with its copy variant.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef

from ..runtime.complex_tensor import ComplexTensor, outer_storage_offset
from ..runtime.dtypes import real_dtype, scalar_type_name
from . import register, register_each
from ._operands import combine_parts, holds_values, on_device, parts, result_dtype

aten = torch.ops.aten


# ---- shared machinery (indexing.py and creation.py use it too) ----------------------------


def functional_overloads(*packets: OpOverloadPacket) -> list[OpOverload]:
    """Return the functional tensor overloads of each overload packet.

    These are the overloads a rule family registers one rule for, each: the ``out=`` overloads
    are left out (they run the functional rule, then a copy), and so are those whose first
    argument is not a tensor or a list of tensors (a factory's ``Scalar`` overloads).

    Parameters
    ----------
    *packets : OpOverloadPacket
        The ops, as packets such as ``torch.ops.aten.flip``.

    Returns
    -------
    list of OpOverload
        Their functional tensor overloads, packet by packet.

    Raises
    ------
    None
        It only reads the packets' schemas.

    See Also
    --------
    realify.rules.register_each : one rule per overload, built by a factory.

    Examples
    --------
    >>> import torch
    >>> from realify.rules.shape import functional_overloads
    >>> torch.ops.aten.cat.overloads()
    ['default', 'out']
    >>> functional_overloads(torch.ops.aten.cat, torch.ops.aten.flip)
    [<OpOverload(op='aten.cat', overload='default')>, <OpOverload(op='aten.flip', overload='default')>]
    """
    found = []
    for packet in packets:
        for name in packet.overloads():
            op = getattr(packet, name)
            args = op._schema.arguments
            if any(a.is_out for a in args) or not args:
                continue
            if str(args[0].type) not in ("Tensor", "List[Tensor]", "Optional[Tensor]"):
                continue
            found.append(op)
    return found


def _is_operand(x: Any) -> bool:
    # symbolic numbers too: a size dynamo passes as an input (scalar_tensor(n), full(shape, n))
    return isinstance(x, (torch.Tensor, numbers.Number, torch.SymInt, torch.SymFloat))


def both_parts(x: Any, rd: torch.dtype) -> tuple[Any, Any]:
    """(re, im) of one operand cast to ``rd``; a missing imaginary part becomes an exact zero."""
    if isinstance(x, (list, tuple)):
        pairs = [both_parts(e, rd) for e in x]
        return type(x)(p[0] for p in pairs), type(x)(p[1] for p in pairs)
    if not _is_operand(x) or isinstance(x, bool):
        return x, x
    re, im = parts(x, rd)
    if im is None:
        im = torch.zeros_like(re) if isinstance(re, torch.Tensor) else 0
    return re, im


def tensors_in(x: Any) -> list[torch.Tensor]:
    """Return the tensors of ``x``: ``x`` itself, or the tensors of a (nested) list or tuple."""
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in tensors_in(e)]
    return [x] if isinstance(x, torch.Tensor) else []


def partwise_at(op: Callable, *slots: int | str, promote: bool = False) -> Callable:
    """Return a rule that runs ``op`` once on the real and once on the imaginary parts.

    The rule of every op that moves elements without combining them (or combines them
    linearly): ``op(a + bi) = op(a) + op(b) i``. The real operands among the slots get an
    exactly-zero imaginary part.

    Parameters
    ----------
    op : callable
        The op, run on real parts: usually the op the rule is for (what
        :func:`~realify.rules.register_each` passes first).
    *slots : int or str
        The positions (or keyword names) of the complex-capable arguments: tensors, lists of
        tensors, or number fill values; none given means argument 0 (``self``) alone. Every
        other argument is passed to each call unchanged.
    promote : bool, default False
        Give the result the dtype eager's type promotion gives all the slot operands (``cat``,
        ``stack``) rather than the dtype of ``self`` (argument 0).

    Returns
    -------
    callable
        The rule: it takes the op's arguments and returns a ComplexTensor (or a list or tuple
        of them, for an op that returns several), or, where the result dtype is real, ``op``'s
        result on the real parts alone.

    Raises
    ------
    None
        Making the rule raises nothing; the rule raises what ``op`` raises on the parts.

    See Also
    --------
    realify.rules.register_each : registers such a rule for each op of a family.
    functional_overloads : the overloads of a family.

    Notes
    -----
    A real ``self`` that is not promoted keeps its dtype: complex values written into it lose
    their imaginary part, as ``copy_`` does. A complex argument outside the slots only gives a
    shape (``self`` of a ``*_backward`` op): each call gets its real part.

    Examples
    --------
    >>> import torch
    >>> from realify.rules.shape import partwise_at
    >>> flip = partwise_at(torch.ops.aten.flip.default)
    >>> flip(torch.tensor([1 + 2j, 3 - 4j]), [0]).to_complex()
    tensor([3.-4.j, 1.+2.j])

    ``cat`` of a complex and a real tensor: slot 0 is the list, and the result is promoted:

    >>> cat = partwise_at(torch.ops.aten.cat.default, 0, promote=True)
    >>> cat([torch.tensor([1 + 2j]), torch.tensor([3.0], dtype=torch.float64)]).to_complex()
    tensor([1.+2.j, 3.+0.j], dtype=torch.complex128)
    """
    slots = slots or (0,)

    def rule(*args, **kwargs):
        args = list(args)
        values = [kwargs.get(s) if isinstance(s, str) else args[s] if s < len(args) else None for s in slots]
        present = [(s, v) for s, v in zip(slots, values) if v is not None]
        if promote:
            dtype = result_dtype(*tensors_in([v for _, v in present]))
        else:
            self = args[0]
            dtype = self.dtype if isinstance(self, torch.Tensor) else result_dtype(*tensors_in(values))
        rd = real_dtype(dtype)
        split = {s: both_parts(v, rd) for s, v in present}

        def call(k: int):
            # a complex argument outside the slots only gives a shape (``self`` of a *_backward op)
            a = [x.re if isinstance(x, ComplexTensor) else x for x in args]
            kw = {n: x.re if isinstance(x, ComplexTensor) else x for n, x in kwargs.items()}
            for s, pair in split.items():
                if isinstance(s, int):
                    a[s] = pair[k]
                else:
                    kw[s] = pair[k]
            return op(*a, **kw)

        if not dtype.is_complex:
            return call(0)
        return combine_parts(call(0), call(1))

    rule.__name__ = f"planar_{op}"
    return rule


# ---- views and layout: op(a + bi) = op(a) + op(b) i ---------------------------------------

_LAYOUT_PACKETS = (
    # views and their functional *_copy twins
    aten.view, aten._unsafe_view, aten._reshape_alias, aten.reshape, aten.permute, aten.transpose, aten.t,
    aten.expand, aten.squeeze, aten.unsqueeze, aten.flatten, aten.unflatten, aten.slice, aten.select,
    aten.narrow, aten.split, aten.split_with_sizes, aten.unsafe_split, aten.unsafe_split_with_sizes,
    aten.unbind, aten.chunk, aten.unsafe_chunk, aten.tensor_split, aten.diagonal, aten.unfold,
    aten.movedim, aten.view_copy, aten._reshape_copy, aten.permute_copy, aten.transpose_copy, aten.t_copy,
    aten.expand_copy, aten.squeeze_copy, aten.unsqueeze_copy, aten.slice_copy, aten.select_copy,
    aten.narrow_copy, aten.split_copy, aten.split_with_sizes_copy, aten.unbind_copy, aten.diagonal_copy,
    aten.unfold_copy, aten.detach_copy,
    # element moves that copy
    aten.flip, aten.roll, aten.rot90, aten.repeat, aten.tril, aten.triu, aten.diag, aten.diag_embed,
    aten.pixel_shuffle, aten.pixel_unshuffle, aten.channel_shuffle, aten.native_channel_shuffle,
    aten.im2col, aten.col2im, aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d,
    aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d,
    # backward of views and pads: linear in the gradient
    aten.select_backward, aten.slice_backward, aten.diagonal_backward, aten.unfold_backward,
    aten.reflection_pad1d_backward, aten.reflection_pad2d_backward, aten.reflection_pad3d_backward,
    aten.replication_pad1d_backward, aten.replication_pad2d_backward, aten.replication_pad3d_backward,
)
_VIEW_DTYPE = (aten.view.dtype, aten.view_copy.dtype)


register_each([op for op in functional_overloads(*_LAYOUT_PACKETS) if op not in _VIEW_DTYPE], partwise_at)

# constant padding: the pad value's parts pad each part
register_each(functional_overloads(aten.constant_pad_nd), partwise_at, 0, 2)
register_each(functional_overloads(aten.pad), partwise_at, 0, 3)

# lists of tensors: real and complex operands mix, the result dtype is promoted
register_each(functional_overloads(aten.cat, aten.stack, aten._chunk_cat, aten.block_diag, aten.hstack,
                                   aten.vstack, aten.dstack, aten.column_stack), partwise_at, 0, promote=True)

# view-inverse scatters: base and source (a real source has a zero imaginary part)
register_each(functional_overloads(aten.slice_scatter, aten.select_scatter, aten.diagonal_scatter), partwise_at, 0, 1)


@register(*_VIEW_DTYPE)
def view_dtype(self, dtype):
    """Return the view of a tensor's bits as ``dtype``, a complex tensor's or a complex dtype's."""
    # a complex tensor of n elements is its real dtype's 2n, interleaved: [a0, b0, a1, b1, ...];
    # where the element sizes differ (complex64 as float64, float64 as complex64), that
    # interleaved real tensor is viewed as the other real dtype, as eager reinterprets bytes
    if isinstance(self, ComplexTensor) and dtype == self.dtype:
        return self
    if isinstance(self, ComplexTensor):
        if holds_values(self.re):
            _check_view_dtype(self.shape, self.stride(), outer_storage_offset(self), self.dtype, dtype)
        if self.dim() == 0:
            raise RuntimeError("view(dtype) of a 0-dim complex tensor as another dtype is not supported "
                               "(eager PyTorch rejects it too); use torch.view_as_real")
        interleaved = torch.stack([self.re, self.im], dim=-1).flatten(-2)
        return interleaved if dtype == interleaved.dtype else view_dtype(interleaved, dtype)
    if not dtype.is_complex:
        return self.view(dtype)
    interleaved = self if self.dtype == real_dtype(dtype) else self.view(real_dtype(dtype))
    if interleaved.dim() == 0 or interleaved.shape[-1] % 2:
        raise RuntimeError(f"view(dtype={dtype}) needs an even number of {real_dtype(dtype)} elements in the last "
                           f"dimension, got shape {tuple(interleaved.shape)}")
    return ComplexTensor(interleaved[..., 0::2], interleaved[..., 1::2])


def _check_view_dtype(shape, stride, offset: int, source: torch.dtype, target: torch.dtype) -> None:
    """Raise eager's error where it refuses to view a tensor of this layout as ``target``.

    Across element sizes the last dim must be unit-stride, and a view as a wider dtype must find
    whole elements (the last size, the offset and the other strides divisible by the size ratio).
    """
    narrow, wide = source.itemsize, target.itemsize
    if narrow == wide:
        return
    names = f"to view {scalar_type_name(source)} as {scalar_type_name(target)} (different element sizes)"
    if not shape:
        raise RuntimeError(f"self.dim() cannot be 0 {names}")
    ratio = wide // narrow
    if wide > narrow:
        if shape[-1] % ratio:
            raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {names}, but got {shape[-1]}")
        if offset % ratio:
            raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {names}, but got {offset}")
    if stride[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {names}, but got {stride[-1]}")
    for dim in range(len(shape) - 1) if wide > narrow else ():
        if stride[dim] % ratio:
            raise RuntimeError(f"self.stride({dim}) must be divisible by {ratio} {names}, but got {stride[dim]}")


# ---- as_strided: strides are in units of complex elements of the storage ------------------


def _storage_map(z: ComplexTensor) -> list[tuple[torch.Tensor, int, int]]:
    """(part, stride scale, offset shift) for each part, mapping complex storage positions to the part's.

    Parts split out of an interleaved complex tensor (``from_complex``, the "interleaved"
    boundary) live in one real storage: complex element p is real elements 2p (re) and
    2p + 1 (im). Otherwise each part mirrors the complex layout, the imaginary part at a
    fixed distance from the real one (the "planar" (2, ...) boundary) or in its own storage.
    """
    re, im = z.re, z.im
    shift = im.storage_offset() - re.storage_offset()
    interleaved = shift == 1 and StorageWeakRef(re.untyped_storage()) == StorageWeakRef(im.untyped_storage())
    scale = 2 if interleaved else 1
    return [(re, scale, 0), (im, scale, shift)]


def _complex_strides(part: torch.Tensor, scale: int) -> list[int]:
    return [s // scale for s in part.stride()]


@register(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(self, size, stride, storage_offset=None):
    """Return the strided view of each part, strides counted in complex elements of the storage."""
    # element i of the view is storage[offset + sum(i_k stride_k)], for each part's storage
    self = _as_complex(self)
    views = [p.as_strided(size, [scale * s for s in stride],
                          None if storage_offset is None else scale * storage_offset + shift)
             for p, scale, shift in _storage_map(self)]
    return ComplexTensor(*views)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(self, src, size, stride, storage_offset=None):
    """Return a copy of ``self`` with ``src`` written into its strided view ``(size, stride, storage_offset)``."""
    # out = clone(self) (eager's clone strides); out.as_strided(size, stride, offset) = src, computed on one
    # (..., 2) tensor that holds complex element p at real elements 2p and 2p + 1, as eager's complex storage
    # does. Per part it would be wrong in the gradient: autograd reads it with as_strided at absolute
    # offsets, and an imaginary part's gradient can be a one-element view at offset 1.
    if not (isinstance(self, ComplexTensor) or self.dtype.is_complex):
        # a real destination keeps its dtype: src's real part, as eager's copy_ takes it
        return aten.as_strided_scatter.default(self, parts(src)[0].to(self.dtype), size, stride, storage_offset)
    self = _as_complex(self)
    (re, scale, _), (im, _, _) = _storage_map(self)
    base = torch.stack([re, im], -1)
    strides = [2 * s for s in _complex_strides(re, scale)] + [1]
    if not _same_strides(strides, base.stride()):
        # copy_, not aten.copy: autograd differentiates copy_. A contiguous self needs no copy
        # (and no strides read from sizes, which ONNX has no operator for)
        base = torch.empty_strided([*re.shape, 2], strides, dtype=re.dtype, device=re.device).copy_(base)
    # src's values move to self's device, as the copy_ eager writes them with does
    pairs = on_device(torch.stack(both_parts(src, re.dtype), -1), re.device)
    offset = None if storage_offset is None else 2 * storage_offset
    out = aten.as_strided_scatter.default(base, pairs, [*size, 2], [2 * s for s in stride] + [1], offset)
    return ComplexTensor(out[..., 0], out[..., 1])


def _same_strides(a: list, b: tuple) -> bool:
    # equal for every size the symbols may take: no guard (a size-1 dim's stride is free)
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))


def _as_complex(x: Any) -> ComplexTensor:
    if isinstance(x, ComplexTensor):
        return x
    re, im = both_parts(x, x.dtype)
    return ComplexTensor(re, im)
