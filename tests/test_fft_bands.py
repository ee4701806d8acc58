"""Inverse real FFTs of spectra that are zero beyond a band (realify/fft_bands.py): the compile
backend transforms only the band, and values and gradients stay eager's."""

from __future__ import annotations

import math

import pytest
import torch

import realify
from backend_support import RecordingInner
from realify.ops import fft_c2r

C2R = torch.ops.realify.fft_c2r.default


@pytest.mark.parametrize("normalization", [0, 1, 2])
@pytest.mark.parametrize("n", [8, 9])
def test_c2r_of_fewer_bins_pads_them_with_zeros(normalization, n):
    # the op takes a band narrower than n // 2 + 1 bins, as torch.fft.irfft's n pads
    torch.manual_seed(0)
    band = torch.randn(2, 6, 3, dtype=torch.complex128)
    full = torch.nn.functional.pad(band, (0, n // 2 + 1 - 3))
    got = fft_c2r(torch.view_as_real(band), [0, 2], normalization, n)
    expected = torch.ops.aten._fft_c2r(full, [0, 2], normalization, n)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    pairs = torch.view_as_real(band).clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda p: fft_c2r(p, [0, 2], normalization, n), (pairs,))


def _modes_inverted(x, w, norm):
    # neuraloperator's spectral convolution: modes of the forward FFT mixed, written into a
    # zero spectrum (rows centred by fftshift, the first columns), inverted
    spectrum = torch.fft.fftshift(torch.fft.rfft2(x, norm=norm), dim=-2)
    out = torch.zeros_like(spectrum)
    rows = slice(spectrum.shape[-2] // 2 - 2, spectrum.shape[-2] // 2 + 2)
    out[..., rows, :3] = spectrum[..., rows, :3] * w
    return torch.fft.irfft2(torch.fft.ifftshift(out, dim=-2), s=x.shape[-2:], norm=norm)


def _compiled_graph(program, *args):
    torch._dynamo.reset()
    inner = RecordingInner()
    out = realify.compile(program, inner=inner)(*args)
    (_, graph), = [g for g in inner.graphs if g[0] == "dynamo"]
    return out, graph


def _c2r_dims(graph):
    return [len(n.args[1]) for n in graph.graph.nodes if n.target is C2R]


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_band_of_a_spectrum_is_transformed_alone(norm, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 12, dtype=dtype, requires_grad=True)
    w = torch.randn(4, 3, dtype=dtype.to_complex(), requires_grad=True)
    got, graph = _compiled_graph(lambda x, w: _modes_inverted(x, w, norm), x, w)
    assert _c2r_dims(graph) == [1], graph.code  # 3 of 7 bins: the band alone
    got.square().sum().backward()
    got_grads = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    expected = _modes_inverted(x, w, norm)
    expected.square().sum().backward()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    for g, e in zip(got_grads, (x.grad, w.grad)):
        torch.testing.assert_close(g, e, rtol=tol, atol=tol)


def _written(out, block, where):
    out[where] = block
    return torch.fft.irfftn(out, s=(6, 10), dim=(-2, -1))


@pytest.mark.parametrize("case", ["offset band", "wide band", "nonzero fill", "strided write", "input spectrum",
                                  "rows only", "special values"])
def test_band_found_only_where_the_zeros_are_known(case):
    # the band is where the program wrote into a zero spectrum; anything else keeps the full
    # transform. Values are eager's either way, special values and signed zeros included.
    torch.manual_seed(0)
    fill, where, block_shape, banded = 0.0, (Ellipsis, slice(None), slice(1, 3)), (2, 6, 2), True
    if case == "wide band":  # 4 of 6 bins: more than half, the full transform is cheaper
        where, block_shape, banded = (Ellipsis, slice(None), slice(0, 4)), (2, 6, 4), False
    elif case == "nonzero fill":
        fill, banded = 1.0, False
    elif case == "strided write":
        where, banded = (Ellipsis, slice(None), slice(0, 4, 2)), False
    elif case == "rows only":  # zero rows do not shorten the last dimension's transform
        where, block_shape, banded = (Ellipsis, slice(1, 3), slice(None)), (2, 2, 6), False
    block = torch.randn(block_shape, dtype=torch.complex64)
    if case == "special values":
        block[0, 0, 0] = complex(math.inf, -0.0)
        block[1, 2, 1] = complex(math.nan, 0.0)
        block[1, 3] = complex(-0.0, -0.0)

    if case == "input spectrum":
        program, args, banded = _written, (torch.zeros(2, 6, 6, dtype=torch.complex64), block, where), False
    else:
        def program(block):
            return _written(torch.full((2, 6, 6), complex(fill, 0.0), dtype=torch.complex64), block, where)
        args = (block,)
    got, graph = _compiled_graph(program, *(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    assert _c2r_dims(graph) == ([1] if banded else [2]), graph.code
    expected = program(*args)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    zeros = expected == 0
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit())


def test_an_all_zero_band_keeps_eagers_signed_zeros():
    # every bin zero (signed zeros in the band): each output is a sum of zeros, whose sign the
    # full transform and the band's transform must agree on
    block = torch.complex(torch.tensor([[-0.0, 0.0], [0.0, -0.0]]), torch.tensor([[-0.0, -0.0], [0.0, 0.0]]))

    def program(block):
        out = torch.zeros(2, 8, 6, dtype=torch.complex64)
        out[:, 2:4, :2] = block
        return torch.fft.irfft2(out, s=(8, 10))

    got, graph = _compiled_graph(program, block)
    assert _c2r_dims(graph) == [1], graph.code
    expected = program(block)
    assert torch.equal(got, expected) and torch.equal(got.signbit(), expected.signbit())
