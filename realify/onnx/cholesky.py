"""The translation of ``aten.linalg_cholesky_ex`` on a real matrix: ONNX has no Cholesky, so
the factorization is unrolled column by column in elementary operators (what realify's rule
for a complex Cholesky, the real factor of its embedding, is written with)."""

from __future__ import annotations

from .graph_helpers import _int32, _ints
from .optional_imports import op


def linalg_cholesky_ex(A, upper: bool = False, check_errors: bool = False):
    """aten.linalg_cholesky_ex on a real (..., n, n) matrix of static n: (L, info), A = L L^T
    (upper: U^T U, U = L^T), unrolled column by column (outer-product form) in elementary ops.

    Column j of L is the first column of the trailing matrix S_j divided by sqrt(S_j[0, 0]),
    and S_{j+1} = S_j[1:, 1:] - l l^T of its other entries: about 8 ops per column, the flops of
    LAPACK's potrf (n^3 / 3 multiply-adds), batched over the leading dims, which may be dynamic.
    Every ordering of Cholesky's sums is backward stable with the same bound (Higham, Accuracy
    and Stability of Numerical Algorithms, Theorem 10.3: L L^T = A + dA, |dA| <= c n u |L| |L^T|).
    Meant for the sizes realify's rules factor (2n for an n x n complex matrix) up to a few
    hundred; the graph grows linearly with n.

    As LAPACK, it reads one triangle. info is the order of the first leading minor whose pivot
    is not positive (or NaN), 0 if none; past it L holds NaN, where LAPACK leaves its partial
    factor (eager documents neither). ``check_errors`` cannot raise in ONNX: the info output is
    the only report, and eager's check of it is dropped (:func:`_without_error_checks`)."""
    n = A.shape[-1]
    if not isinstance(n, int):
        raise NotImplementedError("linalg_cholesky_ex to ONNX needs a static matrix size (the factorization "
                                  "is unrolled column by column); leading batch dims may be dynamic")
    rank = len(A.shape)
    swap = [*range(rank - 2), rank - 1, rank - 2]  # transpose of the last two dims
    # the symmetric matrix LAPACK sees: one triangle and its mirror
    S = op.Add(op.Trilu(A, upper=int(upper)), op.Transpose(op.Trilu(A, _ints([1 if upper else -1]), upper=int(upper)),
                                                          perm=swap))
    zero = op.CastLike(op.Constant(value_float=0.0), A)
    no_failure = _int32(0)
    info = no_failure
    columns = []
    for j in range(n):
        column = op.Slice(S, _ints([0]), _ints([1]), _ints([-1]))  # (..., n - j, 1)
        pivot = op.Slice(column, _ints([0]), _ints([1]), _ints([-2]))  # (..., 1, 1)
        # not pivot > 0: nonpositive or NaN, as potrf tests it; the first such j + 1 is info
        failed = op.Squeeze(op.Not(op.Greater(pivot, zero)), _ints([-2, -1]))
        info = op.Where(op.And(failed, op.Equal(info, no_failure)), _int32(j + 1), info)
        factor_column = op.Div(column, op.Sqrt(pivot))
        columns.append(op.Pad(factor_column, _ints([j, 0]), zero, _ints([-2])) if j else factor_column)
        if j + 1 < n:
            rest = op.Slice(factor_column, _ints([1]), _ints([n - j]), _ints([-2]))
            trailing = op.Slice(S, _ints([1, 1]), _ints([n - j, n - j]), _ints([-2, -1]))
            S = op.Sub(trailing, op.MatMul(rest, op.Transpose(rest, perm=swap)))
    L = op.Concat(*columns, axis=-1) if n > 1 else columns[0]
    # info has the batch shape: broadcast the scalar where no pivot was looked at (n == 0 aside)
    return (op.Transpose(L, perm=swap) if upper else L), info
