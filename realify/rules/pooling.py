"""Pooling, resampling and normalization: average pooling, adaptive average pooling and
upsampling/interpolation (real-linear: one real op per part), and the ops that have no complex
meaning (max pooling, batch and group normalization), which raise a clear error.

Average pooling and every interpolation mode (nearest, nearest-exact, linear, bilinear,
bicubic, trilinear, antialiased, area) compute each output element as a fixed linear
combination of input elements with *real* weights, so they act on the real and the imaginary
part independently:  pool(a + bi) = pool(a) + pool(b) i.  One real kernel per part, through
the shared :func:`realify.rules.shape.partwise_at` helper. F.pad's modes, pixel
(un)shuffle and im2col/col2im live in shape.py; F.normalize and rms_norm, which eager does
define for complex, are composites of reductions and arithmetic with rules of their own.

Eager PyTorch instantiates none of these kernels for complex dtypes (CPU and CUDA dispatch
floating types only: ``"avg_pool2d" not implemented for 'ComplexFloat'``), except where a
composite avoids the kernel (``adaptive_avg_pool2d(z, 1)`` is a ``mean``). realify gives
the value such a kernel would compute, the op applied to each part (what eager computes on
``view_as_real`` channels), instead of an error or an ad-hoc decomposition that works for
some modes only (PyTorch's decompositions build complex interpolation weights and then fail on
``clamp``/``floor`` of complex values).

Gradients: a real graph made of these rules (``realify.decompose``) differentiates like any
real graph. PyTorch's autograd itself refuses these ops on complex values ("avg_pool2d does not
support automatic differentiation for outputs with complex dtype") before any subclass or
backend sees them, so the ComplexTensor front end and torch.compile (whose fake-tensor trace of
the user's code runs autograd's check) only run them without gradients; their ``*_backward``
ops never reach a complex rule and have none.

Max pooling (and adaptive/fractional max pooling) selects the largest element: complex numbers
have no order. Batch and group normalization have several incompatible complex definitions.
Eager raises for both, and so does realify, with an error that names the op and says what to
do instead (rather than an obscure failure inside a decomposition, or a value eager never
defined).
"""

from __future__ import annotations

import torch

from ..errors import RealifyError
from . import register_each
from .shape import functional_overloads, partwise_at

aten = torch.ops.aten


# ---- linear pooling and resampling: op(a + bi) = op(a) + op(b) i --------------------------

_LINEAR_PACKETS = (
    # average pooling (avg_pool1d and the adaptive_* wrappers are composites in eager mode;
    # registered for graphs that keep them)
    aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d,
    aten.adaptive_avg_pool1d, aten.adaptive_avg_pool2d, aten.adaptive_avg_pool3d,
    aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d,
    # interpolation: F.interpolate / nn.Upsample, every mode (area is adaptive_avg_pool)
    aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d,
    aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d,
    aten.upsample_linear1d, aten.upsample_bilinear2d, aten.upsample_trilinear3d, aten.upsample_bicubic2d,
    aten._upsample_bilinear2d_aa, aten._upsample_bicubic2d_aa,
)

register_each(functional_overloads(*_LINEAR_PACKETS), partwise_at, 0)


# ---- max pooling and batch/group normalization: undefined for complex --------------------------


class UndefinedForComplexError(RealifyError, NotImplementedError):
    """An op that has no complex definition (eager PyTorch raises NotImplementedError too)."""


def _undefined(op, why: str, instead: str):
    def rule(*args, **kwargs):
        raise UndefinedForComplexError(
            f"{op} is not defined for complex tensors: {why} (eager PyTorch raises NotImplementedError "
            f"too). {instead}"
        )

    rule.__name__ = f"undefined_{op}"
    return rule


register_each(functional_overloads(
    aten.max_pool1d, aten.max_pool2d, aten.max_pool3d,
     aten.max_pool1d_with_indices, aten.max_pool2d_with_indices, aten.max_pool3d_with_indices,
     aten.adaptive_max_pool1d, aten.adaptive_max_pool2d, aten.adaptive_max_pool3d,
     aten.fractional_max_pool2d, aten.fractional_max_pool3d),
    _undefined,
    "complex numbers have no order, so there is no maximum to pool",
    "Pool a real quantity instead, e.g. F.max_pool2d(z.abs(), k, return_indices=True) and gather z at "
    "the indices (max-magnitude pooling), or pool z.real and z.imag separately.",
)

# batch norm in every form aten traces it to (instance_norm is batch norm on a reshaped input),
# and group norm; layer norm's composite rejects complex before any rule is reached
register_each(functional_overloads(
    aten.native_batch_norm, aten._native_batch_norm_legit, aten._native_batch_norm_legit_no_training,
     aten._native_batch_norm_legit_functional, aten._batch_norm_with_update,
     aten._batch_norm_with_update_functional, aten._batch_norm_no_update, aten.native_group_norm),
    _undefined,
    "complex normalization has several incompatible definitions (dividing by the magnitude variance "
    "E|z - mean|^2, or whitening the 2x2 covariance of (re, im) as in Deep Complex Networks)",
    "Write the one you mean with complex arithmetic (mean, var, sqrt), or normalize the real "
    "channels of torch.view_as_real(z).",
)
