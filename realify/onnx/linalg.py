"""The real-arithmetic forms realify.onnx writes where a compiled program calls LAPACK (the LU
family, solves and inverses, Cholesky, QR, eigh, the SVD, LDL; complex logcumsumexp), as
decompositions applied to the ExportedProgram before translation; and the removal of eager's
checks of factorization infos, which ONNX cannot raise."""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..rules import bunch_kaufman, householder, jacobi, lu, reductions, singular
from ..rules.linalg import cholesky_parts, hermitian_parts
from ..runtime.complex_lapack import pairs_op

# ---- LU factorizations and solves in elementary operators --------------------------------
# ONNX has no LU, solve or inverse. realify's complex LAPACK ops (and the real ones of real
# programs) become realify/rules/lu.py's real-arithmetic getrf and substitutions before
# translation: unrolled over the columns, so the matrix size is fixed at export
# (docs/numerics.md, "LU").


def linalg_decompositions() -> dict:
    """The ops realify.onnx writes in real arithmetic where a compiled program calls eager's kernel
    (the LU family, solves and inverses, Cholesky, QR, eigh, the SVD, LDL; complex
    logcumsumexp), for ``ExportedProgram.run_decompositions``."""
    aten, realify = torch.ops.aten, torch.ops.realify
    return {
        realify.lu_factor_pairs.default: _lu_factor_pairs,
        realify.lu_solve_pairs.default: _lu_solve_pairs,
        realify.det_pairs.default: _det_pairs,
        aten.linalg_lu_factor_ex.default: _real_lu_factor_ex,
        aten._linalg_det.default: _real_linalg_det,
        aten._linalg_slogdet.default: _real_linalg_slogdet,
        aten.linalg_lu_solve.default: _real_lu_solve,
        aten.linalg_inv_ex.default: _real_inv_ex,
        aten._linalg_eigh.default: _real_eigh,
        aten._linalg_svd.default: _real_svd,
        aten.linalg_ldl_factor_ex.default: _real_ldl_factor_ex,
        aten.linalg_ldl_solve.default: _real_ldl_solve,
        aten.linalg_pinv.atol_rtol_tensor: _real_pinv,
        **({aten.linalg_polar.default: _real_polar, aten.linalg_matrix_sqrth.default: _real_matrix_sqrth}
           if hasattr(aten, "linalg_polar") else {}),
        **{pairs_op(op)._opoverload: decomposition for op, decomposition in [
            (aten._linalg_eigh.default, _eigh_pairs),
            (aten._linalg_solve_ex.default, _solve_ex_pairs),
            (aten.linalg_inv_ex.default, _inv_ex_pairs),
            (aten.linalg_solve_triangular.default, _solve_triangular_pairs),
            (aten.triangular_solve.default, _triangular_solve_pairs),
            (aten.cholesky_solve.default, _cholesky_solve_pairs),
            (aten.cholesky_inverse.default, _cholesky_inverse_pairs),
            (aten.linalg_cholesky_ex.default, _cholesky_ex_pairs),
            (aten.linalg_qr.default, _qr_pairs),
            (aten.geqrf.default, _geqrf_pairs),
            (aten.linalg_householder_product.default, _householder_product_pairs),
            (aten.ormqr.default, _ormqr_pairs),
            (aten._linalg_svd.default, _svd_pairs),
            (aten.linalg_ldl_factor_ex.default, _ldl_factor_ex_pairs),
            (aten.linalg_ldl_solve.default, _ldl_solve_pairs),
            (aten.linalg_pinv.atol_rtol_tensor, _pinv_pairs),
            (aten.logcumsumexp.default, _logcumsumexp_pairs),
            *([(aten.linalg_polar.default, _polar_pairs), (aten.linalg_matrix_sqrth.default, _matrix_sqrth_pairs)]
              if hasattr(aten, "linalg_polar") else []),
        ]},
    }


def _real_eigh(A, UPLO="L", compute_v=True):
    # cyclic Jacobi (realify/rules/jacobi.py) on the symmetric matrix LAPACK's syevd sees
    values, vectors, _ = jacobi.hermitian_eigen_parts(hermitian_parts(A, None, UPLO.upper() == "U")[0], None)
    return values, vectors if compute_v else A.new_empty(0)


def _eigh_pairs(complex_args, A, UPLO="L", compute_v=True):
    values, vr, vi = jacobi.hermitian_eigen_parts(*hermitian_parts(*_matrix(complex_args, A), UPLO.upper() == "U"))
    return values, _result(complex_args, (vr, vi) if compute_v else None, A)


def _matrix(complex_args, A) -> tuple[torch.Tensor, Any]:
    # the parts of a pairs op's first argument; a real matrix (complex_args[0] false) went to
    # the real routine and has no imaginary part
    return _parts(A) if complex_args[0] else (A, None)


def _result(complex_args, x: tuple | None, A) -> torch.Tensor:
    # a complex result as pairs (real where the op ran the real routine); None: an output not
    # asked for, eager's empty tensor
    if x is None:
        return A.new_empty((0, 2) if complex_args[0] else 0)
    return _as_pairs(x) if complex_args[0] else x[0]


def _logcumsumexp_pairs(complex_args, x, dim):
    # a scan of eager's logaddexp step, on eager's branch (realify/rules/reductions.py); dim
    # counts the complex tensor's dims, not the pairs' trailing one
    re, im = _parts(x)
    return _as_pairs(reductions.logcumsumexp_parts(re, im, dim % re.dim()))


# ---- the SVD and what is made of it: eigenproblems of Hermitian embeddings, by Jacobi --------


def _svd_pairs(complex_args, A, full_matrices=False, compute_uv=True, driver=None):
    u, s, vh = singular.svd_parts(*_matrix(complex_args, A), full_matrices, compute_uv)
    return _result(complex_args, u, A), s, _result(complex_args, vh, A)


def _real_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    return _svd_pairs([False], A, full_matrices, compute_uv)


def _pinv_pairs(complex_args, A, atol=None, rtol=None, hermitian=False):
    return _result(complex_args, singular.pinv_parts(*_matrix(complex_args, A), atol, rtol, hermitian), A)


def _real_pinv(A, *, atol=None, rtol=None, hermitian=False):
    return _pinv_pairs([False], A, atol, rtol, hermitian)


def _polar_pairs(complex_args, A):
    u, h = singular.polar_parts(*_matrix(complex_args, A))
    return _result(complex_args, u, A), _result(complex_args, h, A)


def _real_polar(A):
    return _polar_pairs([False], A)


def _matrix_sqrth_pairs(complex_args, A):
    return _result(complex_args, singular.matrix_sqrth_parts(*_matrix(complex_args, A)), A)


def _real_matrix_sqrth(A):
    return _matrix_sqrth_pairs([False], A)


# ---- LDL: Bunch-Kaufman pivoting, LAPACK's sytf2/hetf2 (realify/rules/bunch_kaufman.py) ---------


def _ldl_factor_ex_pairs(complex_args, A, hermitian=False, check_errors=False):
    ldr, ldi, pivots, info = bunch_kaufman.ldl_factor_parts(*_matrix(complex_args, A), hermitian)
    return _result(complex_args, (ldr, ldi), A), pivots, info


def _real_ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    return _ldl_factor_ex_pairs([False], A, hermitian)


def _ldl_solve_pairs(complex_args, LD, pivots, B, hermitian=False):
    # LD and B are both pairs or both real (the rule promotes a real one beside a complex one)
    x = bunch_kaufman.ldl_solve_parts(*_matrix(complex_args, LD), pivots, *_matrix(complex_args, B), hermitian)
    return _result(complex_args, x, LD)


def _real_ldl_solve(LD, pivots, B, *, hermitian=False):
    return _ldl_solve_pairs([False], LD, pivots, B, hermitian)


def _lu_factor_pairs(A, pivot):
    lr, li, pivots, info = lu.lu_factor_parts(A[..., 0], A[..., 1], pivot)
    return torch.stack([lr, li], dim=-1), pivots, info


def _lu_solve_pairs(LU, pivots, B, left, adjoint):
    xr, xi = lu.solve_with_lu_parts((LU[..., 0], LU[..., 1]), pivots, (B[..., 0], B[..., 1]), left, adjoint)
    return torch.stack([xr, xi], dim=-1)


def _det_pairs(A):
    # det P * prod_k u_kk
    lr, li, pivots, _ = lu.lu_factor_parts(A[..., 0], A[..., 1])
    dr, di = lu.determinant_parts(lr, li, pivots)
    return torch.stack([dr, di], dim=-1)


def _real_lu_factor_ex(A, *, pivot=True, check_errors=False):
    LU, _, pivots, info = lu.lu_factor_parts(A, None, pivot)
    return LU, pivots, info


def _real_linalg_det(A):
    # det A = det P * prod_k u_kk (1 for 0 x 0), beside the LU and pivots _linalg_det returns
    # for its backward; torch.onnx's translation of it returns the determinant alone
    LU, _, pivots, _ = lu.lu_factor_parts(A, None)
    return lu.permutation_sign(pivots, A.dtype) * torch.diagonal(LU, dim1=-2, dim2=-1).prod(-1), LU, pivots


def _real_linalg_slogdet(A):
    # sign = det P * prod_k sgn(u_kk), logabsdet = sum_k log|u_kk|, beside the LU and pivots
    LU, _, pivots, _ = lu.lu_factor_parts(A, None)
    diagonal = torch.diagonal(LU, dim1=-2, dim2=-1)
    sign = lu.permutation_sign(pivots, A.dtype) * diagonal.sign().prod(-1)
    return sign, diagonal.abs().log().sum(-1), LU, pivots


def _real_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    return lu.solve_with_lu_parts((LU, None), pivots, (B, None), left, adjoint)[0]


def _real_inv_ex(A, *, check_errors=False):
    # A^-1 = the solution of A X = I
    LU, _, pivots, info = lu.lu_factor_parts(A, None)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape)
    return lu.solve_with_lu_parts((LU, None), pivots, (eye, None))[0], info


# ---- solves, inverses and Cholesky on pairs, in real arithmetic ------------------------------
# The complex LU (realify/rules/lu.py) and substitutions where a compiled program calls LAPACK's
# getrf/getrs/trtrs/potrf/potrs on pairs; Cholesky through its real embedding, whose real factor
# torch.onnx writes column by column (linalg_cholesky_ex in realify/onnx/cholesky.py).


def _parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x[..., 0], x[..., 1]


def _as_pairs(x: tuple) -> torch.Tensor:
    re, im = x
    return torch.stack([re, torch.zeros_like(re) if im is None else im], dim=-1)


def _identity_parts(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    eye = torch.eye(A.shape[-2], dtype=A.dtype, device=A.device).expand(A.shape[:-1])
    return eye, torch.zeros_like(eye)


def _solve_ex_pairs(complex_args, A, B, left=True, check_errors=False):
    lr, li, pivots, info = lu.lu_factor_parts(*_parts(A))
    # a vector right-hand side, as linalg.solve tells one (shapes here carry the trailing 2)
    vector = B.dim() == 2 or (B.dim() == A.dim() - 1 and B.shape[:-1] == A.shape[:-2])
    br, bi = _parts(B)
    b = (br.unsqueeze(-1), bi.unsqueeze(-1)) if vector else (br, bi)
    xr, xi = lu.solve_with_lu_parts((lr, li), pivots, b, left)
    x = (xr.squeeze(-1), xi.squeeze(-1)) if vector else (xr, xi)
    return _as_pairs(x), _as_pairs((lr, li)), pivots, info


def _inv_ex_pairs(complex_args, A, check_errors=False):
    lr, li, pivots, info = lu.lu_factor_parts(*_parts(A))
    return _as_pairs(lu.solve_with_lu_parts((lr, li), pivots, _identity_parts(A))), info


def _triangle_parts(A, upper: bool) -> tuple[torch.Tensor, torch.Tensor]:
    ar, ai = _parts(A)
    return (ar.triu(), ai.triu()) if upper else (ar.tril(), ai.tril())


def _transposed(x: tuple) -> tuple:
    return x[0].mT, x[1].mT


def _solve_triangular_pairs(complex_args, A, B, upper, left=True, unitriangular=False):
    t, b = _triangle_parts(A, upper), _parts(B)
    if left:
        return _as_pairs(lu.substitute(t, b, lower=not upper, unit=unitriangular))
    # X T = B  <=>  T^T X^T = B^T
    x = lu.substitute(_transposed(t), _transposed(b), lower=upper, unit=unitriangular)
    return _as_pairs(_transposed(x))


def _triangular_solve_pairs(complex_args, B, A, upper=True, transpose=False, unitriangular=False):
    # op(T) X = B, op = transpose (not conjugate); returns (X, a copy of A) as eager
    t = _triangle_parts(A, upper)
    lower = not upper
    if transpose:
        t, lower = _transposed(t), upper
    return _as_pairs(lu.substitute(t, _parts(B), lower=lower, unit=unitriangular)), A.clone()


def _cholesky_substitutions(b, L, upper: bool):
    # A = L L^H (upper: U^H U): L y = b, then L^H x = y
    t = _triangle_parts(L, upper)
    t_h = (t[0].mT, -t[1].mT)
    first, second = (t_h, t) if upper else (t, t_h)
    y = lu.substitute(first, b, lower=True, unit=False)
    return lu.substitute(second, y, lower=False, unit=False)


def _cholesky_solve_pairs(complex_args, B, L, upper=False):
    return _as_pairs(_cholesky_substitutions(_parts(B), L, upper))


def _cholesky_inverse_pairs(complex_args, L, upper=False):
    return _as_pairs(_cholesky_substitutions(_identity_parts(L), L, upper))


def _qr_pairs(complex_args, A, mode="reduced"):
    q, r = householder.qr_parts(*_parts(A), mode)
    return (A.new_empty((0, 2)) if q is None else _as_pairs(q)), _as_pairs(r)


def _geqrf_pairs(complex_args, A):
    a, tau = householder.geqrf_parts(*_parts(A))
    return _as_pairs(a), _as_pairs(tau)


def _householder_product_pairs(complex_args, A, tau):
    return _as_pairs(householder.householder_product_parts(_parts(A), _parts(tau)))


def _ormqr_pairs(complex_args, A, tau, C, left=True, transpose=False):
    return _as_pairs(householder.ormqr_parts(_parts(A), _parts(tau), _parts(C), left, transpose))


def _cholesky_ex_pairs(complex_args, A, upper=False, check_errors=False):
    lr, li, info = cholesky_parts(*_parts(A), upper)
    return _as_pairs((lr, li)), info


def _without_error_checks(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``ep`` without eager's checks of factorization infos (aten._linalg_check_errors, which
    linalg.cholesky calls on its info): they raise eager's LinAlgError where an info is nonzero,
    and ONNX cannot raise (run_decompositions would also make the effectful op a token-threaded
    ``with_effects`` node, which torch.onnx does not translate). A factorization's info output,
    where the program returns it, is the report, as for eager's ``*_ex`` functions with
    ``check_errors=False``. A new program: ``ep``, perhaps the caller's, is left as it is."""
    def is_check(node: torch.fx.Node) -> bool:
        return node.target is torch.ops.aten._linalg_check_errors.default

    if not any(is_check(node) for node in ep.graph.nodes):
        return ep
    gm = torch.fx.GraphModule(ep.graph_module, copy.deepcopy(ep.graph))
    for node in [node for node in gm.graph.nodes if is_check(node)]:
        gm.graph.erase_node(node)
    gm.recompile()
    return ep._update(gm, ep.graph_signature)
