"""ONNX export of real-only programs made by :func:`realify.export`.

The exported graph is real everywhere, so ``torch.onnx.export`` translates it with its own
tables, except for realify's FFT ops (:mod:`realify.runtime.ops`) on (re, im) pairs. Their translations use
ONNX ``DFT`` (opset 20: ``axis`` is an input), which works on a trailing dim of 2
``[re, im]`` (or 1 for a real signal), the same interleaved layout the export boundary uses.

Normalization follows aten's codes: 0 none, 1 by ``1/sqrt(n)``, 2 by ``1/n``, whatever the
direction, with ``n`` the product of the transformed signal lengths. ONNX's inverse DFT
already divides by each axis length, so inverse transforms are rescaled by ``n * scale``.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnxscript import opset20 as op

from .engine.size_conditions import SizeConditions
from .errors import NoOnnxFormError
from .export import export
from .rules import bunch_kaufman, householder, jacobi, lu, reductions, singular
from .rules._derivative import decompositions as pointwise_decompositions
from .rules.linalg import cholesky_parts, hermitian_parts
from .runtime import lapack, ops  # noqa: F401  (registers the realify:: ops)
from .runtime.complex_lapack import pairs_op
from .runtime.expm1 import SERIES_BOUND, series_coefficients

log = logging.getLogger("realify")

# torch.onnx's default opset in torch 2.13 (torch.onnx._constants.ONNX_DEFAULT_OPSET)
OPSET = 20


def onnx_translation_table() -> dict[Callable, Callable]:
    """``custom_translation_table`` entries for realify's custom ops, for ``torch.onnx.export``."""
    return {
        torch.ops.realify.fft_c2c.default: fft_c2c,
        torch.ops.realify.fft_r2c.default: fft_r2c,
        torch.ops.realify.fft_c2r.default: fft_c2r,
        torch.ops.realify.fft_c2c_pairs.default: fft_c2c_pairs,
        torch.ops.realify.fft_r2c_pairs.default: fft_r2c_pairs,
        # realify's rules read signs of zeros (branch cuts, C99 special values): the default
        # translations have no copysign and a signbit that is false for -0.0
        torch.ops.aten.copysign.Tensor: copysign,
        torch.ops.aten.signbit.default: signbit,
        torch.ops.prims.signbit.default: signbit,
        # |z| = hypot(re, im) must not overflow where re^2 + im^2 would
        torch.ops.aten.hypot.default: hypot,
        torch.ops.prims.hypot.default: hypot,
        # ONNX has no Expm1, Log1p or Atan2: the default translations cancel near 0
        # (Exp(x) - 1, Log(1 + x)) and give atan2(+0, -1) = -pi, atan2(y, -0) = -pi/2
        torch.ops.aten.expm1.default: expm1,
        torch.ops.aten.log1p.default: log1p,
        torch.ops.aten.atan2.default: atan2,
        # ONNX Runtime's CPU Where returns +0 where it selects a -0 from its second input
        torch.ops.aten.where.self: where,
        # istft's overlap-add: torch.onnx's translation is one ScatterND per frame position,
        # with int32 indices ONNX Runtime refuses
        torch.ops.aten.unfold_backward.default: unfold_backward,
        # a write autograd does not see (realify/engine/grad_semantics.py): the new value; ONNX has no
        # gradients
        torch.ops.realify.straight_through.default: straight_through,
        # ONNX has no Cholesky: the complex rule's real factorization (realify/rules/linalg.py),
        # unrolled
        torch.ops.aten.linalg_cholesky_ex.default: linalg_cholesky_ex,
    }


def to_onnx(
    program: torch.export.ExportedProgram | torch.nn.Module | Callable,
    args: Sequence[Any] = (),
    path: str | os.PathLike | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    truncate_double: bool = False,
    custom_translation_table: dict[Callable, Callable] | None = None,
    **onnx_options: Any,
) -> torch.onnx.ONNXProgram:
    """Export a complex program to ONNX through :func:`realify.export`.

    ``program`` is an ExportedProgram made by :func:`realify.export` (``args`` are then not
    needed), or a module/function exported first with ``args``, ``kwargs``,
    ``dynamic_shapes`` and ``truncate_double``. Complex inputs and outputs are real
    ``(*shape, 2)`` tensors in the ONNX model. The result is ``torch.onnx.export``'s
    ONNXProgram (``.model_proto``, ``.save(path)``); it is saved to ``path`` when given.
    Other keyword arguments go to ``torch.onnx.export`` (``opset_version``, ``optimize``, ...).
    Inputs keep the program's argument names; outputs are named ``output`` (one) or
    ``output_0``, ``output_1``, ... unless ``output_names`` says otherwise; dynamic dimensions
    take the names of their ``torch.export.Dim`` (``Dim("seq")`` is ``seq`` in the model).
    """
    if isinstance(program, torch.export.ExportedProgram):
        ep = program
    else:
        ep = export(program, args, kwargs, dynamic_shapes=dynamic_shapes, truncate_double=truncate_double)
    # realify::pointwise carries a derivative formula, which ONNX has no use for: its kernel's
    # real ops go to torch.onnx instead
    exported = ep
    placeholders = [n.meta.get("val") for n in ep.graph.find_nodes(op="placeholder")]
    with SizeConditions(placeholders) as conditions:
        ep = _without_error_checks(ep).run_decompositions({**pointwise_decompositions(), **linalg_decompositions()})
    conditions.refuse(exported, _needs_static_sizes)
    _check_onnx_forms(ep)
    table = {**onnx_translation_table(), **(custom_translation_table or {})}
    onnx_options.setdefault("opset_version", OPSET)
    onnx_options.setdefault("verbose", False)
    outputs = len(ep.graph_signature.user_outputs)
    onnx_options.setdefault("output_names", ["output"] if outputs == 1 else [f"output_{i}" for i in range(outputs)])
    optimize = onnx_options.pop("optimize", None)
    onnx_program = torch.onnx.export(ep, (), dynamo=True, custom_translation_table=table, optimize=False,
                                     **onnx_options)
    assert onnx_program is not None  # the dynamo exporter always returns its program
    _optimize(onnx_program, optimize)
    if dynamic_shapes is not None and not isinstance(program, torch.export.ExportedProgram):
        # the exported program knows its dynamic dims by symbol (s32); the ONNX model's
        # inputs (one per tensor input, complex ones as pairs) take the names of the Dims (one
        # Dim on several inputs is one symbol: torch warns that it names it once, as wanted)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="# The axis name")
            onnx_program._rename_dynamic_axes(dynamic_shapes)
    if path is not None:
        onnx_program.save(os.fspath(path))
        log.info("wrote %s", os.fspath(path))
    return onnx_program


# onnxscript's optimizer matches its rewrite rules against the whole graph for each node: its
# time grows with the square of the node count (80 s for the 2,700 nodes of a 6 x 6
# determinant's unrolled LU, against 6 s for the export itself). Above this many nodes, only
# its constant folding and dead-node removal run.
REWRITE_NODE_LIMIT = 2000


def _optimize(onnx_program: torch.onnx.ONNXProgram, optimize: bool | None) -> None:
    """onnxscript's optimizer on the program (``optimize`` True, or None and at most
    :data:`REWRITE_NODE_LIMIT` nodes); constant folding alone where None and larger."""
    import onnxscript.optimizer

    if optimize is None:
        optimize = len(onnx_program.model.graph) <= REWRITE_NODE_LIMIT
        if not optimize:
            onnxscript.optimizer.fold_constants(onnx_program.model)
            onnxscript.optimizer.remove_unused_nodes(onnx_program.model)
    if optimize:
        onnx_program.optimize()


# ---- translations of the realify:: FFT ops (onnxscript, traced at export time) -------------


def fft_c2c_pairs(x, dim: Sequence[int], normalization: int, forward: bool):
    """realify::fft_c2c_pairs -> DFT over each dim of the ``(*shape, 2)`` pairs (DFT's own
    complex layout), then the scale.

    X[k] = scale * sum_n x[n] exp(-+2 pi i k n / N) per dim; ONNX's inverse DFT has the
    1/N of each dim built in, so the inverse result is multiplied by n * scale."""
    dims = _complex_dims(x, dim)
    z = x
    for d in dims:
        z = op.DFT(z, None, _axis(d), inverse=0 if forward else 1, onesided=0)
    return _normalize(z, _length(x, dims), normalization, inverse=not forward)


def fft_c2c(x, dim: Sequence[int], normalization: int, forward: bool):
    """realify::fft_c2c -> :func:`fft_c2c_pairs`, split into planar (re, im)."""
    return _unstack(fft_c2c_pairs(x, dim, normalization, forward))


def fft_r2c_pairs(x, dim: Sequence[int], normalization: int, onesided: bool):
    """realify::fft_r2c_pairs -> a real DFT on the last dim (onesided: bins 0 .. N//2), then
    full DFTs on the other dims, as pairs.

    X[k] = scale * sum_n x[n] exp(-2 pi i k n / N); scale = 1, 1/sqrt(n), 1/n for codes 0/1/2."""
    dims = _wrapped(x, dim)
    n = _length(x, dims)
    z = op.Unsqueeze(x, _ints([-1]))  # a real signal: trailing dim of 1
    z = op.DFT(z, None, _axis(dims[-1]), inverse=0, onesided=1 if onesided else 0)
    for d in dims[:-1]:
        z = op.DFT(z, None, _axis(d), inverse=0, onesided=0)
    return _normalize(z, n, normalization, inverse=False)


def fft_r2c(x, dim: Sequence[int], normalization: int, onesided: bool):
    """realify::fft_r2c -> :func:`fft_r2c_pairs`, split into planar (re, im)."""
    return _unstack(fft_r2c_pairs(x, dim, normalization, onesided))


def fft_c2r(x, dim: Sequence[int], normalization: int, last_dim_size: int):
    """realify::fft_c2r -> inverse DFTs of the ``(*shape, 2)`` pairs on the leading dims,
    Hermitian completion of the last dim, inverse DFT, real part.

    x[n] = scale * sum_k X[k] exp(2 pi i k n / N), N = last_dim_size, with the bins the onesided
    input lacks filled by symmetry: X[N - k] = conj(X[k]) for k = 1 .. N - (N//2 + 1). The
    imaginary parts of X[0] (and of X[N/2] for even N) only reach the imaginary part of x,
    which is dropped, as aten's c2r ignores them."""
    dims = _complex_dims(x, dim)
    z = x
    for d in dims[:-1]:
        z = op.DFT(z, None, _axis(d), inverse=1, onesided=0)
    last, size = dims[-1], last_dim_size
    half = size // 2 + 1
    head = op.Slice(z, _ints([0]), _ints([half]), _ints([last]))
    # bins N - half .. 1, in that order (step -1; ``ends`` is exclusive)
    mirrored = op.Slice(z, _ints([size - half]), _ints([0]), _ints([last]), _ints([-1]))
    mirrored = op.Mul(mirrored, op.CastLike(op.Constant(value_floats=[1.0, -1.0]), mirrored))  # conj
    full = op.Concat(head, mirrored, axis=last)
    out = op.DFT(full, None, _axis(last), inverse=1, onesided=0)
    out = op.Squeeze(op.Slice(out, _ints([0]), _ints([1]), _ints([-1])), _ints([-1]))  # real part
    n = op.Mul(_length(x, dims[:-1]), op.Constant(value_int=size)) if len(dims) > 1 else op.Constant(value_int=size)
    return _normalize(out, n, normalization, inverse=True)


# ---- sign of zero ------------------------------------------------------------------------------


def signbit(x):
    """signbit(x) = x < 0, or x == 0 and 1/x < 0 (1/-0.0 = -inf). ONNX (opset 20) cannot read
    the sign bit of a NaN: signbit(-nan) is False here, True in PyTorch."""
    zero = op.CastLike(op.Constant(value_float=0.0), x)
    return op.Or(op.Less(x, zero), _is_negative_zero(x))


def copysign(a, b):
    """copysign(a, b) = -|a| where signbit(b), else |a|."""
    magnitude = op.Abs(a)
    return _negated_where(magnitude, signbit(op.CastLike(b, a)))


def straight_through(value, source):
    """``realify::straight_through(value, source)`` is ``value``; only its gradient reads ``source``."""
    return op.Identity(value)


def hypot(x, y):
    """hypot(x, y) = m * sqrt(1 + (n/m)^2) with m = max(|x|, |y|), n = min(|x|, |y|): no overflow
    or underflow of x^2 + y^2. C99: inf if either is infinite (even with a NaN), else NaN if
    either is NaN; 0 when both are 0."""
    # every selection here is of nonnegative values or +inf: plain Where cannot lose a -0
    ax, ay = op.Abs(x), op.Abs(op.CastLike(y, x))
    big, small = op.Max(ax, ay), op.Min(ax, ay)
    zero, one = op.CastLike(op.Constant(value_float=0.0), x), op.CastLike(op.Constant(value_float=1.0), x)
    ratio = op.Div(small, op.Where(op.Equal(big, zero), one, big))
    result = op.Mul(big, op.Sqrt(op.Add(one, op.Mul(ratio, ratio))))
    result = op.Where(op.Or(op.IsNaN(ax), op.IsNaN(ay)), op.Add(ax, ay), result)
    infinite = op.Or(op.IsInf(ax), op.IsInf(ay))
    return op.Where(infinite, op.CastLike(op.Constant(value_float=float("inf")), x), result)


def expm1(x):
    """expm1 with no cancellation near 0: Taylor's series below ln(2)/2, Exp(x) - 1 above
    (realify/runtime/expm1.py; the default translation's Exp(x) - 1 gives expm1(1e-8) = 0 in float32)."""
    inner, *coefficients = series_coefficients(x.dtype == ir.DataType.DOUBLE)
    series = _constant_like(inner, x)
    for c in coefficients:
        series = op.Add(op.Mul(x, series), _constant_like(c, x))
    one = op.CastLike(op.Constant(value_float=1.0), x)
    near_zero = op.Less(op.Abs(x), op.CastLike(op.Constant(value_float=SERIES_BOUND), x))
    return where(near_zero, op.Mul(x, series), op.Sub(op.Exp(x), one))


def where(condition, x, y):
    """Where(condition, x, y), with the sign of a selected zero on every runtime. Every
    selection in this module's translations that may pick a -0 goes through it.

    ONNX Runtime's CPU Where merges its two selections by value, so a -0 taken from ``x``
    can come out +0 (``Where(True, -0.0, 1.0) = 0.0``; a -0 from ``y`` is kept). realify's
    rules select signed zeros on branch cuts: through ONNX Runtime, ``asin``, ``acos``,
    ``atan``, their hyperbolic forms and ``log`` came out on the wrong side of their cuts
    (``acos(2 - 0i)`` gave ``-1.317i`` for ``+1.317i``). The selection is negated exactly
    where it should be -0 (the side selected holds a -0) and is +0, so a runtime whose Where
    keeps -0 gets the same values. Integer selections (an index chosen per row) have no -0."""
    x = op.CastLike(x, y)
    selected = op.Where(condition, x, y)
    if y.dtype is not None and not y.dtype.is_floating_point():
        return selected
    should_be_negative_zero = op.Or(op.And(condition, _is_negative_zero(x)),
                                    op.And(op.Not(condition), _is_negative_zero(y)))
    zero = op.CastLike(op.Constant(value_float=0.0), y)
    is_positive_zero = op.And(op.Equal(selected, zero), op.Greater(op.Reciprocal(selected), zero))
    return _negated_where(selected, op.And(should_be_negative_zero, is_positive_zero))


def _negated_where(x, mask):
    """-x where ``mask``, x elsewhere, without a Where: ``x * (1 - 2 mask)`` (exact: a
    multiplication by ±1; -0 for +0, nan stays nan)."""
    one, two = op.CastLike(op.Constant(value_float=1.0), x), op.CastLike(op.Constant(value_float=2.0), x)
    return op.Mul(x, op.Sub(one, op.Mul(two, op.CastLike(mask, x))))


def _is_negative_zero(x):
    zero = op.CastLike(op.Constant(value_float=0.0), x)
    return op.And(op.Equal(x, zero), op.Less(op.Reciprocal(x), zero))


def log1p(x):
    """log1p(x) = x log(u) / (u - 1) with u = 1 + x (Goldberg, "What every computer scientist
    should know about floating-point arithmetic", Theorem 4: the rounding of u cancels between
    log u and u - 1); x where u == 1 (keeps -0 and tiny x), log u where u is 0 or inf."""
    one = op.CastLike(op.Constant(value_float=1.0), x)
    u = op.Add(one, x)
    log_u = op.Log(u)
    result = where(op.Equal(u, one), x, op.Div(op.Mul(x, log_u), op.Sub(u, one)))
    saturated = op.Or(op.IsInf(u), op.Equal(u, op.CastLike(op.Constant(value_float=0.0), x)))
    return where(saturated, log_u, result)


def atan2(y, x):
    """atan2(y, x) with C99's signed zeros and infinities:
    atan(y/x), plus copysign(pi, y) where x < 0 or x = -0 (signbit(x));
    where y and x are both zero: y if x is +0, copysign(pi, y) if x is -0;
    where both are infinite: copysign(pi/4, y) if x > 0, copysign(3 pi/4, y) if x < 0.
    NaN in either gives NaN (y/x is NaN and no case above applies)."""
    x = op.CastLike(x, y)
    zero = op.CastLike(op.Constant(value_float=0.0), y)
    half_turn = copysign(_constant_like(math.pi, y), y)
    base = op.Atan(op.Div(y, x))
    result = where(signbit(x), op.Add(base, half_turn), base)
    both_zero = op.And(op.Equal(y, zero), op.Equal(x, zero))
    result = where(both_zero, where(signbit(x), half_turn, y), result)
    # nonzero constants: a plain Where
    corner = op.Where(op.Greater(x, zero), _constant_like(math.pi / 4, y), _constant_like(3 * math.pi / 4, y))
    both_infinite = op.And(op.IsInf(y), op.IsInf(x))
    return where(both_infinite, copysign(corner, y), result)


def unfold_backward(frames, input_sizes: Sequence[Any], dim: int, size: int, step: int):
    """The overlap-add of ``size``-long windows taken every ``step`` along ``dim`` (istft's,
    and the gradient of ``unfold``): ``out[..., i*step + k, ...] += frames[..., i, ..., k]``.

    With each window zero-padded to ``r*step`` (``r = ceil(size/step)``) and cut into ``r``
    chunks of ``step``, chunk ``j`` of window ``i`` lands on block ``i + j`` of the output: so
    the output's blocks are the sum over ``j`` of chunk ``j`` of every window, shifted by ``j``
    blocks (a Pad each), ``r`` additions in all; then the length is fitted to the input's
    (a Pad, negative where the blocks run past it)."""
    rank = len(input_sizes) + 1  # the frames: input_sizes with dim -> frame count, then size
    dim %= rank - 1
    r = -(-size // step)
    # frames to (..., frame, window): the frame axis next to last
    order = [a for a in range(rank - 1) if a != dim] + [dim, rank - 1]
    x = op.Transpose(frames, perm=order)
    x = op.Pad(x, _ints([0] * rank + [0] * (rank - 1) + [r * step - size]))
    x = op.Reshape(x, _ints([0] * (rank - 1) + [r, step]))
    total = None
    for j in range(r):
        chunk = op.Squeeze(op.Slice(x, _ints([j]), _ints([j + 1]), _ints([rank - 1])), _ints([rank - 1]))
        before, after = [0] * rank, [0] * rank
        before[rank - 2], after[rank - 2] = j, r - 1 - j
        shifted = op.Pad(chunk, _ints(before + after))
        total = shifted if total is None else op.Add(total, shifted)
    signal = op.Reshape(total, _ints([0] * (rank - 2) + [-1]))  # blocks -> samples
    length = input_sizes[dim]
    if isinstance(length, int):
        length = _ints([length])
    else:  # a symbolic size: the input's own dimension, as a 1-element int64 tensor
        length = op.Reshape(op.Cast(length, to=ir.DataType.INT64), _ints([1]))
    excess = op.Sub(length, op.Gather(op.Shape(signal), _ints([rank - 2]), axis=0))
    signal = op.Pad(signal, op.Concat(_ints([0] * (2 * rank - 3)), excess, axis=0))
    back = [0] * (rank - 1)  # the sample axis (last now) returns to dim
    for position, axis in enumerate(order[:-1]):
        back[axis] = position
    return op.Transpose(signal, perm=back)


# ---- Cholesky ------------------------------------------------------------------------------


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


# The ops realify's rules run on pairs (realify/runtime/complex_lapack.py) that realify.onnx does
# not write, and why
NO_ONNX_FORM = {
    **dict.fromkeys(["prod_dim_int", "cumprod"],
                    "a complex product along a dynamic dim runs eager's kernel (its real form is unrolled over the "
                    "entries, in eager's order); export with that dim static"),
    "linalg_eig": "a general (non-Hermitian) eigenproblem has no practical real-arithmetic form of fixed size: "
                  "its eigenvalues are complex and its QR iteration needs shifts and deflation decided by the data; "
                  "for a Hermitian or real symmetric matrix, linalg.eigh (or eigvalsh) exports",
}


def _needs_static_sizes(conditions: str) -> NoOnnxFormError:
    return NoOnnxFormError(
        "an op of the program with dynamic sizes",
        "its real-arithmetic form for ONNX (an LU, a substitution or a factorization unrolled over the matrix's "
        f"rows) is written for one size, and holds only where these conditions hold:\n{conditions}\nExport with "
        "the matrix dims static (leading batch dims may stay dynamic)")


def _check_onnx_forms(ep: torch.export.ExportedProgram) -> None:
    """NoOnnxFormError for the first op on pairs left in ``ep`` that ONNX cannot run, and for an
    ``as_strided`` of a view with strides or an offset of its own (a part of pairs, a slice):
    ONNX tensors have no storage, and torch.onnx reads the view as if it were its own
    contiguous storage, which gives other elements than eager's, silently."""
    for node in ep.graph.find_nodes(op="call_function", target=torch.ops.aten.as_strided.default):
        source = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if isinstance(source, torch.Tensor) and not (source.is_contiguous() and source.storage_offset() == 0):
            raise NoOnnxFormError("torch.as_strided of a strided view (here of a complex value's part)",
                                  "ONNX tensors have no storage for its strides to address; call as_strided on a "
                                  "contiguous tensor (x.contiguous()), or index with view ops (slicing, unfold)")
    if ep.graph.find_nodes(op="call_function", target=torch.ops.aten.linalg_matrix_exp.default):
        raise NoOnnxFormError("torch.linalg.matrix_exp",
                              "torch.onnx has no form of the matrix exponential (of real matrices either; realify "
                              "computes a complex one as the real exponential of its real embedding); compute it "
                              "outside the exported program, or export a fixed-degree Taylor or Pade polynomial of "
                              "your own where the matrix norm is bounded")
    for node in ep.graph.nodes:
        name = getattr(node.target, "_opname", "")
        if node.op == "call_function" and getattr(node.target, "namespace", "") == "realify" \
                and name.endswith("_pairs"):
            base = name.removesuffix("_pairs").removesuffix("_atol_rtol_tensor")
            if base in NO_ONNX_FORM:
                raise NoOnnxFormError(f"torch.{base.lstrip('_').replace('_', '.', 1)} (realify::{name})",
                                      NO_ONNX_FORM[base])


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
# torch.onnx writes column by column (linalg_cholesky_ex above).


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


def _int32(value: int):
    return op.Constant(value=ir.tensor(np.array(value, dtype=np.int32)))


def _constant_like(value: float, x):
    """``value`` in x's dtype, rounded once from float64 (``value_float`` would round to float32)."""
    return op.CastLike(op.Constant(value=ir.tensor(np.array(value, dtype=np.float64))), x)


def _wrapped(x, dim: Sequence[int]) -> list[int]:
    rank = len(x.shape)
    return [d % rank for d in dim]


def _complex_dims(pairs, dim: Sequence[int]) -> list[int]:
    """``dim`` of the complex value held as ``(*shape, 2)`` pairs, wrapped by its rank."""
    rank = len(pairs.shape) - 1
    return [d % rank for d in dim]


def _ints(values: list[int]):
    return op.Constant(value_ints=values)


def _axis(d: int):
    return op.Constant(value_int=d)  # DFT-20's axis: a scalar int64 input


def _unstack(z):
    """``(*shape, 2)`` pairs -> the planar (re, im) outputs of the realify:: FFT ops."""
    re, im = op.Split(z, axis=-1, num_outputs=2)
    return op.Squeeze(re, _ints([-1])), op.Squeeze(im, _ints([-1]))


def _length(x, dims: Sequence[int]):
    """n: the product of x's sizes over ``dims`` (an int64 scalar, computed at run time so
    dynamic sizes work)."""
    sizes = op.Gather(op.Shape(x), _ints(list(dims)), axis=0)
    return op.ReduceProd(sizes, keepdims=0)


def _normalize(z, n, normalization: int, inverse: bool):
    """Multiply the DFT result by (desired scale) / (ONNX's own scale):
    forward: ONNX scale 1, so 1, 1/sqrt(n), 1/n for codes 0, 1, 2;
    inverse: ONNX scale 1/n, so n, sqrt(n), 1 for codes 0, 1, 2."""
    n = op.CastLike(n, z)
    if inverse:
        if normalization == 0:
            return op.Mul(z, n)
        if normalization == 1:
            return op.Mul(z, op.Sqrt(n))
        return z
    if normalization == 1:
        return op.Div(z, op.Sqrt(n))
    if normalization == 2:
        return op.Div(z, n)
    return z
