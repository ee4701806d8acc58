"""The Bunch-Kaufman LDL factorization and solve in real arithmetic (realify/rules/bunch_kaufman.py)
against eager's LAPACK (torch.linalg.ldl_factor_ex / ldl_solve, ?sytrf / ?hetrf and ?sytrs /
?hetrs with uplo='L'): the same pivots and info, the same packed LD to rounding, the same
solutions; and the same functions through torch.export with a dynamic batch and in ONNX Runtime."""

from __future__ import annotations

import math

import pytest
import torch

from realify.rules.bunch_kaufman import ldl_factor_parts, ldl_solve_parts

# (dtype, hermitian): a real matrix's factorization is the same either way; both are checked once
CASES = [(torch.complex64, True), (torch.complex64, False), (torch.complex128, True), (torch.complex128, False),
         (torch.float32, False), (torch.float64, False), (torch.float64, True)]
CASE_IDS = [f"{str(dtype).split('.')[1]}-{'he' if hermitian else 'sy'}" for dtype, hermitian in CASES]
BATCH = (3, 2)


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(torch.empty(0, dtype=dtype).real.dtype).eps


def _ld_tolerance(A: torch.Tensor) -> dict:
    """The factorization does LAPACK's operations in LAPACK's order, but the BLAS under eager
    rounds some complex products and quotients differently in the last bit (real matrices come
    out bit for bit); each such difference is carried through the n - k Schur complements that
    follow, scaled by the growth of the entries (bounded by Bunch-Kaufman's pivot rule): 32 n eps
    relative to the largest entry of A. The largest difference seen on 180 matrices of each kind
    (complex, symmetric or Hermitian, random, tiny or zero diagonal) is 11 n eps for n <= 16, and
    32 n eps at n = 32, where a larger growth amplifies it more."""
    n = A.shape[-1]
    scale = max(A.abs().max().item(), 1.0)
    return dict(rtol=0.0, atol=32 * n * _eps(A.dtype) * scale)


def symmetric(n: int, dtype: torch.dtype, hermitian: bool, diagonal: str = "random", seed: int = 0,
              batch: tuple[int, ...] = BATCH) -> torch.Tensor:
    """A random symmetric (hermitian False) or Hermitian indefinite matrix; ``diagonal`` "tiny"
    scales its diagonal by 1e-3 and "zero" removes it, which makes 2x2 pivots and interchanges
    the rule's usual choice."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(*batch, n, n, dtype=dtype, generator=g)
    A = X + (X.mH if hermitian else X.mT)
    d = torch.diag_embed(A.diagonal(dim1=-2, dim2=-1))
    return {"random": A, "tiny": A - (1 - 1e-3) * d, "zero": A - d}[diagonal]


def factor(A: torch.Tensor, hermitian: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ldl_factor_parts on the parts of A, as one (complex or real) LD."""
    if not A.is_complex():
        ldr, ldi, pivots, info = ldl_factor_parts(A, None, hermitian)
        assert ldi is None
        return ldr, pivots, info
    ldr, ldi, pivots, info = ldl_factor_parts(A.real, A.imag, hermitian)
    return torch.complex(ldr, ldi), pivots, info


def solve(LD: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """ldl_solve_parts on the parts of LD and B, as one X."""
    if not LD.is_complex():
        xr, xi = ldl_solve_parts(LD, None, pivots, B, None, hermitian)
        assert xi is None
        return xr
    xr, xi = ldl_solve_parts(LD.real, LD.imag, pivots, B.real, B.imag, hermitian)
    return torch.complex(xr, xi)


def assert_factor_like_eager(A: torch.Tensor, hermitian: bool) -> torch.Tensor:
    """Pivots and info exactly eager's, LD eager's to rounding; eager's pivots returned."""
    expected_ld, expected_pivots, expected_info = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
    ld, pivots, info = factor(A, hermitian)
    assert pivots.dtype == info.dtype == torch.int32
    assert info.shape == A.shape[:-2]
    torch.testing.assert_close(pivots, expected_pivots, rtol=0, atol=0)
    torch.testing.assert_close(info, expected_info, rtol=0, atol=0)
    torch.testing.assert_close(ld, expected_ld, **_ld_tolerance(A))
    return expected_pivots


@pytest.mark.parametrize("diagonal", ["random", "tiny", "zero"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16])
@pytest.mark.parametrize(("dtype", "hermitian"), CASES, ids=CASE_IDS)
def test_factor_like_eager(dtype, hermitian, n, diagonal):
    pivots = assert_factor_like_eager(symmetric(n, dtype, hermitian, diagonal, seed=n), hermitian)
    if diagonal == "zero" and n > 1:
        # a zero a_11 next to a nonzero column always makes the first step a 2x2 block
        assert (pivots[..., 0] < 0).all()


@pytest.mark.parametrize(("dtype", "hermitian"), CASES, ids=CASE_IDS)
def test_only_the_lower_triangle_is_read(dtype, hermitian):
    # eager (LAPACK, uplo='L') reads neither the strict upper triangle nor, for a Hermitian
    # matrix, the imaginary part of the diagonal
    A = symmetric(5, dtype, hermitian, "tiny", seed=1)
    noise = symmetric(5, dtype, False, seed=2)
    if dtype.is_complex and hermitian:
        noise = noise.triu(1) + 1j * torch.diag_embed(noise.diagonal(dim1=-2, dim2=-1).real)
    else:
        noise = noise.triu(1)
    assert_factor_like_eager(A + noise, hermitian)


def mixed_batch(dtype: torch.dtype, hermitian: bool) -> torch.Tensor:
    """Six 5x5 matrices, one per kind of step sequence: 1x1 pivots in place, 2x2 blocks in place,
    a 1x1 pivot after an interchange, a 2x2 block after an interchange, a zero column (info 3)
    and the zero matrix (info 1). Off-diagonal entries carry a complex phase where A is complex."""
    n = 5
    lower = torch.zeros(6, n, n, dtype=torch.float64)
    diagonal = torch.zeros(6, n, dtype=torch.float64)
    lower[0] = 0.1 * torch.ones(n, n).tril(-1)
    diagonal[0] = torch.tensor([4.0, -3.0, 2.0, -5.0, 1.0])
    lower[1, 1, 0], lower[1, 3, 2], diagonal[1, 4] = 2.0, 3.0, 1.0  # [[0, b], [b, 0]] blocks
    lower[2, 1, 0] = 1.0
    diagonal[2] = torch.tensor([1e-3, 5.0, 1.0, 1.0, 1.0])  # a_22 is the better pivot
    lower[3, 1:, 0] = torch.tensor([0.5, 0.25, 2.0, 0.125])  # largest in row 4: a block on 1 and 4
    lower[3, 2, 1], lower[3, 4, 3], diagonal[3, 4] = 1.0, 1.0, 1.0
    lower[4] = 0.1 * torch.ones(n, n).tril(-1)
    lower[4, :, 2] = lower[4, 2, :] = 0.0
    diagonal[4] = torch.tensor([4.0, -3.0, 0.0, -5.0, 1.0])
    lower = lower.to(dtype)
    if dtype.is_complex:
        lower = lower * torch.exp(torch.tensor(0.7j, dtype=dtype))
    return lower + (lower.mH if hermitian else lower.mT) + torch.diag_embed(diagonal.to(dtype))


@pytest.mark.parametrize(("dtype", "hermitian"), CASES, ids=CASE_IDS)
def test_mixed_steps_in_one_batch(dtype, hermitian):
    A = mixed_batch(dtype, hermitian)
    pivots = assert_factor_like_eager(A, hermitian)
    # the batch holds the kinds of steps it was built for (eager decides them)
    assert pivots.tolist() == [[1, 2, 3, 4, 5], [-2, -2, -4, -4, 5], [2, 2, 3, 4, 5], [-4, -4, -4, -4, 5],
                               [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]
    assert factor(A, hermitian)[2].tolist() == [0, 0, 0, 0, 3, 1]


@pytest.mark.parametrize(("dtype", "hermitian"), CASES, ids=CASE_IDS)
def test_singular_columns(dtype, hermitian):
    # a zero column anywhere: info is the first zero column met (1-based; an interchange may have
    # moved it), the column is left as it is
    A = symmetric(6, dtype, hermitian, "tiny", seed=3, batch=(4,))
    keep = torch.ones(4, 6, 1, dtype=torch.bool)
    keep[0, 0], keep[1, 3], keep[2, 5], keep[3, 2], keep[3, 4] = False, False, False, False, False
    A = A * (keep & keep.mT)
    assert_factor_like_eager(A, hermitian)
    info = factor(A, hermitian)[2]
    assert info[0] == 1
    assert (info > 0).all()


def _solve_tolerance(A: torch.Tensor) -> float:
    # a backward stable solve: a relative error of the order of n eps cond(A), 100 n eps cond(A) allowed
    return 100 * A.shape[-1] * _eps(A.dtype) * torch.linalg.cond(A.to(torch.complex128)).max().item()


@pytest.mark.parametrize(("n", "diagonal"), [(1, "random"), (3, "random"), (3, "zero"), (8, "random"), (8, "zero"),
                                             (16, "random"), (16, "zero")])  # a 1x1 with a zero diagonal is singular
@pytest.mark.parametrize(("dtype", "hermitian"), CASES, ids=CASE_IDS)
def test_solve_like_eager(dtype, hermitian, n, diagonal):
    A = symmetric(n, dtype, hermitian, diagonal, seed=10 + n)
    B = torch.randn(*BATCH, n, 3, dtype=dtype, generator=torch.Generator().manual_seed(1))
    LD, pivots, _ = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
    expected = torch.linalg.ldl_solve(LD, pivots, B, hermitian=hermitian)
    X = solve(LD, pivots, B, hermitian)
    tolerance = _solve_tolerance(A)
    assert ((X - expected).abs().max() / expected.abs().max()).item() <= tolerance
    residual = (A @ X - B).abs().max() / (A.abs().max() * X.abs().max() * n)
    assert residual.item() <= 100 * _eps(dtype)


@pytest.mark.parametrize("cond", [1e2, 1e4, 1e6])
@pytest.mark.parametrize("hermitian", [True, False], ids=["he", "sy"])
def test_ill_conditioned_complex64_like_lapack(hermitian, cond):
    # indefinite, singular values spread geometrically from 1 to 1/cond, complex64, n = 16: the
    # pivots are eager's, and the solve is as backward stable as LAPACK's (Bunch-Kaufman bounds
    # the growth): ||A X - B|| within c n u ||A|| ||X||, c = 10, whatever cond; the forward
    # error against eager's solution then within c n u cond(A)
    n = 16
    g = torch.Generator().manual_seed(int(cond))
    Q, _ = torch.linalg.qr(torch.randn(4, n, n, dtype=torch.complex128, generator=g))
    signs = torch.tensor([(-1.0) ** k for k in range(n)], dtype=torch.float64)
    values = torch.logspace(0, -math.log10(cond), n, dtype=torch.float64) * signs
    if hermitian:
        A = (Q * values.to(Q.dtype)) @ Q.mH
    else:  # complex symmetric: Q diag(s) Q^T has singular values |s|
        A = (Q * values.to(Q.dtype)) @ Q.mT
    A = A.to(torch.complex64)
    B = torch.randn(4, n, 2, dtype=torch.complex64, generator=g)
    LD, pivots, info = torch.linalg.ldl_factor_ex(A, hermitian=hermitian)
    ldr, ldi, got_pivots, got_info = ldl_factor_parts(A.real, A.imag, hermitian)
    assert torch.equal(got_pivots, pivots) and torch.equal(got_info, info)
    X = solve(torch.complex(ldr, ldi), got_pivots, B, hermitian).to(torch.complex128)
    wide = A.to(torch.complex128)
    u = _eps(torch.float32) / 2
    norm = torch.linalg.matrix_norm
    backward = norm(wide @ X - B.to(torch.complex128), 2) / (norm(wide, 2) * norm(X, 2))
    assert backward.max().item() <= n * u
    expected = torch.linalg.ldl_solve(LD, pivots, B, hermitian=hermitian).to(torch.complex128)
    forward = norm(X - expected, 2) / norm(expected, 2)
    assert forward.max().item() <= n * u * cond


@pytest.mark.parametrize("hermitian", [True, False], ids=["he", "sy"])
def test_solve_mixed_steps_and_broadcast_right_hand_side(hermitian):
    dtype = torch.complex128
    # every kind of step in one batch (the singular ones left out), one B for the whole batch
    A = mixed_batch(dtype, hermitian)[:4]
    B = torch.randn(5, 2, dtype=dtype, generator=torch.Generator().manual_seed(2))
    LD, pivots = factor(A, hermitian)[:2]
    X = solve(LD, pivots, B, hermitian)
    assert X.shape == (4, 5, 2)
    torch.testing.assert_close(X, torch.linalg.ldl_solve(LD, pivots, B.expand(4, 5, 2), hermitian=hermitian))
    torch.testing.assert_close(A @ X, B.expand(4, 5, 2))


# ---- traceability -------------------------------------------------------------------------------


class FactorAndSolve(torch.nn.Module):
    """LD, pivots, info and X of A X = B, A and B given by their parts."""

    def __init__(self, hermitian: bool):
        super().__init__()
        self.hermitian = hermitian

    def forward(self, ar, ai, br, bi):
        ldr, ldi, pivots, info = ldl_factor_parts(ar, ai, self.hermitian)
        xr, xi = ldl_solve_parts(ldr, ldi, pivots, br, bi, self.hermitian)
        return ldr, ldi, pivots, info, xr, xi


def _export_inputs(n: int, batch: int, hermitian: bool, seed: int) -> tuple[torch.Tensor, ...]:
    # a batch holding a 2x2 block with an interchange next to random matrices
    A = symmetric(n, torch.complex64, hermitian, "zero", seed=seed, batch=(batch,))
    A[0] = mixed_batch(torch.complex64, hermitian)[3, :n, :n]
    B = torch.randn(batch, n, 2, dtype=torch.complex64, generator=torch.Generator().manual_seed(seed))
    return A.real.contiguous(), A.imag.contiguous(), B.real.contiguous(), B.imag.contiguous()


def _exported(hermitian: bool, n: int) -> tuple[torch.nn.Module, tuple, dict]:
    batch = torch.export.Dim("batch", min=2, max=64)
    return FactorAndSolve(hermitian).eval(), _export_inputs(n, 3, hermitian, seed=0), {name: {0: batch} for name in
                                                                                ("ar", "ai", "br", "bi")}


@pytest.mark.parametrize("hermitian", [True, False], ids=["he", "sy"])
def test_torch_export_with_a_dynamic_batch(hermitian):
    module, inputs, dynamic_shapes = _exported(hermitian, 3)
    program = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes)
    other = _export_inputs(3, 5, hermitian, seed=1)  # another batch size
    expected = module(*other)
    assert (expected[2] < 0).any()  # the 2x2 path is taken
    for got, want in zip(program.module()(*other), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:# The axis name")  # the four inputs share the one batch Dim
def test_onnx_runtime_runs_the_exported_program():
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    pytest.importorskip("onnxruntime", reason="running the ONNX program needs onnxruntime")
    module, inputs, dynamic_shapes = _exported(True, 3)
    program = torch.onnx.export(module, inputs, dynamic_shapes=dynamic_shapes, dynamo=True, optimize=False,
                                verbose=False)
    other = _export_inputs(3, 5, True, seed=1)
    expected = module(*other)
    got = program(*other)
    assert len(got) == len(expected)
    for g, want in zip(got, expected, strict=True):
        if want.is_floating_point():
            # ONNX Runtime's kernels round a few operations differently
            torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)
        else:
            torch.testing.assert_close(g, want, rtol=0, atol=0)
