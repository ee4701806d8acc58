"""The SVD in real arithmetic (realify/rules/singular.py: Jacobi on the Hermitian embedding
[[0, A], [A^H, 0]], Householder to orthonormalize), what realify.onnx writes ``svd``,
``svdvals``, ``pinv``, ``polar`` and ``matrix_sqrth`` with: against LAPACK on well- and
ill-conditioned, rank-deficient and zero matrices, and in ONNX Runtime."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from test_jacobi import _run
from test_lu import general

from realify.onnx import to_onnx
from realify.rules import singular
from realify.rules.jacobi import sweeps_for


def _complex(parts) -> torch.Tensor:
    re, im = parts
    return re if im is None else torch.complex(re, im)


def _svd(A: torch.Tensor, full_matrices: bool = False):
    u, s, vh = singular.svd_parts(A.real.contiguous(), A.imag.contiguous() if A.is_complex() else None,
                                  full_matrices)
    return _complex(u), s, _complex(vh)


def _unit(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def _with_singular_values(s: torch.Tensor, m: int, n: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """W diag(s) V^H (m x n) with W, V random with orthonormal columns, rounded to ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    base = torch.complex128 if dtype.is_complex else torch.float64
    W, _ = torch.linalg.qr(torch.randn(*s.shape[:-1], m, s.shape[-1], dtype=base, generator=g))
    V, _ = torch.linalg.qr(torch.randn(*s.shape[:-1], n, s.shape[-1], dtype=base, generator=g))
    return ((W * s.to(base).unsqueeze(-2)) @ V.mH).to(dtype)


def _check(A: torch.Tensor, full_matrices: bool = False) -> None:
    """S within LAPACK's own bound of LAPACK's on the same rounded matrix, U diag(S) V^H within
    the same of A, U and V orthonormal: backward stability, c (m + n) u ||A||_2 with c = 10 (the
    Jacobi bound on the (m + n) embedding), times its sweeps for the vectors (each entry of the
    accumulated rotations takes about sweeps * (m + n) roundings)."""
    m, n = A.shape[-2:]
    k = min(m, n)
    U, S, Vh = _svd(A, full_matrices)
    wide = A.to(torch.complex128 if A.is_complex() else torch.float64)
    norm = torch.linalg.matrix_norm(wide, 2).max().item()
    bound = 10 * (m + n) * _unit(A.dtype) * max(norm, 1e-300)
    assert S.shape == (*A.shape[:-2], k)
    assert (S.double() - torch.linalg.svdvals(wide)).abs().max().item() <= bound
    assert (S[..., :-1] >= S[..., 1:]).all() and (S >= 0).all()
    assert U.shape[-2:] == (m, m if full_matrices else k) and Vh.shape[-2:] == (n if full_matrices else k, n)
    growth = sweeps_for(m + n, S.dtype)
    rebuilt = (U[..., :, :k].to(wide.dtype) * S.double().unsqueeze(-2).to(wide.dtype)) @ Vh[..., :k, :].to(wide.dtype)
    assert torch.linalg.matrix_norm(rebuilt - wide, 2).max().item() <= growth * bound
    for Q in (U.to(wide.dtype), Vh.mH.to(wide.dtype)):
        eye = torch.eye(Q.shape[-1], dtype=wide.dtype)
        assert (Q.mH @ Q - eye).abs().max().item() <= growth * 10 * (m + n) * _unit(A.dtype)


@pytest.mark.parametrize("cond", [1.0, 1e3, 1e6])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32, torch.complex128])
@pytest.mark.parametrize("shape", [(4, 4), (8, 3), (3, 8), (16, 16)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_against_lapack(shape, dtype, cond):
    m, n = shape
    k = min(m, n)
    s = torch.logspace(0, -math.log10(cond), k, dtype=torch.float64)
    A = _with_singular_values(torch.stack([s, s.flip(-1) * 3]), m, n, dtype)
    for full_matrices in (False, True):
        _check(A, full_matrices)


def test_vectors_of_separated_values_are_lapacks_up_to_phase():
    # the singular subspaces: each vector's error u ||A|| / gap (gaps >= 0.25 here)
    A = _with_singular_values(torch.tensor([4.0, 3.0, 2.0, 1.0, 0.5]), 7, 5, torch.complex64)
    U, _, Vh = _svd(A)
    Ue, _, Vhe = torch.linalg.svd(A.to(torch.complex128), full_matrices=False)
    overlap_u = (U.to(torch.complex128).mH @ Ue).diagonal().abs()
    overlap_v = (Vh.to(torch.complex128) @ Vhe.mH).diagonal().abs()
    assert (overlap_u - 1).abs().max() < 1e-5 and (overlap_v - 1).abs().max() < 1e-5
    # the same phase on u_i and v_i: U diag(S) V^H is A, not A with rotated columns
    phases = (U.to(torch.complex128).mH @ Ue).diagonal() / (Vh.to(torch.complex128) @ Vhe.mH).diagonal()
    assert (phases - 1).abs().max() < 1e-5


@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (4, 6)], ids=["square", "tall", "wide"])
def test_rank_deficient_and_zero_matrices(shape):
    # zero singular values: the embedding's +-0 eigenvectors mix the halves, and the zero
    # matrix's Jacobi vectors have a zero half; U and V stay orthonormal (Householder)
    m, n = shape
    low_rank = general(m, 2, dtype=torch.complex64) @ general(2, n, dtype=torch.complex64, seed=1)
    for A in (low_rank, torch.zeros(m, n, dtype=torch.complex64), torch.zeros(m, n)):
        for full_matrices in (False, True):
            _check(A, full_matrices)
    _, S, _ = _svd(torch.zeros(2, m, n, dtype=torch.complex64))
    assert S.eq(0).all()


def test_batches_and_odd_sizes():
    A = general(2, 3, 5, 4, dtype=torch.complex64)
    _check(A)
    _check(general(3, 1, 7, dtype=torch.complex128), True)


# ---- pinv, polar, matrix_sqrth and what goes through S, in ONNX Runtime ----------------------


def _pinv_cases(A: torch.Tensor, H: torch.Tensor) -> dict:
    return {
        # one export for the variants (each export costs seconds)
        "pinv variants": lambda A: (torch.linalg.pinv(A), torch.linalg.pinv(A, atol=0.75),  # cuts 0.5, keeps 1
                                    torch.linalg.pinv(A, rtol=torch.tensor(0.3, dtype=torch.float64)),
                                    torch.pinverse(A.mT)),
        "pinv hermitian": lambda A: torch.linalg.pinv(H + 0 * A[..., :1, :1], hermitian=True),
    }


def _programs(A: torch.Tensor, H: torch.Tensor) -> dict:
    """name -> (program, gauge-free: the same whatever phases the vectors have)."""
    return {
        "svdvals": torch.linalg.svdvals,
        "svd rebuilt": lambda A: (lambda U, S, Vh: (U * S.to(A.dtype).unsqueeze(-2)) @ Vh)(
            *torch.linalg.svd(A, full_matrices=False)),
        "svd projectors": lambda A: (lambda U, S, Vh: (U[..., :2] @ U[..., :2].mH, Vh.mH[..., :2] @ Vh[..., :2, :]))(
            *torch.linalg.svd(A)),
        "norms": lambda A: (torch.linalg.matrix_norm(A, 2), torch.linalg.matrix_norm(A, "nuc"), torch.linalg.cond(A)),
        **_pinv_cases(A, H),
        "polar": lambda A: tuple(torch.linalg.polar(A)),
        "matrix_sqrth": lambda A: torch.linalg.matrix_sqrth(H @ H.mH + 0 * A[..., :1, :1]),
    }


def _tall(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    # singular values 4 .. 0.5 (and 8 .. 1), so the projectors onto the top two are well defined
    s = torch.tensor([[4.0, 3.0, 1.0, 0.5], [8.0, 6.0, 2.0, 1.0]], dtype=torch.float64)
    H = general(2, 4, 4, seed=2)
    H = (H if dtype.is_complex else H.real).to(dtype)
    return _with_singular_values(s, 6, 4, dtype), H + H.mH


# a real matrix's SVD, pinv, polar and square root go through the same forms (realify.onnx's
# _real_* translations of the real ATen ops)
_REAL = ("svd rebuilt", "pinv hermitian", "polar", "matrix_sqrth")


@pytest.mark.parametrize("name,dtype", [(name, torch.complex64) for name in _programs(*_tall(torch.complex64))]
                         + [(name, torch.float32) for name in _REAL])
def test_onnx_runtime(name, dtype):
    # errors: the singular values' u ||A|| bound, the vectors' u ||A|| / gap (gap >= 2 at the
    # projectors' split, 0.5 for the smallest value in polar, pinv's 1/s amplifying by s_min^-2
    # = 4): all below 2e-5 in single precision
    if name in ("polar", "matrix_sqrth") and not hasattr(torch.linalg, "polar"):
        pytest.skip("torch.linalg.polar and matrix_sqrth are new in torch 2.15")
    A, H = _tall(dtype)
    program = _programs(A, H)[name]
    expected = program(A)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = _run(to_onnx(program, (A,)).model_proto, A)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = torch.from_numpy(g)
        g = torch.view_as_complex(g) if e.is_complex() else g
        torch.testing.assert_close(g, e, rtol=2e-5, atol=2e-5, msg=name)


def test_onnx_runtime_pinv_of_rank_deficient_matrix():
    # the cut at eager's default tolerance: rank 2 of 5, the other values ~1e-7 go to zero
    A = general(2, 5, 2, dtype=torch.complex64) @ general(2, 2, 5, dtype=torch.complex64, seed=1)
    (got,) = _run(to_onnx(torch.linalg.pinv, (A,)).model_proto, A)
    torch.testing.assert_close(torch.view_as_complex(torch.from_numpy(got)), torch.linalg.pinv(A),
                               rtol=1e-4, atol=1e-5)


def test_onnx_runtime_svd_with_dynamic_batch():
    batch = torch.export.Dim("batch")
    A = general(3, 3, 1, dtype=torch.complex64)  # a small embedding: the rounds are unrolled
    onnx_program = to_onnx(lambda A: torch.linalg.svdvals(A), (A,), dynamic_shapes=({0: batch},))
    for b in (1, 4):
        A = general(b, 3, 1, dtype=torch.complex64, seed=b)
        (got,) = _run(onnx_program.model_proto, A)
        bound = 10 * 4 * _unit(torch.float32) * torch.linalg.matrix_norm(A, 2).max().item()
        assert np.abs(got - torch.linalg.svdvals(A).numpy()).max() <= bound
