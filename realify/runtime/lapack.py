"""Complex LAPACK factorizations and solves as real-interface ops on (re, im) pairs.

- ``realify::lu_factor_pairs(A, pivot) -> (LU, pivots, info)``   (aten.linalg_lu_factor_ex)
- ``realify::lu_solve_pairs(LU, pivots, B, left, adjoint) -> X``          (aten.linalg_lu_solve)
- ``realify::det_pairs(A) -> det``    (aten._linalg_det: its derivative holds at singular A too)

Complex operands and results are real ``(..., m, n, 2)`` tensors of (re, im) pairs;
``pivots`` and ``info`` are eager's int32 tensors. The kernel is the device's own complex factorization (LAPACK's
getrf on the CPU), so a compiled program runs it at eager's speed, and the graph around it holds
no complex dtype. Measured against the same factorization written in real arithmetic and
compiled by Inductor (docs/numerics.md, "LU"), the LAPACK call wins at every size by 2x to
5x at run time and by minutes of compile time. That real-arithmetic formulation
(realify/rules/lu.py) is what a runtime without LAPACK gets instead: realify.onnx writes this
op with it.

Each derivative is eager's: the backward op recomputes the op under torch.func.vjp, PyTorch's
own formula (the LU factorization's for square and rectangular A alike). Gradients follow
PyTorch's convention, ``dL/dRe + i dL/dIm`` as the pair ``(dL/dRe, dL/dIm)``.
"""

from __future__ import annotations

import torch

from .complex_lapack import complex_from_pairs, pairs_from_complex, pairs_result
from .eager_dispatch import eager_dispatch

__all__ = ["det_pairs", "lu_factor_pairs", "lu_solve_pairs"]


@torch.library.custom_op("realify::lu_factor_pairs", mutates_args=())
def lu_factor_pairs(A: torch.Tensor, pivot: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with eager_dispatch():
        LU, pivots, info = torch.linalg.lu_factor_ex(complex_from_pairs(A), pivot=pivot)
    return pairs_from_complex(LU), pivots, info


@lu_factor_pairs.register_fake
def _(A, pivot):
    *batch, m, n, _ = A.shape
    return (A.new_empty(A.shape), A.new_empty((*batch, torch.sym_min(m, n)), dtype=torch.int32),
            A.new_empty(batch, dtype=torch.int32))


def _eager_vjp(fn, inputs: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """The pairs gradients of ``fn``'s complex output with respect to its complex ``inputs``,
    given as pairs: eager's own derivative formulas. Autograd is off below a custom op's
    dispatch; torch.func.vjp brings its own."""
    with eager_dispatch():
        _, pullback = torch.func.vjp(fn, *[complex_from_pairs(x) for x in inputs])
        return [pairs_result(g) for g in pullback(*[complex_from_pairs(g) for g in grads])]


@torch.library.custom_op("realify::lu_factor_pairs_backward", mutates_args=())
def lu_factor_pairs_backward(A: torch.Tensor, grad: torch.Tensor, pivot: bool) -> torch.Tensor:
    (grad_A,) = _eager_vjp(lambda z: torch.linalg.lu_factor_ex(z, pivot=pivot).LU, [A], [grad])
    return grad_A


@lu_factor_pairs_backward.register_fake
def _(A, grad, pivot):
    return A.new_empty(A.shape)


def _lu_setup(ctx, inputs, output):
    A, ctx.pivot = inputs
    ctx.save_for_backward(A)


def _lu_backward(ctx, grad_LU, _grad_pivots, _grad_info):
    (A,) = ctx.saved_tensors
    return lu_factor_pairs_backward(A, grad_LU, ctx.pivot), None


@torch.library.custom_op("realify::lu_solve_pairs", mutates_args=())
def lu_solve_pairs(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, left: bool, adjoint: bool) -> torch.Tensor:
    with eager_dispatch():
        X = torch.linalg.lu_solve(complex_from_pairs(LU), pivots, complex_from_pairs(B), left=left, adjoint=adjoint)
        return pairs_from_complex(X)


@lu_solve_pairs.register_fake
def _(LU, pivots, B, left, adjoint):
    batch = torch.broadcast_shapes(LU.shape[:-3], pivots.shape[:-1], B.shape[:-3])
    return B.new_empty((*batch, *B.shape[-3:]))


@torch.library.custom_op("realify::lu_solve_pairs_backward", mutates_args=())
def lu_solve_pairs_backward(LU: torch.Tensor, pivots: torch.Tensor, B: torch.Tensor, grad: torch.Tensor, left: bool,
                            adjoint: bool) -> tuple[torch.Tensor, torch.Tensor]:
    def solve(lu, b):
        return torch.linalg.lu_solve(lu, pivots, b, left=left, adjoint=adjoint)

    grad_LU, grad_B = _eager_vjp(solve, [LU, B], [grad])
    return grad_LU, grad_B


@lu_solve_pairs_backward.register_fake
def _(LU, pivots, B, grad, left, adjoint):
    return LU.new_empty(LU.shape), B.new_empty(B.shape)


def _solve_setup(ctx, inputs, output):
    LU, pivots, B, *ctx.flags = inputs
    ctx.save_for_backward(LU, pivots, B)


def _solve_backward(ctx, grad):
    LU, pivots, B = ctx.saved_tensors
    grad_LU, grad_B = lu_solve_pairs_backward(LU, pivots, B, grad, *ctx.flags)
    return grad_LU, None, grad_B, None, None


@torch.library.custom_op("realify::det_pairs", mutates_args=())
def det_pairs(A: torch.Tensor) -> torch.Tensor:
    with eager_dispatch():
        return pairs_from_complex(torch.linalg.det(complex_from_pairs(A)))


@det_pairs.register_fake
def _(A):
    return A.new_empty((*A.shape[:-3], 2))


@torch.library.custom_op("realify::det_pairs_backward", mutates_args=())
def det_pairs_backward(A: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    # eager's formula: through a solve where A is invertible, an SVD where it is singular
    (grad_A,) = _eager_vjp(torch.linalg.det, [A], [grad])
    return grad_A


@det_pairs_backward.register_fake
def _(A, grad):
    return A.new_empty(A.shape)


def _det_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _det_backward(ctx, grad):
    (A,) = ctx.saved_tensors
    return det_pairs_backward(A, grad)


def _no_second_derivative(ctx, *grads):
    raise NotImplementedError(
        "realify computes the first derivative of its LAPACK ops only (eager's formulas, "
        "realify/runtime/lapack.py); a second derivative through linalg.lu_factor, lu, det, slogdet, "
        "lu_solve or solve_triangular is not supported: compute it in eager PyTorch")


lu_factor_pairs.register_autograd(_lu_backward, setup_context=_lu_setup)
lu_solve_pairs.register_autograd(_solve_backward, setup_context=_solve_setup)
det_pairs.register_autograd(_det_backward, setup_context=_det_setup)
for _backward_op in (lu_factor_pairs_backward, lu_solve_pairs_backward, det_pairs_backward):
    _backward_op.register_autograd(_no_second_derivative, setup_context=lambda ctx, inputs, output: None)
