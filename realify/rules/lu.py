"""The LU family: ``linalg.lu_factor(_ex)``, ``linalg.lu``, ``lu_unpack``, ``linalg.lu_solve``,
``linalg.det`` and ``linalg.slogdet`` (and ``torch.lu``, ``torch.lu_solve`` and ``logdet``,
which PyTorch writes with these).

The rules factor, solve and take determinants with ``realify::lu_factor_pairs``,
``realify::lu_solve_pairs`` and ``realify::det_pairs`` (realify/runtime/lapack.py: the
device's complex getrf, getrs and det on (re, im) pairs, with eager's derivatives); the rest
(unpacking, the permutation, slogdet from the diagonal) is real arithmetic on the parts.

Below the rules is the same factorization in real arithmetic, LAPACK's getrf done column by
column, for runtimes without LAPACK (realify.onnx writes the ops above with it; ONNX has no
factorization operator). At step k the pivot is the first row at or below k of largest
``|re| + |im|`` (LAPACK's i?amax measure, not the modulus), that row is swapped with row k,
the column below the pivot is scaled by the pivot's reciprocal (L's multipliers) and the
trailing block loses the outer product of the multipliers and the pivot row. The loop is
unrolled over the columns (the matrix size is static; batch sizes may be dynamic) and every
step is written on the whole matrix with masks: a fixed sequence of elementwise ops, gathers
and argmaxes. docs/numerics.md ("LU") has its error bounds, the sizes it is meant for, and
where the two may differ (near-ties of the pivot measure).
"""

from __future__ import annotations

from typing import Any

import torch

from ..runtime.complex_tensor import ComplexTensor
from ..runtime.lapack import det_pairs, lu_factor_pairs, lu_solve_pairs
from . import register
from ._algebra import cdiv, cmul, padjoint, pselect, psub
from ._operands import filled_parts, stacked_pairs

aten = torch.ops.aten
Part = Any  # a real tensor, or None for an exact zero (a real matrix's imaginary part)
Parts = tuple[torch.Tensor, Part]


# ---- rules --------------------------------------------------------------------------------


def lu_factor(A: Any, pivot: bool = True) -> tuple[ComplexTensor, torch.Tensor, torch.Tensor]:
    """(LU, pivots, info) of the complex matrix A, as torch.linalg.lu_factor_ex."""
    LU, pivots, info = lu_factor_pairs(stacked_pairs(A), pivot)
    return ComplexTensor.from_pairs(LU), pivots, info


def row_order(pivots: torch.Tensor, m: int) -> torch.Tensor:
    """The rows of A in the order the factorization left them (int64, (..., m)): the swaps of
    ``pivots`` applied one after another to 0 .. m-1, so that (P^T A)[j] = A[order[j]]."""
    order = torch.arange(m, device=pivots.device).expand(*pivots.shape[:-1], m)
    for k in range(pivots.shape[-1]):
        order = _row_swap(order.unsqueeze(-1), k, pivots[..., k].long() - 1).squeeze(-1)
    return order


def exchanged(n: int, i: Any, j: torch.Tensor, device=None) -> torch.Tensor:
    """0 .. n-1 with i and j exchanged, (..., n) for j batched (i batched alike, or an int): the
    gather index of a row or column interchange decided by the data."""
    ids = torch.arange(n, device=device)
    i = i.unsqueeze(-1) if isinstance(i, torch.Tensor) else i
    j = j.unsqueeze(-1)
    return torch.where(ids == i, j, torch.where(ids == j, i, ids))


def first_largest(score: torch.Tensor) -> torch.Tensor:
    """LAPACK's i?amax on the last dimension: the first index of the largest score. A NaN is
    never larger than the running maximum there (the comparison is false), so it is taken only
    where it stands first; argmax would take any NaN."""
    first_nan = score[..., 0].isnan()
    best = score.masked_fill(score.isnan(), -1.0).argmax(dim=-1)
    return best.masked_fill(first_nan, 0)


def _row_swap(x: torch.Tensor, k: int, p: torch.Tensor) -> torch.Tensor:
    """x (..., m, n) with its rows k and p[...] exchanged (p batched)."""
    return x.gather(-2, exchanged(x.shape[-2], k, p, x.device).unsqueeze(-1).expand(x.shape))


def _with_row_index(x: torch.Tensor, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # x (..., m, r) and order (..., m) broadcast to one batch, order as an index of x's shape
    batch = torch.broadcast_shapes(x.shape[:-2], order.shape[:-1])
    x = x.expand(*batch, *x.shape[-2:])
    return x, order.expand(*batch, order.shape[-1]).unsqueeze(-1).expand(x.shape)


def _gather_rows(x: Part, order: torch.Tensor) -> Part:
    # (P^T x)[j] = x[order[j]]
    if x is None:
        return None
    x, index = _with_row_index(x, order)
    return x.gather(-2, index)


def _scatter_rows(x: Part, order: torch.Tensor) -> Part:
    # (P x)[order[j]] = x[j]
    if x is None:
        return None
    x, index = _with_row_index(x, order)
    return torch.zeros_like(x).scatter(-2, index, x)


def permutation_sign(pivots: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """det P of getrf's row swaps: (-1)^(number of rows swapped with another row)."""
    k = pivots.shape[-1]
    swaps = (pivots != torch.arange(1, k + 1, device=pivots.device, dtype=pivots.dtype)).sum(-1)
    return (1 - 2 * (swaps % 2)).to(dtype)


def _complex_tensor(re: torch.Tensor, im: Part = None) -> ComplexTensor:
    return ComplexTensor(re.contiguous(), torch.zeros_like(re) if im is None else im.contiguous())


def unpack(lr: torch.Tensor, li: Part) -> tuple[Parts, Parts]:
    """(L, U) parts of getrf's packed LU (..., m, n): L (..., m, k) unit lower, U (..., k, n)."""
    m, n = lr.shape[-2:]
    k = torch.sym_min(m, n)  # a symbol where m or n is (no guard on which is smaller)
    eye = torch.eye(m, k, dtype=lr.dtype, device=lr.device)
    lower = (_first_columns(lr, k).tril(-1) + eye, None if li is None else _first_columns(li, k).tril(-1))
    upper = (lr[..., :k, :].triu(), None if li is None else li[..., :k, :].triu())
    return lower, upper


def _first_columns(x: torch.Tensor, k: Any) -> torch.Tensor:
    # x[..., :k]; at a symbolic k = min(m, n) gathered instead: the slice's view has row stride n
    # and width k, whose contiguity torch.export's trace of the real program checks at run time
    # (`n != min(m, n)`, false wherever n <= m); tril copies the columns either way
    if isinstance(k, int):
        return x[..., :k]
    return x.index_select(-1, torch.arange(k, device=x.device))


def permutation_matrix(pivots: torch.Tensor, m: int, dtype: torch.dtype) -> torch.Tensor:
    """P (..., m, m) with A = P L U: P[order[j], j] = 1."""
    if not isinstance(pivots.shape[-1], int):
        # the swaps applied one by one (row_order) unroll over the pivots, which a symbolic
        # count cannot give: ATen's own unpacking of them (its LU argument gives shapes only)
        shape = (*pivots.shape[:-1], m, pivots.shape[-1])
        return torch.lu_unpack(torch.zeros(shape, dtype=dtype, device=pivots.device), pivots,
                               unpack_data=False)[0]
    order = row_order(pivots, m)
    return (torch.arange(m, device=pivots.device).unsqueeze(-1) == order.unsqueeze(-2)).to(dtype)


@register(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    # A = P L U, L and U packed in one matrix (getrf); linalg.lu_factor checks the info itself
    LU, pivots, info = lu_factor(A, pivot)
    if check_errors:
        torch._linalg_check_errors(info, "torch.linalg.lu_factor_ex", is_matrix=A.dim() == 2)
    return LU, pivots, info


@register(aten.lu_unpack.default)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    # (P, L, U) of A = P L U from getrf's packed form; what is not asked for is empty, as eager's
    lr, li = filled_parts(LU_data)
    empty = lr.new_empty(0)
    if unpack_data:
        (Lr, Li), (Ur, Ui) = unpack(lr, li)
        L, U = _complex_tensor(Lr, Li), _complex_tensor(Ur, Ui)
    else:
        L = U = _complex_tensor(empty)
    P = permutation_matrix(LU_pivots, lr.shape[-2], lr.dtype) if unpack_pivots else empty
    return _complex_tensor(P), L, U


@register(aten.linalg_lu.default)
def linalg_lu(A, *, pivot=True):
    # (P, L, U) with A = P L U; unpivoted (CUDA only in eager), P is empty
    LU, pivots, _ = lu_factor(A, pivot)
    return lu_unpack(LU, pivots, unpack_pivots=pivot)


@register(aten.linalg_lu_solve.default)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    # left: op(A) X = B, right: X op(A) = B, op(A) = A or A^H (getrs)
    return ComplexTensor.from_pairs(lu_solve_pairs(stacked_pairs(LU), pivots, stacked_pairs(B), left, adjoint))


def _diagonal(LU: ComplexTensor) -> ComplexTensor:
    return ComplexTensor(LU.re.diagonal(dim1=-2, dim2=-1), LU.im.diagonal(dim1=-2, dim2=-1))


@register(aten._linalg_det.default)
def linalg_det(A):
    # det A = det P * prod_k u_kk (getrf), with eager's derivative, finite at singular A where
    # the factorization's is not; the LU and pivots outputs (eager's saved values) come from
    # their own call, which a graph drops where nothing reads them
    LU, pivots, _ = lu_factor(A)
    return ComplexTensor.from_pairs(det_pairs(stacked_pairs(A))), LU, pivots


@register(aten._linalg_slogdet.default)
def linalg_slogdet(A):
    # sign = det P * prod_k sgn(u_kk), log|det A| = sum_k log|u_kk|: eager's own formulas
    LU, pivots, _ = lu_factor(A)
    diagonal = _diagonal(LU)
    sign = diagonal.sgn().prod(-1) * permutation_sign(pivots, LU.re.dtype)
    return sign, diagonal.abs().log().sum(-1), LU, pivots


# ---- the same in real arithmetic (runtimes without LAPACK) ----------------------------------


def _column(x: Part, k: int) -> Part:
    return None if x is None else x[..., :, k]


def _pivot_row(ar: torch.Tensor, ai: Part, k: int) -> torch.Tensor:
    """LAPACK's i?amax on column k from row k down: the first row of largest |re| + |im|."""
    score = ar[..., k:, k].abs() if ai is None else ar[..., k:, k].abs() + ai[..., k:, k].abs()
    return first_largest(score) + k


def lu_factor_parts(ar: torch.Tensor, ai: Part, pivot: bool = True) -> tuple[torch.Tensor, Part, torch.Tensor,
                                                                                torch.Tensor]:
    """(Re LU, Im LU, pivots, info) of A = ar + i ai (..., m, n) (``ai`` None: a real A), as
    LAPACK's getrf: L's multipliers below the diagonal (its unit diagonal implied) and U on and
    above it; pivots 1-based int32, the row swapped with each row; info the first zero pivot's
    column (1-based), 0 for none."""
    *batch, m, n = ar.shape
    rows = torch.arange(m, device=ar.device).unsqueeze(-1)  # (m, 1)
    cols = torch.arange(n, device=ar.device)  # (n,)
    info = torch.zeros(batch, dtype=torch.int32, device=ar.device)
    pivots = []
    for k in range(min(m, n)):
        if pivot:
            p = _pivot_row(ar, ai, k)
            ar, ai = _row_swap(ar, k, p), (None if ai is None else _row_swap(ai, k, p))
        else:
            p = torch.full(batch, k, dtype=torch.int64, device=ar.device)
        pivots.append(p)
        pr, pi = ar[..., k:k + 1, k], (None if ai is None else ai[..., k:k + 1, k])
        zero = pr == 0 if pi is None else (pr == 0) & (pi == 0)  # LAPACK records it, divides by nothing
        info = torch.where((info == 0) & zero.squeeze(-1), k + 1, info)
        # multipliers l_i = a_ik * (1 / a_kk) below the pivot, the reciprocal once per matrix
        # (a safe divisor where the pivot is zero)
        rr, ri = cdiv(1.0, None, pr.masked_fill(zero, 1.0), None if pi is None else pi.masked_fill(zero, 0.0))
        lr, li = cmul(_column(ar, k), _column(ai, k), rr, ri)
        scaled = (rows.squeeze(-1) > k) & ~zero
        lr, li = pselect(scaled, lr, _column(ar, k)), pselect(scaled, li, _column(ai, k))
        # trailing block: a_ij -= l_i u_kj for i > k, j > k
        update_r, update_i = cmul(lr.unsqueeze(-1), None if li is None else li.unsqueeze(-1),
                                  ar[..., k:k + 1, :], None if ai is None else ai[..., k:k + 1, :])
        trailing = (rows > k) & (cols > k) & ~zero.unsqueeze(-1)
        ar = torch.where(cols == k, lr.unsqueeze(-1), torch.where(trailing, ar - update_r, ar))
        if ai is not None:
            ai = torch.where(cols == k, li.unsqueeze(-1), torch.where(trailing, ai - update_i, ai))
    pivots_1based = (torch.stack(pivots, dim=-1) + 1).to(torch.int32) if pivots else \
        torch.zeros((*batch, 0), dtype=torch.int32, device=ar.device)
    return ar, ai, pivots_1based, info


def determinant_parts(lr: torch.Tensor, li: torch.Tensor, pivots: torch.Tensor) -> Parts:
    """det A = det P * prod_k u_kk from getrf's packed LU parts, the product taken in order."""
    sign = permutation_sign(pivots, lr.dtype)
    dr, di = lr[..., 0, 0] * sign, li[..., 0, 0] * sign
    for k in range(1, lr.shape[-1]):
        dr, di = cmul(dr, di, lr[..., k, k], li[..., k, k])
    return dr, di


def substitute(t: Parts, b: Parts, lower: bool, unit: bool) -> Parts:
    """X with T X = B for the triangle of T (lower or upper; unit: ones on its diagonal, which
    is not read), by substitution one row of X at a time: x_k = r_k / t_kk, then every row
    still to solve loses t_ik x_k. T (..., n, n) and B (..., n, r) broadcast over the batch;
    None parts are exact zeros."""
    tr, ti = t
    rr, ri = b
    n = tr.shape[-1]
    rows = torch.arange(n, device=tr.device).unsqueeze(-1)
    for k in (range(n) if lower else reversed(range(n))):
        xr, xi = rr[..., k:k + 1, :], (None if ri is None else ri[..., k:k + 1, :])
        if not unit:
            xr, xi = cdiv(xr, xi, tr[..., k:k + 1, k:k + 1], None if ti is None else ti[..., k:k + 1, k:k + 1])
        update_r, update_i = cmul(tr[..., :, k:k + 1], None if ti is None else ti[..., :, k:k + 1], xr, xi)
        later = rows > k if lower else rows < k
        rr = torch.where(rows == k, xr, torch.where(later, rr - update_r, rr))
        if update_i is not None or ri is not None:
            ri = pselect(rows == k, xi, pselect(later, psub(ri, update_i), ri))
    return rr, ri


def solve_with_lu_parts(lu: Parts, pivots: torch.Tensor, b: Parts, left: bool = True, adjoint: bool = False
                        ) -> Parts:
    """X with op(A) X = B (``left``) or X op(A) = B, op(A) = A or A^H (``adjoint``), for A = P L U
    given as getrf's (LU, pivots), in real arithmetic (as linalg.lu_solve)."""
    if not left:
        # X op(A) = B  <=>  op(A)^H X^H = B^H
        return padjoint(solve_with_lu_parts(lu, pivots, padjoint(b), adjoint=not adjoint))
    order = row_order(pivots, lu[0].shape[-1])
    if not adjoint:
        y = substitute(lu, (_gather_rows(b[0], order), _gather_rows(b[1], order)), lower=True, unit=True)
        return substitute(lu, y, lower=False, unit=False)
    lu_h = padjoint(lu)
    y = substitute(lu_h, b, lower=True, unit=False)
    y = substitute(lu_h, y, lower=False, unit=True)
    return _scatter_rows(y[0], order), _scatter_rows(y[1], order)
