"""Small DFTs as real matrices: the transforms of a band of bins as one GEMM.

An FFT of ``n`` points costs about ``n log n`` operations per transformed row, but the FFT
libraries run them one row at a time with strided loads; where only ``m`` bins of a spectrum
are nonzero (an inverse transform of a band) or read (a forward transform whose modes are
cut), the ``2 m n`` multiply-adds of the dense DFT run as a GEMM at BLAS speed instead, faster
on CPU for the band widths of spectral convolutions ("Measurements behind design choices",
docs/benchmarks.md). realify/passes/fft_bands.py decides where.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.fx as fx

from .cleanup import call_on_fakes

aten = torch.ops.aten
prims = torch.ops.prims

__all__ = ["dft_matrix", "scale_of", "with_imaginary_bin_0", "without_imaginary_bin_0"]


def dft_matrix(graph: fx.Graph, like: torch.Tensor, m: int, n: int, normalization: int, *,
               mirrored: bool) -> fx.Node:
    """A (2m - 1, n) node ``D``: the real and imaginary rows of bins ``0 .. m-1``, ``s w_k
    cos(2 pi k j / n)`` and ``-s w_k sin(2 pi k j / n)`` for ``j`` in ``0 .. n-1``, ``s`` the
    normalization's scale (:func:`scale_of`), in the order of (re, im) pairs less bin 0's
    imaginary row (sin 0 = 0: a real signal's bin 0 is real, and a c2r ignores its imaginary
    part, as the FFT libraries do, even where it is infinite or NaN).

    - ``mirrored``: ``w_k = 2`` for the bins a one-sided spectrum's Hermitian completion
      mirrors (1 .. n - (n//2 + 1)), else 1: the c2r of bins ``0 .. m-1`` (the others zero) is
      ``pairs @ D``, ``pairs`` the bins' (re, im) pairs less bin 0's imaginary part.
    - not ``mirrored``: ``w_k = 1``: ``x @ D.T`` is the r2c of ``x`` at bins ``0 .. m-1``, in the
      same order.

    Made in the graph, in float64 (``k j mod n`` exact, so every angle is the nearest float64 to
    its value), then rounded to ``like``'s dtype: 2mn elements, a few microseconds per call.
    Only ops that Inductor lowers as they are: the pass also runs after its decompositions."""
    make = functools.partial(call_on_fakes, graph, fake_mode=like.fake_mode)

    def index(size: int) -> fx.Node:
        ints = make(prims.iota.default, size, start=0, step=1, dtype=torch.int64, device=like.device,
                    requires_grad=False)
        return make(prims.convert_element_type.default, ints, torch.float64)

    k, j = index(m), index(n)
    turns = make(aten.remainder.Scalar, make(aten.mul.Tensor, make(aten.unsqueeze.default, k, 1), j), n)
    angle = make(aten.mul.Tensor, turns, 2 * math.pi / n)
    weight = scale_of(normalization, n)
    if mirrored:
        twice = make(aten.bitwise_and.Tensor, make(aten.ge.Scalar, k, 1), make(aten.le.Scalar, k, n - (n // 2 + 1)))
        count = make(aten.add.Tensor, make(prims.convert_element_type.default, twice, torch.float64), 1.0)
        weight = make(aten.unsqueeze.default, make(aten.mul.Tensor, count, weight), 1)
    cos = make(aten.mul.Tensor, make(aten.cos.default, angle), weight)
    sin = make(aten.mul.Tensor, make(aten.neg.default, make(aten.sin.default, angle)), weight)
    rows = [make(aten.unsqueeze.default, part, 1) for part in (cos, sin)]  # (m, 2, n): re, im of each bin
    pairs = make(aten.reshape.default, make(aten.cat.default, rows, 1), [2 * m, n])
    matrix = make(aten.cat.default,
                  [make(aten.slice.Tensor, pairs, 0, 0, 1), make(aten.slice.Tensor, pairs, 0, 2, 2 * m)])
    if like.dtype == torch.float64:
        return matrix
    return make(prims.convert_element_type.default, matrix, like.dtype)


def without_imaginary_bin_0(graph: fx.Graph, pairs: fx.Node) -> fx.Node:
    """(rows, 2m) pairs -> (rows, 2m - 1): bin 0's imaginary part dropped (a copy of the band)."""
    width = pairs.meta["val"].shape[-1]
    make = functools.partial(call_on_fakes, graph)
    return make(aten.cat.default,
                [make(aten.slice.Tensor, pairs, 1, 0, 1), make(aten.slice.Tensor, pairs, 1, 2, width)], 1)


def with_imaginary_bin_0(graph: fx.Graph, bins: fx.Node, samples: fx.Node) -> fx.Node:
    """``samples @ D.T`` (rows, 2m - 1) -> (rows, 2m) pairs as the FFT libraries make them: bin
    0's imaginary part +0, its real part -0 where every sample of the row is -0 (a sum of
    zeros is -0 only if all are; a GEMM's sum starts from +0)."""
    width = bins.meta["val"].shape[-1]
    make = functools.partial(call_on_fakes, graph, fake_mode=bins.meta["val"].fake_mode)
    # -0's bits, read as a signed integer, are the smallest integer: the row's largest is that
    # integer only if every sample is -0 (one vectorized max over the row's bits)
    dtype = samples.meta["val"].dtype
    bits = torch.int64 if dtype == torch.float64 else torch.int32
    largest = make(aten.amax.default, make(aten.view.dtype, samples, bits), [1], True)
    all_negative_zero = make(aten.eq.Scalar, largest, torch.iinfo(bits).min)
    real = make(aten.where.self, all_negative_zero, make(aten.scalar_tensor.default, -0.0, dtype=bins.meta["val"].dtype,
                                                         device=bins.meta["val"].device),
                make(aten.slice.Tensor, bins, 1, 0, 1))
    bin_0 = make(aten.constant_pad_nd.default, real, [0, 1], 0.0)
    return make(aten.cat.default, [bin_0, make(aten.slice.Tensor, bins, 1, 1, width)], 1)


def scale_of(normalization: int, n: int) -> float:
    """aten's FFT normalization code as the factor it applies: none, 1/sqrt(n), 1/n."""
    return (1.0, 1 / math.sqrt(n), 1 / n)[normalization]
