"""Hermitian eigenvalues and singular values (realify/rules/spectra.py: LAPACK on pairs) and
the matrix exponential (realify/rules/linalg.py: real arithmetic on the parts)."""

from __future__ import annotations

import pytest
import torch
from backend_support import RecordingInner
from torch.utils._pytree import tree_unflatten

import realify

DTYPES = [torch.complex64, torch.complex128]

# each test compiles afresh: torch.linalg.svdvals compiled by an earlier parametrization would
# hand the recording inner compiler no graph (torch 2.13 reuses it across shapes)
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def value_bound(A: torch.Tensor) -> float:
    """How far apart two backward-stable solvers may put an eigenvalue or singular value of A.

    Each returns the values of a matrix within c n u ||A||_2 of A (Weyl's and Mirsky's
    perturbation bounds turn that into the same bound on every value): eager's complex LAPACK
    with or without vectors (realify calls the same routine, but not always with eager's choice
    of computing the vectors: a traced call may), or a product realify computes in another
    order before it. Two of them differ by at most twice that; c = 10 covers LAPACK's
    Householder reductions at n <= 8."""
    n = max(A.shape[-2:])
    u = torch.finfo(A.real.dtype).eps / 2
    return 2 * 10 * 2 * n * u * torch.linalg.matrix_norm(A, 2).max().item()


def compiled(fn):
    rec = RecordingInner()
    return realify.compile(fn, inner=rec), rec


def real_only(rec: RecordingInner) -> bool:
    """No complex value and no eager island in any graph the inner compiler received."""
    islands = [n for _, gm in rec.graphs for n in gm.graph.nodes if "eager_island" in str(n.target)]
    return bool(rec.graphs) and not islands and rec.complex_nodes() == []


def decomposed(fn, *args):
    gm = realify.decompose(fn, list(args))
    return tree_unflatten(gm(*args), gm.realify_signature.out_spec)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh_reads_one_triangle_like_eager(dtype, uplo):
    # not Hermitian on purpose: eigh reads the named triangle and the real part of the diagonal
    A = torch.randn(3, 6, 6, dtype=dtype)

    def f(A):
        return torch.linalg.eigvalsh(A, UPLO=uplo)

    expected = f(A)
    fn, rec = compiled(f)
    got = fn(A)
    torch.testing.assert_close(got, expected, rtol=0, atol=value_bound(A))
    torch.testing.assert_close(decomposed(f, A), expected, rtol=0, atol=value_bound(A))
    assert real_only(rec)


def test_eigvalsh_with_repeated_eigenvalues():
    # a degenerate spectrum: each repeated value exact
    Q, _ = torch.linalg.qr(torch.randn(5, 5, dtype=torch.complex128))
    A = Q @ torch.diag(torch.tensor([1.0, 1.0, 2.0, 2.0, -3.0], dtype=torch.complex128)) @ Q.mH
    got = decomposed(torch.linalg.eigvalsh, A)
    torch.testing.assert_close(got, torch.linalg.eigvalsh(A), rtol=0, atol=value_bound(A))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 6), (6, 4), (5, 5)])
def test_svdvals_like_eager(dtype, shape):
    A = torch.randn(*shape, dtype=dtype)
    fn, rec = compiled(torch.linalg.svdvals)
    expected = torch.linalg.svdvals(A)
    torch.testing.assert_close(fn(A), expected, rtol=0, atol=value_bound(A))
    torch.testing.assert_close(decomposed(torch.linalg.svdvals, A), expected, rtol=0, atol=value_bound(A))
    assert real_only(rec)


def test_spectral_norms_compile_without_islands():
    # built on svdvals/eigvalsh: matrix 2-norm, nuclear norm, condition number, rank
    A = torch.randn(2, 5, 5, dtype=torch.complex128)
    H = A + A.mH

    def f(A, H):
        return (torch.linalg.matrix_norm(A, 2), torch.linalg.matrix_norm(A, "nuc"), torch.linalg.cond(A),
                torch.linalg.matrix_rank(A), torch.linalg.matrix_rank(H, hermitian=True))

    fn, rec = compiled(f)
    for got, expected in zip(fn(A, H), f(A, H)):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    assert real_only(rec)


def test_ground_state_energy_gradients_match_eager():
    # a variational Hamiltonian H(theta) = H0 + sum_k theta_k H_k: lowest eigenvalue and the
    # nuclear norm of a theta-dependent matrix, differentiated by eager's formulas
    torch.manual_seed(0)
    n, k = 6, 3
    herm = [(lambda m: m + m.mH)(torch.randn(n, n, dtype=torch.complex128)) for _ in range(k + 1)]
    M = torch.randn(k, 4, 5, dtype=torch.complex128)

    def loss(theta):
        H = herm[0] + sum(t * h for t, h in zip(theta, herm[1:]))
        return torch.linalg.eigvalsh(H)[0] + torch.linalg.svdvals(torch.einsum("k,kij->ij", theta.to(M.dtype), M)).sum()

    theta = torch.randn(k, dtype=torch.float64, requires_grad=True)
    expected = loss(theta)
    (expected_grad,) = torch.autograd.grad(expected, theta)
    fn, rec = compiled(loss)
    got = fn(theta)
    (got_grad,) = torch.autograd.grad(got, theta)
    # float64, well-separated spectrum (gap > 0.1 for this seed): first-order perturbation
    # theory bounds the gradient error by ~ n u ||H_k|| / gap, far below 1e-9
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(got_grad, expected_grad, rtol=1e-9, atol=1e-9)
    assert {"forward", "backward"} <= rec.kinds() and real_only(rec)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eager_complex_tensor_asks_values_only_where_the_function_returns_values(dtype):
    # ATen asks a tensor subclass for vectors inside every value-only function (for its own
    # backward); the eager ComplexTensor front end sees the function called and asks for none
    from realify import ComplexTensor

    torch.manual_seed(0)
    A = torch.randn(2, 5, 5, dtype=dtype)
    H = A + A.mH
    functions = {
        "svdvals": lambda a: torch.linalg.svdvals(a),
        "eigvalsh U": lambda a: torch.linalg.eigvalsh(a, UPLO="U"),
        "nuclear norm": lambda a: torch.linalg.matrix_norm(a, "nuc"),
        "spectral norm": lambda a: torch.linalg.matrix_norm(a, -2),
        "torch.norm nuc": lambda a: torch.norm(a, p="nuc", dim=(-2, -1)),
        "Tensor.norm nuc": lambda a: a.norm(p="nuc", dim=(-2, -1)),
        "cond": lambda a: torch.linalg.cond(a),
        "rank": lambda a: torch.linalg.matrix_rank(a[..., :3] @ a[..., :3].mH),
        "hermitian rank": lambda a: torch.linalg.matrix_rank(a, hermitian=True),
    }
    for name, f in functions.items():
        expected = f(H)
        got = f(ComplexTensor.from_complex(H))
        atol = 0 if expected.dtype == torch.int64 else 5 * value_bound(H) * max(1.0, expected.abs().max().item())
        torch.testing.assert_close(got, expected, rtol=0, atol=atol, msg=name)

    # gradients of svdvals/eigvalsh: eager's formula, its vectors recomputed in the backward
    for f in (torch.linalg.svdvals, torch.linalg.eigvalsh):
        a = H.clone().requires_grad_()
        (expected,) = torch.autograd.grad(f(a).sum(), a)
        z = ComplexTensor.from_complex(H).requires_grad_()
        (got,) = torch.autograd.grad(f(z).sum(), z)
        torch.testing.assert_close(got.to_complex(), expected, rtol=0, atol=20 * value_bound(H))
    # ATen's backward of cond reads the singular vectors, never empty ones: LAPACK's, on pairs
    # (realify/rules/factorizations.py), so the gradient is eager's
    a = H.clone().requires_grad_()
    (expected,) = torch.autograd.grad(torch.linalg.cond(a).sum(), a)
    for call in (lambda z: torch.linalg.cond(z), lambda z: torch.linalg.cond(input=z)):  # a keyword argument too
        z = ComplexTensor.from_complex(H).requires_grad_()
        (got,) = torch.autograd.grad(call(z).sum(), z)
        torch.testing.assert_close(got.to_complex(), expected, rtol=0, atol=20 * value_bound(H))
    # a call that reads the vectors gets eager's
    for got, expected in zip(torch.linalg.svd(ComplexTensor.from_complex(H)), torch.linalg.svd(H)):
        torch.testing.assert_close(got.to_complex() if isinstance(got, ComplexTensor) else got, expected)


def test_time_evolution_by_matrix_exp_matches_eager():
    # psi(t) = exp(-i t H(theta)) psi0 for a 4-qubit Hamiltonian (16 x 16), and the gradient
    # of <psi(t)| Z_0 |psi(t)> with respect to theta: real-only graphs forward and backward.
    # complex128: the real exponential of E(-i t H), a 32 x 32 matrix of the same 2-norm, and
    # eager's complex one run the same Taylor scaling-and-squaring algorithm; measured 8e-16
    # apart in value and 2e-16 in gradient at ||t H||_2 = 0.77 and 15.3 (bounds: 1000x that)
    torch.manual_seed(0)
    n, k = 16, 3
    herm = [(lambda m: (m + m.mH) / 4)(torch.randn(n, n, dtype=torch.complex128)) for _ in range(k + 1)]
    psi0 = torch.nn.functional.normalize(torch.randn(n, dtype=torch.complex128), dim=0)
    z0 = torch.tensor([1.0] * (n // 2) + [-1.0] * (n // 2), dtype=torch.float64)

    def expectation(theta, t):
        H = herm[0] + sum(th * h for th, h in zip(theta, herm[1:]))
        psi = torch.linalg.matrix_exp(-1j * t * H) @ psi0
        return (psi.abs() ** 2 * z0).sum()

    theta = torch.randn(k, dtype=torch.float64, requires_grad=True)
    fn, rec = compiled(expectation)
    for t in (0.1, 2.0):
        expected = expectation(theta, t)
        (expected_grad,) = torch.autograd.grad(expected, theta)
        got = fn(theta, t)
        (got_grad,) = torch.autograd.grad(got, theta)
        torch.testing.assert_close(got, expected, rtol=1e-11, atol=1e-11)
        torch.testing.assert_close(got_grad, expected_grad, rtol=1e-10, atol=1e-10)
    assert {"forward", "backward"} <= rec.kinds() and real_only(rec)


def test_eigenvectors_and_singular_vectors_are_eagers():
    """Vectors asked for run LAPACK's complex routine on pairs (realify/rules/factorizations.py),
    not an eager island: the compile backend and decompose give eager's vectors."""
    A = torch.randn(4, 4, dtype=torch.complex64)
    A = A + A.mH

    def f(A):
        values, vectors = torch.linalg.eigh(A)
        return values, vectors.abs()

    fn, rec = compiled(f)
    for g, e in zip(fn(A), f(A)):
        torch.testing.assert_close(g, e)
    assert real_only(rec)  # no eager island
    for g, e in zip(decomposed(f, A), f(A)):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(decomposed(lambda A: torch.linalg.svd(A).U, A), torch.linalg.svd(A).U)


def test_eigvalsh_compiles_with_inductor():
    A = torch.randn(4, 8, 8, dtype=torch.complex64)
    H = A + A.mH

    def f(H):
        return torch.linalg.eigvalsh(H * 2).sum(-1) + torch.linalg.svdvals(H).max(-1).values

    torch._dynamo.reset()
    torch.testing.assert_close(realify.compile(f)(H), f(H), rtol=0, atol=2 * value_bound(2 * H))


def test_unread_placeholders_leave_the_graph_random_ops_stay():
    A = torch.randn(4, 4, dtype=torch.complex64)
    ep = realify.export(lambda A: torch.linalg.eigvalsh(A), (A + A.mH,))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    eigh_on_pairs = torch.ops.realify._linalg_eigh_pairs.default
    assert torch.ops.aten.new_zeros.default not in targets and eigh_on_pairs in targets

    def f(z):
        torch.randn(3)  # read by nothing, but it advances the random stream
        return z * torch.randn(3)

    z = torch.randn(3, dtype=torch.complex64)
    gm = realify.decompose(f, [z])
    torch.manual_seed(7)
    got = tree_unflatten(gm(z), gm.realify_signature.out_spec)
    torch.manual_seed(7)
    torch.testing.assert_close(got, f(z))
