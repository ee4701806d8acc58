"""FFT family: the three aten primitives every ``torch.fft`` function (and stft/istft) lowers to.

fft/ifft/fftn/hfft/... become ``_fft_c2c`` / ``_fft_r2c`` / ``_fft_c2r`` plus shape ops,
conjugation and scaling (which have their own rules), so these three rules cover the family.
Each one runs a custom op of :mod:`realify.runtime.ops` (complex inputs as (re, im) pairs,
outputs as separate real and imaginary parts): the real graph keeps one opaque FFT node per
transform, differentiable through the ops' own real adjoints.
"""

from __future__ import annotations

import torch

from ..runtime import ops
from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import scalar_type_name
from . import register
from ._operands import stacked_pairs

aten = torch.ops.aten


@register(aten._fft_c2c.default)
def fft_c2c(self, dim, normalization, forward):
    # X[k] = scale * sum_n x[n] exp(-+2 pi i k n / N), on (re, im) pairs by realify::fft_c2c
    return ComplexTensor(*ops.fft_c2c(stacked_pairs(self), list(dim), normalization, forward))


@register(aten._fft_r2c.default)
def fft_r2c(self, dim, normalization, onesided):
    # real x -> X[k] = scale * sum_n x[n] exp(-2 pi i k n / N), k = 0 .. N//2 when onesided
    if isinstance(self, ComplexTensor):  # a complex input (ihfftn's), as eager's kernel refuses it
        raise TypeError(f"Only supports floating-point dtypes, but found: {scalar_type_name(self.dtype)}")
    return ComplexTensor(*ops.fft_r2c(self, list(dim), normalization, onesided))


@register(aten._fft_c2r.default)
def fft_c2r(self, dim, normalization, last_dim_size):
    # Hermitian-symmetric X (onesided) -> real x[n] = scale * sum_k X[k] exp(2 pi i k n / N)
    return ops.fft_c2r(stacked_pairs(self), list(dim), normalization, last_dim_size)
