"""Complex products (3M and 4M GEMM) and complex reductions, against eager complex PyTorch
and against the error bounds derived in docs/numerics.md ("Complex GEMM: 3M vs 4M")."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._pytree import tree_unflatten

import realify
from realify import ComplexTensor
from realify.passes.gauss import gauss_products
from realify.rules import apply_rule
from realify.tensor import unwrap_complex, wrap_complex

aten = torch.ops.aten
DTYPES = (torch.complex64, torch.complex128)
MULTIPLICATIONS = (3, 4)


# ---- helpers ---------------------------------------------------------------------------------


def unit_roundoff(dtype: torch.dtype) -> float:
    # u = 2^-24 (float32) or 2^-53 (float64): round-to-nearest unit roundoff
    return {torch.complex64: 2.0**-24, torch.float32: 2.0**-24}.get(dtype, 2.0**-53)


def gamma(k: int, u: float) -> float:
    # Higham's gamma_k = k u / (1 - k u): the bound on prod (1 + delta_i)^{+-1} - 1 over k roundings
    return k * u / (1 - k * u)


def run_eager(fn, *args, **kwargs):
    """fn through the eager ComplexTensor front end."""
    args, kwargs = wrap_complex((args, kwargs))
    return unwrap_complex(fn(*args, **kwargs))


def run_decomposed(fn, *args):
    """fn traced by realify.decompose (the graph is checked to hold no complex value), then run."""
    gm = realify.decompose(fn, list(args))
    return tree_unflatten(gm(*args), gm.realify_signature.out_spec)


def crandn(*shape, dtype=torch.complex64):
    return torch.randn(*shape, dtype=dtype)


def magnitude_terms(product, a: torch.Tensor, b: torch.Tensor):
    """The elementwise magnitudes that bound the rounding error of a bilinear product with
    nonnegative structure (mm, bmm, einsum, linear): M1 = |Ar|*|Br|, M2 = |Ai|*|Bi|,
    M3 = |Ar+Ai|*|Br+Bi| (the Gauss product) and M4 = |Ar|*|Bi| + |Ai|*|Br| (4M imaginary),
    each computed in float64 with ``*`` = ``product`` (relative error ~n 1e-16: negligible
    next to float32's u, and covered by the reference slack for complex128)."""
    ar, ai = a.real.double(), a.imag.double()
    br, bi = b.real.double(), b.imag.double()
    m1 = product(ar.abs(), br.abs())
    m2 = product(ai.abs(), bi.abs())
    # the exact |Ar + Ai| (a float64 sum of two float32 values is exact): the rounding of this
    # sum in the working precision is part of the bound's gamma_{n+2} (docs/numerics.md)
    m3 = product((ar + ai).abs(), (br + bi).abs())
    m4 = product(ar.abs(), bi.abs()) + product(ai.abs(), br.abs())
    return m1, m2, m3, m4


def gemm_error_bounds(product, a, b, n: int, multiplications: int):
    """Elementwise bounds (re, im) on |computed - exact| for the realify product of a and b.

    4M: two real GEMMs (gamma_n each) and one rounded subtraction/addition per part:
        |dRe| <= gamma_{n+1} (M1 + M2),   |dIm| <= gamma_{n+1} M4.
    3M: Re as 4M; Im adds two rounded input sums and two rounded subtractions:
        |dIm| <= gamma_{n+4} (M1 + M2 + M3).
    (docs/numerics.md derives both.)
    """
    u = unit_roundoff(a.dtype)
    m1, m2, m3, m4 = magnitude_terms(product, a, b)
    re = gamma(n + 1, u) * (m1 + m2)
    im = gamma(n + 1, u) * m4 if multiplications == 4 else gamma(n + 4, u) * (m1 + m2 + m3)
    return re, im


def assert_within(actual: torch.Tensor, reference: torch.Tensor, re_bound, im_bound, slack_re=0.0, slack_im=0.0):
    err = actual.to(torch.complex128) - reference.to(torch.complex128)
    over_re = err.real.abs() - (re_bound + slack_re)
    over_im = err.imag.abs() - (im_bound + slack_im)
    assert (over_re <= 0).all(), f"real part over its bound by up to {over_re.max().item():.3e}"
    assert (over_im <= 0).all(), f"imaginary part over its bound by up to {over_im.max().item():.3e}"


def assert_close_to_eager(actual, expected, product, a, b, n):
    """Both realify and eager (BLAS) carry rounding error: their difference is bounded by the sum
    of both bounds. Eager's cgemm/zgemm is a 4M-type algorithm; the 3M bound with M4 added is
    a bound for any of the orders BLAS may use, so use it for both sides."""
    u = unit_roundoff(a.dtype)
    m1, m2, m3, m4 = magnitude_terms(product, a, b)
    bound = 2 * gamma(n + 4, u) * (m1 + m2 + m3 + m4)
    assert_within(actual, expected, bound, bound)


def count_real_products(fn, *args) -> int:
    """How many real mm/bmm/mv/dot ops ``fn`` runs on (re, im) tensor arguments in a traced
    graph: traced with make_fx (the ComplexTensor dispatch happens inside, so the graph is real),
    then the choice of real products every traced front end makes (realify/passes/gauss.py)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, tracing_mode="fake")(*args)
    if realify.config.gemm_multiplications == 3:
        gauss_products(gm)
    products = {aten.mm.default, aten.bmm.default, aten.mv.default, aten.dot.default}
    return sum(1 for node in gm.graph.nodes if node.target in products)


@pytest.fixture(params=MULTIPLICATIONS, ids=lambda m: f"{m}M")
def multiplications(request):
    with realify.config.patch(gemm_multiplications=request.param):
        yield request.param


# ---- products against eager complex ------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mm_bmm_matmul(multiplications, dtype):
    torch.manual_seed(0)
    a, b = crandn(7, 16, dtype=dtype), crandn(16, 5, dtype=dtype)
    assert_close_to_eager(run_eager(torch.mm, a, b), torch.mm(a, b), torch.mm, a, b, 16)
    assert_close_to_eager(run_decomposed(torch.mm, a, b), torch.mm(a, b), torch.mm, a, b, 16)
    x, y = crandn(3, 7, 16, dtype=dtype), crandn(3, 16, 5, dtype=dtype)
    assert_close_to_eager(run_eager(torch.bmm, x, y), torch.bmm(x, y), torch.bmm, x, y, 16)
    assert_close_to_eager(run_eager(torch.matmul, x, y), torch.matmul(x, y), torch.matmul, x, y, 16)
    assert_close_to_eager(run_decomposed(torch.matmul, x, y), torch.matmul(x, y), torch.matmul, x, y, 16)
    # broadcast batch x matrix goes through view + mm
    assert_close_to_eager(run_eager(torch.matmul, x, b), torch.matmul(x, b), torch.matmul, x, b, 16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_einsum_and_linear(multiplications, dtype):
    torch.manual_seed(1)
    x, y = crandn(2, 4, 16, dtype=dtype), crandn(2, 16, 3, dtype=dtype)

    def einsum(p, q):
        return torch.einsum("bij,bjk->bik", p, q)

    for run in (run_eager, run_decomposed):
        assert_close_to_eager(run(einsum, x, y), einsum(x, y), einsum, x, y, 16)

    inp, weight, bias = crandn(6, 16, dtype=dtype), crandn(4, 16, dtype=dtype), crandn(4, dtype=dtype)

    def linear(i, w):
        return torch.nn.functional.linear(i, w)

    expected = torch.nn.functional.linear(inp, weight, bias)
    u = unit_roundoff(dtype)
    m1, m2, m3, m4 = magnitude_terms(linear, inp, weight)
    # the bias addition is one more rounding of a value below |product| + |bias| on each side
    bound = 2 * gamma(16 + 4, u) * (m1 + m2 + m3 + m4) + 2 * u * (m1 + m2 + m3 + m4 + bias.abs().double())
    for run in (run_eager, run_decomposed):
        assert_within(run(torch.nn.functional.linear, inp, weight, bias), expected, bound, bound)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("alpha,beta", [(1, 1), (0.5, 2), (2 - 1j, 0.5j), (1j, 0)], ids=str)
def test_add_products(multiplications, dtype, alpha, beta):
    torch.manual_seed(2)
    n = 8
    cases = [
        (torch.addmm, torch.mm, n, crandn(5, 3, dtype=dtype), crandn(5, n, dtype=dtype), crandn(n, 3, dtype=dtype)),
        (torch.addmm, torch.mm, n, crandn(3, dtype=dtype), crandn(5, n, dtype=dtype), crandn(n, 3, dtype=dtype)),
        (torch.baddbmm, torch.bmm, n, crandn(2, 5, 3, dtype=dtype), crandn(2, 5, n, dtype=dtype),
         crandn(2, n, 3, dtype=dtype)),
        (torch.addbmm, lambda p, q: torch.bmm(p, q).sum(0), 2 * n, crandn(5, 3, dtype=dtype),
         crandn(2, 5, n, dtype=dtype), crandn(2, n, 3, dtype=dtype)),
        (torch.addmv, torch.mv, n, crandn(5, dtype=dtype), crandn(5, n, dtype=dtype), crandn(n, dtype=dtype)),
        (torch.addr, torch.outer, 1, crandn(5, 3, dtype=dtype), crandn(5, dtype=dtype), crandn(3, dtype=dtype)),
    ]
    u = unit_roundoff(dtype)
    for op, product, length, inp, x, y in cases:
        m = sum(magnitude_terms(product, x, y))
        # beta C + alpha P, on each side (realify and eager): P's error (<= gamma_{n+4} m per
        # part, mixed by the complex alpha: x 2|alpha|), then the roundings of alpha P, beta C
        # and the sum (<= gamma_4 of |alpha| (|Pr| + |Pi|) + |beta| (|Cr| + |Ci|)).
        side = (2 * abs(alpha) * gamma(length + 4, u) * m
                + gamma(4, u) * (2 * abs(alpha) * m + 2 * abs(beta) * inp.abs().double()))
        expected = op(inp, x, y, alpha=alpha, beta=beta)
        actual = run_eager(op, inp, x, y, alpha=alpha, beta=beta)
        assert_within(actual, expected, 2 * side, 2 * side)
        # traced at once, within the iteration
        actual = run_decomposed(lambda i, p, q: op(i, p, q, alpha=alpha, beta=beta), inp, x, y)  # noqa: B023
        assert_within(actual, expected, 2 * side, 2 * side)


def test_beta_zero_ignores_nan_input(multiplications):
    torch.manual_seed(3)
    inp = torch.full((4, 3), complex(float("nan"), float("nan")), dtype=torch.complex64)
    x, y = crandn(4, 6), crandn(6, 3)
    for op_args in ((torch.addmm, inp, x, y), (torch.addmv, inp[:, 0], x, y[:, 0])):
        op, i, p, q = op_args
        expected = op(i, p, q, beta=0, alpha=2j)
        actual = run_eager(op, i, p, q, beta=0, alpha=2j)
        assert not actual.isnan().any()
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dot_vdot_cross(multiplications, dtype):
    torch.manual_seed(4)
    a, b = crandn(32, dtype=dtype), crandn(32, dtype=dtype)
    tol = 100 * 32 * unit_roundoff(dtype)
    for op in (torch.dot, torch.vdot, torch.inner, torch.linalg.vecdot):
        for run in (run_eager, run_decomposed):
            torch.testing.assert_close(run(op, a, b), op(a, b), rtol=tol, atol=tol)
    p, q = crandn(4, 3, dtype=dtype), crandn(4, 3, dtype=dtype)
    for run in (run_eager, run_decomposed):
        torch.testing.assert_close(run(torch.linalg.cross, p, q), torch.linalg.cross(p, q), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_real_times_complex_uses_two_products(multiplications, dtype):
    torch.manual_seed(5)
    real = torch.randn(6, 16, dtype=realify.runtime.dtypes.real_dtype(dtype))
    z = crandn(16, 4, dtype=dtype)

    # the rule's path for a real operand, which rules take inside their own computations (a
    # user's call of mm on a real and a complex matrix raises eager's error, below)
    def real_times_complex(r, zr, zi):
        out = apply_rule(aten.mm.default, (r, ComplexTensor(zr, zi)), {})
        return out.re, out.im

    def complex_times_real(r, zr, zi):
        out = apply_rule(aten.mm.default, (ComplexTensor(zr, zi).T, r.T), {})
        return out.re, out.im

    def complex_times_complex(r, zr, zi):
        z = ComplexTensor(zr, zi)
        out = torch.mm(z.T, z)
        return out.re, out.im

    parts = (real, z.real.contiguous(), z.imag.contiguous())
    # real x complex: A Br and A Bi only
    assert count_real_products(real_times_complex, *parts) == 2
    assert count_real_products(complex_times_real, *parts) == 2
    assert count_real_products(complex_times_complex, *parts) == multiplications

    def matrix_vector(r, zr, zi):
        z = ComplexTensor(zr, zi)
        out = torch.mv(z.T, z[:, 0])
        return out.re, out.im

    # memory-bound products keep the textbook 4 whatever the setting (docs/numerics.md)
    assert count_real_products(matrix_vector, *parts) == 4
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.mm(real, z)  # eager refuses the mix
    with pytest.raises(RuntimeError, match="same dtype"):
        run_eager(torch.mm, real, z)


GAUSS_CASES = {
    # name: (program of complex a (8, 16) and b (16, 5), its real product op, complex products
    # in it, whether they are compute-bound (GEMMs) or memory-bound)
    "mm": (torch.mm, aten.mm.default, 1, True),
    "conj transposed": (lambda a, b: a.mH @ a, aten.mm.default, 1, True),
    "addmm complex alpha": (lambda a, b: torch.addmm(b[:8], a, b, alpha=2j, beta=0.5), aten.mm.default, 1, True),
    "baddbmm": (lambda a, b: torch.baddbmm(b[:8].expand(3, 8, 5), a.expand(3, 8, 16), b.expand(3, 16, 5)),
                aten.bmm.default, 1, True),
    "addbmm": (lambda a, b: torch.addbmm(b[:8], a.expand(3, 8, 16), b.expand(3, 16, 5)), aten.mm.default, 1, True),
    "einsum": (lambda a, b: torch.einsum("ik,kj->ij", a, b), aten.bmm.default, 1, True),
    # a product of a product: the second matches once the first is rewritten
    "multi_dot": (lambda a, b: torch.linalg.multi_dot([a, b, b.mT, a.mT]), aten.mm.default, 3, True),
    # memory-bound: forming Ar + Ai costs more than the product it saves
    "mv": (lambda a, b: torch.mv(a, b[:, 0]), aten.mv.default, 1, False),
    "vdot": (lambda a, b: torch.vdot(a[0], b[:, 0]), aten.dot.default, 1, False),
}


@pytest.mark.parametrize("name", list(GAUSS_CASES))
def test_traced_products_take_gauss_form_where_compute_bound(name):
    # the rules write the textbook 4 products; every traced front end trades one for additions
    # where the product is a GEMM (realify/passes/gauss.py), with gemm_multiplications=3
    program, product, products, compute_bound = GAUSS_CASES[name]
    torch.manual_seed(3)
    a, b = crandn(8, 16, dtype=torch.complex128), crandn(16, 5, dtype=torch.complex128)
    expected = program(a, b)
    for multiplications in (3, 4):
        gm = realify.decompose(program, [a, b], gemm_multiplications=multiplications)
        real_products = (multiplications if compute_bound else 4) * products
        assert sum(n.target is product for n in gm.graph.nodes) == real_products, (name, multiplications)
        got = tree_unflatten(gm(a, b), gm.realify_signature.out_spec)
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    # the eager ComplexTensor runs the rules as written: the textbook form, whatever the option
    with realify.config.patch(gemm_multiplications=3):
        traced = run_eager(program, a, b)
    torch.testing.assert_close(traced, expected, rtol=1e-12, atol=1e-12)


def test_gauss_form_needs_both_cross_terms_and_leaves_other_sums_alone():
    # P(a, d) + P(c, b) is rewritten only where the graph also computes P(a, b) and P(c, d)
    # (a complex product's real part); a sum of two unrelated GEMMs stays as written, exactly
    torch.manual_seed(4)
    a, b = crandn(6, 7), crandn(7, 5)

    def sum_of_cross_terms(a, b):
        return a.real @ b.imag + a.imag @ b.real

    def one_real_term_too(a, b):
        return a.real @ b.imag + a.imag @ b.real, a.real @ b.real

    for program, count in ((sum_of_cross_terms, 2), (one_real_term_too, 3)):
        gm = realify.decompose(program, [a, b], gemm_multiplications=3)
        assert sum(n.target is aten.mm.default for n in gm.graph.nodes) == count
        got = tree_unflatten(gm(a, b), gm.realify_signature.out_spec)
        torch.testing.assert_close(got, program(a, b), rtol=0, atol=0)


def test_gauss_form_never_merges_random_operands():
    # two rand() calls of one shape are different values: the pass compares what nodes compute
    # only for pure ops, so (R1 + iR2)(B) products of fresh randoms are never taken as one
    def program(b):
        z = torch.complex(*(torch.rand(4, 6, dtype=torch.float64) for _ in range(2)))
        w = torch.complex(*(torch.rand(4, 6, dtype=torch.float64) for _ in range(2)))
        return z @ b, w @ b, z, w

    b = crandn(6, 3, dtype=torch.complex128)
    gm = realify.decompose(program, [b], gemm_multiplications=3)
    zb, wb, z, w = tree_unflatten(gm(b), gm.realify_signature.out_spec)
    assert not torch.equal(z, w)
    torch.testing.assert_close(zb, z @ b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(wb, w @ b, rtol=1e-12, atol=1e-12)


# ---- the 3M / 4M error bound ---------------------------------------------------------------------


def _adversarial(m: int, n: int, p: int, t: float, dtype=torch.complex64):
    """A = X (1 + t i), B = Y (1 - t i): AB = (1 + t^2) XY is real, so Im(AB) = 0 is the result of
    cancelling T3 = (1+t)(1-t) XY against T1 + T2 = (1 - t^2) XY: 3M's Im error grows like t^2 u,
    4M's like t u (its terms X(-tY) and (tX)Y cancel at size t)."""
    x, y = torch.randn(m, n), torch.randn(n, p)
    rd = realify.runtime.dtypes.real_dtype(dtype)
    a = torch.complex(x.to(rd), (t * x).to(rd))
    b = torch.complex(y.to(rd), (-t * y).to(rd))
    return a, b


def _measured(a, b, multiplications):
    with realify.config.patch(gemm_multiplications=multiplications):
        out = run_decomposed(torch.mm, a, b)
    reference = torch.mm(a.to(torch.complex128), b.to(torch.complex128))
    return out, reference


def _reference_slack(a, b, n):
    # the complex128 reference is itself rounded: its own 3M-type bound in u = 2^-53
    m1, m2, m3, m4 = magnitude_terms(torch.mm, a, b)
    s = gamma(n + 4, 2.0**-53) * (m1 + m2 + m3 + m4)
    return s, s


@pytest.mark.parametrize("case", ["gaussian", "uniform_scaled", "adversarial_t16", "adversarial_t1000"])
def test_gemm_error_bound(multiplications, case):
    torch.manual_seed(6)
    m, n, p = 24, 64, 20
    if case == "gaussian":
        a, b = crandn(m, n), crandn(n, p)
    elif case == "uniform_scaled":
        # rows/columns of very different scales: the bound is elementwise, so it must follow
        a = (torch.rand(m, n, dtype=torch.complex64) - (0.5 + 0.5j)) * torch.logspace(-3, 3, m).unsqueeze(1)
        b = (torch.rand(n, p, dtype=torch.complex64) - (0.5 + 0.5j)) * torch.logspace(3, -3, p)
    else:
        a, b = _adversarial(m, n, p, float(case.rsplit("t", 1)[1]))
    out, reference = _measured(a, b, multiplications)
    re_bound, im_bound = gemm_error_bounds(torch.mm, a, b, n, multiplications)
    assert_within(out, reference, re_bound, im_bound, *_reference_slack(a, b, n))


def test_3m_error_is_larger_under_cancellation():
    """The adversarial case shows why 4M exists: 3M's measured Im error exceeds even the 4M
    *bound* there (so 3M's weaker bound is not an artefact of the analysis), while both stay
    within their own bounds (test_gemm_error_bound)."""
    torch.manual_seed(7)
    n = 64
    a, b = _adversarial(24, n, 20, 1000.0)
    out3, reference = _measured(a, b, 3)
    out4, _ = _measured(a, b, 4)
    err3 = (out3.to(torch.complex128) - reference).imag.abs()
    err4 = (out4.to(torch.complex128) - reference).imag.abs()
    _, im_bound4 = gemm_error_bounds(torch.mm, a, b, n, 4)
    assert (err3 > im_bound4).any()
    assert err3.max() > 10 * err4.max()


# ---- reductions ------------------------------------------------------------------------------


def _values(dtype):
    torch.manual_seed(8)
    z = crandn(4, 5, 6, dtype=dtype)
    z[0, 0, 0] = 0
    z[1, 2, :] = 0  # a zero fibre
    z[2, 1, 3] = 3j  # purely imaginary: "nonzero"
    return z


REDUCTIONS = {
    "sum": lambda z: (z.sum(), z.sum((0, 2), keepdim=True), z.sum(1, dtype=torch.complex128)),
    "mean": lambda z: (z.mean(), z.mean(-1), z.mean((0, 1), keepdim=True)),
    "prod": lambda z: (z.prod(), z.prod(1), z.prod(-1, keepdim=True), z[:, 1:, 1:].prod(2)),
    "cumsum": lambda z: (z.cumsum(1), z.cumsum(-1, dtype=torch.complex128)),
    "cumprod": lambda z: (z.cumprod(0), z.cumprod(2), z[..., :1].cumprod(2)),
    "var": lambda z: (z.var(), z.var(1), z.var((0, 2), correction=0, keepdim=True), z.var(2, correction=2)),
    "std": lambda z: (z.std(), z.std(1, keepdim=True), z.std((1, 2), correction=0)),
    "var_mean": lambda z: torch.var_mean(z, 1),
    "std_mean": lambda z: torch.std_mean(z, (0, 2), correction=0),
    "vector_norm": lambda z: tuple(torch.linalg.vector_norm(z, o, d) for o in (2, 1, 0, 0.5, 3, -1, math.inf, -math.inf)
                                   for d in (None, 1)),
    "norm": lambda z: (z.norm(), z.norm(1, dim=2), torch.norm(z, p="fro"), torch.dist(z, z[0])),
    "all_any": lambda z: (z.all(), z.all(2), z.any(), z.any(-1), z.all((0, 2)), torch.count_nonzero(z),
                          torch.count_nonzero(z, (1,))),
    "logsumexp": lambda z: (torch.logsumexp(z, 1), torch.logsumexp(z, (0, 2), keepdim=True)),
    "trace": lambda z: (torch.trace(z[0]),),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name, dtype):
    z = _values(dtype)
    fn = REDUCTIONS[name]
    expected = fn(z)
    # a handful of roundings per output on O(1) data (prod: 30 complex multiplications whose
    # order differs from eager's sequential loop): 1e-5/1e-12 relative
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == torch.complex64 else dict(rtol=1e-12, atol=1e-12)
    for run in (run_eager, run_decomposed):
        torch.testing.assert_close(run(fn, z), expected, **tol)


def test_prod_and_cumprod_special_values():
    # inf, nan and zero factors: the pairwise tree must not invent NaN (no padding by 1 + 0i)
    inf, nan = float("inf"), float("nan")
    z = torch.tensor([[inf + 0j, 2 + 0j, 1 + 0j], [0j, 1 + 1j, 2j], [nan + 0j, 1 + 0j, 1 + 0j]], dtype=torch.complex128)
    for fn in (lambda t: t.prod(1), lambda t: t.cumprod(1), lambda t: t[:, :1].prod(1), lambda t: t.cumprod(0)):
        torch.testing.assert_close(run_eager(fn, z), fn(z), equal_nan=True)
    # the empty product is 1 + 0i
    e = torch.zeros(3, 0, dtype=torch.complex64)
    torch.testing.assert_close(run_eager(lambda t: t.prod(1), e), e.prod(1))


def test_reductions_are_traceable_and_real():
    z = _values(torch.complex64)
    for name in ("prod", "cumprod", "logsumexp", "vector_norm"):
        gm = realify.decompose(REDUCTIONS[name], [z])
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target in (aten.view_as_real.default, aten.complex.default,
                                                              aten.resolve_conj.default, aten.resolve_neg.default):
                continue  # the complex boundary
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and node.op == "call_function":
                assert not val.dtype.is_complex, f"{name}: complex value inside at {node.format_node()}"


GRADIENT_CASES = {
    "prod": lambda t, w: t.prod(1),  # t holds a zero: eager's prod backward special-cases it
    "cumprod": lambda t, w: t.cumprod(1),
    "logsumexp": lambda t, w: torch.logsumexp(t, 1),
    "var": lambda t, w: t.var(1),
    "std_mean": lambda t, w: torch.std_mean(t, 0)[0],
    "vector_norm_2": lambda t, w: torch.linalg.vector_norm(t, 2, 1),
    "vector_norm_3": lambda t, w: torch.linalg.vector_norm(t, 3),
    "vector_norm_inf": lambda t, w: torch.linalg.vector_norm(t, math.inf, 1),
    "mm": lambda t, w: t @ w,
    "addmm": lambda t, w: torch.addmm(w[:3, :1], t, w, alpha=0.5j),
    "vdot": lambda t, w: torch.vdot(t[0], w[:, 0]),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_through_real_graph(multiplications, name):
    """The decomposed (real) graph differentiated by autograd gives PyTorch's complex gradient
    convention (grad = dL/dRe + i dL/dIm), finite where eager's is, including at z = 0."""
    torch.manual_seed(9)
    fn = GRADIENT_CASES[name]
    z, w = crandn(3, 4, dtype=torch.complex128), crandn(4, 5, dtype=torch.complex128)
    z[0, 1] = 0
    z[2] = 0  # a zero row: norms at 0
    gm = realify.decompose(fn, [z, w], inputs="planar", outputs="planar")
    planar = [torch.view_as_real(t).movedim(-1, 0).contiguous().requires_grad_() for t in (z, w)]
    out = gm(*planar)
    out = out[0] if isinstance(out, (list, tuple)) else out
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    eager = [t.clone().requires_grad_() for t in (z, w)]
    expected = fn(*eager)
    if expected.dtype.is_complex:
        grad_out = torch.complex(grad_out[0], grad_out[1])
    expected.backward(grad_out)
    for p, e in zip(planar, eager):
        if e.grad is None:
            continue
        got = torch.complex(p.grad[0], p.grad[1])
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, e.grad, rtol=1e-9, atol=1e-9)


def test_norm_gradient_finite_at_zero():
    """|z| is computed with a zero-safe hypot: gradients at z = 0 stay finite (eager: 0)."""
    z = torch.zeros(2, 3, dtype=torch.complex64)
    z[0, 0] = 3 + 4j
    for ord in (2, 1, 3):
        # traced at once, within the iteration
        gm = realify.decompose(lambda t: torch.linalg.vector_norm(t, ord), [z],  # noqa: B023
                               inputs="planar", outputs="planar")
        planar = torch.view_as_real(z).movedim(-1, 0).contiguous().requires_grad_()
        out = gm(planar)
        (out[0] if isinstance(out, (list, tuple)) else out).backward()
        eager = z.clone().requires_grad_()
        torch.linalg.vector_norm(eager, ord).backward()
        assert torch.isfinite(planar.grad).all(), ord
        torch.testing.assert_close(torch.complex(planar.grad[0], planar.grad[1]), eager.grad)
