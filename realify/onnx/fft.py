"""Translations of realify's FFT ops (:mod:`realify.runtime.ops`) to ONNX ``DFT`` (opset 20:
``axis`` is an input), on the ``(*shape, 2)`` pairs of DFT's own complex layout, and the
normalization of aten's codes (0 none, 1 by ``1/sqrt(n)``, 2 by ``1/n``)."""

from __future__ import annotations

from collections.abc import Sequence

from .graph_helpers import _ints
from .optional_imports import op

# ---- translations of the realify:: FFT ops (onnxscript, traced at export time) -------------


def fft_c2c_pairs(x, dim: Sequence[int], normalization: int, forward: bool):
    """realify::fft_c2c_pairs -> DFT over each dim of the ``(*shape, 2)`` pairs (DFT's own
    complex layout), then the scale.

    X[k] = scale * sum_n x[n] exp(-+2 pi i k n / N) per dim; ONNX's inverse DFT has the
    1/N of each dim built in, so the inverse result is multiplied by n * scale."""
    dims = _complex_dims(x, dim)
    z = x
    for d in dims:
        z = op.DFT(z, None, _axis(d), inverse=0 if forward else 1, onesided=0)
    return _normalize(z, _length(x, dims), normalization, inverse=not forward)


def fft_c2c(x, dim: Sequence[int], normalization: int, forward: bool):
    """realify::fft_c2c -> :func:`fft_c2c_pairs`, split into planar (re, im)."""
    return _unstack(fft_c2c_pairs(x, dim, normalization, forward))


def fft_r2c_pairs(x, dim: Sequence[int], normalization: int, onesided: bool):
    """realify::fft_r2c_pairs -> a real DFT on the last dim (onesided: bins 0 .. N//2), then
    full DFTs on the other dims, as pairs.

    X[k] = scale * sum_n x[n] exp(-2 pi i k n / N); scale = 1, 1/sqrt(n), 1/n for codes 0/1/2."""
    dims = _wrapped(x, dim)
    n = _length(x, dims)
    z = op.Unsqueeze(x, _ints([-1]))  # a real signal: trailing dim of 1
    z = op.DFT(z, None, _axis(dims[-1]), inverse=0, onesided=1 if onesided else 0)
    for d in dims[:-1]:
        z = op.DFT(z, None, _axis(d), inverse=0, onesided=0)
    return _normalize(z, n, normalization, inverse=False)


def fft_r2c(x, dim: Sequence[int], normalization: int, onesided: bool):
    """realify::fft_r2c -> :func:`fft_r2c_pairs`, split into planar (re, im)."""
    return _unstack(fft_r2c_pairs(x, dim, normalization, onesided))


def fft_c2r(x, dim: Sequence[int], normalization: int, last_dim_size: int):
    """realify::fft_c2r -> inverse DFTs of the ``(*shape, 2)`` pairs on the leading dims,
    Hermitian completion of the last dim, inverse DFT, real part.

    x[n] = scale * sum_k X[k] exp(2 pi i k n / N), N = last_dim_size, with the bins the onesided
    input lacks filled by symmetry: X[N - k] = conj(X[k]) for k = 1 .. N - (N//2 + 1). The
    imaginary parts of X[0] (and of X[N/2] for even N) only reach the imaginary part of x,
    which is dropped, as aten's c2r ignores them."""
    dims = _complex_dims(x, dim)
    z = x
    for d in dims[:-1]:
        z = op.DFT(z, None, _axis(d), inverse=1, onesided=0)
    last, size = dims[-1], last_dim_size
    half = size // 2 + 1
    head = op.Slice(z, _ints([0]), _ints([half]), _ints([last]))
    # bins N - half .. 1, in that order (step -1; ``ends`` is exclusive)
    mirrored = op.Slice(z, _ints([size - half]), _ints([0]), _ints([last]), _ints([-1]))
    mirrored = op.Mul(mirrored, op.CastLike(op.Constant(value_floats=[1.0, -1.0]), mirrored))  # conj
    full = op.Concat(head, mirrored, axis=last)
    out = op.DFT(full, None, _axis(last), inverse=1, onesided=0)
    out = op.Squeeze(op.Slice(out, _ints([0]), _ints([1]), _ints([-1])), _ints([-1]))  # real part
    n = op.Mul(_length(x, dims[:-1]), op.Constant(value_int=size)) if len(dims) > 1 else op.Constant(value_int=size)
    return _normalize(out, n, normalization, inverse=True)


def _wrapped(x, dim: Sequence[int]) -> list[int]:
    rank = len(x.shape)
    return [d % rank for d in dim]


def _complex_dims(pairs, dim: Sequence[int]) -> list[int]:
    """``dim`` of the complex value held as ``(*shape, 2)`` pairs, wrapped by its rank."""
    rank = len(pairs.shape) - 1
    return [d % rank for d in dim]


def _axis(d: int):
    return op.Constant(value_int=d)  # DFT-20's axis: a scalar int64 input


def _unstack(z):
    """``(*shape, 2)`` pairs -> the planar (re, im) outputs of the realify:: FFT ops."""
    re, im = op.Split(z, axis=-1, num_outputs=2)
    return op.Squeeze(re, _ints([-1])), op.Squeeze(im, _ints([-1]))


def _length(x, dims: Sequence[int]):
    """n: the product of x's sizes over ``dims`` (an int64 scalar, computed at run time so
    dynamic sizes work)."""
    sizes = op.Gather(op.Shape(x), _ints(list(dims)), axis=0)
    return op.ReduceProd(sizes, keepdims=0)


def _normalize(z, n, normalization: int, inverse: bool):
    """Multiply the DFT result by (desired scale) / (ONNX's own scale):
    forward: ONNX scale 1, so 1, 1/sqrt(n), 1/n for codes 0, 1, 2;
    inverse: ONNX scale 1/n, so n, sqrt(n), 1 for codes 0, 1, 2."""
    n = op.CastLike(n, z)
    if inverse:
        if normalization == 0:
            return op.Mul(z, n)
        if normalization == 1:
            return op.Mul(z, op.Sqrt(n))
        return z
    if normalization == 1:
        return op.Div(z, op.Sqrt(n))
    if normalization == 2:
        return op.Div(z, n)
    return z
