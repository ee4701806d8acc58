"""Factorizations with vectors (realify/rules/factorizations.py, realify/runtime/complex_lapack.py):
QR, geqrf, householder_product, ormqr, eig/eigvals, eigh, svd, pinv, matrix_sqrth, polar and
the LDL family run LAPACK on pairs in every front end, with eager's values (phases of vectors
included) and eager's derivatives, and no island; realify.onnx writes solves, inverses, Cholesky and
QR (realify/rules/householder.py) for ONNX Runtime and names the ones it cannot write."""

from __future__ import annotations

import onnxruntime as ort
import pytest
import torch
from test_cholesky import compiled, front_ends, real_only
from test_lu import general

import realify
from realify.onnx import to_onnx
from realify.rules import householder

# each test compiles afresh: a program compiled by an earlier test (torch.linalg.pinv itself,
# say) would hand the recording inner compiler no graph
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def hermitian(*shape: int, dtype=torch.complex128, seed: int = 0) -> torch.Tensor:
    A = general(*shape, dtype=dtype, seed=seed)
    return A + A.mH


def _pd(*shape: int, dtype=torch.complex128, seed: int = 0) -> torch.Tensor:
    A = general(*shape, dtype=dtype, seed=seed)
    return A @ A.mH + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def _programs() -> dict:
    """name -> (program, its input)."""
    A, H = general(2, 5, 4), hermitian(2, 4, 4)
    C = general(2, 5, 3, seed=3)
    return {
        "qr": (lambda A: tuple(torch.linalg.qr(A)), A),
        "qr complete": (lambda A: tuple(torch.linalg.qr(A, mode="complete")), A),
        "qr r": (lambda A: torch.linalg.qr(A, mode="r")[1], A),
        "geqrf": (lambda A: tuple(torch.geqrf(A)), A),
        "householder_product": (lambda A: torch.linalg.householder_product(*torch.geqrf(A)), A),
        "ormqr": (lambda A: torch.ormqr(*torch.geqrf(A), C.to(A.dtype)), A),
        "ormqr right adjoint": (lambda A: torch.ormqr(*torch.geqrf(A), C.mT[..., :5].to(A.dtype), left=False,
                                                                   transpose=True),
                                A),
        "eig": (lambda A: tuple(torch.linalg.eig(A)), general(2, 4, 4)),
        "eigvals": (torch.linalg.eigvals, general(2, 4, 4)),
        "eigh": (lambda H: tuple(torch.linalg.eigh(H)), H),
        "eigh U": (lambda H: tuple(torch.linalg.eigh(H, UPLO="U")), H),
        "eigvalsh": (lambda H: (torch.linalg.eigvalsh(H),), H),
        "svd": (lambda A: tuple(torch.linalg.svd(A, full_matrices=False)), A),
        "svd full": (lambda A: tuple(torch.linalg.svd(A)), A),
        "torch.svd": (lambda A: tuple(torch.svd(A)), A),
        "pinv": (torch.linalg.pinv, A),
        "pinv hermitian": (lambda H: torch.linalg.pinv(H, hermitian=True), H),
        "pinv atol": (lambda A: torch.linalg.pinv(A, atol=torch.tensor(0.5, dtype=torch.float64)), A),
        "matrix_sqrth": (torch.linalg.matrix_sqrth, _pd(2, 4, 4)) if hasattr(torch.linalg, "matrix_sqrth") else None,
        "polar": (lambda A: tuple(torch.linalg.polar(A)), general(2, 4, 4)) if hasattr(torch.linalg, "polar")
        else None,
        "ldl_factor": (lambda H: tuple(torch.linalg.ldl_factor_ex(H, hermitian=True)), H),
        "ldl_factor symmetric": (lambda H: tuple(torch.linalg.ldl_factor_ex(H)), H),
        "ldl_solve": (lambda H: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(H, hermitian=True),
                                                       C[..., :4, :].to(H.dtype), hermitian=True), H),
        "pinv rank-deficient": (torch.linalg.pinv, general(2, 5, 2) @ general(2, 2, 4, seed=1)),
    }


PROGRAMS = {name: p for name, p in _programs().items() if p is not None}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_values_are_eagers_with_no_island(name, dtype):
    program, A = PROGRAMS[name]
    A = A.to(dtype)
    expected = program(A)
    for front_end, got in front_ends(program, A).items():
        # the same LAPACK call on the same numbers: equal, vectors' phases included
        torch.testing.assert_close(got, expected, rtol=0, atol=0, msg=front_end)


@pytest.mark.parametrize("view", ["conj", "transposed", "real data"])
def test_views_and_real_data(view):
    A = general(2, 4, 4)
    make = {"conj": lambda A: A.conj(), "transposed": lambda A: A.mT,
            "real data": lambda A: torch.complex(A.real, torch.zeros_like(A.real))}[view]

    def f(A):
        B = make(A)
        Q, R = torch.linalg.qr(B)
        L, V = torch.linalg.eigh(B + B.mH)
        return Q, R, L, V, torch.linalg.eigvals(B), torch.linalg.pinv(B)

    expected = f(A)
    for front_end, got in front_ends(f, A).items():
        torch.testing.assert_close(got, expected, rtol=0, atol=0, msg=front_end)


def test_eig_of_a_real_matrix_is_eagers():
    # a real input goes to the real geev, as in eager, whose vectors differ from the complex one's
    A = torch.randn(3, 5, 5, dtype=torch.float64)
    expected = torch.linalg.eig(A)
    got = realify.compile(torch.linalg.eig, inner="eager", strict=True)(A)
    torch.testing.assert_close(tuple(got), tuple(expected), rtol=0, atol=0)


def _gauge_invariant_loss(name: str):
    """A real loss of the program's outputs that does not depend on the phases of vectors (as
    OpInfo's gradient checks): projectors, |.|, values."""
    C = general(2, 5, 3, seed=3, dtype=torch.complex64)
    return {
        "qr": lambda A: sum((x * x.conj()).real.sum() for x in torch.linalg.qr(A)) + torch.linalg.qr(A)[1].real.sum(),
        # eager has no derivative for geqrf: these differentiate with respect to its outputs
        "householder_product": lambda a, tau: (torch.linalg.householder_product(a, tau) * (1 + 1j)).real.sum(),
        "ormqr": lambda a, tau: (torch.ormqr(a, tau, C) * (1 - 2j)).real.sum(),
        "eig": lambda A: (torch.linalg.eigvals(A) * (1 + 2j)).real.sum()
        + (lambda L, V: (V * V.conj()).real.mul(L.real.unsqueeze(-2)).sum())(*torch.linalg.eig(A)),
        "eigh": lambda A: (lambda L, V: ((V[..., :2] @ V[..., :2].mH) * (2 + 1j)).real.sum() + L.sum())(
            *torch.linalg.eigh(A + A.mH)),
        "svd": lambda A: (lambda U, S, Vh: ((U[..., :2] @ Vh[..., :2, :]) * (1 - 1j)).real.sum() + S.sum())(
            *torch.linalg.svd(A, full_matrices=False)),
        "svd values of full": lambda A: torch.linalg.svd(A)[1].sum(),
        "pinv": lambda A: (torch.linalg.pinv(A) * (1 + 1j)).real.sum(),
        "pinv hermitian": lambda A: (torch.linalg.pinv(A + A.mH, hermitian=True) * (1 + 1j)).real.sum(),
        "polar": lambda A: sum((x * (1 + 1j)).real.sum() for x in torch.linalg.polar(A)),
        "matrix_sqrth": lambda A: (torch.linalg.matrix_sqrth(A @ A.mH + 4 * torch.eye(4)) * (1 + 1j)).real.sum(),
    }[name]


GRADIENT_CASES = ["qr", "householder_product", "ormqr", "eig", "eigh", "svd", "svd values of full", "pinv",
                  "pinv hermitian"] + (["polar"] if hasattr(torch.linalg, "polar") else []) + (
    ["matrix_sqrth"] if hasattr(torch.linalg, "matrix_sqrth") else [])


@pytest.mark.parametrize("inner", ["eager", "inductor"])
@pytest.mark.parametrize("name", GRADIENT_CASES)
def test_gradients_are_eagers(name, inner):
    shape = (2, 5, 4) if name in ("qr", "householder_product", "ormqr", "svd", "svd values of full", "pinv") \
        else (2, 4, 4)
    A = general(*shape, dtype=torch.complex64)
    loss = _gauge_invariant_loss(name)
    inputs = torch.geqrf(A) if name in ("householder_product", "ormqr") else (A,)
    leaves = [x.clone().requires_grad_() for x in inputs]
    loss(*leaves).backward()
    expected = [x.grad for x in leaves]
    leaves = [x.clone().requires_grad_() for x in inputs]
    realify.compile(loss, inner=inner, strict=True)(*leaves).backward()
    # eager's own derivative on eager's own factors; Inductor computes the loss's cotangents
    # with other roundings, which eig's and eigh's 1/(l_i - l_j) terms amplify by
    # max |l| / min gap (~10 for these matrices): 1e-4 for complex64
    torch.testing.assert_close([x.grad for x in leaves], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("output", ["S", "U"])
def test_svd_full_matrices_differentiates_where_eager_does(output):
    # eager differentiates S of a full_matrices SVD; U's gradient it computes since torch 2.15
    # and refused before: the same here, either way
    def loss(A):
        U, S, _ = torch.linalg.svd(A)
        return S.sum() if output == "S" else U.abs().sum()  # |U|: free of the columns' phases

    A = general(5, 3)
    a = A.clone().requires_grad_()
    try:
        loss(a).backward()
    except RuntimeError as eager_error:
        with pytest.raises(RuntimeError, match="full_matrices"):
            realify.compile(loss, inner="eager", strict=True)(a).backward()
        assert "full_matrices" in str(eager_error)
        return
    expected, a.grad = a.grad, None
    realify.compile(loss, inner="eager", strict=True)(a).backward()
    torch.testing.assert_close(a.grad, expected)


def test_not_differentiable_in_eager_raises_eagers_error():
    A = general(4, 3).requires_grad_()
    with pytest.raises(RuntimeError) as eager_error:
        torch.geqrf(A)[0].abs().sum().backward()
    fn = realify.compile(lambda A: torch.geqrf(A)[0].abs().sum(), inner="eager", strict=True)
    with pytest.raises(RuntimeError) as realify_error:
        fn(A).backward()
    assert "geqrf" in str(eager_error.value) and "geqrf" in str(realify_error.value)


def test_second_derivative_is_a_named_error():
    A = general(4, 4).requires_grad_()
    values = realify.compile(lambda A: torch.linalg.eigvals(A), inner="eager")(A)
    (grad,) = torch.autograd.grad(values.abs().sum(), A, create_graph=True)
    with pytest.raises(NotImplementedError, match="second derivative"):
        grad.abs().sum().backward()


def test_dynamic_batch_and_strict_real_graph():
    def f(A):
        Q, R = torch.linalg.qr(A)
        L, V = torch.linalg.eigh(A + A.mH)  # a sum: the same input as eager's, to the last bit
        return Q, R, L, V, torch.linalg.svd(A, full_matrices=False)[2]

    fn, rec = compiled(f, dynamic=True)
    for batch in (2, 3, 5):
        A = general(batch, 4, 4, dtype=torch.complex64, seed=batch)
        torch.testing.assert_close(fn(A), f(A), rtol=0, atol=0)
    assert real_only(rec)
    assert [kind for kind, _ in rec.graphs].count("dynamo") == 1


def test_graph_break_between_factor_and_use():
    def f(A):
        a, tau = torch.geqrf(A)
        torch._dynamo.graph_break()
        return torch.linalg.householder_product(a, tau) @ torch.triu(a)[..., :3, :]

    A = general(2, 5, 3, dtype=torch.complex64)
    fn, rec = compiled(f)
    # the factors are eager's; the product is realify's (3 real GEMMs), not bit for bit
    torch.testing.assert_close(fn(A), f(A), rtol=1e-5, atol=1e-6)
    assert real_only(rec) and [kind for kind, _ in rec.graphs].count("dynamo") == 2


def test_nan_and_inf_inputs_like_eager():
    # eager's own kernel on the same numbers: the same NaNs, and eager's LinAlgError where it
    # raises one (eig of a NaN matrix is left out: LAPACK's geev does not return on it, in eager too)
    A = general(4, 4)
    for bad in (float("nan"), complex(float("inf"), 0)):
        A[1, 2] = bad
        got = realify.compile(lambda A: tuple(torch.linalg.qr(A)), inner="eager", strict=True)(A)
        torch.testing.assert_close(got, tuple(torch.linalg.qr(A)), equal_nan=True)
        # eigh reads the lower triangle: the upper one's NaN or inf never reaches it
        got = realify.compile(lambda A: tuple(torch.linalg.eigh(A)), inner="eager", strict=True)(A)
        torch.testing.assert_close(got, tuple(torch.linalg.eigh(A)), rtol=0, atol=0)
        try:
            expected = torch.linalg.pinv(A)
        except torch.linalg.LinAlgError:  # NaN: gesdd does not converge
            with pytest.raises(torch.linalg.LinAlgError, match="non-finite"):
                realify.compile(torch.linalg.pinv, inner="eager", strict=True)(A)
        else:  # inf: all NaN
            got = realify.compile(torch.linalg.pinv, inner="eager", strict=True)(A)
            torch.testing.assert_close(got, expected, equal_nan=True)


NO_ONNX = {
    "eig": lambda A: torch.linalg.eig(A)[1],
    "eigvals": lambda A: torch.linalg.eigvals(A),
}


@pytest.mark.parametrize("name", list(NO_ONNX))
def test_onnx_names_what_it_cannot_write(name):
    # the one factorization without a real-arithmetic form in ONNX: the error names the op,
    # why, and the export that works for Hermitian matrices
    A = general(4, 4, dtype=torch.complex64)
    with pytest.raises(realify.NoOnnxFormError, match=r"realify::linalg_eig_pairs") as error:
        to_onnx(NO_ONNX[name], (A,))
    assert "What to do" in str(error.value) and "linalg.eigh" in str(error.value)


@pytest.mark.parametrize("cond", [1e2, 1e4, 1e6])
def test_householder_qr_accuracy_on_ill_conditioned_inputs(cond):
    # realify.onnx's QR (realify/rules/householder.py) in complex64 at n = 16: backward stable
    # whatever cond, ||QR - A|| / ||A|| within 2 n u and ||Q^H Q - I|| within 4 n u (Higham's
    # c n u; measured 0.3 and 0.8 n u), and R within n u cond(A) of LAPACK's R (the normwise
    # perturbation bound; measured below 0.004 times that: R is better determined than it says)
    n = 16
    A = general(4, n, n, dtype=torch.complex64, cond=cond)
    (qr_, qi), (rr, ri) = householder.qr_parts(A.real, A.imag, "reduced")
    Q, R = torch.complex(qr_, qi).to(torch.complex128), torch.complex(rr, ri).to(torch.complex128)
    wide = A.to(torch.complex128)
    u = torch.finfo(torch.float32).eps / 2
    norm = torch.linalg.matrix_norm
    assert (norm(Q @ R - wide, 2) / norm(wide, 2)).max().item() <= 2 * n * u
    assert norm(Q.mH @ Q - torch.eye(n, dtype=Q.dtype), 2).max().item() <= 4 * n * u
    _, expected = torch.linalg.qr(A)
    assert (norm(R - expected.to(R.dtype), 2) / norm(wide, 2)).max().item() <= n * u * cond


@pytest.mark.parametrize("hermitian", [True, False], ids=["hermitian", "symmetric"])
def test_onnx_runtime_ldl_is_lapacks(hermitian):
    # Bunch-Kaufman with LAPACK's pivot rule (realify/rules/bunch_kaufman.py): eager's pivots and
    # info exactly; LD and the solve within rounding (LD 32 n u max|A| in tests/test_bunch_kaufman.py,
    # the solve's error c n u cond(A), cond below 1e2 here). A leading [[0, 3], [3, 0]] block is a
    # 2x2 pivot, and the last matrix of the batch is singular (a zero column: info > 0)
    A = general(3, 4, 4, dtype=torch.complex64)
    A = A + (A.mH if hermitian else A.mT)
    A[:2, :2, :2] = torch.tensor([[0, 3], [3, 0]], dtype=A.dtype)
    A[2, :, 1] = A[2, 1, :] = 0
    B = general(3, 4, 2, dtype=torch.complex64, seed=1)

    def program(A):
        LD, pivots, info = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
        return LD, pivots, info, torch.linalg.ldl_solve(LD[:2], pivots[:2], B[:2], hermitian=hermitian)

    LD, pivots, info, X = program(A)
    assert (pivots < 0).any() and info[2] > 0
    model = to_onnx(program, (A,)).model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: torch.view_as_real(A).numpy()})
    assert (got[1] == pivots.numpy()).all() and (got[2] == info.numpy()).all()
    torch.testing.assert_close(torch.view_as_complex(torch.from_numpy(got[0])), LD, rtol=0, atol=5e-6)
    torch.testing.assert_close(torch.view_as_complex(torch.from_numpy(got[3])), X, rtol=1e-5, atol=1e-5)


def _solve_programs(A: torch.Tensor, B: torch.Tensor) -> dict:
    L = torch.linalg.cholesky(A @ A.mH + A.shape[-1] * torch.eye(A.shape[-1], dtype=A.dtype))
    return {
        "solve": lambda A: torch.linalg.solve(A, B),
        "solve vector": lambda A: torch.linalg.solve(A, B[..., 0]),
        "solve right": lambda A: torch.linalg.solve(A, B.mT, left=False),
        "inv": torch.linalg.inv,
        "solve_triangular upper": lambda A: torch.linalg.solve_triangular(A, B, upper=True),
        "solve_triangular lower right unit": lambda A: torch.linalg.solve_triangular(
            A, B.mT, upper=False, left=False, unitriangular=True),
        "triangular_solve transpose": lambda A: torch.triangular_solve(B, A, upper=False, transpose=True)[0],
        "cholesky_solve": lambda A: torch.cholesky_solve(B, L + 0 * A),
        "cholesky_solve upper": lambda A: torch.cholesky_solve(B, L.mH + 0 * A, upper=True),
        "cholesky_inverse": lambda A: torch.cholesky_inverse(L + 0 * A),
        "cholesky": lambda A: torch.linalg.cholesky(A @ A.mH + 4 * torch.eye(4, dtype=A.dtype)),
    }


@pytest.mark.parametrize("name", list(_solve_programs(torch.eye(4, dtype=torch.complex64),
                                                      torch.eye(4, 2, dtype=torch.complex64))))
def test_solves_inverses_and_cholesky_in_every_front_end_and_onnx_runtime(name):
    # LAPACK on pairs where realify compiles; the complex LU, substitutions and the embedded
    # Cholesky in ONNX Runtime, whose error bounds (docs/numerics.md) at these well-conditioned
    # 4 x 4 matrices (the triangles' diagonals kept away from 0) are below 1e-5
    A = general(2, 4, 4, dtype=torch.complex64) + 4 * torch.eye(4, dtype=torch.complex64)
    B = general(2, 4, 2, dtype=torch.complex64, seed=1)
    program = _solve_programs(A, B)[name]
    expected = program(A)
    for front_end, got in front_ends(program, A).items():
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, msg=front_end)
    model = to_onnx(program, (A,)).model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: torch.view_as_real(A).numpy()})
    torch.testing.assert_close(torch.view_as_complex(torch.from_numpy(got)), expected, rtol=1e-5, atol=1e-5)


QR_PROGRAMS = {
    "qr": lambda A: tuple(torch.linalg.qr(A)),
    "qr complete": lambda A: tuple(torch.linalg.qr(A, mode="complete")),
    "qr r": lambda A: torch.linalg.qr(A, mode="r")[1],
    "geqrf": lambda A: tuple(torch.geqrf(A)),
    "householder_product": lambda A: torch.linalg.householder_product(*torch.geqrf(A)),
    "ormqr": lambda A: torch.ormqr(*torch.geqrf(A), A[..., :2] * 2j),
    "ormqr right adjoint": lambda A: torch.ormqr(*torch.geqrf(A), A.mT[..., :2, :] * 1j, left=False, transpose=True),
}


@pytest.mark.parametrize("shape", [(2, 5, 3), (4, 4)], ids=["tall", "square"])
@pytest.mark.parametrize("name", list(QR_PROGRAMS))
def test_onnx_runtime_householder_qr_is_lapacks(name, shape):
    # realify/rules/householder.py follows zlarfg's conventions (R's real diagonal, its signs),
    # so ONNX Runtime's Q and R are eager's to rounding, not only up to phases: Householder QR
    # is backward stable, within c n u ||A|| (5e-6 here for complex64)
    A = general(*shape, dtype=torch.complex64)
    program = QR_PROGRAMS[name]
    expected = program(A)
    expected = expected if isinstance(expected, tuple) else (expected,)
    model = to_onnx(program, (A,)).model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: torch.view_as_real(A).numpy()})
    for g, e in zip(got, expected):
        torch.testing.assert_close(torch.view_as_complex(torch.from_numpy(g)), e, rtol=0, atol=5e-6)
