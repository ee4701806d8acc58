"""Inverse real FFTs of spectra that are zero beyond a band (realify/passes/fft_bands.py): the compile
backend transforms only the band, and values and gradients stay eager's."""

from __future__ import annotations

import math

import pytest
import torch
from backend_support import RecordingInner

import realify
from realify.runtime.ops import fft_c2r

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


def _inverse(graph):
    """How the graph inverts its spectrum: "full" (a multi-dimensional c2r), or "band" (the
    band's c2c, then its last dimension's c2r as a GEMM on CPU: no c2r left)."""
    dims = [len(n.args[1]) for n in graph.graph.nodes if n.target is C2R]
    gemms = [n for n in graph.graph.nodes if n.target is torch.ops.aten.mm.default]
    return {(2,): "full", (): "band" if gemms else "none"}.get(tuple(dims), dims)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_band_of_a_spectrum_is_transformed_alone(norm, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 12, dtype=dtype, requires_grad=True)
    w = torch.randn(4, 3, dtype=dtype.to_complex(), requires_grad=True)
    got, graph = _compiled_graph(lambda x, w: _modes_inverted(x, w, norm), x, w)
    assert _inverse(graph) == "band", graph.code  # 3 of 7 bins: the band alone
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
    assert _inverse(graph) == ("band" if banded else "full"), graph.code
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
    assert _inverse(graph) == "band", graph.code
    expected = program(block)
    assert torch.equal(got, expected) and torch.equal(got.signbit(), expected.signbit())


R2C = {torch.ops.realify.fft_r2c.default, torch.ops.realify.fft_r2c_pairs.default}


def _r2c_left(graph):
    return sum(n.target in R2C for n in graph.graph.nodes)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_dimensional_transforms_of_a_band(norm, dtype):
    # rfft whose first 3 of 7 bins are read, irfft of 3 bins written into zeros: both GEMMs
    torch.manual_seed(0)
    x = torch.randn(4, 5, 12, dtype=dtype, requires_grad=True)
    w = torch.randn(5, 3, dtype=dtype.to_complex(), requires_grad=True)

    def program(x, w):
        out = torch.zeros(4, 5, 7, dtype=dtype.to_complex())
        out[..., :3] = torch.fft.rfft(x, norm=norm)[..., :3] * w
        return torch.fft.irfft(out, n=12, norm=norm)

    got, graph = _compiled_graph(program, x, w)
    assert _r2c_left(graph) == 0 and _inverse(graph) == "band", graph.code
    got.square().sum().backward()
    got_grads = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    expected = program(x, w)
    expected.square().sum().backward()
    # each output a sum of 2m - 1 = 5 (c2r) or n = 12 (r2c) products: the GEMM's rounding
    # error is within a few units of the FFT's at these sizes
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    for g, e in zip(got_grads, (x.grad, w.grad)):
        torch.testing.assert_close(g, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["modes", "start inside", "past half", "strided", "whole", "rows"])
def test_forward_transform_cut_to_the_bins_read(case):
    # the r2c becomes a GEMM only where every reader reads a leading band of at most half the
    # bins of its last dimension
    torch.manual_seed(0)
    x = torch.randn(2, 8, 12)
    read, by_gemm = {"modes": ((Ellipsis, slice(2, 6), slice(0, 3)), True),
                     "start inside": ((Ellipsis, slice(1, 3)), True),
                     "past half": ((Ellipsis, slice(0, 4)), False),
                     "strided": ((Ellipsis, slice(0, 3, 2)), False),
                     "whole": ((Ellipsis,), False),
                     "rows": ((Ellipsis, slice(0, 2), slice(None)), False)}[case]

    def program(x):
        return torch.fft.fftshift(torch.fft.rfft2(x), dim=-2)[read] * 2

    got, graph = _compiled_graph(program, x)
    assert _r2c_left(graph) == (0 if by_gemm else 1), graph.code
    torch.testing.assert_close(got, program(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -0.0])
def test_forward_transform_of_special_values(value):
    # an infinite or NaN sample makes its whole row non-finite, in the FFT and in the GEMM
    # alike; which of inf or NaN each part holds is the FFT library's (MKL, pocketfft and
    # cuFFT differ too), so the test holds the positions of non-finite bins to eager's, finite
    # bins to eager's values, zero bins to eager's signs, bin 0's imaginary part to +0
    torch.manual_seed(0)
    x = torch.randn(2, 3, 12)
    x[0, 1, 4] = value
    x[1] = -0.0  # every sample -0: each bin a sum of signed zeros

    def program(x):
        return torch.fft.rfft(x)[..., :3] * 1

    got, graph = _compiled_graph(program, x)
    assert _r2c_left(graph) == 0, graph.code
    expected = program(x)
    assert torch.equal(got.isfinite(), expected.isfinite())
    finite = expected.isfinite()
    torch.testing.assert_close(got[finite], expected[finite], rtol=1e-5, atol=1e-5)
    for part in (torch.real, torch.imag):
        zeros = part(expected) == 0
        assert torch.equal(part(got)[zeros & finite].signbit(), part(expected)[zeros & finite].signbit())


@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_inverse_transform_ignores_the_imaginary_part_of_bin_0(value):
    # c2r drops bin 0's imaginary part whatever it holds; the GEMM leaves it out, not
    # multiplied by sin 0 = 0 (inf * 0 would be NaN)
    block = torch.randn(2, 3, 2, dtype=torch.complex64)
    block[:, :, 0] = torch.complex(block[:, :, 0].real, torch.full((2, 3), value))

    def program(block):
        out = torch.zeros(2, 3, 7, dtype=torch.complex64)
        out[..., :2] = block
        return torch.fft.irfft(out, n=12)

    got, graph = _compiled_graph(program, block)
    assert _inverse(graph) == "band", graph.code
    expected = program(block)
    assert expected.isfinite().all()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("last", [-1, -2])
def test_forward_transform_cut_by_the_fft_where_a_gemm_does_not_pay(monkeypatch, last):
    # the one-dimensional r2c of all bins, cut to the band, then the band's c2c: the full
    # transform's bits (here for a last transformed dim that is not the tensor's last, or with
    # the GEMM ruled out)
    import realify.passes.fft_bands as fft_bands
    monkeypatch.setattr(fft_bands, "gemm_pays", lambda m, n, inverse: False)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 12, 5, requires_grad=True)
    dims = (-3, -2) if last == -2 else (-2, -1)

    def program(x):
        spectrum = torch.fft.rfftn(x, dim=dims)
        cut = spectrum[:, :, :3] if last == -2 else spectrum[..., :1]
        return torch.view_as_real(cut * 2)

    got, graph = _compiled_graph(program, x)
    assert _r2c_left(graph) == 1 and _c2c_dims(graph) == [1], graph.code
    expected = program(x)
    assert torch.equal(got, expected)
    got.square().sum().backward()
    got_grad, x.grad = x.grad.clone(), None
    expected.square().sum().backward()
    # the gradient runs other transforms than eager's (c2c, then c2r of the band, against one
    # two-dimensional c2r): both are off from float64's by up to 1e-7 of the largest entry,
    # which is ~1000 here, so entries near 0 differ by more than 1e-5 relative
    torch.testing.assert_close(got_grad, x.grad, rtol=1e-5, atol=1e-6 * x.grad.abs().max().item())


def _c2c_dims(graph):
    return [len(n.args[1]) for n in graph.graph.nodes if n.target is torch.ops.realify.fft_c2c_pairs.default]


@pytest.mark.parametrize("case", ["transposed input", "signed zeros", "graph break"])
def test_band_gemms_on_awkward_inputs(case):
    # values and gradients stay eager's on a non-contiguous input, on exact zeros of both signs
    # (rows of -0 and +0 samples, an axis-point complex weight), and across a graph break
    # between the forward transform and its readers (no graph sees both: nothing rewritten there)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 12, 8)
    if case == "transposed input":
        x = x.transpose(-1, -2)  # (2, 3, 8, 12), last dim strided
    elif case == "signed zeros":
        x[0, 0] = -0.0
        x[0, 1, :, :6] = 0.0
    x.requires_grad_()
    w = torch.randn(3, 1, 3, dtype=torch.complex64)
    w[0, 0] = torch.complex(torch.tensor([1.0, -0.0, 2.0]), torch.zeros(3))  # real weights: axis points
    w.requires_grad_()

    def program(x, w):
        spectrum = torch.fft.rfft2(x)
        if case == "graph break":
            torch._dynamo.graph_break()
        out = torch.zeros_like(spectrum)
        out[..., :3] = spectrum[..., :3] * w
        return torch.fft.irfft2(out, s=x.shape[-2:])

    torch._dynamo.reset()
    got = realify.compile(program)(x, w)
    got.square().sum().backward()
    got_grads, x.grad, w.grad = (x.grad.clone(), w.grad.clone()), None, None
    expected = program(x, w)
    expected.square().sum().backward()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    zeros = expected == 0
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit())
    for g, e in zip(got_grads, (x.grad, w.grad)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
