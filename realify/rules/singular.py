"""The SVD in real arithmetic, for runtimes without LAPACK: realify.onnx writes ``linalg.svd``,
``svdvals``, ``pinv``, ``polar`` and ``matrix_sqrth`` with it (ONNX has no factorization).

The Hermitian matrix ``H = [[0, A], [A^H, 0]]`` ((m + n) x (m + n)) has the eigenvalues
``+sigma_i`` and ``-sigma_i`` (i < k = min(m, n)) and ``|m - n|`` zeros, with the eigenvectors
``(u_i; +-v_i) / sqrt(2)``. Its cyclic Jacobi eigensolver (realify/rules/jacobi.py) therefore
gives the singular values as the k largest eigenvalues, each to an absolute error of a few
``(m + n) u ||A||``, LAPACK's own bound: the embedding, unlike ``A^H A``, does not square the
condition number. The singular vectors are ``sqrt(2)`` times the two halves of those
eigenvectors. Where singular values are zero or within rounding of zero, the eigenvectors of
``+sigma`` and ``-sigma`` mix and the halves lose their norm (a zero matrix's Jacobi vectors
have a zero half), so U and V are then made orthonormal by Householder QR
(realify/rules/householder.py), each column keeping its phase (the sign of R's real diagonal);
the same QR completes U or V to a square unitary matrix for ``full_matrices``. Phases of the
vectors are Jacobi's, not LAPACK's (as for eigh); ``U diag(S) V^H`` and everything built
from it (pinv, polar) do not depend on them.
"""

from __future__ import annotations

import torch

from . import householder, jacobi
from ._algebra import complex_product, padjoint
from .jacobi import Part
from .linalg import hermitian_parts

Parts = tuple[torch.Tensor, Part]


def _embedding(ar: torch.Tensor, ai: Part) -> tuple[torch.Tensor, Part]:
    """The parts of [[0, A], [A^H, 0]]."""
    m, n = ar.shape[-2:]

    def blocks(x: torch.Tensor, lower: torch.Tensor) -> torch.Tensor:
        top = torch.cat([x.new_zeros((*x.shape[:-2], m, m)), x], dim=-1)
        bottom = torch.cat([lower, x.new_zeros((*x.shape[:-2], n, n))], dim=-1)
        return torch.cat([top, bottom], dim=-2)

    return blocks(ar, ar.mT), None if ai is None else blocks(ai, -ai.mT)


def _orthonormal(xr: torch.Tensor, xi: Part, square: bool) -> Parts:
    """The columns of x made orthonormal (Householder QR, each column's phase kept); ``square``:
    completed to a unitary matrix."""
    real = xi is None
    (qr_, qi), (rr, _) = householder.qr_parts(xr, torch.zeros_like(xr) if real else xi,
                                              "complete" if square else "reduced")
    k = xr.shape[-1]
    # R's diagonal is real (zlarfg's beta): its sign undoes the reflection's on each column
    sign = torch.where(rr.diagonal(dim1=-2, dim2=-1)[..., :k] < 0, -1.0, 1.0)
    if square:
        sign = torch.cat([sign, torch.ones_like(qr_[..., 0, k:])], dim=-1)
    sign = sign.unsqueeze(-2)
    return qr_ * sign, None if real else qi * sign


def svd_parts(ar: torch.Tensor, ai: Part, full_matrices: bool = False, compute_uv: bool = True
              ) -> tuple[Parts | None, torch.Tensor, Parts | None]:
    """(U, S, V^H) of A = ar + i ai (..., m, n) (``ai`` None for a real matrix, and then U's
    and V^H's imaginary parts), S descending as LAPACK returns it; U and V^H None without
    ``compute_uv``."""
    m, n = ar.shape[-2:]
    if not (isinstance(m, int) and isinstance(n, int)):
        raise NotImplementedError("the SVD in real arithmetic needs a static matrix size (the Jacobi sweeps are "
                                  "unrolled); leading batch dims may be dynamic")
    k = min(m, n)
    if k == 0:
        return _empty_svd(ar, ai is None, full_matrices, compute_uv)
    values, er, ei = jacobi.hermitian_eigen_parts(*_embedding(ar, ai))
    # the k largest eigenvalues, descending; abs: a zero singular value may come out as -0 or -tiny
    s, order = torch.sort(values[..., m + n - k:].abs(), dim=-1, descending=True)
    if not compute_uv:
        return None, s, None
    columns = (order + (m + n - k)).unsqueeze(-2)

    def half(x: Part, start: int, size: int) -> Part:
        # sqrt(2) times rows start .. start + size of the chosen eigenvectors
        return None if x is None else 2.0 ** 0.5 * x[..., start:start + size, :].gather(
            -1, columns.expand(*x.shape[:-2], size, k))

    ur, ui = _orthonormal(half(er, 0, m), half(ei, 0, m), full_matrices)
    vr, vi = _orthonormal(half(er, m, n), half(ei, m, n), full_matrices)
    return (ur, ui), s, padjoint((vr, vi))


def _empty_svd(ar: torch.Tensor, real: bool, full_matrices: bool, compute_uv: bool):
    m, n = ar.shape[-2:]
    batch = ar.shape[:-2]
    s = ar.new_zeros((*batch, 0))
    if not compute_uv:
        return None, s, None
    u = torch.eye(m, m if full_matrices else 0, dtype=ar.dtype, device=ar.device).expand(*batch, -1, -1)
    vh = torch.eye(n if full_matrices else 0, n, dtype=ar.dtype, device=ar.device).expand(*batch, -1, -1)
    return (u, None if real else torch.zeros_like(u)), s, (vh, None if real else torch.zeros_like(vh))


def _matmul(a: Parts, b: Parts) -> Parts:
    return complex_product(torch.matmul, a, b)


def _scaled_columns(x: Parts, scale: torch.Tensor) -> Parts:
    # x diag(scale)
    scale = scale.unsqueeze(-2)
    return x[0] * scale, None if x[1] is None else x[1] * scale


def _hermitian_eigen(ar: torch.Tensor, ai: Part) -> tuple[torch.Tensor, Parts]:
    # eigh of the Hermitian matrix A's lower triangle denotes, as LAPACK's heevd reads it
    values, vr, vi = jacobi.hermitian_eigen_parts(*hermitian_parts(ar, ai, upper=False))
    return values, (vr, vi)


def matrix_sqrth_parts(ar: torch.Tensor, ai: Part) -> Parts:
    """The principal square root V diag(sqrt(max(l, 0))) V^H of the Hermitian matrix A's lower
    triangle denotes (negative eigenvalues, rounding's or the input's, count as zero, as eager)."""
    values, v = _hermitian_eigen(ar, ai)
    return _matmul(_scaled_columns(v, values.clamp_min(0).sqrt()), padjoint(v))


def polar_parts(ar: torch.Tensor, ai: Part) -> tuple[Parts, Parts]:
    """(U, H) with A = U H (m >= n): U = W V^H and H = V diag(S) V^H from A = W diag(S) V^H,
    H made exactly Hermitian."""
    w, s, vh = svd_parts(ar, ai)
    v = padjoint(vh)
    hr, hi = _matmul(_scaled_columns(v, s), vh)
    h = ((hr + hr.mT) / 2, None if hi is None else (hi - hi.mT) / 2)
    return _matmul(w, vh), h


def pinv_parts(ar: torch.Tensor, ai: Part, atol: torch.Tensor | None, rtol: torch.Tensor | None,
               hermitian: bool) -> Parts:
    """The pseudoinverse as eager's ``linalg.pinv``: V diag(1/s) W^H over the singular values (or,
    ``hermitian``, eigenvalues by modulus) above max(atol, rtol * the largest), eager's default
    tolerances where not given, compared in double as eager does."""
    atol, rtol = _tolerances(ar, atol, rtol)
    if hermitian:
        values, v = _hermitian_eigen(ar, ai)
        size = values.abs()
        left, right = v, padjoint(v)
    else:
        w, values, vh = svd_parts(ar, ai)
        size = values
        left, right = padjoint(vh), padjoint(w)
    largest = size.amax(-1, keepdim=True) if size.shape[-1] else size
    tolerance = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * largest)
    kept = size.double() > tolerance
    reciprocal = torch.where(kept, 1 / torch.where(kept, values, 1.0), 0.0)
    return _matmul(_scaled_columns(left, reciprocal), right)


def _tolerances(ar: torch.Tensor, atol: torch.Tensor | None, rtol: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    # eager's: atol 0 where not given; rtol, where not given, eps * max(m, n), or 0 where a
    # positive atol is given
    zero = torch.zeros((), dtype=torch.float64, device=ar.device)
    if rtol is None:
        default = torch.full((), torch.finfo(ar.dtype).eps * max(ar.shape[-2:]), dtype=torch.float64,
                             device=ar.device)
        rtol = default if atol is None else torch.where(atol > 0, zero, default)
    return (zero if atol is None else atol), rtol
