"""Cyclic Jacobi for Hermitian and real symmetric eigenproblems (realify/rules/jacobi.py), what
realify.onnx writes ``eigh``/``eigvalsh`` with: against LAPACK in float64 on well- and
ill-conditioned, degenerate and graded matrices, and in ONNX Runtime."""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
import torch

import realify
from realify.onnx import to_onnx
from realify.rules.jacobi import hermitian_eigen_parts, round_robin, sweeps_for


def spectrum_matrix(values: torch.Tensor, *, complex_: bool = True, seed: int = 0) -> torch.Tensor:
    """Q diag(values) Q^H with Q a random unitary (orthogonal) matrix, in float64/complex128."""
    g = torch.Generator().manual_seed(seed)
    n = values.shape[-1]
    dtype = torch.complex128 if complex_ else torch.float64
    Q, _ = torch.linalg.qr(torch.randn(*values.shape[:-1], n, n, dtype=dtype, generator=g))
    return (Q * values.to(dtype).unsqueeze(-2)) @ Q.mH


def _jacobi(H: torch.Tensor):
    if H.is_complex():
        values, vr, vi = hermitian_eigen_parts(H.real.contiguous(), H.imag.contiguous())
        return values, torch.complex(vr, vi)
    values, vr, _ = hermitian_eigen_parts(H, None)
    return values, vr


def _bound(H: torch.Tensor) -> float:
    # backward stability: the values of a matrix within c n u ||H||_2 of H (Weyl), c = 10
    n = H.shape[-1]
    return 10 * n * torch.finfo(H.real.dtype).eps / 2 * torch.linalg.matrix_norm(H.to(torch.complex128), 2).max().item()


def test_round_robin_meets_every_pair_once_per_sweep():
    for n in (2, 4, 6, 8, 16):
        p, q = round_robin(n, n - 1)
        pairs = {(a, b) for ps, qs in zip(p.tolist(), q.tolist()) for a, b in zip(ps, qs)}
        assert len(pairs) == n * (n - 1) // 2 and all(a < b for a, b in pairs)
        for ps, qs in zip(p.tolist(), q.tolist()):  # a round's pairs are disjoint
            assert sorted(ps + qs) == list(range(n))


@pytest.mark.parametrize("cond", [1.0, 1e2, 1e4, 1e6])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32, torch.complex128])
@pytest.mark.parametrize("n", [3, 8, 16])
def test_values_and_vectors_against_lapack(n, dtype, cond):
    # values spread geometrically over [1/cond, 1] with both signs
    magnitudes = torch.logspace(0, -math.log10(cond), n, dtype=torch.float64)
    signs = torch.tensor([(-1.0) ** k for k in range(n)], dtype=torch.float64)
    H64 = spectrum_matrix(torch.stack([magnitudes * signs, magnitudes.flip(-1)]), complex_=dtype.is_complex)
    H = H64.to(dtype)
    values, V = _jacobi(H)
    reference = torch.linalg.eigvalsh(H.to(H64.dtype))  # LAPACK on the same rounded matrix
    bound = _bound(H)
    assert (values.double() - reference).abs().max().item() <= bound
    # each column an eigenvector, and the columns orthonormal: V is a product of one rotation
    # per pair and sweep, and each entry takes about sweeps * n roundings
    growth = sweeps_for(n, values.dtype)
    residual = H.to(H64.dtype) @ V.to(H64.dtype) - V.to(H64.dtype) * values.double().unsqueeze(-2)
    assert torch.linalg.matrix_norm(residual, 2).max().item() <= growth * bound
    eye = torch.eye(n, dtype=H64.dtype)
    orthogonality = (V.to(H64.dtype).mH @ V.to(H64.dtype) - eye).abs().max().item()
    assert orthogonality <= growth * n * torch.finfo(values.dtype).eps


def test_degenerate_diagonal_zero_and_tiny_matrices():
    # repeated values (an eigenspace of dimension 3), a diagonal matrix (no rotation at all:
    # exact), the zero matrix, and entries near the underflow threshold (where squares of the
    # off-diagonal would make the rotation not unitary)
    H = spectrum_matrix(torch.tensor([2.0, 2.0, 2.0, -1.0, 5.0])).to(torch.complex64)
    values, V = _jacobi(H)
    assert (values.double() - torch.tensor([-1.0, 2.0, 2.0, 2.0, 5.0], dtype=torch.float64)).abs().max() <= _bound(H)
    projector = V[:, 1:4] @ V[:, 1:4].mH
    expected = torch.linalg.eigh(H.to(torch.complex128))[1][:, 1:4]
    torch.testing.assert_close(projector.to(torch.complex128), expected @ expected.mH, rtol=0, atol=1e-5)

    D = torch.diag(torch.tensor([3.0, -0.0, 1.0, -2.0])).to(torch.complex64)
    values, V = _jacobi(D)
    assert values.tolist() == [-2.0, 0.0, 1.0, 3.0]
    assert (V.abs() == V.abs().round()).all()  # a permutation

    values, V = _jacobi(torch.zeros(4, 4, dtype=torch.complex64))
    assert values.eq(0).all() and (V == torch.eye(4)).all()

    tiny = spectrum_matrix(torch.tensor([1.0, -2.0, 3.0, 0.5, 4.0, -1.0])).to(torch.complex64) * 1e-19
    values, _ = _jacobi(tiny)
    reference = torch.linalg.eigvalsh(tiny.to(torch.complex128))
    torch.testing.assert_close(values.double(), reference, rtol=1e-5, atol=0)


def test_odd_sizes_and_batches():
    H = torch.randn(2, 3, 7, 7, dtype=torch.complex64)
    H = H + H.mH
    values, V = _jacobi(H)
    torch.testing.assert_close(values, torch.linalg.eigvalsh(H), rtol=0, atol=_bound(H))
    assert V.shape == H.shape


def _run(model, *inputs) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: (torch.view_as_real(x) if x.is_complex() else x).numpy()
             for i, x in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)


@pytest.mark.parametrize("n", [1, 5, 8, 16])
def test_onnx_runtime_eigh_and_eigvalsh(n):
    torch.manual_seed(n)
    A = torch.randn(3, n, n, dtype=torch.complex64)
    H = A @ A.mH + 0.1 * torch.eye(n)

    def program(H):
        L, V = torch.linalg.eigh(H)
        k = max(n // 2, 1)
        return torch.linalg.eigvalsh(H, UPLO="U"), L, V[..., :k] @ V[..., :k].mH  # a projector: free of phases

    onnx_program = to_onnx(program, (H,))
    # one Scan over the rounds, whatever n: the model does not grow with it
    assert len(onnx_program.model.graph) < 200
    got = _run(onnx_program.model_proto, H)
    values_u, values, projector = program(H)
    bound = _bound(H)
    assert np.abs(got[0] - values_u.numpy()).max() <= bound
    assert np.abs(got[1] - values.numpy()).max() <= bound
    # the projector's error: the eigenvectors' (u ||H|| / gap, the gap at the split <= 1e3 here)
    gap = (values[..., n // 2] - values[..., n // 2 - 1]).min().item() if n > 1 else 1.0
    np.testing.assert_allclose(got[2], torch.view_as_real(projector).numpy(), rtol=0, atol=max(1e-5, 20 * bound / gap))


def test_onnx_runtime_real_symmetric_with_dynamic_batch():
    S = torch.randn(4, 6, 6)
    S = S + S.mT
    batch = torch.export.Dim("batch")
    onnx_program = to_onnx(lambda S: torch.linalg.eigvalsh(S), (S,), dynamic_shapes=({0: batch},))
    for b in (1, 4, 7):
        S = torch.randn(b, 6, 6)
        S = S + S.mT
        (got,) = _run(onnx_program.model_proto, S)
        assert np.abs(got - torch.linalg.eigvalsh(S).numpy()).max() <= _bound(S)


def test_eigh_exports_to_a_real_only_program():
    H = torch.randn(5, 5, dtype=torch.complex64)
    ep = realify.export(lambda H: torch.linalg.eigh(H + H.mH)[1], (H,))
    assert not any(isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].is_complex()
                   for n in ep.graph.nodes)


def test_onnx_export_of_a_real_matrix_after_a_complex_one():
    # the same scan body traced twice in one process, with four carries then two
    H = torch.randn(2, 6, 6, dtype=torch.complex64)
    H = H + H.mH
    for matrix in (H, H.real.contiguous()):
        (got,) = _run(to_onnx(torch.linalg.eigvalsh, (matrix,)).model_proto, matrix)
        assert np.abs(got - torch.linalg.eigvalsh(matrix).numpy()).max() <= _bound(matrix)
