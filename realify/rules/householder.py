"""Householder QR in real arithmetic on (re, im) parts: LAPACK's geqrf, ungqr (householder_product)
and unmqr (ormqr), for runtimes without LAPACK (realify.onnx writes QR with it).

geqrf reduces column k with the reflector ``H = I - tau v v^H`` that zlarfg makes: for
``alpha = a_kk`` and ``x`` the column below it, ``beta = -sgn(Re alpha) sqrt(|alpha|^2 + |x|^2)``
(real), ``tau = (beta - Re alpha)/beta - i Im alpha/beta``, ``v = [1; x / (alpha - beta)]``, and
``H^H`` applied to the trailing columns (zgeqr2 applies ``I - conj(tau) v v^H``). Where x = 0
and alpha is real, tau = 0 (H = I). So R's diagonal is real with LAPACK's signs, and Q and R are
eager's to rounding, not only up to phases. zlarfg's rescaling of a beta below the underflow
threshold is left out (a column of norm below 1e-38 in float32 loses accuracy). The loops are
unrolled over the columns: the matrix size is static, batch sizes may be dynamic.
"""

from __future__ import annotations

import torch

from ._algebra import cdiv, cmul

Parts = tuple[torch.Tensor, torch.Tensor]


def _reflector(ar: torch.Tensor, ai: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, Parts, Parts]:
    """zlarfg on column k from row k: (beta, the mask of rows > k, v's parts with v_k = 1 and zeros
    above, tau's parts)."""
    m = ar.shape[-2]
    rows = torch.arange(m, device=ar.device)
    below = rows > k
    alpha_r, alpha_i = ar[..., k, k], ai[..., k, k]
    xr, xi = ar[..., :, k].masked_fill(~below, 0.0), ai[..., :, k].masked_fill(~below, 0.0)
    xnorm2 = (xr * xr + xi * xi).sum(-1)
    reflect = (xnorm2 != 0) | (alpha_i != 0)
    size = torch.sqrt(alpha_r * alpha_r + alpha_i * alpha_i + xnorm2)
    beta = torch.where(alpha_r >= 0, -size, size)
    safe_beta = torch.where(reflect, beta, 1.0)
    tau_r = torch.where(reflect, (beta - alpha_r) / safe_beta, 0.0)
    tau_i = torch.where(reflect, -alpha_i / safe_beta, 0.0)
    # v below the diagonal: x / (alpha - beta)
    sr, si = cdiv(1.0, None, torch.where(reflect, alpha_r - beta, 1.0), torch.where(reflect, alpha_i, 0.0))
    vr, vi = cmul(xr, xi, sr.unsqueeze(-1), si.unsqueeze(-1))
    diagonal = rows == k
    vr = torch.where(diagonal, 1.0, vr)
    vi = torch.where(diagonal, 0.0, vi)
    return torch.where(reflect, beta, alpha_r), below, (vr, vi), (tau_r, tau_i)


def _apply_left(cr: torch.Tensor, ci: torch.Tensor, v: Parts, tau: Parts, columns: torch.Tensor | None = None
                ) -> Parts:
    """(I - tau v v^H) C, on the columns where ``columns`` (a mask) is true (all where None)."""
    vr, vi = v[0].unsqueeze(-1), v[1].unsqueeze(-1)
    # w = v^H C (a row)
    wr = (vr * cr + vi * ci).sum(-2, keepdim=True)
    wi = (vr * ci - vi * cr).sum(-2, keepdim=True)
    tr, ti = cmul(tau[0].unsqueeze(-1).unsqueeze(-1), tau[1].unsqueeze(-1).unsqueeze(-1), wr, wi)
    ur, ui = cmul(vr, vi, tr, ti)
    if columns is None:
        return cr - ur, ci - ui
    return torch.where(columns, cr - ur, cr), torch.where(columns, ci - ui, ci)


def _apply_right(cr: torch.Tensor, ci: torch.Tensor, v: Parts, tau: Parts) -> Parts:
    """C (I - tau v v^H)."""
    vr, vi = v[0].unsqueeze(-2), v[1].unsqueeze(-2)
    # w = C v (a column)
    wr = (cr * vr - ci * vi).sum(-1, keepdim=True)
    wi = (cr * vi + ci * vr).sum(-1, keepdim=True)
    tr, ti = cmul(wr, wi, tau[0].unsqueeze(-1).unsqueeze(-1), tau[1].unsqueeze(-1).unsqueeze(-1))
    # (C v tau) v^H
    return cr - (tr * vr + ti * vi), ci - (ti * vr - tr * vi)


def _conj(x: Parts) -> Parts:
    return x[0], -x[1]


def geqrf_parts(ar: torch.Tensor, ai: torch.Tensor) -> tuple[Parts, Parts]:
    """((Re a, Im a), (Re tau, Im tau)) of A = ar + i ai (..., m, n), as LAPACK's geqrf: R on and
    above the diagonal, the reflectors' v below it (v_k = 1 implied)."""
    m, n = ar.shape[-2:]
    cols = torch.arange(n, device=ar.device)
    taus_r, taus_i = [], []
    for k in range(min(m, n)):
        beta, below, v, tau = _reflector(ar, ai, k)
        ar, ai = _apply_left(ar, ai, v, _conj(tau), columns=cols > k)
        at_k = cols == k
        ar = torch.where(at_k, torch.where(below.unsqueeze(-1), v[0].unsqueeze(-1), ar), ar)
        ai = torch.where(at_k, torch.where(below.unsqueeze(-1), v[1].unsqueeze(-1), ai), ai)
        rows = torch.arange(m, device=ar.device).unsqueeze(-1)
        ar = torch.where(at_k & (rows == k), beta.unsqueeze(-1).unsqueeze(-1), ar)
        ai = torch.where(at_k & (rows == k), 0.0, ai)
        taus_r.append(tau[0])
        taus_i.append(tau[1])
    empty = ar.new_zeros((*ar.shape[:-2], 0))
    tau_r = torch.stack(taus_r, dim=-1) if taus_r else empty
    tau_i = torch.stack(taus_i, dim=-1) if taus_i else empty
    return (ar, ai), (tau_r, tau_i)


def _vector(a: Parts, i: int) -> Parts:
    # reflector i's v from geqrf's packed a: 1 at row i, zeros above
    rows = torch.arange(a[0].shape[-2], device=a[0].device)
    vr = torch.where(rows == i, 1.0, a[0][..., :, i].masked_fill(rows < i, 0.0))
    vi = a[1][..., :, i].masked_fill(rows <= i, 0.0)
    return vr, vi


def _tau(tau: Parts, i: int) -> Parts:
    return tau[0][..., i], tau[1][..., i]


def householder_product_parts(a: Parts, tau: Parts) -> Parts:
    """Q = H_0 H_1 ... H_(k-1), its first n columns (a is (..., m, n)), as ungqr."""
    m, n = a[0].shape[-2:]
    eye = torch.eye(m, n, dtype=a[0].dtype, device=a[0].device).expand(a[0].shape)
    qr_, qi = eye, torch.zeros_like(eye)
    for i in reversed(range(tau[0].shape[-1])):
        qr_, qi = _apply_left(qr_, qi, _vector(a, i), _tau(tau, i))
    return qr_, qi


def ormqr_parts(a: Parts, tau: Parts, c: Parts, left: bool, transpose: bool) -> Parts:
    """op(Q) C (``left``) or C op(Q), op(Q) = Q^H where ``transpose`` (as unmqr, conjugate
    transpose for complex), Q = H_0 ... H_(k-1) of geqrf's (a, tau)."""
    k = tau[0].shape[-1]
    cr, ci = c
    # Q C applies H_(k-1) first; Q^H C = H_(k-1)^H ... H_0^H C applies H_0^H first; on the right
    # C Q applies H_0 first, C Q^H applies H_(k-1)^H first
    forward = transpose if left else not transpose
    for i in (range(k) if forward else reversed(range(k))):
        t = _conj(_tau(tau, i)) if transpose else _tau(tau, i)
        if left:
            cr, ci = _apply_left(cr, ci, _vector(a, i), t)
        else:
            cr, ci = _apply_right(cr, ci, _vector(a, i), t)
    return cr, ci


def qr_parts(ar: torch.Tensor, ai: torch.Tensor, mode: str) -> tuple[Parts | None, Parts]:
    """(Q, R) as linalg.qr: ``reduced`` (Q m x k, R k x n), ``complete`` (Q m x m, R m x n) or
    ``r`` (no Q), k = min(m, n)."""
    m, n = ar.shape[-2:]
    k = min(m, n)
    a, tau = geqrf_parts(ar, ai)
    if mode == "complete":
        r = (a[0].triu(), a[1].triu())
        if m > n:  # Q's further columns are the identity's, reflected
            pad = a[0].new_zeros((*a[0].shape[:-1], m - n))
            a = (torch.cat([a[0], pad], dim=-1), torch.cat([a[1], pad], dim=-1))
        return householder_product_parts((a[0][..., :, :m], a[1][..., :, :m]), tau), r
    r = (a[0][..., :k, :].triu(), a[1][..., :k, :].triu())
    if mode == "r":
        return None, r
    return householder_product_parts((a[0][..., :, :k], a[1][..., :, :k]), tau), r
