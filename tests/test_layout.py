"""Memory-layout choices that keep the real graph fast without changing a value: products on
interleaved pairs (realify::cmul_pairs), views instead of functionalization's copies, and
BLAS-ready GEMM operands. Each is compared with eager complex PyTorch."""

from __future__ import annotations

import math
import re

import pytest
import torch
from backend_support import RecordingInner

import realify
from realify.backend import SMALL_INPUT
from realify.bench.workloads import SpectralConv2d, apply_rotary_emb, rotary_freqs
from realify.passes.layout import PAIRS_GEMM_INTENSITY, PAIRS_GEMM_MIN_INNER
from realify.runtime.ops import cmm_pairs, cmul_pairs


def _targets(gm: torch.fx.GraphModule) -> set[str]:
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


@pytest.mark.parametrize("conj_a", [False, True])
@pytest.mark.parametrize("conj_b", [False, True])
def test_cmul_pairs_values_and_gradients(conj_a, conj_b):
    a = torch.randn(3, 1, 4, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 4, 2, dtype=torch.float64, requires_grad=True)

    def reference(a, b):
        za, zb = torch.view_as_complex(a), torch.view_as_complex(b)
        return torch.view_as_real((za.conj() if conj_a else za) * (zb.conj() if conj_b else zb))

    torch.testing.assert_close(cmul_pairs(a, b, conj_a, conj_b), reference(a, b), rtol=0, atol=0)
    assert torch.autograd.gradcheck(lambda a, b: cmul_pairs(a, b, conj_a, conj_b), (a, b))
    assert torch.autograd.gradgradcheck(lambda a, b: cmul_pairs(a, b, conj_a, conj_b), (a, b))


def test_cmul_pairs_takes_non_viewable_pairs():
    # a transposed (..., 2) operand cannot be viewed as complex: the op copies it first
    a = torch.randn(2, 4, 3).transpose(0, 2)  # (3, 4, 2), last stride 12
    b = torch.randn(4, 2)
    expected = torch.view_as_real(torch.view_as_complex(a.contiguous()) * torch.view_as_complex(b))
    torch.testing.assert_close(cmul_pairs(a, b, False, False), expected, rtol=0, atol=0)


@pytest.mark.parametrize("conj_a", [False, True])
@pytest.mark.parametrize("conj_b", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cmm_pairs_values_and_gradients(conj_a, conj_b, batch):
    a = torch.randn(*batch, 3, 4, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(*batch, 4, 5, 2, dtype=torch.float64, requires_grad=True)

    def reference(a, b):
        za, zb = torch.view_as_complex(a), torch.view_as_complex(b)
        return torch.view_as_real((za.conj() if conj_a else za) @ (zb.conj() if conj_b else zb))

    torch.testing.assert_close(cmm_pairs(a, b, conj_a, conj_b), reference(a, b), rtol=0, atol=0)
    assert torch.autograd.gradcheck(lambda a, b: cmm_pairs(a, b, conj_a, conj_b), (a, b))
    assert torch.autograd.gradgradcheck(lambda a, b: cmm_pairs(a, b, conj_a, conj_b), (a, b))


def _matrix_products(a, b, c):
    # mm, a transposed factor and a conjugated one, bmm through matmul with a conjugate
    # transpose, baddbmm with complex alpha, an einsum over modes (the FNO contraction)
    return (a @ b, a.mT @ b.conj(), torch.matmul(c, c.mH), torch.baddbmm(c, c, c, alpha=0.5j, beta=2),
            torch.einsum("bixy,ioxy->boxy", c[:2, :, None], c.transpose(0, 1)[:, :, None]))


def _special_matrices():
    # complex matrices with inf, nan, ±0 and exact axis points among ordinary entries
    torch.manual_seed(0)
    n = PAIRS_GEMM_MIN_INNER  # the smallest inner dimension that runs on the pairs
    a, b = torch.randn(n, n, dtype=torch.complex64), torch.randn(n, n, dtype=torch.complex64)
    a[0, 0] = complex(math.inf, 0.0)
    a[1, 2] = complex(math.nan, 1.0)
    a[2] = torch.complex(torch.tensor(-0.0), torch.tensor(0.0))
    b[:, 3] = torch.complex(torch.tensor(0.0), torch.tensor(-0.0))
    b[4, 4] = complex(0.0, -math.inf)
    a[3, 1] = 2.0  # real-axis and imaginary-axis points
    b[5, 0] = 3j
    c = torch.randn(4, n, n, dtype=torch.complex64)
    c[1, 0, 0] = complex(-math.inf, math.inf)
    return a, b, c


def _same_special_values(got, expected):
    # where eager's result is inf/nan/±0, realify's is the same (sign included)
    g, e = torch.view_as_real(got), torch.view_as_real(expected)
    assert torch.equal(g.isnan(), e.isnan())
    assert torch.equal(g.isinf(), e.isinf()) and torch.equal(g[e.isinf()], e[e.isinf()])
    zeros = e == 0
    assert torch.equal(g[zeros] == 0, zeros[zeros]) and torch.equal(g[zeros].signbit(), e[zeros].signbit())


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_small_matrix_products_run_on_pairs_and_match_eager(inner):
    # below PAIRS_GEMM_INTENSITY a complex GEMM is BLAS's complex GEMM on the pairs: eager's
    # own kernel, so special values come out where eager puts them (the planar form's
    # cancellations differ: README, "Where values differ from eager"); gradients too
    a, b, c = (t.requires_grad_() for t in _special_matrices())
    torch._dynamo.reset()
    rec = RecordingInner() if inner == "eager" else "inductor"
    got = realify.compile(_matrix_products, inner=rec)(a, b, c)
    expected = _matrix_products(a, b, c)
    for k, (g, e) in enumerate(zip(got, expected)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, equal_nan=True)
        if k != 3:  # baddbmm's complex alpha: README, "Where values differ from eager"
            _same_special_values(g, e)
    if inner == "eager":
        forward = next(gm for kind, gm in rec.graphs if kind == "forward")
        assert "aten.mm.default" not in _targets(forward) and "aten.bmm.default" not in _targets(forward)
        assert [n.target for n in forward.graph.nodes].count(torch.ops.realify.cmm_pairs.default) == 5
    # gradients, on finite values (eager's own backward is what is compared)
    a, b, c = (torch.randn_like(t).requires_grad_() for t in (a, b, c))
    loss = lambda outs: sum((o * o.conj().sin()).real.sum() for o in outs)
    loss(realify.compile(_matrix_products, inner=rec)(a, b, c)).backward()
    got_grads = [t.grad.clone() for t in (a, b, c)]
    for t in (a, b, c):
        t.grad = None
    loss(_matrix_products(a, b, c)).backward()
    for g, t in zip(got_grads, (a, b, c)):
        torch.testing.assert_close(g, t.grad, rtol=1e-4, atol=1e-4)


def _matrix_vector(c, v):
    return torch.einsum("hn,hnl->hl", c, v)  # S4's kernel: a batch of vector-matrix products


def test_backward_of_products_on_pairs_conjugates_and_broadcasts_in_inductor():
    """The backward of a vector-matrix product on pairs: grad_c = g @ conj(v)^T (a conjugated
    GEMM operand: conjugated by the kernel that lays it out, not by ATen's extra copy) and
    grad_v = conj(c)^T @ g, an outer product (inner dimension 1: elementwise in Inductor, not a
    GEMM). Special values in the incoming gradient and the factors land where eager's do."""
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    n = PAIRS_GEMM_MIN_INNER
    c = torch.randn(3, n, dtype=torch.complex64)
    v = torch.randn(3, n, 24, dtype=torch.complex64)
    c[0, 1], c[1, 2] = complex(math.inf, 0.0), complex(-0.0, 0.0)
    v[1, 3, 4], v[2, 0, :] = complex(math.nan, 1.0), 2.0
    g = torch.randn(3, 24, dtype=torch.complex64)
    g[0, 5], g[2, 7], g[1, 0] = complex(0.0, -0.0), complex(-math.inf, 1.0), 1j

    def grads(fn):
        leaves = [t.clone().requires_grad_() for t in (c, v)]
        out = fn(*leaves)
        return (out.detach(), *torch.autograd.grad(out, leaves, g))

    torch._dynamo.reset()
    got, (forward, backward) = run_and_get_code(grads, realify.compile(_matrix_vector))
    for x, e in zip(got, grads(_matrix_vector)):
        torch.testing.assert_close(x, e, rtol=1e-5, atol=1e-5, equal_nan=True)
        _same_special_values(x, e)
    assert "aten.bmm.default(" in forward and backward.count("aten.bmm.default(") == 1, backward
    assert "conj_physical" not in backward


def test_permuted_pairs_reach_blas_as_eight_byte_words():
    # einsum's mode-major permute of complex64 pairs is copied as one float64 word per
    # element (a bitcast of the input's pairs, the views replayed on it), not as float32
    # pairs two lanes at a time; values and gradients as eager's
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    x = torch.randn(4, 16, 6, 5, dtype=torch.complex64, requires_grad=True)
    w = torch.randn(16, 8, 6, 5, dtype=torch.complex64, requires_grad=True)

    def f(x, w):
        return torch.einsum("bixy,ioxy->boxy", x, w)

    def step(fn):
        out = fn(x, w)
        (out * out.conj().cos()).real.sum().backward()
        grads = x.grad.clone(), w.grad.clone()
        x.grad = w.grad = None
        return (out.detach(), *grads)

    got, (forward, backward) = run_and_get_code(step, realify.compile(f))
    for g, e in zip(got, step(f)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    # both operands: the graph input's pairs as words
    assert len(re.findall(r"view\.dtype\((?:arg|primals)\w*, torch\.float64\)", forward)) == 2, forward
    assert "aten.bmm.default" in forward and "aten.bmm.default" in backward


def test_matrix_products_on_pairs_or_planes_by_size():
    # the layout pass puts a matrix product on the pairs below the measured crossover only;
    # the compile backend asks for it (pair_products), export does not
    def targets(n, **options):
        a = torch.randn(n, n, dtype=torch.complex64)
        return _targets(realify.decompose(lambda a, b: a @ b, [a, a], inputs="interleaved",
                                          outputs="interleaved", **options))

    small, large = 512, 640  # intensity n/3: 171 and 213, either side of 192
    assert small / 3 < PAIRS_GEMM_INTENSITY < large / 3
    assert targets(small, pair_products=True) == {"realify.cmm_pairs.default"}
    assert "realify.cmm_pairs.default" not in targets(large, pair_products=True)
    assert "realify.cmm_pairs.default" not in targets(small)
    # a wide product with a short inner dimension is as small: m n k / (m k + k n + m n);
    # below PAIRS_GEMM_MIN_INNER (a quantum gate's k = 2) it stays planar
    for k in (PAIRS_GEMM_MIN_INNER, 2):
        wide = realify.decompose(lambda a, b: a @ b, [torch.randn(4096, k, dtype=torch.complex64),
                                                      torch.randn(k, 4096, dtype=torch.complex64)], pair_products=True)
        assert ("realify.cmm_pairs.default" in _targets(wide)) == (k == PAIRS_GEMM_MIN_INNER)


@pytest.mark.parametrize("interleaved", [True, False])
def test_rotary_runs_on_pairs_and_matches_eager(interleaved):
    q = torch.randn(2, 16, 4, 32, requires_grad=True)
    k = torch.randn(2, 16, 4, 32, requires_grad=True)
    freqs = rotary_freqs(16, 32)
    rec = RecordingInner()
    with realify.config.patch(interleaved_products=interleaved):
        oq, ok = realify.compile(apply_rotary_emb, inner=rec)(q, k, freqs)
    (oq.square().sum() + ok.sin().sum()).backward()
    got = oq, ok, q.grad.clone(), k.grad.clone()
    q.grad = k.grad = None
    eq, ek = apply_rotary_emb(q, k, freqs)
    (eq.square().sum() + ek.sin().sum()).backward()
    for g, e in zip(got, (eq, ek, q.grad, k.grad)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    ops = set().union(*(_targets(gm) for kind, gm in rec.graphs if kind != "dynamo"))
    assert ("realify.cmul_pairs.default" in ops) == interleaved


def test_layout_pass_keeps_pairs_through_views_and_decides_products():
    # rules compute on planar parts; the layout pass (realify/passes/layout.py) keeps a value made
    # with view_as_complex as its pairs through views (no stack back into pairs) and, asked,
    # runs its products on the pairs
    def f(x, w):
        z = torch.view_as_complex(x)[:, None, 1:].transpose(0, 1)
        return torch.view_as_real(z * w), torch.view_as_real(z.squeeze(0))

    x = torch.randn(3, 5, 2)
    w = torch.randn(1, 4, dtype=torch.complex64)
    expected = f(x, w)
    for products in (False, True):
        gm = realify.decompose(f, [x, w], pair_products=products)
        targets = _targets(gm)
        assert ("realify.cmul_pairs.default" in targets) == products
        # one stack, the planar product's parts into pairs, and none for cmul_pairs, whose
        # operands are pairs already (w enters as a view of its pairs); never the view of z,
        # which stays x's pairs
        assert [n.target for n in gm.graph.nodes].count(torch.ops.aten.stack.default) == (0 if products else 1)
        for got, e in zip(gm(x, w), expected):
            torch.testing.assert_close(got, e, rtol=1e-6, atol=1e-6)
    real = realify.decompose(lambda x: torch.view_as_real(torch.view_as_complex(x)[1:].unsqueeze(0)), [x])
    assert _targets(real) <= {"aten.slice.Tensor", "aten.unsqueeze.default"}


def _spectrum_shifted(x):
    # neuraloperator's spectral convolution up to its graph break: rfftn, fftshift, out
    return torch.fft.fftshift(torch.fft.rfftn(x, dim=(-2, -1), norm="ortho"), dim=(-2,))


def _spectrum_through_a_break(x, w):
    z = _spectrum_shifted(x)
    torch._dynamo.graph_break()
    z = torch.fft.ifftshift(z * w, dim=(-2,))
    return torch.fft.irfftn(z, s=x.shape[-2:], dim=(-2, -1), norm="ortho")


def test_fft_wanted_as_pairs_computes_pairs():
    # an FFT whose result only leaves as pairs (through an fftshift of an odd size, rolled on
    # the pairs) is the FFT library's interleaved result: no split into planes and stack back
    x = torch.randn(2, 3, 7, 6)
    gm = realify.decompose(_spectrum_shifted, [x], inputs="interleaved", outputs="interleaved")
    assert _targets(gm) == {"realify.fft_r2c_pairs.default", "aten.roll.default"}, gm.code
    torch.testing.assert_close(gm(x)[0], torch.view_as_real(_spectrum_shifted(x)), rtol=0, atol=0)
    # of an even size the shift is a sign product on the input (realify/passes/centered_fft.py),
    # and the FFT still computes pairs
    x = torch.randn(2, 3, 8, 6)
    gm = realify.decompose(_spectrum_shifted, [x], inputs="interleaved", outputs="interleaved")
    targets = _targets(gm)
    assert "realify.fft_r2c_pairs.default" in targets and "aten.roll.default" not in targets, gm.code
    assert "aten.stack.default" not in targets, gm.code
    expected = torch.view_as_real(_spectrum_shifted(x))
    # the library transforms the modulated input, not the rolled one: within 8 eps log2 N of the
    # largest element (docs/numerics.md, "FFTs"; N = 48 < 2^6)
    torch.testing.assert_close(gm(x)[0], expected, rtol=0, atol=8 * 2.0 ** -23 * 6 * float(expected.abs().max()))
    # read planar (|z|, or a part read back from the pairs into arithmetic): the planar FFT
    for planar in (lambda x: _spectrum_shifted(x).abs(),
                   lambda x: torch.view_as_real(_spectrum_shifted(x))[..., 0] * 2):
        gm = realify.decompose(planar, [x])
        assert "realify.fft_r2c.default" in _targets(gm) and "realify.fft_r2c_pairs.default" not in _targets(gm)
        torch.testing.assert_close(gm(x)[0], planar(x), rtol=1e-6, atol=1e-6)
    c2c = realify.decompose(lambda z: torch.fft.fft2(z).transpose(0, 1), [torch.randn(4, 5, dtype=torch.complex64)],
                            inputs="interleaved", outputs="interleaved")
    assert "realify.fft_c2c_pairs.default" in _targets(c2c) and "aten.stack.default" not in _targets(c2c)
    # through ops computed alike on both parts (rule 2 runs them on the pairs): pairs too
    z = torch.randn(4, 5, dtype=torch.complex64)
    scaled = realify.decompose(lambda z: torch.fft.fft(z) * 0.5 - z, [z], inputs="interleaved", outputs="interleaved")
    assert {"realify.fft_c2c_pairs.default"} <= _targets(scaled), scaled.code
    assert "aten.stack.default" not in _targets(scaled) and "realify.fft_c2c.default" not in _targets(scaled)
    torch.testing.assert_close(torch.view_as_complex(scaled(torch.view_as_real(z))[0]), torch.fft.fft(z) * 0.5 - z,
                               rtol=0, atol=0)


def _modes_mixed(x, w):
    # neuraloperator's spectral contraction: modes of the forward FFT (centred rows, first
    # columns) mixed over channels by einsum, which copies them into matrices it can multiply
    modes = torch.fft.fftshift(torch.fft.rfft2(x), dim=-2)[..., 6:10, :3]
    return torch.einsum("bixy,ioxy->boxy", modes, w)


def test_fft_read_by_a_product_on_pairs_computes_pairs():
    # the contraction runs on pairs (rule 3) and einsum's copy of the modes moves pairs (rule 1),
    # so the FFT's result is only wanted as pairs (rule 4, on the walk after rule 3's)
    x = torch.randn(2, PAIRS_GEMM_MIN_INNER, 16, 16)
    w = torch.randn(PAIRS_GEMM_MIN_INNER, 5, 4, 3, dtype=torch.complex64)
    gm = realify.decompose(_modes_mixed, [x, w], inputs="interleaved", outputs="interleaved", pair_products=True)
    targets = _targets(gm)
    assert {"realify.fft_r2c_pairs.default", "realify.cmm_pairs.default"} <= targets, gm.code
    assert "realify.fft_r2c.default" not in targets and "aten.stack.default" not in targets, gm.code
    got = realify.runtime.boundary.RealCall(gm, gm.realify_signature)(x, w)
    torch.testing.assert_close(got, _modes_mixed(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_spectrum_crossing_a_graph_break_matches_eager(inner):
    # values and gradients where the spectrum leaves one graph as pairs and enters the next
    x = torch.randn(2, 3, 8, 6, requires_grad=True)
    w = torch.randn(8, 4, dtype=torch.complex64, requires_grad=True)
    torch._dynamo.reset()
    got = realify.compile(_spectrum_through_a_break, inner=inner)(x, w)
    got.square().sum().backward()
    got_grads = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    expected = _spectrum_through_a_break(x, w)
    expected.square().sum().backward()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    for g, e in zip(got_grads, (x.grad, w.grad)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_a_constant_spectrum_is_filled_as_pairs():
    # torch.zeros of a complex dtype leaving as pairs (neuraloperator's spectrum to write modes
    # into, made before a graph break): one fill of the pairs, not two parts stacked; parts of
    # different constants (-0.0 and 0.0 among them) stay two parts
    def program(x):
        return (torch.zeros(x.shape, dtype=torch.complex64),
                torch.full(x.shape, complex(-0.0, 0.0), dtype=torch.complex64),
                torch.full(x.shape, 1 + 2j, dtype=torch.complex64), x * 2)

    x = torch.randn(2, 3, dtype=torch.complex64)
    gm = realify.decompose(program, [x], inputs="interleaved", outputs="interleaved")
    fills = [n for n in gm.graph.nodes if n.target is torch.ops.aten.full.default]
    assert [tuple(n.args[0]) for n in fills].count((2, 3, 2)) == 1, gm.code
    stacked = [n.args[0] for n in gm.graph.nodes if n.target is torch.ops.aten.stack.default]
    assert sum(all(a.target is torch.ops.aten.full.default for a in parts) for parts in stacked) == 2, gm.code
    for got, expected in zip(gm(torch.view_as_real(x)), program(x)):
        assert torch.equal(got, torch.view_as_real(expected))
        assert torch.equal(got.signbit(), torch.view_as_real(expected).signbit())


def _modes_written(out, z, block):
    # neuraloperator's spectral convolution after its contraction: the mixed modes written into
    # a spectrum (a slice and a select of it), fftshift, the inverse FFT
    out[:, :, 2:6, :3] = block
    out[:, :, 0] = z[:, :, 0]
    return torch.fft.irfftn(torch.fft.ifftshift(out, dim=(-2,)), s=(8, 8), dim=(-2, -1))


def test_writes_of_pairs_into_pairs_stay_pairs():
    # slice_scatter/select_scatter of one complex value into another, both pairs: the write of
    # the pairs (it moves bits: equal to eager's to the last signed zero and NaN), not one per
    # part stacked back into pairs
    z = torch.randn(2, 3, 8, 5, dtype=torch.complex64)
    rows = torch.complex(torch.tensor([0.0, -0.0, float("inf"), float("nan")]),
                         torch.tensor([-0.0, float("-inf"), 1.0, float("nan")]))
    block = rows[:, None].expand(2, 3, 4, 3).clone()
    out = torch.complex(torch.full((2, 3, 8, 5), -0.0), torch.zeros(2, 3, 8, 5))
    gm = realify.decompose(_modes_written, [out, z, block], inputs="interleaved", outputs="interleaved")
    targets = _targets(gm)
    assert {"aten.slice_scatter.default", "aten.select_scatter.default"} <= targets, gm.code
    assert "aten.stack.default" not in targets, gm.code
    got_out = out.clone()
    got = realify.runtime.boundary.RealCall(gm, gm.realify_signature)(got_out, z, block)
    expected = _modes_written(out, z, block)
    got_pairs, expected_pairs = torch.view_as_real(got_out), torch.view_as_real(out)
    torch.testing.assert_close(got_pairs, expected_pairs, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(got_pairs.signbit(), expected_pairs.signbit())
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def _written_across_a_break(x, w):
    # the zero spectrum made in one graph, written in the next (an input the graph writes)
    z = _spectrum_shifted(x)
    out = torch.zeros_like(z)
    torch._dynamo.graph_break()
    out[..., 2:6, :3] = z[..., 2:6, :3] * w
    out[..., 0, :] = z[..., 0, :]
    return torch.fft.irfftn(torch.fft.ifftshift(out, dim=(-2,)), s=x.shape[-2:], dim=(-2, -1)), out


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_writes_into_a_spectrum_across_a_graph_break_match_eager(inner):
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.complex64, requires_grad=True)
    torch._dynamo.reset()
    got, got_out = realify.compile(_written_across_a_break, inner=inner)(x, w)
    (got.square().sum() + got_out.abs().sum()).backward()
    got_grads = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    expected, expected_out = _written_across_a_break(x, w)
    (expected.square().sum() + expected_out.abs().sum()).backward()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_out, expected_out, rtol=1e-5, atol=1e-6)
    for g, e in zip(got_grads, (x.grad, w.grad)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def _rotary_with_trainable_freqs(q, k, angles):
    # the frequency table differentiable too, so the backward needs every conj flag:
    # grad q = g * conj(f) and grad f = sum(g * conj(q))
    return apply_rotary_emb(q, k, torch.polar(torch.ones_like(angles), angles))


def test_pair_products_lowered_to_aten_in_inductor(recwarn):
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    q = torch.randn(2, 8, 2, 16, requires_grad=True)
    k = torch.randn(2, 8, 2, 16, requires_grad=True)
    angles = torch.randn(8, 8, requires_grad=True)
    compiled = realify.compile(_rotary_with_trainable_freqs)

    def step(fn):
        oq, ok = fn(q, k, angles)
        (oq.square().sum() + ok.sin().sum()).backward()
        grads = tuple(t.grad.clone() for t in (q, k, angles))
        q.grad = k.grad = angles.grad = None
        return (oq.detach(), ok.detach(), *grads)

    got, code = run_and_get_code(step, compiled)
    for g, e in zip(got, step(_rotary_with_trainable_freqs)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    # forward and backward call ATen's complex kernel directly, no Python custom op
    assert len(code) == 2
    assert all("aten.mul.Tensor" in c and "cmul_pairs" not in c for c in code)
    assert "conj_physical" in code[1]
    assert not [w for w in recwarn if "complex operators" in str(w.message)]


def test_pair_products_lowering_keeps_user_passes():
    seen = []

    def user_pass(graph):
        seen.append(sum(1 for n in graph.nodes if n.target is torch.ops.realify.cmul_pairs.default))

    q, k, freqs = torch.randn(1, 4, 1, 8), torch.randn(1, 4, 1, 8), rotary_freqs(4, 8)
    out = realify.compile(apply_rotary_emb, inner_options={"post_grad_custom_post_pass": user_pass})(q, k, freqs)
    for g, e in zip(out, apply_rotary_emb(q, k, freqs)):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)
    assert seen == [2]  # the user's pass runs first and sees realify's op


def test_pass_sequence_runs_a_callers_passes_first_and_caches_only_when_each_can():
    from torch._inductor.custom_graph_pass import CustomGraphPass

    from realify.inductor import PassSequence

    seen = []

    class Named(CustomGraphPass):
        def __init__(self, name):
            self.name = name

        def __call__(self, graph):
            seen.append(self.name)

        def uuid(self):
            return self.name

    callers = [Named("a"), Named("b")]
    sequence = PassSequence(PassSequence(callers, Named("c")), Named("d"))
    sequence(torch.fx.Graph())
    assert seen == ["a", "b", "c", "d"] and sequence.uuid() == ("a", "b", "c", "d")
    only = Named("e")
    assert PassSequence(only).passes == (only,) and PassSequence(None, only).passes == (only,)
    assert PassSequence(lambda graph: None, Named("x")).uuid() is None  # a plain function has no uuid


@pytest.mark.parametrize("size", [8, SMALL_INPUT + 1])
def test_boundary_layout_by_input_size(size):
    # for inner compilers other than Inductor, small complex inputs enter as their own
    # (re, im) pairs (a free view) and larger ones are split into planes once; either way a
    # product of inputs that feeds more arithmetic is planar real arithmetic
    torch._dynamo.reset()  # static shapes: no automatic dynamic from an earlier size
    rec = RecordingInner()
    a, b = torch.randn(size, dtype=torch.complex64), torch.randn(size, dtype=torch.complex64)
    out = realify.compile(lambda a, b: a * b + 1, inner=rec)(a, b)
    torch.testing.assert_close(out, a * b + 1)
    (forward,) = [gm for kind, gm in rec.graphs if kind == "forward"]
    shapes = [tuple(n.meta["val"].shape) for n in forward.graph.nodes if n.op == "placeholder"]
    assert shapes == ([(size, 2)] * 2 if size <= SMALL_INPUT else [(2, size)] * 2)
    assert "realify.cmul_pairs.default" not in _targets(forward)


def _input_layouts(code: str) -> dict[str, tuple]:
    """Each graph input's (size, stride) as Inductor's generated code asserts it: one
    assert_size_stride per input, or (torch >= 2.15) one assert_size_stride_grouped for all."""
    import ast

    layouts = {}
    for line in map(str.strip, code.splitlines()):
        if not line.startswith(("assert_size_stride(", "assert_size_stride_grouped(")):
            continue
        names, sizes, strides = ast.parse(line).body[0].value.args[:3]
        if line.startswith("assert_size_stride_grouped("):
            names = [name.id for name in names.elts]
            sizes, strides = ast.literal_eval(sizes), ast.literal_eval(strides)
        else:
            names, sizes, strides = [names.id], [ast.literal_eval(sizes)], [ast.literal_eval(strides)]
        layouts.update(zip(names, zip(sizes, strides)))
    return layouts


def test_inductor_takes_every_complex_input_as_pairs():
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    a, b = (torch.randn(SMALL_INPUT + 1, dtype=torch.complex64) for _ in range(2))

    def f(a, b):
        return torch.cos(a * b) + a

    out, (code,) = run_and_get_code(realify.compile(f), a, b)
    torch.testing.assert_close(out, f(a, b), rtol=1e-5, atol=1e-5)
    # with the tiling heuristic back on, Inductor would read pairs in scalar loops: large
    # inputs are split into planes instead
    torch._dynamo.reset()
    options = {"cpp.enable_tiling_heuristics": True}
    out, (planar,) = run_and_get_code(realify.compile(f, inner_options=options), a, b)
    torch.testing.assert_close(out, f(a, b), rtol=1e-5, atol=1e-5)
    n = SMALL_INPUT + 1
    assert _input_layouts(planar)["arg0_1"] == ((2, n), (n, 1))
    # no split copy at the boundary: both inputs reach the kernel as (n, 2) pairs, and the
    # product is fused into it rather than called as a pairs product
    assert _input_layouts(code)["arg0_1"] == ((n, 2), (2, 1))
    assert "cmul_pairs" not in code and "aten.mul" not in code


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_as_strided_on_a_large_partial_view(inner):
    # as_strided reads the input's storage (offsets count from the storage, not the view):
    # such a graph takes every complex input as a view of its own storage, never a copy
    base = torch.randn(3 * SMALL_INPUT, dtype=torch.complex64)
    x = base[10:2 * SMALL_INPUT]

    def f(x):
        return torch.as_strided(x, (100,), (3,), 7) * 2

    torch.testing.assert_close(realify.compile(f, inner=inner)(x), f(x), rtol=0, atol=0)


@pytest.mark.parametrize("inner", ["eager", "inductor"])
@pytest.mark.parametrize("mutate", [False, True])
def test_graph_is_traced_for_the_strides_of_the_pairs_it_gets(inner, mutate):
    # an input that enters as its own pairs arrives with its view's strides (b.mT: the pairs
    # of a transposed matrix); the quotient takes b's layout, and a reshape of it is a view
    # of each part only where those strides allow: a graph traced for contiguous pairs viewed
    # where it must copy, and failed at run time
    def program(a, b):
        flat = a.reshape(-1)
        if mutate:
            a.div_(b)
            return torch.exp(flat)  # a view of a: it sees the write
        return torch.exp((a / b).reshape(-1))

    def inputs():
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(2, 3, dtype=torch.complex64, generator=gen)
        b = torch.randn(3, 2, dtype=torch.complex64, generator=gen)
        return a.conj(), b.mT

    expected = program(*inputs())
    a, b = inputs()
    values = a.detach().clone()
    got = realify.compile(program, inner=inner, fullgraph=True)(a, b)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    if mutate:
        torch.testing.assert_close(a, values / b, rtol=1e-6, atol=0)


def test_small_conj_input_enters_resolved():
    # a lazy conj view cannot be viewed as pairs as it is: it is resolved at the boundary
    z = torch.randn(6, dtype=torch.complex64)
    w = torch.randn(6, dtype=torch.complex64)
    f = realify.compile(lambda z, w: z * w + z, inner="eager")
    torch.testing.assert_close(f(z.conj(), w), z.conj() * w + z.conj())


def test_functional_copies_become_views():
    # slices, permutes and reshapes of the FNO spectrum stay views in the real graph
    torch.manual_seed(0)
    model = SpectralConv2d(4, 4, 3)
    x = torch.randn(2, 4, 8, 8)
    rec = RecordingInner()
    with torch.no_grad():
        out = realify.compile(model, inner=rec)(x)
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    dynamo_free = [gm for kind, gm in rec.graphs if kind == "forward"]
    assert dynamo_free and not any(t.endswith("_copy.Tensor") or t.endswith("_copy.int") or t.endswith("_copy.default")
                                   for gm in dynamo_free for t in _targets(gm))


def test_writes_to_inputs_keep_copies():
    # a graph that writes into an input must not turn the value it read into a view
    def f(z):
        before = z[1:3] * 1
        z.mul_(2)
        return before + z[0]

    z = torch.randn(4, dtype=torch.complex64)
    expected_z = z.clone()
    expected = f(expected_z)
    out = realify.compile(f, inner="eager")(z)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(z, expected_z)


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_batch_major_einsum_operands(inner):
    # einsum over modes with batch-major permuted weights (the FNO contraction)
    x = torch.randn(4, 6, 5, 5, dtype=torch.complex64)
    w = torch.randn(6, 7, 5, 5, dtype=torch.complex64)

    def f(x, w):
        return torch.einsum("bixy,ioxy->boxy", x, w)

    torch.testing.assert_close(realify.compile(f, inner=inner)(x, w), f(x, w), rtol=1e-5, atol=1e-5)


def test_per_input_layouts_in_decompose():
    # one layout per input: pairs for the first, planes for the second, same values
    a, b = torch.randn(5, dtype=torch.complex64), torch.randn(5, dtype=torch.complex64)
    gm = realify.decompose(lambda a, b: a * b + a, [a, b], inputs=["interleaved", "planar"], outputs="interleaved")
    (out,) = gm(torch.view_as_real(a), torch.stack([b.real, b.imag]))
    torch.testing.assert_close(torch.view_as_complex(out), a * b + a)
    with pytest.raises(ValueError, match="cannot be mixed"):
        realify.decompose(lambda a, b: a * b, [a, b], inputs=["complex", "planar"])
    with pytest.raises(ValueError, match="2 input layouts for 1 inputs"):
        realify.decompose(lambda a: a * 2, [a], inputs=["planar", "planar"])


@pytest.mark.parametrize("user_value", [None, True])
def test_kernels_reading_pairs_are_vectorized(user_value):
    # every input enters as (re, im) pairs; Inductor's tiling heuristic would run the loop
    # that gathers them as scalar code (scalar libm atan2/hypot), realify turns it off unless
    # the caller set it
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    z = torch.randn(4096, dtype=torch.complex64)
    options = {} if user_value is None else {"cpp.enable_tiling_heuristics": user_value}
    f = realify.compile(lambda z: torch.angle(z) + z.abs(), inner_options=options)
    out, (code,) = run_and_get_code(f, z)
    torch.testing.assert_close(out, torch.angle(z) + z.abs(), rtol=1e-6, atol=1e-6)
    vectorized = ".atan2(" in code and "std::atan2(" not in code
    assert vectorized == (user_value is None)


def test_istft_overlap_add_runs_as_aten():
    # istft's overlap-add is unfold_backward; Inductor's decomposition would make it an atomic
    # scatter-add, realify keeps ATen's kernel
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    window = torch.hann_window(64)
    spec = torch.stft(torch.randn(2, 1000), 64, 16, window=window, return_complex=True)

    def f(spec):
        return torch.istft(spec * 0.5, 64, 16, window=window, length=1000)

    out, (code,) = run_and_get_code(realify.compile(f), spec)
    torch.testing.assert_close(out, f(spec), rtol=1e-5, atol=1e-5)
    assert "aten.unfold_backward.default(" in code and "atomic_add" not in code


def test_aten_fallback_needs_no_implicit_fallback(tmp_path):
    # With the CI environment variable set, Inductor refuses an implicit ATen fallback for an
    # op that has a decomposition; realify registers its fallback itself, so compiling istft
    # works in any environment. A fresh process: the lowering registry is per process.
    import os
    import subprocess
    import sys

    script = tmp_path / "istft_under_ci.py"
    script.write_text(
        "import torch, realify\n"
        "w = torch.hann_window(64)\n"
        "spec = torch.stft(torch.randn(2, 1000), 64, 16, window=w, return_complex=True)\n"
        "f = lambda s: torch.istft(s * 0.5, 64, 16, window=w, length=1000)\n"
        "torch.testing.assert_close(realify.compile(f)(spec), f(spec), rtol=1e-5, atol=1e-5)\n"
    )
    env = {**os.environ, "CI": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    assert run.returncode == 0, run.stderr[-3000:]


def _gemm_operand_strides(code: str) -> list[tuple[int, ...]]:
    """The strides of every buffer or input handed to an extern mm/bmm in Inductor's wrapper."""
    import re

    declared = {name: tuple(int(s) for s in strides.split(",") if s.strip())
                for name, strides in re.findall(r"(buf\d+) = empty_strided_cpu\(\([^)]*\), \(([^)]*)\)", code)}
    for name, strides in re.findall(r"assert_size_stride\((\w+), \([^)]*\), \(([^)]*)\), 'input'\)", code):
        declared[name] = tuple(int(s) for s in strides.split(",") if s.strip())
    for name, strides in re.findall(r"(buf\d+) = reinterpret_tensor\(\w+, \([^)]*\), \(([^)]*)\)", code):
        declared[name] = tuple(int(s) for s in strides.split(",") if s.strip())
    for name, reused in re.findall(r"(buf\d+) = (buf\d+); del buf\d+  # reuse", code):
        declared[name] = declared.get(reused)
    found = []
    for args in re.findall(r"extern_kernels\.b?mm\((.*), out=", code):
        for view_strides, name in re.findall(r"reinterpret_tensor\(\w+, \([^)]*\), \(([^)]*)\)|(\w+)", args):
            if view_strides:
                found.append(tuple(int(s) for s in view_strides.split(",") if s.strip()))
            elif name in declared:
                found.append(declared[name])
    return found


def test_gemm_operands_reach_blas_with_a_unit_stride(monkeypatch):
    # einsum's batch-major permute hands bmm the FNO weights with no unit stride, and the
    # backward graph computes their gradients' operands laid out batch-major; the post-grad
    # pass gives every such operand a contiguous layout (otherwise ATen's bmm copies them
    # matrix by matrix)
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    torch.manual_seed(0)
    model, x = SpectralConv2d(8, 8, 4), torch.randn(2, 8, 16, 16)
    compiled = realify.compile(model)
    # the real bmm of planes: this small contraction would otherwise run on the pairs
    monkeypatch.setattr(realify.passes.layout, "PAIRS_GEMM_INTENSITY", 0)

    def step(run):
        model.zero_grad()
        out = run(x)
        out.square().sum().backward()
        return out, [p.grad.clone() for p in model.parameters()]

    (out, grads), (forward, backward) = run_and_get_code(step, compiled)
    expected, expected_grads = step(model)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grads, expected_grads, rtol=1e-4, atol=1e-4)
    for code in (forward, backward):
        strides = _gemm_operand_strides(code)
        assert len(strides) >= 12, code  # 2 corners x 3 real bmm x 2 operands
        assert all(1 in s[-2:] for s in strides), strides


def test_exported_gemm_has_no_layout_copies():
    # the BLAS layout is Inductor's business: an exported graph holds no x * 1 copies
    x, w = torch.randn(2, 4, 6, 6, dtype=torch.complex64), torch.randn(4, 5, 6, 6, dtype=torch.complex64)
    ep = realify.export(lambda x, w: torch.einsum("bixy,ioxy->boxy", x, w), (x, w))
    muls = [n for n in ep.graph.nodes if n.target is torch.ops.aten.mul.Tensor and 1 in n.args[1:]]
    assert not muls, [n.format_node() for n in muls]


# ---- parts computed alike: the same elementwise ops on both parts run on the pairs ----------


def _special_complex(*shape: int, dtype=torch.complex64) -> torch.Tensor:
    """Random values with ±0 parts, infinities, NaN and exact axis points among them."""
    z = torch.randn(*shape, dtype=dtype)
    flat = z.view(-1)
    specials = [complex(-0.0, 0.0), complex(0.0, -0.0), complex(math.inf, 1.0), complex(2.0, -math.inf),
                complex(math.nan, 0.5), complex(3.0, 0.0), complex(0.0, -2.0)]
    flat[: len(specials)] = torch.tensor(specials, dtype=dtype)
    return z


_ALIKE = {
    "scale": lambda x, y, r: x * 2,
    "real-tensor-scale-and-add": lambda x, y, r: x * r + y,
    "difference-halved": lambda x, y, r: (x - y) * 0.5,
    "negated-quotient-by-real": lambda x, y, r: -(x / r),
    "0-d-float64-factor": lambda x, y, r: x * torch.tensor(3.0, dtype=torch.float64),  # promotes as a number
    "broadcast-up": lambda x, y, r: x[0] * r[:, None],  # the shared operand has more dims than the parts
    "where": lambda x, y, r: torch.where(r > 0, x, y),
}


@pytest.mark.parametrize("name", list(_ALIKE))
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "conj"])
def test_parts_computed_alike_run_on_the_pairs(name, layout):
    # the real graph holds no stack of parts into pairs, and its values are each part's (to
    # the bit, ±0, inf and NaN included): a real operand of a complex product has no imaginary
    # part (C99 Annex G, docs/numerics.md), so each program here is the same real program on
    # the real and on the imaginary parts, which eager computes as a reference at the special
    # values (eager's complex kernels give (inf + 1j) * 2 a NaN imaginary part); on ordinary
    # values, the compiled program's values and gradients are eager's
    f = _ALIKE[name]
    x, y = _special_complex(4, 5), _special_complex(4, 5)
    r = torch.randn(5)
    r_special = r.clone()
    r_special[1] = -0.0
    if layout == "transposed":
        x, y = x.T.contiguous().T, y.T.contiguous().T
    if layout == "conj":
        x = x.conj()
    gm = realify.decompose(lambda x, y: f(x, y, r_special), [x, y], inputs="interleaved", outputs="interleaved")
    assert "aten.stack.default" not in _targets(gm)
    expected = torch.complex(f(x.real, y.real, r_special), f(x.imag, y.imag, r_special))
    (got,) = gm(torch.view_as_real(x.resolve_conj()), torch.view_as_real(y))
    torch.testing.assert_close(torch.view_as_complex(got), expected, rtol=0, atol=0, equal_nan=True)

    torch._dynamo.reset()
    xs, ys = (torch.randn(4, 5, dtype=torch.complex64, requires_grad=True) for _ in range(2))
    compiled = realify.compile(lambda x, y: f(x, y, r))
    out = compiled(xs, ys)
    # exact, but for an ulp where eager's complex division by a real rounds twice and
    # realify's per-part quotient once (docs/numerics.md, "Division")
    torch.testing.assert_close(out, f(xs, ys, r), rtol=2 ** -23, atol=0)
    torch.view_as_real(out).sin().sum().backward()
    got_grads = xs.grad.clone(), ys.grad
    xs.grad = ys.grad = None
    torch.view_as_real(f(xs, ys, r)).sin().sum().backward()
    # the gradient cos(out) / r meets the quotient's one-ulp difference above as
    # sin(out) * ulp(out) / r: at most 2^-23 |out| / |r| more
    atol = 1e-6 + (2 ** -23 * float(out.abs().max() / r.abs().min()) if name == "negated-quotient-by-real" else 0)
    for g, e in zip(got_grads, (xs.grad, ys.grad)):
        if e is None:
            assert g is None or not g.any()
        else:
            torch.testing.assert_close(g, e, rtol=1e-6, atol=atol)


def test_parts_read_elsewhere_stay_planar():
    # a part the program also reads on its own (here the real part of x * 2) is not computed
    # twice: the scale stays planar
    def f(x):
        y = x * 2
        return y, y.real.exp()

    x = torch.randn(6, dtype=torch.complex64)
    gm = realify.decompose(f, [x], inputs="interleaved", outputs="interleaved")
    got = gm(torch.view_as_real(x))
    torch.testing.assert_close(torch.view_as_complex(got[0]), f(x)[0], rtol=0, atol=0)
    torch.testing.assert_close(got[1], f(x)[1], rtol=0, atol=0)
    muls = [n for n in gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor]
    assert all(n.meta["val"].shape == (6,) for n in muls), "the scale ran on the pairs and again on a part"


def _partwise_difference(m: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    # realify's complex difference, part by part (eager's computes m + (-1) a through a complex
    # product, which makes an infinite part of a NaN in both: docs/numerics.md, "Addition")
    return torch.complex(m.real - a.real, m.imag - a.imag)


def _product_scaled_apart(a, b):
    # the parts take different scales: the same op, but not computed alike (rule 2 declines)
    p = a * b
    return torch.complex(p.real * 2, p.imag * 3)


_PRODUCTS_OF_INPUTS = {
    # program, its reference, whether its product runs on the pairs
    "returned": (lambda a, b: a * b, None, True),
    "conjugate-factor": (lambda a, b: a * b.conj(), None, True),  # the conj as cmul_pairs' flag, no copy
    # the difference runs on the pairs too
    "then-added-alike": (lambda a, b: a * b - a, lambda a, b: _partwise_difference(a * b, a), True),
    "then-a-real-added": (lambda a, b: a * b + 1, None, False),  # re + 1, im: not alike, stays planar
    "parts-scaled-apart": (_product_scaled_apart, None, False),
}


@pytest.mark.parametrize("name", list(_PRODUCTS_OF_INPUTS))
def test_a_product_of_interleaved_inputs_wanted_as_pairs_runs_on_pairs(name):
    # a product of two inputs whose result is only wanted as pairs (stacked back, directly or
    # through ops computed alike on both parts) runs ATen's complex kernel on the pairs, eager's
    # own kernel: eager's values, special ones included; one feeding other arithmetic stays planar
    f, reference, on_pairs = _PRODUCTS_OF_INPUTS[name]
    a, b = _special_complex(8, 3), _special_complex(8, 3).flip(0)
    gm = realify.decompose(f, [a, b], inputs="interleaved", outputs="interleaved", pair_products=True)
    targets = _targets(gm)
    assert ("realify.cmul_pairs.default" in targets) == on_pairs
    if on_pairs:
        assert "aten.stack.default" not in targets
    (got,) = gm(torch.view_as_real(a), torch.view_as_real(b))
    expected = (reference or f)(a, b)
    torch.testing.assert_close(torch.view_as_complex(got), expected, rtol=0, atol=0, equal_nan=True)
    # compiled with gradients, on ordinary values: eager's
    torch._dynamo.reset()
    leaves = [torch.randn(8, 3, dtype=torch.complex64, requires_grad=True) for _ in range(2)]
    out = realify.compile(f)(*leaves)
    grads = torch.autograd.grad(torch.view_as_real(out).sin().sum(), leaves)
    eager_out = f(*leaves)
    eager_grads = torch.autograd.grad(torch.view_as_real(eager_out).sin().sum(), leaves)
    for g, e in zip((out, *grads), (eager_out, *eager_grads)):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)


def test_an_unread_product_is_left_alone():
    # a product nothing reads (a prod the program drops, before dead-code elimination) has
    # parts with no reader: the layout pass leaves it, and the program runs (found by the fuzzer)
    def f(a):
        unread = a.prod(dim=0)  # noqa: F841
        return torch.exp(a)

    torch._dynamo.reset()
    a = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    out = realify.compile(f, inner="eager")(a)
    torch.testing.assert_close(out, f(a))
    torch.view_as_real(out).sum().backward()
    expected = torch.autograd.grad(torch.view_as_real(f(a)).sum(), a)[0]
    torch.testing.assert_close(a.grad, expected)
