"""Factories with a complex result: constant fills, eye, ranges, random numbers.

They reach the table either with a ComplexTensor ``self`` (``zeros_like``, ``new_full``) or
with only real/Python arguments and a complex ``dtype=`` (``zeros``, ``full(…, 1j)``,
``randn(…, dtype=complex64)``): :func:`realify.decompose` routes every op whose output is
complex to the table. The rule makes each part with the same factory in the real dtype.

Random factories draw the (…, 2) real tensor eager PyTorch draws for a complex tensor
(``view_as_real`` of it), so that the same generator state gives the same numbers:
``randn`` has variance 1 split as 1/2 per part.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import complex_dtype, real_dtype
from . import register, register_each
from ._operands import combine_parts, parts, result_dtype
from .shape import both_parts, functional_overloads, tensors_in

aten = torch.ops.aten


def _is_complex_value(x: Any) -> bool:
    return isinstance(x, complex) or (isinstance(x, torch.Tensor) and x.dtype.is_complex)


def _inferred_dtype(op, args: list, kwargs: dict, slots: tuple) -> torch.dtype | None:
    """The dtype the factory produces: dtype=, else self's, else complex when a fill value is."""
    if kwargs.get("dtype") is not None:
        return kwargs["dtype"]
    if _takes_self(op) and isinstance(args[0], torch.Tensor):
        return args[0].dtype
    values = [args[s] for s in slots if s < len(args)]
    if any(_is_complex_value(v) for v in values):
        tensors = tensors_in(values)
        return complex_dtype(result_dtype(*tensors) if tensors else torch.get_default_dtype())
    return None


def _takes_self(op) -> bool:
    return op._schema.arguments[0].name == "self"


def factory(op: Callable, *slots: int, imag: str = "same") -> Callable:
    """Rule making a complex factory result from two real calls of ``op``.

    ``slots``: positions of fill values / endpoints, split into parts. ``imag``: ``"same"`` runs
    ``op`` on the imaginary parts too (zeros, empty, full with a complex fill); ``"zero"`` gives
    an exactly-zero imaginary part (ones, eye).
    """

    def rule(*args, **kwargs):
        args = list(args)
        dtype = _inferred_dtype(op, args, kwargs, slots)
        if _takes_self(op) and isinstance(args[0], ComplexTensor):
            args[0] = args[0].re  # only its shape/device matter
        if dtype is None or not dtype.is_complex:
            return op(*[parts(a)[0] if s in slots else a for s, a in enumerate(args)], **kwargs)
        rd = real_dtype(dtype)
        split = {s: both_parts(args[s], rd) for s in slots if s < len(args)}

        def call(k: int):
            a = list(args)
            for s, pair in split.items():
                a[s] = pair[k]
            return op(*a, **{**kwargs, "dtype": rd})

        re = call(0)
        return combine_parts(re, torch.zeros_like(re) if imag == "zero" else call(1))

    rule.__name__ = f"factory_{op}"
    return rule


def _factories(*packets) -> list:
    """Every overload of ``packets`` that makes a tensor: those that take one first
    (``zeros_like``) and those that do not (``zeros(size)``)."""
    return functional_overloads(*packets) + [o for p in packets for o in _plain_overloads(p)]


def _plain_overloads(packet) -> list:
    """Overloads that take no tensor first (zeros(size), eye(n), scalar_tensor(s), ...)."""
    found = []
    for name in packet.overloads():
        op = getattr(packet, name)
        args = op._schema.arguments
        if not any(a.is_out for a in args) and args and "Tensor" not in str(args[0].type):
            found.append(op)
    return found


# zeros(a) + zeros(a) i, empty likewise
register_each(_factories(aten.zeros, aten.empty, aten.empty_strided, aten.empty_permuted, aten.zeros_like,
                         aten.empty_like, aten.new_zeros, aten.new_empty, aten.new_empty_strided), factory)
# ones = 1 + 0i, eye = I + 0i
register_each(_factories(aten.ones, aten.ones_like, aten.new_ones, aten.eye), factory, imag="zero")
# full(v) = full(re v) + full(im v) i; scalar_tensor likewise
register_each(_factories(aten.full, aten.full_like), factory, 1)
register_each(_factories(aten.new_full), factory, 2)
register_each(_factories(aten.scalar_tensor), factory, 0)
# linspace(s, e) = linspace(re s, re e) + linspace(im s, im e) i: each point s + k (e - s)/(n - 1)
# is linear in the endpoints, and eager evaluates it the same way per part
register_each(_factories(aten.linspace), factory, 0, 1)


@register(*_plain_overloads(aten.logspace), *functional_overloads(aten.logspace))
def logspace(start, end, steps, base=10.0, *, dtype=None, **kwargs):
    # base^w = exp(w log base), log base = ln|base| + (pi if base < 0) i; w = linspace(start, end)
    exponent = linspace(start, end, steps, dtype=dtype, **kwargs)
    if not isinstance(exponent, ComplexTensor):
        return torch.pow(base, exponent)
    wr, wi = exponent.re, exponent.im
    log_base = math.log(abs(base)) if base != 0 else -math.inf
    arg_base = math.pi if base < 0 else 0.0
    # (wr + wi i)(L + A i) = (wr L - wi A) + (wr A + wi L) i
    xr = wr * log_base - wi * arg_base
    xi = wr * arg_base + wi * log_base
    # exp(x) = e^xr (cos xi + i sin xi)
    magnitude = torch.exp(xr)
    return ComplexTensor(magnitude * torch.cos(xi), magnitude * torch.sin(xi))


def linspace(start, end, steps, **kwargs):
    op = {(True, True): aten.linspace.Tensor_Tensor, (True, False): aten.linspace.Tensor_Scalar,
          (False, True): aten.linspace.Scalar_Tensor}.get(
        (isinstance(start, torch.Tensor), isinstance(end, torch.Tensor)), aten.linspace.default)
    return factory(op, 0, 1)(start, end, steps, **kwargs)


# ---- random factories: draw the interleaved (..., 2) real tensor eager draws --------------


def _split_last(pair: torch.Tensor) -> ComplexTensor:
    return ComplexTensor(pair[..., 0], pair[..., 1])


def _complex_random(draw: Callable[[list, torch.dtype, dict], torch.Tensor]) -> Callable:
    """Rule for a random op on a complex result: ``draw(shape + [2], real dtype, kwargs)``."""

    def rule(self_or_size, *args, **kwargs):
        if isinstance(self_or_size, torch.Tensor):
            shape, dtype = list(self_or_size.shape), kwargs.get("dtype") or self_or_size.dtype
            device = kwargs.get("device") or self_or_size.device
        else:
            shape, dtype, device = list(self_or_size), kwargs.get("dtype"), kwargs.get("device")
        if dtype is None or not dtype.is_complex:
            raise TypeError(f"{draw.__name__}: realify's rule is for complex results, got dtype {dtype}")
        return _split_last(draw([*shape, 2], real_dtype(dtype), device, *args, generator=kwargs.get("generator")))

    rule.__name__ = f"complex_{draw.__name__}"
    return rule


def _normal(shape, rd, device, mean=0.0, std=1.0, *, generator=None):
    # complex normal(mean, std): each part ~ N(mean, std^2 / 2)
    return torch.normal(mean, std / math.sqrt(2), shape, generator=generator, dtype=rd, device=device)


def _uniform(shape, rd, device, low=0.0, high=1.0, *, generator=None):
    # complex uniform(low, high): each part ~ U(low, high)
    return aten.uniform.default(torch.empty(shape, dtype=rd, device=device), low, high, generator=generator)


complex_normal = register(aten.randn.default, aten.randn.generator, aten.randn_like.default,
                          aten.normal_functional.default)(_complex_random(_normal))
register(aten.rand.default, aten.rand.generator, aten.rand_like.default, aten.uniform.default)(
    _complex_random(_uniform))


@register(aten.bernoulli.p)
def bernoulli_p(self, p=0.5, *, generator=None):
    # dropout's mask on a complex input, as torch >= 2.15 decomposes dropout (eager has no
    # complex Bernoulli kernel; its dropout draws the mask as a real tensor of the input's
    # shape): 0/1 real parts drawn as for the real part, imaginary parts 0
    mask = aten.bernoulli.p(self.re, p, generator=generator)
    return ComplexTensor(mask, torch.zeros_like(mask))


@register(aten.normal.float_float)
def normal_of_size(mean, std, size, *, generator=None, dtype=None, device=None, **_):
    # torch.normal(mean, std, size, dtype=complex): each part ~ N(mean, std^2 / 2), as randn's
    return complex_normal(size, mean, std, generator=generator, dtype=dtype, device=device)


@register(aten.normal_.default)
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    # no functional variant aten.normal.default exists for the generic in-place path
    return aten.copy_.default(self, complex_normal(self, mean, std, generator=generator))


# ---- resize: a functional graph's aten.resize; eager in-place resize_ cannot change a wrapper


@register(aten.resize.default)
def resize(self, size, *, memory_format=None):
    # the first numel elements in (contiguous) storage order, then zeros where eager leaves garbage
    count = math.prod(size)

    def resized(p):
        flat = p.reshape(-1)[:count]
        return torch.constant_pad_nd(flat, [0, count - flat.numel()]).view(size)

    return ComplexTensor(resized(self.re), resized(self.im))


@register(aten.resize_as_.default)
def resize_as_(self, the_template, *, memory_format=None):
    return resize_(self, the_template.shape)


@register(aten.resize_.default)
def resize_(self, size, *, memory_format=None):
    if tuple(size) == tuple(self.shape):
        return self
    raise NotImplementedError(
        f"resize_ of a ComplexTensor from {tuple(self.shape)} to {tuple(size)}: a ComplexTensor's shape is fixed "
        "at creation; use the functional form (x = x.reshape(...) or torch.empty(...)) or run it under "
        "realify.decompose, which handles resize_"
    )
