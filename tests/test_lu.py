"""The LU family (realify/rules/lu.py, realify/runtime/lapack.py): lu_factor(_ex), linalg.lu,
lu_unpack, lu_solve, det, slogdet and logdet in every front end against eager, with no island;
the real-arithmetic getrf and substitutions that realify.onnx writes them with, against LAPACK;
and programs holding them in ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from test_cholesky import compiled, front_ends, real_only

import realify
from realify.onnx import to_onnx
from realify.rules import lu

DTYPES = [torch.complex64, torch.complex128]


def general(*shape: int, dtype=torch.complex128, cond: float | None = None, seed: int = 0) -> torch.Tensor:
    """A random complex matrix, or U diag(s) V^H with singular values spread geometrically from
    1 to 1/cond (U, V random unitary)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(*shape, dtype=torch.complex128, generator=g)
    if cond is None:
        return X.to(dtype)
    U, _ = torch.linalg.qr(X)
    V, _ = torch.linalg.qr(torch.randn(*shape, dtype=torch.complex128, generator=g))
    s = torch.logspace(0, -np.log10(cond), shape[-1], dtype=torch.float64).to(torch.complex128)
    return ((U * s.unsqueeze(-2)) @ V.mH).to(dtype)


def _tolerances(dtype) -> dict:
    # the same LAPACK call as eager's for the factorization; solves and determinants of
    # well-conditioned 5 x 5 matrices go through a few roundings more (the permutation and
    # the diagonal's product as real arithmetic): 100 eps relative
    eps = torch.finfo(torch.empty(0, dtype=dtype).real.dtype).eps
    return dict(rtol=100 * eps, atol=100 * eps)


def _programs(B: torch.Tensor) -> dict:
    return {
        "lu_factor_ex": lambda A: tuple(torch.linalg.lu_factor_ex(A)),
        "linalg.lu": lambda A: tuple(torch.linalg.lu(A)),
        "lu_unpack": lambda A: tuple(torch.lu_unpack(*torch.linalg.lu_factor(A))),
        "lu_solve": lambda A: torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B),
        "lu_solve_adjoint": lambda A: torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B, adjoint=True),
        "lu_solve_right": lambda A: torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B.mT, left=False),
        "lu_solve_right_adjoint": lambda A: torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B.mT, left=False,
                                                                  adjoint=True),
        "det": torch.linalg.det,
        "slogdet": lambda A: tuple(torch.linalg.slogdet(A)),
        "logdet": torch.logdet,
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(_programs(torch.empty(0))))
def test_values_like_eager_with_no_island(dtype, name):
    A, B = general(3, 5, 5, dtype=dtype), general(3, 5, 2, dtype=dtype, seed=1)
    fn = _programs(B)[name]
    expected = fn(A)
    for front_end, got in front_ends(fn, A).items():
        torch.testing.assert_close(got, expected, **_tolerances(dtype), msg=front_end)


@pytest.mark.parametrize("shape", [(2, 4, 6), (2, 6, 4)], ids=["wide", "tall"])
def test_rectangular_factors_like_eager(shape):
    A = general(*shape)

    def f(A):
        return (*torch.linalg.lu_factor_ex(A), *torch.linalg.lu(A))

    expected = f(A)
    for front_end, got in front_ends(f, A).items():
        torch.testing.assert_close(got, expected, msg=front_end)


def test_singular_and_real_data_and_views():
    # an exactly singular matrix (info, det 0, slogdet's sign 0 and -inf), a complex matrix of
    # real data, and conj/transposed views of the input
    A = general(4, 4)
    singular = A.clone()
    singular[:, 2] = 0
    real_data = torch.randn(4, 4, dtype=torch.float64).to(torch.complex128)

    def f(S, R, A):
        return (*torch.linalg.lu_factor_ex(S), torch.linalg.det(S), *torch.linalg.slogdet(S),
                *torch.linalg.lu_factor_ex(R), *torch.linalg.slogdet(R), torch.linalg.det(A.mT),
                torch.linalg.det(A.conj()), torch.linalg.lu_solve(*torch.linalg.lu_factor(A.mH), R))

    expected = f(singular, real_data, A)
    assert expected[2].item() != 0 and expected[3].item() == 0 and expected[5].item() == -float("inf")
    for front_end, got in front_ends(f, singular, real_data, A).items():
        torch.testing.assert_close(got, expected, msg=front_end)


def _loss(name: str, B: torch.Tensor):
    fn = _programs(B)[name]

    def loss(A):
        out = fn(A)
        out = out if isinstance(out, tuple) else (out,)
        # a real loss of every differentiable output (slogdet's sign too)
        return sum((o * o.conj()).real.sum() if o.is_complex() else o.sum() for o in out if o.is_floating_point()
                   or o.is_complex())

    return loss


@pytest.mark.parametrize("inner", ["eager", "inductor"])
@pytest.mark.parametrize("name", ["lu_factor_ex", "linalg.lu", "lu_solve", "lu_solve_right_adjoint", "det",
                                  "slogdet", "logdet"])
def test_gradients_like_eager(name, inner):
    A = general(2, 4, 4, dtype=torch.complex64)
    B = general(2, 4, 3, dtype=torch.complex64, seed=1).requires_grad_()
    loss = _loss(name, B)
    a = A.clone().requires_grad_()
    loss(a).backward()
    expected_A, expected_B = a.grad, B.grad
    B.grad = None
    a = A.clone().requires_grad_()
    realify.compile(loss, inner=inner, strict=True)(a).backward()
    torch.testing.assert_close(a.grad, expected_A, rtol=1e-4, atol=1e-4)
    if expected_B is not None:
        torch.testing.assert_close(B.grad, expected_B, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_det_gradient_at_singular_matrices_like_eager(inner):
    # eager's det derivative is finite at singular A (it switches formulas there), where the LU
    # factorization's is not: a zero column, and two
    A = general(2, 4, 4)
    A[0, :, 2] = 0
    A[1, :, 1] = 0
    A[1, :, 3] = 0

    def loss(A):
        det = torch.linalg.det(A)
        return (det * (1 + 2j)).real.sum()

    a = A.clone().requires_grad_()
    loss(a).backward()
    assert a.grad.isfinite().all()
    expected, a.grad = a.grad, None
    realify.compile(loss, inner=inner, strict=True)(a).backward()
    torch.testing.assert_close(a.grad, expected)


def test_dynamic_batch_and_strict_real_graph():
    def f(A, B):
        LU, pivots = torch.linalg.lu_factor(A)
        return torch.linalg.lu_solve(LU, pivots, B), torch.linalg.det(A)

    fn, rec = compiled(f, dynamic=True)
    for batch in (2, 3, 5):
        A, B = general(batch, 4, 4, dtype=torch.complex64), general(batch, 4, 1, dtype=torch.complex64, seed=2)
        torch.testing.assert_close(fn(A, B), f(A, B))
    assert real_only(rec)


def test_second_derivative_is_a_named_error():
    A = general(3, 3).requires_grad_()
    det = realify.compile(torch.linalg.det, inner="eager")(A)
    (grad,) = torch.autograd.grad(det.abs(), A, create_graph=True)
    with pytest.raises(NotImplementedError, match="second derivative"):
        grad.abs().sum().backward()


# ---- the real-arithmetic formulation (what ONNX Runtime runs) against LAPACK ----------------


def _unrolled_factor(A: torch.Tensor):
    if A.is_complex():
        lr, li, pivots, info = lu.lu_factor_parts(A.real, A.imag)
        return torch.complex(lr, li), pivots, info
    LU, _, pivots, info = lu.lu_factor_parts(A, None)
    return LU, pivots, info


@pytest.mark.parametrize("cond", [None, 1e2, 1e4, 1e6])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_unrolled_getrf_like_lapack(cond, dtype):
    """Pivots equal LAPACK's; the factors are a backward-stable LU: ||P L U - A|| <= c n u ||A||
    (Higham, Thm. 9.3, with partial pivoting's growth factor of random matrices, c = 10), as
    LAPACK's own are."""
    A = general(4, 8, 8, dtype=torch.complex128, cond=cond, seed=3)
    A = (A if dtype.is_complex else A.real).to(dtype)
    LU, pivots, info = _unrolled_factor(A)
    expected = torch.linalg.lu_factor_ex(A)
    assert torch.equal(pivots, expected.pivots) and torch.equal(info, expected.info)
    P, L, U = torch.lu_unpack(LU, pivots)
    u = torch.finfo(A.real.dtype).eps / 2
    residual = torch.linalg.matrix_norm((P @ L @ U - A).to(torch.complex128))
    assert (residual <= 10 * 8 * u * torch.linalg.matrix_norm(A.to(torch.complex128))).all()


def test_unrolled_getrf_pivot_ties_and_nan_like_lapack():
    # equal |re| + |im| in a column (1, i, 0.5 + 0.5i): LAPACK takes the first; a NaN below the
    # first row is never taken; a NaN first is
    ties = torch.tensor([[0.5 + 0.5j, 1.0, 2.0], [1.0 + 0j, 3.0, 1.0], [1j, 1.0, 5.0]], dtype=torch.complex64)
    nan_below = torch.tensor([[1.0, 2.0], [complex("nan+0j"), 1.0]], dtype=torch.complex64)
    nan_first = torch.tensor([[complex("nan+0j"), 2.0], [3.0, 1.0]], dtype=torch.complex64)
    for A in (ties, nan_below, nan_first):
        assert torch.equal(_unrolled_factor(A)[1], torch.linalg.lu_factor_ex(A).pivots), A


@pytest.mark.parametrize("adjoint", [False, True])
def test_unrolled_substitution_like_lapack(adjoint):
    A, B = general(2, 6, 6, dtype=torch.complex64, seed=4), general(2, 6, 3, dtype=torch.complex64, seed=5)
    LU, pivots = torch.linalg.lu_factor(A)
    xr, xi = lu.solve_with_lu_parts((LU.real, LU.imag), pivots, (B.real, B.imag), adjoint=adjoint)
    expected = torch.linalg.lu_solve(LU, pivots, B, adjoint=adjoint)
    torch.testing.assert_close(torch.complex(xr, xi), expected, rtol=1e-5, atol=1e-5)


# ---- ONNX Runtime -------------------------------------------------------------------------


def _onnx_run(program, *args):
    """program's outputs run by ONNX Runtime, complex where eager's are."""
    ep = realify.export(program, args)
    model = to_onnx(ep).model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feeds = {name: torch.view_as_real(a.resolve_conj()).numpy() for name, a in zip(names, args)}
    expected = program(*args)
    return [torch.view_as_complex(torch.from_numpy(o)) if e.is_complex() else torch.from_numpy(o)
            for o, e in zip(session.run(None, feeds), expected if isinstance(expected, tuple) else (expected,))]


def test_onnx_runtime_runs_the_family():
    A, B = general(2, 4, 4, dtype=torch.complex64, seed=6), general(2, 4, 2, dtype=torch.complex64, seed=7)

    def program(A, B):
        LU, pivots = torch.linalg.lu_factor(A)
        sign, logabsdet = torch.linalg.slogdet(A)
        return (torch.linalg.det(A), sign, logabsdet, torch.linalg.lu_solve(LU, pivots, B),
                torch.linalg.lu_solve(LU, pivots, B.mT, left=False), torch.linalg.solve(A, B), torch.linalg.inv(A))

    got = _onnx_run(program, A, B)
    for g, e in zip(got, program(A, B)):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cond", [1e2, 1e4, 1e6])
def test_onnx_runtime_solve_accuracy(cond):
    """A solve in ONNX Runtime is as accurate as LAPACK's: forward error within 2 n u cond(A)
    (u the float32 unit roundoff; backward-stable LU, Higham Thm. 9.4), at condition numbers
    to 1e6 in complex64."""
    n = 6
    A = general(2, n, n, dtype=torch.complex64, cond=cond, seed=8)
    X = general(2, n, 1, dtype=torch.complex128, seed=9)
    B = (A.to(torch.complex128) @ X).to(torch.complex64)

    def program(A, B):
        return torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B)

    (got,) = _onnx_run(program, A, B)
    eager = program(A, B)
    bound = 2 * n * (torch.finfo(torch.float32).eps / 2) * cond
    for solution in (got, eager):
        error = torch.linalg.vector_norm(solution.to(torch.complex128) - X, dim=(-2, -1)) / \
            torch.linalg.vector_norm(X, dim=(-2, -1))
        assert (error <= 10 * bound).all(), error
