"""Complex ``logcumsumexp`` (realify/rules/reductions.py). Compiled, it is eager's kernel on
pairs: values bit for bit eager's, special values and the imaginary part's multiple of 2 pi
included, and eager's derivative formula (first and second derivatives), under the eager inner
compiler and Inductor. For ONNX Runtime it is a scan of eager's logaddexp step moved to eager's
branch (``logcumsumexp_parts``): eager's values to rounding."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from test_jacobi import _run

import realify
from realify.onnx import to_onnx
from realify.rules import reductions

inf, nan = math.inf, math.nan
DTYPES = (torch.complex64, torch.complex128)


def _strict(fn, inner: str = "eager"):
    return realify.compile(fn, inner=inner, strict=True)


def _tolerance(dtype: torch.dtype, n: int) -> float:
    # of the scan form against eager's loop, relative to |out|. complex128: both accumulate
    # rounded steps in different orders, eager's n of them, each within a few ulp of the exact
    # value: 10 n u covers both. complex64: eager's CPU loop accumulates in complex128, so its
    # values are rounded once; the scan in single precision takes log2(n) + 1 steps to an
    # output, each within a few ulp (measured at most 40 u at n = 1000): 4 (log2(n) + 2) u
    if dtype == torch.complex128:
        return 10 * max(n, 1) * torch.finfo(torch.float64).eps
    return 4 * (math.log2(max(n, 1)) + 2) * torch.finfo(torch.float32).eps


def _bits(z: torch.Tensor) -> torch.Tensor:
    """The parts' bit patterns, every nan as one pattern: equal bits are equal values, signed
    zeros and infinities included."""
    parts = torch.view_as_real(z.resolve_conj()).clone()
    parts[parts.isnan()] = nan
    return parts.view(torch.int64 if z.dtype == torch.complex128 else torch.int32)


def _assert_same_bits(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    differ = (_bits(got) != _bits(expected)).any(-1)
    assert not bool(differ.any()), [(i, got[tuple(i)].item(), expected[tuple(i)].item())
                                    for i in differ.nonzero()[:6].tolist()]


def _assert_close_to_eagers(got: torch.Tensor, expected: torch.Tensor, n: int) -> None:
    """Each part within the tolerance of |expected| (a part near 0 beside a large one carries
    the other's absolute error), the same nan/inf pattern, and the sign bit of every part that
    is not nan. An imaginary part 2 pi away (another branch of the logarithm) fails."""
    assert got.shape == expected.shape and got.dtype == expected.dtype
    a, e = torch.view_as_real(got.resolve_conj()), torch.view_as_real(expected.resolve_conj())
    scale = expected.abs().unsqueeze(-1)
    close = (a == e) | (a.isnan() & e.isnan()) | ((a - e).abs() <= _tolerance(got.dtype, n) * scale)
    ok = close & ((a.signbit() == e.signbit()) | e.isnan())
    if not bool(ok.all()):
        bad = (~ok).any(-1).nonzero()[:6].tolist()
        lines = [f"at {i}: expected {expected[tuple(i)].item()}, got {got[tuple(i)].item()}" for i in bad]
        raise AssertionError(f"{int((~ok).any(-1).sum())} values differ:\n  " + "\n  ".join(lines))


def _wide(dtype: torch.dtype, shape, seed: int) -> torch.Tensor:
    """Imaginary parts spread over many turns, so that eager's branch and the principal one
    part, and real parts on a scale where terms take turns at being the larger."""
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(*shape, generator=g, dtype=torch.float64) * 3
    imag = torch.randn(*shape, generator=g, dtype=torch.float64) * 50
    return torch.complex(real, imag).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5, 33, 1000])
def test_values_are_eagers(n, dtype):
    """Along the last, a middle and the first dim; a non-contiguous view and a lazily
    conjugated one; imaginary parts over many turns (eager's branch, not the principal one)."""
    z = torch.randn(3, n, 4, dtype=dtype) * 4
    wide = _wide(dtype, (4, n), n)
    wide[:, n // 2] += 200  # one term far larger than the rest: the running value restarts there
    cases = [
        (lambda t: torch.logcumsumexp(t, -1), z),
        (lambda t: torch.logcumsumexp(t, 1), z),
        (lambda t: torch.logcumsumexp(t, 0), z.transpose(0, 1)),
        (lambda t: torch.logcumsumexp(t.conj(), -2), z),
        (lambda t: torch.logcumsumexp(t, -1), wide),
        (lambda t: torch.logcumsumexp(t, 0), wide.T),
    ]
    for fn, x in cases:
        _assert_same_bits(_strict(fn)(x), fn(x))


def test_values_from_real_data_keep_their_signed_zeros():
    """Complex tensors made from real data: every imaginary part an exact +0 or -0, among them
    -0 where eager's first step turns it into +0, and all-negative real parts."""
    for dtype in DTYPES:
        real = torch.tensor([[-0.0, 1.0, -3.0, 2.0, 0.0], [-1.0, -2.0, -3.0, -4.0, -5.0]], dtype=dtype.to_real())
        for imag in (torch.zeros_like(real), -torch.zeros_like(real)):
            z = torch.complex(real, imag)
            for dim in (0, 1):
                fn = lambda t, dim=dim: torch.logcumsumexp(t, dim)
                _assert_same_bits(_strict(fn)(z), fn(z))


def _special_rows(dtype: torch.dtype) -> torch.Tensor:
    """±inf real parts, -inf meeting -inf (and eager's -inf + 0i start), nan in either part,
    ±0 parts, and real parts whose exp overflows."""
    huge = 1e38 if dtype == torch.complex64 else 1e300
    c = complex
    rows = [
        [c(-inf, 1.0), c(-inf, -2.0), c(0.5, -0.0), c(-inf, 0.0), c(1.0, 2.0)],
        [c(inf, 1.0), c(0.5, 0.5), c(inf, -1.0), c(-inf, 3.0), c(2.0, 0.0)],
        [c(0.0, -0.0), c(-0.0, 0.0), c(-0.0, -0.0), c(0.0, 0.0), c(1e-30, -1e-30)],
        [c(huge, 1.0), c(huge, -1.0), c(-huge, 0.5), c(huge, 0.0), c(3.0, 3.0)],
        [c(1.0, 1.0), c(nan, 0.0), c(2.0, 2.0), c(0.0, nan), c(-inf, 0.0)],
        [c(-inf, -0.0), c(-1.0, 0.0), c(inf, inf), c(1.0, -inf), c(0.0, 1e30)],
    ]
    return torch.tensor(rows, dtype=dtype)


def _special_long(dtype: torch.dtype) -> torch.Tensor:
    """The same kinds of entries inside long rows, where the scan groups them differently."""
    z = _wide(dtype, (6, 100), 7)
    z[0, 40] = complex(inf, 1.0)
    z[1, 10] = complex(nan, 0.0)
    z[2, :50] = complex(-inf, 0.0)
    z[3, :30] = complex(-inf, 5.0)
    z[4] += 1e30 if dtype == torch.complex64 else 1e300  # every exp overflows
    z[5, 60] = complex(-0.0, inf)
    return z


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_match_eager(dtype):
    for z in (_special_rows(dtype), _special_long(dtype)):
        for dim in (-1, 0):
            fn = lambda t, dim=dim: torch.logcumsumexp(t, dim)
            _assert_same_bits(_strict(fn)(z), fn(z))


def test_edges_are_eagers():
    """A 0-d tensor is copied (no step with -inf + 0i, so -inf - 0i stays), an empty dim stays
    empty, a one-element tensor, and a real logcumsumexp beside the rule is eager's."""
    cases = [
        (lambda t: torch.logcumsumexp(t, 0), torch.tensor(complex(-inf, -0.0))),
        (lambda t: torch.logcumsumexp(t, -1), torch.tensor(complex(1.0, -0.0))),
        (lambda t: torch.logcumsumexp(t, 1), torch.zeros(3, 0, dtype=torch.complex64)),
        (lambda t: torch.logcumsumexp(t, 1), torch.zeros(0, 4, dtype=torch.complex64)),
        # one element: its parts alone are contiguous views of eager's result
        (lambda t: torch.logcumsumexp(t.unsqueeze(0), 0), torch.tensor(complex(2.0, -1.5))),
        (lambda t: torch.logcumsumexp(t, -1), torch.tensor([complex(-0.0, 3.0)])),
        (lambda t: torch.logcumsumexp(t.real, 0) + torch.logcumsumexp(t, 0), torch.randn(5, dtype=torch.complex64)),
    ]
    for fn, x in cases:
        _assert_same_bits(_strict(fn)(x), fn(x))


def _loss(w: torch.Tensor):
    def loss(t):
        out = torch.logcumsumexp(t.conj() * 1j, -1)
        # the imaginary part is read directly: its branch is eager's, so is its gradient's path
        return (out.exp() * w).abs().sum() + out.imag.sum() + torch.logcumsumexp(t, 0).real.sum()
    return loss


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 100])
def test_gradients_match_eager(n, dtype):
    """Eager's formula, dL/dx_j = sum_(k>=j) g_k conj(exp(x_j - out_k)), computed as eager
    does (a reversed logcumsumexp of log(conj g) - out), here by the rule's own scan: first
    derivatives to the tolerance, with an output gradient that has zeros (log 0 = -inf), and
    second derivatives."""
    torch.manual_seed(n)
    z = torch.randn(2, n, dtype=dtype) * 2
    w = torch.randn(2, n, dtype=dtype)
    w[:, ::3] = 0
    fn = _loss(w)
    x = z.clone().requires_grad_()
    (expected,) = torch.autograd.grad(fn(x), x, create_graph=True)
    (expected_2,) = torch.autograd.grad(expected.abs().sum(), x)
    x = z.clone().requires_grad_()
    (got,) = torch.autograd.grad(_strict(fn)(x), x, create_graph=True)
    # a gradient entry is a sum of n terms, each within the tolerance of its size
    torch.testing.assert_close(got, expected, rtol=n * _tolerance(dtype, n), atol=n * _tolerance(dtype, n))
    (got_2,) = torch.autograd.grad(got.abs().sum(), x)
    # second derivatives: sums of products of rounded first-order terms, ten times that
    torch.testing.assert_close(got_2, expected_2, rtol=10 * n * _tolerance(dtype, n),
                               atol=10 * n * _tolerance(dtype, n))


def test_under_inductor():
    """Inductor compiles the scan's real ops: values (special rows and long rows) and
    gradients, as with the eager inner compiler."""
    dtype = torch.complex64
    short, long = _special_rows(dtype), _wide(dtype, (40, 3), 3)

    def fn(a, b):
        return torch.logcumsumexp(a, -1), torch.logcumsumexp(b, 0)

    got, expected = _strict(fn, "inductor")(short, long), fn(short, long)
    _assert_same_bits(got[0], expected[0])
    _assert_same_bits(got[1], expected[1])
    w = torch.randn(3, 5, dtype=dtype)
    loss = _loss(w)
    z = torch.randn(3, 5, dtype=dtype)
    x = z.clone().requires_grad_()
    (expected_grad,) = torch.autograd.grad(loss(x), x)
    x = z.clone().requires_grad_()
    (got_grad,) = torch.autograd.grad(_strict(loss, "inductor")(x), x)
    torch.testing.assert_close(got_grad, expected_grad, rtol=1e-5, atol=1e-5)


def test_compile_backend_has_no_island():
    """Under torch.compile's realify backend, with islands allowed, no island warning."""
    z = _wide(torch.complex64, (2, 50), 11)
    fn = torch.compile(lambda t: torch.logcumsumexp(t * 1j, 1), backend="realify")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*eager island.*")
        got = fn(z)
    _assert_same_bits(got, torch.logcumsumexp(z * 1j, 1))


def test_onnx_runtime():
    """Exported and run in ONNX Runtime (realify.onnx writes the scan form): eager's values and
    branch to rounding, in the working precision the export traced (the CPU's: complex64
    accumulated in double)."""
    z = _wide(torch.complex64, (3, 12), 5)  # four rounds: restarts and turns across them

    def program(t):
        return torch.logcumsumexp(t, -1)

    (got,) = _run(to_onnx(program, (z,)).model_proto, z)
    _assert_close_to_eagers(torch.view_as_complex(torch.from_numpy(got)), program(z), 12)


# ---- the scan form, as realify.onnx writes it --------------------------------------------


def _scan_form(z: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.complex(*reductions.logcumsumexp_parts(z.real, z.imag, dim % z.dim()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5, 33, 1000])
def test_scan_form_is_eagers_to_rounding(n, dtype):
    """Imaginary parts over many turns (eager's branch, not the principal one, nor the one the
    scan's grouping gives), one term far larger than the rest, along either dim."""
    wide = _wide(dtype, (4, n), n)
    wide[:, n // 2] += 200
    _assert_close_to_eagers(_scan_form(wide, -1), torch.logcumsumexp(wide, -1), n)
    _assert_close_to_eagers(_scan_form(wide.T, 0), torch.logcumsumexp(wide.T, 0), n)
    real = torch.complex(wide.real, torch.zeros_like(wide.real))  # exact axis points
    _assert_close_to_eagers(_scan_form(real, -1), torch.logcumsumexp(real, -1), n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scan_form_special_values(dtype):
    """-inf, +inf and nan real parts, nan imaginary parts, signed zeros and overflowing real
    parts give eager's values, in short and long rows. Left out: an infinite imaginary part
    with a finite real part, which eager's loop absorbs into an earlier +inf real part and the
    scan may meet first (nan where eager has an infinity: the step is not associative there),
    an imaginary part of 1e30, whose phase no precision holds, and a row of real parts of 1e30,
    equal to rounding, whose sums' magnitudes no precision holds either, so that eager's and
    the scan's weights differ (docs/numerics.md)."""
    for z in (_special_rows(dtype), _special_long(dtype)):
        ordinary = (z.imag.isfinite() & (z.imag.abs() < 1e20) | z.imag.isnan()) & (z.real.abs() < 1e20)
        kept = ordinary.all(0).nonzero().flatten(), ordinary.all(1).nonzero().flatten()
        rows, columns = z[kept[1]], z[:, kept[0]]
        _assert_close_to_eagers(_scan_form(rows, -1), torch.logcumsumexp(rows, -1), z.shape[-1])
        _assert_close_to_eagers(_scan_form(columns, 0), torch.logcumsumexp(columns, 0), z.shape[0])


def test_scan_form_spreads_nan_as_eager_does():
    """Two +inf real parts with phases in different quadrants sum to inf + nan i; eager's loop
    then gives nan + nan i for every later entry, which the scan, grouping the later entries
    first, would not."""
    z = torch.tensor([[complex(inf, 1.0), complex(0.5, 0.5), complex(inf, -2.0), complex(-inf, 3.0), 2.0]])
    _assert_close_to_eagers(_scan_form(z, -1), torch.logcumsumexp(z, -1), 5)
