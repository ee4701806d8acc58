"""The eager front end: :class:`ComplexTensor` run op by op, each aten op through its rule.

Two kinds of call lose their meaning below the dispatcher, where the rule table sees them; this
module answers them above it, as torch-function hooks on :class:`ComplexTensor`:

- A ComplexTensor is differentiated above its rules, by PyTorch's formulas run as ComplexTensor
  ops. Those formulas mix Python numbers into complex arithmetic (``1 - z * z``), which the
  rules compute as C99 does (docs/numerics.md), so a signed zero on a branch cut could flip the
  side the formula evaluates. The functions of one complex argument are differentiated by their
  own formula instead, on the parts, exactly as in the traced front ends.
- ATen asks a spectral op (``_linalg_eigh``, ``_linalg_svd``) for its vectors whenever a
  gradient may be needed, even inside ``eigvalsh`` and ``svdvals``, and the rules have no
  real-only formula for vectors (realify/rules/spectra.py). A public function whose result holds
  values only (:data:`VALUES_ONLY`) runs with every spectral op inside asking for none.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from .rules import one_argument_functions
from .rules._derivative import pointwise
from .rules.spectra import OPTIONAL_VECTORS, hermitian_eigenvalues, no_vectors_asked, singular_values
from .runtime.complex_tensor import (
    ComplexTensor,
    add_torch_function_hook,
    as_complex_tensor,
    unwrap_complex,
    wrap_complex,
)

__all__ = ["VALUES_ONLY", "ComplexTensor", "as_complex_tensor", "differentiable_parts", "unwrap_complex",
           "wrap_complex"]


class _Parts(torch.autograd.Function):
    """A ComplexTensor's (re, im) parts, their gradients flowing back as one ComplexTensor."""

    @staticmethod
    def forward(ctx, z):
        return z.re.view_as(z.re), z.im.view_as(z.im)

    @staticmethod
    def backward(ctx, grad_re, grad_im):
        return ComplexTensor(grad_re, grad_im)


def differentiable_parts(z: ComplexTensor) -> tuple[Tensor, Tensor]:
    """A ComplexTensor's (re, im), their gradients flowing back to it as one ComplexTensor."""
    return _Parts.apply(z)


def _by_formula(func, args: tuple, kwargs: dict, call) -> Any:
    """A function of one complex argument on a ComplexTensor that requires grad, differentiated by
    its formula: one the rule table declares so (``register(op, derivative=...)``,
    realify/rules/_derivative.py, ``OneArgument.eager_by_formula``); NotImplemented for every
    other call."""
    if kwargs or len(args) != 1:
        return NotImplemented
    name = getattr(func, "__name__", None)
    if not isinstance(name, str):
        return NotImplemented
    function = one_argument_functions().get(name)
    if (function is None or not function.eager_by_formula
            or func not in (getattr(torch, name, None), getattr(torch.Tensor, name))):
        return NotImplemented
    (z,) = args
    if not (isinstance(z, ComplexTensor) and z.requires_grad and torch.is_grad_enabled()):
        return NotImplemented
    out = pointwise(name, list(differentiable_parts(z)), [])
    return ComplexTensor(*out) if len(out) == 2 else out[0]


# Public functions whose result holds eigen- or singular values only (never vectors): every
# spectral op they call inside has unread vectors
VALUES_ONLY = frozenset({torch.linalg.svdvals, torch.linalg.eigvalsh, torch.linalg.matrix_norm, torch.linalg.norm,
                         torch.norm, torch.Tensor.norm, torch.nuclear_norm, torch.linalg.cond,
                         torch.linalg.matrix_rank})


class _NoVectorsAsked(TorchDispatchMode):
    """Within: every spectral op asks for no vectors (a :data:`VALUES_ONLY` function runs)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in OPTIONAL_VECTORS:
            args, kwargs = no_vectors_asked(func, args, kwargs)
        return func(*args, **kwargs)


def _values_only(func, args: tuple, kwargs: dict, call) -> Any:
    """A :data:`VALUES_ONLY` function: ``call()`` with no spectral op inside asking for vectors;
    where a gradient is needed, ``svdvals``/``eigvalsh`` differentiated through the real solver
    (as the traced front ends do), while the other functions keep ATen's backward, which reads
    the vectors (NotImplemented: MissingRuleError names them). NotImplemented for every other
    function."""
    if func not in VALUES_ONLY:
        return NotImplemented
    if not (torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad
                                            for a in (*args, *kwargs.values()))):
        with _NoVectorsAsked():
            return call()
    if func is torch.linalg.svdvals and set(kwargs) <= {"driver"}:
        return singular_values(*differentiable_parts(args[0]))
    if func is torch.linalg.eigvalsh and set(kwargs) <= {"UPLO"}:
        return hermitian_eigenvalues(*differentiable_parts(args[0]), *args[1:], **kwargs)
    return NotImplemented


add_torch_function_hook(_by_formula)
add_torch_function_hook(_values_only)
