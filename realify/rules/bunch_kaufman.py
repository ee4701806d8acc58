"""LAPACK's Bunch-Kaufman LDL factorization and its solve in real arithmetic, for runtimes without
LAPACK (ONNX has no factorization operator): ``ldl_factor_parts`` gives what
``torch.linalg.ldl_factor_ex`` gives on the CPU (the unblocked ``?sytf2`` / ``?hetf2`` with
uplo='L', which is what ``?sytrf`` / ``?hetrf`` run for the sizes meant here), and
``ldl_solve_parts`` what ``torch.linalg.ldl_solve`` gives (``?sytrs`` / ``?hetrs``, uplo='L').

A symmetric (A = A^T) or Hermitian (A = A^H) indefinite matrix has no stable LDL^T without
pivoting, and a plain diagonal pivot can be zero even where A is not singular ([[0, b], [b, 0]]).
Bunch and Kaufman's rule keeps the growth of the entries bounded by choosing, at each step k,
either a 1x1 pivot (one column of L, one scalar of D) or a 2x2 pivot block (two columns of L,
a 2x2 block of D), after a symmetric interchange of two rows and columns of the trailing block.
With alpha = (1 + sqrt(17)) / 8 (the value that balances the growth bounds of both kinds of
step), |x| the pivot measure (|Re x| + |Im x| for a complex x, LAPACK's cabs1, not the modulus;
the real part alone for a Hermitian diagonal), colmax the largest |a_ik| below the diagonal of
column k, in row imax (the first such row), and rowmax the largest |a_imax,j| off the diagonal
of row imax within the trailing block:

- |a_kk| >= alpha colmax, or |a_kk| colmax >= alpha colmax^2 / rowmax: a 1x1 pivot on a_kk;
- otherwise |a_imax,imax| >= alpha rowmax: a 1x1 pivot after interchanging k and imax;
- otherwise a 2x2 pivot on rows and columns k, k+1 after interchanging k+1 and imax.

A column whose diagonal and subdiagonal are all zero (or whose diagonal is NaN) is left as it
is, as a 1x1 pivot with no interchange, and ``info`` records the first such column (1-based);
nothing is divided by zero. As in LAPACK the interchanges are applied to the trailing block
only: the columns of L already computed keep the order they were computed in, so A = L D L^T is
a product of interchanges and unit lower blocks, not P L D L^T P^T.

The pivots use LAPACK's encoding (int32, 1-based): pivots[k] = p > 0 is a 1x1 pivot after
interchanging rows and columns k and p; pivots[k] = pivots[k+1] = -p < 0 is a 2x2 block on k,
k+1 after interchanging k+1 and p. The packed LD holds L's multipliers below the diagonal (its
unit diagonal implied, zero below a 2x2 block's own subdiagonal entry), D's diagonal, and each
2x2 block's subdiagonal entry; the strict upper triangle is zero, as eager returns it. In the
Hermitian factorization D's diagonal is real (the imaginary parts of A's diagonal are never
read, as in LAPACK).

The step is data dependent (1 or 2 columns) and so are the interchanges, while an exported
graph must be a fixed sequence of operators. The loop is therefore unrolled over every column k
(the matrix size is static; batch sizes may be dynamic) and each step is written on the whole
matrix for the whole batch: the pivot rule gives batched booleans, the interchange is a gather
by a batched permutation of 0 .. n-1, both the 1x1 and the 2x2 update are computed and
``torch.where`` keeps the one chosen, and a batched flag marks column k as already consumed by
the previous step's 2x2 block (a step that changes nothing). Each step is a constant number of
operators on (n, n) tensors, so the graph grows linearly in n (about 500 ONNX nodes per column
for the factorization and the solve together) and the arithmetic as n^3 with a larger constant
than LAPACK's (every candidate is computed on the whole matrix): it is meant for small
matrices, n <= 32.

The arithmetic follows reference LAPACK's expressions in its order (the same reciprocals,
quotients and products), so the pivots and info are eager's and LD agrees to rounding: the
LAPACK under eager may round a complex product or quotient differently in the last bit, and such
a difference is carried through the later Schur complements (real matrices come out bit for bit
alike). Pivot choices could differ only where two pivot measures tie to within a rounding. With
NaN or infinite entries the pivots and info follow reference LAPACK (a NaN diagonal is a
singular column; i?amax passes over a NaN after the first entry), which eager's LAPACK may not.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import torch

from ._algebra import cdiv, cmul, pneg, pselect, psub
from .lu import exchanged, first_largest

Part = Any  # a real tensor, or None for an exact zero imaginary part (a real matrix)
Parts = tuple[torch.Tensor, Part]


# ---- parts -----------------------------------------------------------------------------------


def _where(condition: torch.Tensor, x: Parts, y: Parts) -> Parts:
    return torch.where(condition, x[0], y[0]), pselect(condition, x[1], y[1])


def _mul(x: Parts, y: Parts) -> Parts:
    return cmul(x[0], x[1], y[0], y[1])


def _div(x: Parts, y: Parts) -> Parts:
    return cdiv(x[0], x[1], y[0], y[1])


def _sub(x: Parts, y: Parts) -> Parts:
    return x[0] - y[0], psub(x[1], y[1])


def _conj(x: Parts) -> Parts:
    return x[0], pneg(x[1])


def _scale(x: Parts, r: torch.Tensor) -> Parts:
    # x times a real r
    return x[0] * r, None if x[1] is None else x[1] * r


def _index(x: Parts, *index: Any) -> Parts:
    return x[0][index], None if x[1] is None else x[1][index]


def _as_row(x: Parts) -> Parts:
    return x[0].unsqueeze(-2), None if x[1] is None else x[1].unsqueeze(-2)


def _as_col(x: Parts) -> Parts:
    return x[0].unsqueeze(-1), None if x[1] is None else x[1].unsqueeze(-1)


def _outer(x: Parts, y: Parts) -> Parts:
    # x_i y_j
    return _mul(_as_col(x), _as_row(y))


def _is_zero(x: Parts) -> torch.Tensor:
    return x[0] == 0 if x[1] is None else (x[0] == 0) & (x[1] == 0)


def _nonzero_divisor(x: Parts) -> Parts:
    # x where it is nonzero, 1 where it is zero: a divisor for the lanes whose result is discarded
    zero = _is_zero(x)
    return torch.where(zero, 1.0, x[0]), pselect(zero, None, x[1])


def _cabs1(x: Parts) -> torch.Tensor:
    # LAPACK's pivot measure |Re x| + |Im x|
    return x[0].abs() if x[1] is None else x[0].abs() + x[1].abs()


def _hypot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # sqrt(x^2 + y^2) as LAPACK's dlapy2 computes it, with no overflow in the squares
    big, small = torch.maximum(x.abs(), y.abs()), torch.minimum(x.abs(), y.abs())
    return torch.where(small == 0, big, big * torch.sqrt(1 + (small / torch.where(big == 0, 1.0, big)) ** 2))


def _alpha(dtype: torch.dtype) -> float:
    """(1 + sqrt(17)) / 8 in the working precision (single precision LAPACK computes it in single
    precision; sqrt is correctly rounded, and rounding its double to single gives the same)."""
    if dtype == torch.float64:
        return (1 + math.sqrt(17)) / 8

    def single(x: float) -> float:
        return struct.unpack("f", struct.pack("f", x))[0]

    return single(single(1 + single(math.sqrt(17))) / 8)


# ---- the factorization ------------------------------------------------------------------------


def _full(ar: torch.Tensor, ai: Part, hermitian: bool) -> Parts:
    """The whole symmetric (Hermitian) matrix from its lower triangle; the upper triangle of the
    input is not read, so the pivot search and the interchanges see exactly LAPACK's entries."""
    n = ar.shape[-1]
    lower = torch.ones(n, n, dtype=torch.bool, device=ar.device).tril()
    re = torch.where(lower, ar, ar.mT)
    if ai is None:
        return re, None
    return re, torch.where(lower, ai, -ai.mT if hermitian else ai.mT)


def _symmetric_interchange(s: Parts, k: int, i: Any, j: torch.Tensor) -> Parts:
    """s with rows and columns i and j >= k exchanged within the trailing block s[k:, k:] (i, j
    batched, or i an int); the columns of L to the left keep their rows, as in LAPACK."""
    n = s[0].shape[-1]
    ids = torch.arange(n, device=s[0].device)
    order = exchanged(n, i, j, s[0].device)  # (..., n)
    rows_index = order.unsqueeze(-1).expand(s[0].shape)
    cols_index = order.unsqueeze(-2).expand(s[0].shape)
    trailing = (ids.unsqueeze(-1) >= k) & (ids >= k)

    def permute(x: Part) -> Part:
        if x is None:
            return None
        return torch.where(trailing, x.gather(-2, rows_index).gather(-1, cols_index), x)

    return permute(s[0]), permute(s[1])


def _rank_one_step(s: Parts, k: int, hermitian: bool) -> Parts:
    """The 1x1 pivot on s[k, k]: the trailing block loses w (1/d) w^T (w^H), then column k below
    the diagonal becomes L's column w / d (w the column below the pivot d)."""
    n = s[0].shape[-1]
    ids = torch.arange(n, device=s[0].device)
    rows, cols = ids.unsqueeze(-1), ids
    d = _nonzero_divisor(_index(s, ..., slice(k, k + 1), k))  # (..., 1)
    w = _index(s, ..., k)  # (..., n)
    if hermitian:
        r = 1 / d[0]
        t = _scale(_conj(w), r)  # (1/d) conj(w_j)
        column = _scale(w, r)
    else:
        r = cdiv(1.0, None, *d)
        t = _mul(r, w)
        column = t
    update = _outer(w, t)
    trailing = (rows >= cols) & (cols > k)
    below = (rows > k) & (cols == k)
    updated = _sub(s, update)
    return _where(below, _as_col(column), _where(trailing, updated, s))


def _rank_two_step(s: Parts, k: int, hermitian: bool) -> Parts:
    """The 2x2 pivot on s[k:k+2, k:k+2]: the trailing block loses W D^-1 W^T (W^H), W the columns
    k, k+1 below the block, which then become L's columns W D^-1."""
    n = s[0].shape[-1]
    ids = torch.arange(n, device=s[0].device)
    rows, cols = ids.unsqueeze(-1), ids
    c0, c1 = _index(s, ..., k), _index(s, ..., k + 1)  # (..., n)
    d21 = _nonzero_divisor(_index(s, ..., slice(k + 1, k + 2), k))  # (..., 1)
    a_kk, a_k1k1 = _index(s, ..., slice(k, k + 1), k), _index(s, ..., slice(k + 1, k + 2), k + 1)
    if hermitian:
        # D^-1 from |d21|, the real diagonal over it and d21's direction
        modulus = _hypot(*d21)
        d11, d22 = a_k1k1[0] / modulus, a_kk[0] / modulus
        e = 1 / _nonzero_real(d11 * d22 - 1) / modulus
        direction = (d21[0] / modulus, d21[1] / modulus)
        wk = _scale(_sub(_scale(c0, d11), _mul(direction, c1)), e)
        wk1 = _scale(_sub(_scale(c1, d22), _mul(_conj(direction), c0)), e)
        tk, tk1 = _conj(wk), _conj(wk1)
    else:
        d11, d22 = _div(a_k1k1, d21), _div(a_kk, d21)
        product = _mul(d11, d22)
        t = cdiv(1.0, None, *_nonzero_divisor((product[0] - 1, product[1])))
        e = _div(t, d21)
        wk = _mul(e, _sub(_mul(d11, c0), c1))
        wk1 = _mul(e, _sub(_mul(d22, c1), c0))
        tk, tk1 = wk, wk1

    # a_ij - c0_i tk_j - c1_i tk1_j in this order, as LAPACK
    updated = _sub(_sub(s, _outer(c0, tk)), _outer(c1, tk1))
    trailing = (rows >= cols) & (cols > k + 1)
    below = rows > k + 1

    s = _where(trailing, updated, s)
    s = _where(below & (cols == k), _as_col(wk), s)
    return _where(below & (cols == k + 1), _as_col(wk1), s)


def _nonzero_real(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x == 0, 1.0, x)


def _real_diagonal(s: Parts) -> Parts:
    # a Hermitian factorization keeps only the real part of the diagonal
    if s[1] is None:
        return s
    n = s[0].shape[-1]
    return s[0], torch.where(torch.eye(n, dtype=torch.bool, device=s[0].device), 0.0, s[1])


class _Choice:
    """The pivot rule's decision at column k, batched: ``singular`` (a zero column: info, no
    step), ``double`` (a 2x2 block), and the rows ``kk`` (k or k+1) and ``kp`` to interchange."""

    def __init__(self, s: Parts, k: int, consumed: torch.Tensor, alpha: float):
        n = s[0].shape[-1]
        score = _cabs1(s)  # a Hermitian diagonal is real here: its cabs1 is |Re|
        absakk = score[..., k, k]
        if k == n - 1:
            self.singular = ~consumed & ((absakk == 0) | absakk.isnan())
            self.double = torch.zeros_like(consumed)
            self.kk = k
            self.kp = torch.full_like(absakk, k, dtype=torch.int64)
            return
        imax = k + 1 + first_largest(score[..., k + 1:, k])
        colmax = score[..., k + 1:, k].gather(-1, (imax - k - 1).unsqueeze(-1)).squeeze(-1)
        row = score.gather(-2, imax.view(*imax.shape, 1, 1).expand(*imax.shape, 1, n)).squeeze(-2)
        ids = torch.arange(n, device=row.device)
        rowmax = row.masked_fill((ids < k) | (ids == imax.unsqueeze(-1)), 0.0).amax(-1)
        diagonal_imax = score.diagonal(dim1=-2, dim2=-1).gather(-1, imax.unsqueeze(-1)).squeeze(-1)
        self.singular = ~consumed & ((torch.maximum(absakk, colmax) == 0) | absakk.isnan())
        active = ~consumed & ~self.singular
        # rowmax >= colmax > 0 wherever the second test decides
        keep = (absakk >= alpha * colmax) | (absakk >= alpha * colmax * (colmax / _nonzero_real(rowmax)))
        swap_one = ~keep & (diagonal_imax >= alpha * rowmax)
        self.double = active & ~keep & ~swap_one
        self.kk = k + self.double.long()
        self.kp = torch.where(active & ~keep, imax, k)


def ldl_factor_parts(ar: torch.Tensor, ai: Part, hermitian: bool) -> tuple[torch.Tensor, Part, torch.Tensor,
                                                                            torch.Tensor]:
    """(Re LD, Im LD (None when ``ai`` is None), pivots int32 (..., n), info int32 (...)) of the
    symmetric (``hermitian`` False) or Hermitian matrix ar + i ai (..., n, n) read from its lower
    triangle, as ``torch.linalg.ldl_factor_ex`` (LAPACK's ?sytrf / ?hetrf, uplo='L')."""
    hermitian = hermitian and ai is not None  # a real matrix: both are the same factorization
    n = ar.shape[-1]
    alpha = _alpha(ar.dtype)
    s = _full(ar, ai, hermitian)
    if hermitian:
        s = _real_diagonal(s)
    info = torch.zeros(ar.shape[:-2], dtype=torch.int32, device=ar.device)
    consumed = torch.zeros(ar.shape[:-2], dtype=torch.bool, device=ar.device)  # column k ends the last 2x2 block
    pivots: list[torch.Tensor] = []
    for k in range(n):
        choice = _Choice(s, k, consumed, alpha)
        info = torch.where((info == 0) & choice.singular, k + 1, info)
        swapped = _symmetric_interchange(s, k, choice.kk, choice.kp)
        stepped = _rank_one_step(swapped, k, hermitian)
        if k + 1 < n:
            stepped = _where(choice.double.view(*choice.double.shape, 1, 1),
                             _rank_two_step(swapped, k, hermitian), stepped)
        if hermitian:
            stepped = _real_diagonal(stepped)
        unchanged = (consumed | choice.singular).view(*consumed.shape, 1, 1)
        s = _full(*_where(unchanged, s, stepped), hermitian)
        encoded = torch.where(choice.double, -(choice.kp + 1), choice.kp + 1)
        pivots.append(torch.where(consumed, pivots[-1], encoded) if k else encoded)
        consumed = choice.double
    pivots_tensor = torch.stack(pivots, dim=-1).to(torch.int32) if pivots else \
        torch.zeros((*ar.shape[:-2], 0), dtype=torch.int32, device=ar.device)
    return s[0].tril(), None if s[1] is None else s[1].tril(), pivots_tensor, info


# ---- the solve ----------------------------------------------------------------------------------


def _row_swap(x: Parts, i: Any, j: torch.Tensor) -> Parts:
    """x (..., n, r) with rows i and j exchanged (j batched; i batched or an int)."""
    index = exchanged(x[0].shape[-2], i, j, x[0].device).unsqueeze(-1).expand(x[0].shape)
    return x[0].gather(-2, index), None if x[1] is None else x[1].gather(-2, index)


def _eliminate_below(b: Parts, ld: Parts, k: int, start: int) -> Parts:
    """b with rows i >= start losing l_ik b_k (l column k of L)."""
    n = b[0].shape[-2]
    update = _outer(_index(ld, ..., k), _index(b, ..., k, slice(None)))
    below = (torch.arange(n, device=b[0].device) >= start).unsqueeze(-1)
    return _where(below, _sub(b, update), b)


def _forward_one(b: Parts, ld: Parts, k: int, hermitian: bool) -> Parts:
    # rows below k lose l_k b_k, then b_k is divided by d_k (times its reciprocal, as LAPACK)
    n = b[0].shape[-2]
    b = _eliminate_below(b, ld, k, k + 1)
    d = _nonzero_divisor(_index(ld, ..., slice(k, k + 1), slice(k, k + 1)))
    scaled = _scale(b, 1 / d[0]) if hermitian else _mul(b, cdiv(1.0, None, *d))
    at_k = (torch.arange(n, device=b[0].device) == k).unsqueeze(-1)
    return _where(at_k, scaled, b)


def _forward_two(b: Parts, ld: Parts, k: int, hermitian: bool) -> Parts:
    # rows below the block lose l_k b_k then l_k+1 b_k+1, then the block's 2x2 system is solved
    n = b[0].shape[-2]
    b = _eliminate_below(_eliminate_below(b, ld, k, k + 2), ld, k + 1, k + 2)
    d21 = _nonzero_divisor(_index(ld, ..., slice(k + 1, k + 2), slice(k, k + 1)))
    d12 = _conj(d21) if hermitian else d21
    d11 = _div(_index(ld, ..., slice(k, k + 1), slice(k, k + 1)), d12)
    d22 = _div(_index(ld, ..., slice(k + 1, k + 2), slice(k + 1, k + 2)), d21)
    product = _mul(d11, d22)
    denominator = _nonzero_divisor((product[0] - 1, product[1]))
    b1 = _div(_index(b, ..., slice(k, k + 1), slice(None)), d12)
    b2 = _div(_index(b, ..., slice(k + 1, k + 2), slice(None)), d21)
    x1 = _div(_sub(_mul(d22, b1), b2), denominator)
    x2 = _div(_sub(_mul(d11, b2), b1), denominator)
    ids = torch.arange(n, device=b[0].device).unsqueeze(-1)
    return _where(ids == k, x1, _where(ids == k + 1, x2, b))


def _back_substitute(b: Parts, ld: Parts, row: int, last: int, hermitian: bool) -> Parts:
    """b with its row ``row`` losing sum_{i > last} l_i b_i, l column ``row`` of L (conjugated for
    a Hermitian LD: the product with L^H)."""
    n = b[0].shape[-2]
    ids = torch.arange(n, device=b[0].device).unsqueeze(-1)
    l_col = _as_col(_index(ld, ..., row))
    terms = _mul(_conj(l_col) if hermitian else l_col, b)
    below = ids > last
    total = (terms[0].masked_fill(~below, 0.0).sum(-2, keepdim=True),
             None if terms[1] is None else terms[1].masked_fill(~below, 0.0).sum(-2, keepdim=True))
    return _where(ids == row, _sub(_index(b, ..., slice(row, row + 1), slice(None)), total), b)


def ldl_solve_parts(ldr: torch.Tensor, ldi: Part, pivots: torch.Tensor, br: torch.Tensor, bi: Part,
                    hermitian: bool) -> tuple[torch.Tensor, Part]:
    """X with A X = B, A given by ``ldl_factor_parts``'s (LD, pivots) (..., n, n) and B (..., n, r),
    as ``torch.linalg.ldl_solve`` (LAPACK's ?sytrs / ?hetrs, uplo='L'): B's rows interchanged and
    eliminated with L's columns and D's blocks in the factorization's order, then substituted back
    with L^T (L^H) and interchanged in the reverse order."""
    hermitian = hermitian and ldi is not None  # a real L D L^T: conjugation changes nothing
    n = ldr.shape[-1]
    batch = torch.broadcast_shapes(ldr.shape[:-2], br.shape[:-2], pivots.shape[:-1])
    ld = (ldr.expand(*batch, n, n), None if ldi is None else ldi.expand(*batch, n, n))
    b = (br.expand(*batch, *br.shape[-2:]), None if bi is None else bi.expand(*batch, *br.shape[-2:]))
    pivots = pivots.expand(*batch, n).long()
    rows = (pivots.abs() - 1)  # the row interchanged at each step, 0-based
    # L D Y = B, stepping over D's blocks: 1x1 (pivot > 0), the first column of a 2x2 block
    # (pivot < 0, not consumed), or the second one (consumed, nothing to do)
    consumed = torch.zeros_like(pivots[..., 0], dtype=torch.bool)
    second = []
    for k in range(n):
        one = pivots[..., k] > 0
        first = ~one & ~consumed
        kk = torch.where(first, k + 1, k)
        swapped = _row_swap(b, kk, torch.where(one | first, rows[..., k], kk))
        stepped = _forward_one(swapped, ld, k, hermitian)
        if k + 1 < n:
            stepped = _where(first.view(*batch, 1, 1), _forward_two(swapped, ld, k, hermitian), stepped)
        b = _where((one | first).view(*batch, 1, 1), stepped, b)
        second.append(consumed)
        consumed = first
    # L^T X = Y (L^H X = Y) backwards: a 1x1 step or a 2x2 block's second column substitutes its
    # rows (k, and k-1 for a block) with the rows below, then interchanges k and the pivot's row
    for k in reversed(range(n)):
        one = pivots[..., k] > 0
        stepped = _back_substitute(b, ld, k, k, hermitian)
        if k > 0:
            block = _back_substitute(stepped, ld, k - 1, k, hermitian)
            stepped = _where(second[k].view(*batch, 1, 1), block, stepped)
        stepped = _row_swap(stepped, k, rows[..., k])
        b = _where((one | second[k]).view(*batch, 1, 1), stepped, b)
    return b
