"""FFT family: the three aten primitives every ``torch.fft`` function (and stft/istft) lowers to.

fft/ifft/fftn/hfft/... become ``_fft_c2c`` / ``_fft_r2c`` / ``_fft_c2r`` plus shape ops,
conjugation and scaling (which have their own rules), so these three rules cover the family.
Each one runs a custom op of :mod:`realify.ops` (complex inputs as (re, im) pairs, outputs
planar): the real graph keeps one opaque FFT node per transform, differentiable through the
ops' own real adjoints.
"""

from __future__ import annotations

import torch

from . import register
from ._planar import parts
from .. import ops
from ..tensor import ComplexTensor

aten = torch.ops.aten


def _pairs(self) -> torch.Tensor:
    """The operand as real (..., 2) pairs: the pairs it views where known, else one stack
    (which the compiler fuses into the kernel that computes the parts)."""
    if isinstance(self, ComplexTensor) and self.known_pairs() is not None:
        return self.known_pairs()
    re, im = parts(self)
    return torch.stack([re, torch.zeros_like(re) if im is None else im], dim=-1)


@register(aten._fft_c2c.default)
def fft_c2c(self, dim, normalization, forward):
    # X[k] = scale * sum_n x[n] exp(-+2 pi i k n / N), on (re, im) pairs by realify::fft_c2c
    return ComplexTensor(*ops.fft_c2c(_pairs(self), list(dim), normalization, forward))


@register(aten._fft_r2c.default)
def fft_r2c(self, dim, normalization, onesided):
    # real x -> X[k] = scale * sum_n x[n] exp(-2 pi i k n / N), k = 0 .. N//2 when onesided
    return ComplexTensor(*ops.fft_r2c(self, list(dim), normalization, onesided))


@register(aten._fft_c2r.default)
def fft_c2r(self, dim, normalization, last_dim_size):
    # Hermitian-symmetric X (onesided) -> real x[n] = scale * sum_k X[k] exp(2 pi i k n / N)
    return ops.fft_c2r(_pairs(self), list(dim), normalization, last_dim_size)
