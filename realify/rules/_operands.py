"""Helpers every rule family shares: operand splitting, dtype promotion, construction."""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import get_proxy_mode

from ..runtime.complex_tensor import ComplexTensor, as_complex_tensor
from ..runtime.dtypes import complex_dtype, real_dtype

Part = Any  # a real tensor, a Python float, or None (an exact zero)


def parts(x: Any, dtype: torch.dtype | None = None) -> tuple[Part, Part]:
    """Return the real and imaginary parts of any operand of a rule.

    A rule receives complex operands as :class:`realify.ComplexTensor`, and may receive real
    tensors and Python numbers too: ``parts`` gives ``(re, im)`` for each of them, so a rule
    needs no case of its own per kind of operand.

    Parameters
    ----------
    x : ComplexTensor, torch.Tensor, complex, or number
        The operand: a ComplexTensor or an ordinary complex tensor (split into its parts), a
        real tensor, a Python complex, or a real number (a Python or symbolic one).
    dtype : torch.dtype, optional
        A real dtype to cast tensor parts to (numbers stay numbers). None keeps their dtype.

    Returns
    -------
    re : torch.Tensor or number
        The real part.
    im : torch.Tensor, number, or None
        The imaginary part; None when it is exactly zero (a real tensor or number), which lets
        a rule skip the arithmetic on it (a real operand has no imaginary part, as in C99
        Annex G).

    Raises
    ------
    TypeError
        ``x`` is neither a tensor nor a number.

    Examples
    --------
    >>> import torch
    >>> from realify.rules import parts
    >>> parts(torch.tensor([1 + 2j, 3 - 4j]))
    (tensor([1., 3.]), tensor([ 2., -4.]))
    >>> parts(torch.tensor([1.5, 2.0]))
    (tensor([1.5000, 2.0000]), None)
    >>> parts(2 - 1j), parts(2.5)
    ((2.0, -1.0), (2.5, None))
    >>> parts(torch.tensor([1 + 2j]), torch.float64)
    (tensor([1.], dtype=torch.float64), tensor([2.], dtype=torch.float64))
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
    """Return :func:`parts`, a real operand's missing imaginary part made an explicit zero tensor.

    For ops that need both parts as tensors.
    """
    re, im = parts(x, dtype)
    return re, torch.zeros_like(re) if im is None else im


def holds_values(x: torch.Tensor) -> bool:
    """Whether ``x`` holds its values, as in the eager ``ComplexTensor`` front end.

    A trace's fake, proxied or functionalized tensor does not: there eager's meta kernels made
    their checks on the complex program before it was rewritten.
    """
    return not (isinstance(x, FakeTensor) or get_proxy_mode() is not None or torch._is_functional_tensor(x))


def on_device(t: torch.Tensor, device: torch.device, non_blocking: bool = False) -> torch.Tensor:
    """``t`` on ``device``: itself where it is there already (a trace then records no copy)."""
    return t if t.device == device else t.to(device, non_blocking=non_blocking)


def stacked_pairs(x: Any) -> torch.Tensor:
    """Return ``x`` as one real ``(..., 2)`` tensor of (re, im) pairs: one stack of its parts.

    Where they are the parts of such a tensor already, realify/passes/layout.py takes that
    tensor instead.
    """
    return torch.stack(filled_parts(as_complex_tensor(x)), dim=-1)


def _cast(p: Part, dtype: torch.dtype) -> Part:
    if isinstance(p, torch.Tensor) and p.dtype != dtype:
        return p.to(dtype)
    return p


def result_dtype(*operands: Any, complex_result: bool = True) -> torch.dtype:
    """Return the dtype eager PyTorch gives an elementwise op on ``operands`` (complex by default)."""
    args = [o for o in operands if o is not None]
    _, dtype = elementwise_dtypes(*args, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return complex_dtype(dtype) if complex_result else dtype


def promoted(*names: str, complex_result: bool = True) -> Callable[[Callable], Callable]:
    """Make a rule decorator that applies eager's elementwise type promotion, once.

    The decorated rule keeps its signature; the operands ``names`` arrive as their planar parts
    ``(re, im)`` cast to the real dtype of the promoted result (``im`` None for a real operand,
    numbers for a number), and, with ``complex_result``, the rule returns the result's parts
    ``(re, im)``, which become a ComplexTensor of the promoted complex dtype.

    Parameters
    ----------
    *names : str
        The names of the rule's operands that take part in the promotion (parameters of the
        rule's signature; an operand that is None is left out).
    complex_result : bool, default True
        Whether the rule returns the parts of a complex result. False: the rule returns its
        result itself, which is passed on as it is (``eq`` returns a real boolean tensor).

    Returns
    -------
    callable
        The decorator: it wraps a rule into one with the same signature that promotes its
        operands, and registers nothing (:func:`register` does).

    Raises
    ------
    None
        Making the decorator raises nothing. The wrapped rule raises TypeError for arguments
        that do not bind to its signature, or for a named operand that is neither a tensor nor
        a number (:func:`parts`).

    See Also
    --------
    parts : the parts of an operand, for a rule that does not promote.
    complex_like : a ComplexTensor of a given dtype from parts.

    Notes
    -----
    The promotion is eager's for elementwise ops, computed as ``torch._refs`` does, made
    complex: a complex64 tensor and a float64 tensor give complex128. Where both parts a
    rule returns are numbers, the result takes the shape of the first tensor operand.

    Examples
    --------
    ``z * conj(w)`` of a complex64 and a float64 tensor is complex128; the rule sees the
    float64 parts, ``None`` for the real operand's imaginary part:

    >>> import torch
    >>> from realify.rules import promoted
    >>> @promoted("self", "other")
    ... def mul_conj(self, other):
    ...     (a, b), (c, d) = self, other
    ...     if d is None:  # a real other
    ...         return a * c, b * c
    ...     return a * c + b * d, b * c - a * d
    >>> result = mul_conj(torch.tensor([1 + 2j]), torch.tensor([3.0], dtype=torch.float64))
    >>> result
    ComplexTensor(re=tensor([3.], dtype=torch.float64), im=tensor([6.], dtype=torch.float64))
    >>> result.to_complex()
    tensor([3.+6.j], dtype=torch.complex128)
    """

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
    """Return the ComplexTensor of two parts; a None or number part takes the other's shape."""
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
    """Return the ComplexTensor of complex ``dtype`` with the given parts.

    This is how a rule that does not promote its operands (:func:`promoted`) builds its
    result: the parts are cast to the real dtype of ``dtype``, a part that is None (an exact
    zero) or a number is filled to the other part's shape, and parts of two shapes are
    broadcast to one.

    Parameters
    ----------
    re : torch.Tensor, number, or None
        The real part; None is zero.
    im : torch.Tensor, number, or None
        The imaginary part; None is zero (a real result's).
    dtype : torch.dtype
        The complex dtype of the result (complex64 gives float32 parts).
    like : torch.Tensor, optional
        The tensor whose shape (and device) number parts take where neither part is a tensor.

    Returns
    -------
    ComplexTensor
        The complex value ``re + i im``, of dtype ``dtype``.

    Raises
    ------
    TypeError
        Neither part is a tensor and ``like`` is None.

    Examples
    --------
    >>> import torch
    >>> from realify.rules import complex_like
    >>> complex_like(torch.tensor([1.0, 2.0]), None, torch.complex128)
    ComplexTensor(re=tensor([1., 2.], dtype=torch.float64), im=tensor([0., 0.], dtype=torch.float64))
    >>> complex_like(torch.tensor([1.0, 2.0]), 3.0, torch.complex64).to_complex()
    tensor([1.+3.j, 2.+3.j])
    >>> complex_like(0.0, 1.0, torch.complex64, like=torch.zeros(2)).to_complex()
    tensor([0.+1.j, 0.+1.j])
    """
    rd = real_dtype(dtype)
    z = make_complex(re, im, like)
    if z.re.dtype != rd:
        z = ComplexTensor(z.re.to(rd), z.im.to(rd))
    return z


def partwise(op):
    """Return a rule that applies ``op`` with the same arguments to the real and imaginary parts.

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
    """Return the ComplexTensor of two parts, or the list or tuple of them for lists of parts."""
    if isinstance(re, torch.Tensor):
        return ComplexTensor(re, im)
    return type(re)(combine_parts(r, i) for r, i in zip(re, im))
