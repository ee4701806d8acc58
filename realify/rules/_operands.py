"""Helpers every rule family shares: operand splitting, dtype promotion, construction."""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..runtime.complex_tensor import ComplexTensor, as_complex_tensor
from ..runtime.dtypes import complex_dtype, real_dtype

Part = Any  # a real tensor, a Python float, or None (an exact zero)


def parts(x: Any, dtype: torch.dtype | None = None) -> tuple[Part, Part]:
    """(re, im) of any operand; im is None when it is exactly zero (a real operand).

    With ``dtype`` (a real dtype), tensor parts are cast to it.
    """
    x = as_complex_tensor(x)
    if isinstance(x, ComplexTensor):
        re, im = x.re, x.im
    elif isinstance(x, torch.Tensor):
        re, im = x, None
    elif isinstance(x, complex):
        re, im = x.real, x.imag
    elif isinstance(x, (numbers.Number, torch.SymInt, torch.SymFloat, torch.SymBool)):
        re, im = x, None
    else:
        raise TypeError(f"cannot take the complex parts of {type(x).__name__}")
    if dtype is not None:
        re, im = _cast(re, dtype), _cast(im, dtype)
    return re, im


def filled_parts(x: Any, dtype: torch.dtype | None = None) -> tuple[Part, Part]:
    """:func:`parts`, a real operand's missing imaginary part made an explicit zero tensor (for
    ops that need both parts as tensors)."""
    re, im = parts(x, dtype)
    return re, torch.zeros_like(re) if im is None else im


def stacked_pairs(x: Any) -> torch.Tensor:
    """x as one real ``(..., 2)`` tensor of (re, im) pairs: one stack of its parts (where they
    are the parts of such a tensor already, realify/passes/layout.py takes that tensor instead)."""
    return torch.stack(filled_parts(as_complex_tensor(x)), dim=-1)


def _cast(p: Part, dtype: torch.dtype) -> Part:
    if isinstance(p, torch.Tensor) and p.dtype != dtype:
        return p.to(dtype)
    return p


def result_dtype(*operands: Any, complex_result: bool = True) -> torch.dtype:
    """The dtype eager PyTorch gives an elementwise op on ``operands`` (complex by default)."""
    args = [o for o in operands if o is not None]
    _, dtype = elementwise_dtypes(*args, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return complex_dtype(dtype) if complex_result else dtype


def promoted(*names: str, complex_result: bool = True) -> Callable[[Callable], Callable]:
    """Rule decorator: eager's elementwise type promotion, done once, as ``torch._refs`` does.

    The operands ``names`` arrive as their planar parts ``(re, im)`` cast to the real dtype of
    the promoted result (``im`` None for a real operand, numbers for a number); with
    ``complex_result`` the rule returns the result's parts ``(re, im)``, which become a
    ComplexTensor of the promoted complex dtype, shaped like the first tensor operand where
    both parts are numbers. A rule that returns anything else returns it as it is."""

    def decorate(rule: Callable) -> Callable:
        signature = inspect.signature(rule)

        @functools.wraps(rule)
        def promoting(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            operands = [bound.arguments.get(name) for name in names]
            dtype = result_dtype(*operands)
            rd = real_dtype(dtype)
            for name, operand in zip(names, operands):
                if operand is not None:
                    bound.arguments[name] = parts(operand, rd)
            result = rule(*bound.args, **bound.kwargs)
            if not complex_result:
                return result
            like = next((x for x in operands if isinstance(x, torch.Tensor)), None)
            return complex_like(*result, dtype, like)

        return promoting

    return decorate


def make_complex(re: Part, im: Part, like: torch.Tensor | None = None) -> ComplexTensor:
    """ComplexTensor from parts; a None or scalar part is materialized with the other's shape."""
    ref = re if isinstance(re, torch.Tensor) else im if isinstance(im, torch.Tensor) else like
    if ref is None:
        raise TypeError("make_complex needs at least one tensor part or a `like` tensor")
    re = _materialize(re, ref)
    im = _materialize(im, ref)
    if re.shape != im.shape:
        re, im = torch.broadcast_tensors(re, im)
    if re.dtype != im.dtype:
        dt = torch.promote_types(re.dtype, im.dtype)
        re, im = re.to(dt), im.to(dt)
    return ComplexTensor(re, im)


def _materialize(p: Part, ref: torch.Tensor) -> torch.Tensor:
    if isinstance(p, torch.Tensor):
        return p
    if p is None or p == 0:
        return torch.zeros_like(ref)
    return torch.full_like(ref, p)


def complex_like(re: Part, im: Part, dtype: torch.dtype, like: torch.Tensor | None = None) -> ComplexTensor:
    """ComplexTensor of complex ``dtype`` (parts cast to its real dtype)."""
    rd = real_dtype(dtype)
    z = make_complex(re, im, like)
    if z.re.dtype != rd:
        z = ComplexTensor(z.re.to(rd), z.im.to(rd))
    return z


def partwise(op):
    """Rule that applies ``op`` with the same arguments to the real and imaginary parts.

    Right for every op that is linear and acts on each element's position only (views,
    reshapes, indexing, concatenation, padding with zeros, ...).
    """

    def rule(self, *args, **kwargs):
        re, im = parts(self)
        if im is None:
            im = torch.zeros_like(re)
        return combine_parts(op(re, *args, **kwargs), op(im, *args, **kwargs))

    rule.__name__ = f"partwise_{op}"
    return rule


def combine_parts(re: Any, im: Any) -> Any:
    if isinstance(re, torch.Tensor):
        return ComplexTensor(re, im)
    return type(re)(combine_parts(r, i) for r, i in zip(re, im))
