"""Products: mm, bmm, mv, dot, vdot, outer products, the add* (GEMM with alpha/beta) family, cross;
solves, inverses and the Cholesky factorization (LAPACK on pairs); the matrix exponential through
the real embedding, and the embedded Cholesky realify.onnx writes.

Every complex product here is a *bilinear* real product ``⋆`` (mm, bmm, mv, dot, outer, cross,
...) applied to planar parts, through one helper, :func:`complex_product`, in the textbook
form ``(Ar + Ai i) ⋆ (Br + Bi i) = (Ar⋆Br - Ai⋆Bi) + (Ar⋆Bi + Ai⋆Br) i``. A real operand (no
imaginary part) costs two real products: ``A ⋆ (Br + Bi i) = A⋆Br + (A⋆Bi) i``.

Whether a matrix-matrix product spends three real products instead (Gauss: ``Im = (Ar+Ai)⋆
(Br+Bi) - Ar⋆Br - Ai⋆Bi``) is decided on the traced graph (realify/passes/gauss.py,
``realify.config.gemm_multiplications``), not here; docs/numerics.md ("Complex GEMM: 3M vs
4M") derives the error bound of each form.

Composite ops (matmul, einsum, linear, tensordot, inner, kron, outer, multi_dot, vecdot)
are not registered: PyTorch lowers them to the ops below plus views and ``mul``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..runtime.complex_tensor import ComplexTensor
from . import register
from ._algebra import cmul, complex_product, padd, pneg
from ._operands import parts, promoted
from .factorizations import lapack_rule

aten = torch.ops.aten
Part = Any
RealProduct = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _scale(p: tuple[Part, Part], s: Any) -> tuple[Part, Part]:
    # s (p_re + p_im i), s a real or complex Python scalar
    if s is None or s == 1:
        return p
    return cmul(p[0], p[1], *parts(s))


def _product_rule(product: RealProduct, conj_self: bool = False) -> Callable:
    """Rule for ``self ⋆ other`` (``conj(self) ⋆ other`` with ``conj_self``)."""

    @promoted("self", "other")
    def rule(self, other):
        sr, si = self
        if conj_self:
            # conj(a + bi) = a - bi
            si = pneg(si)
        return complex_product(product, (sr, si), other)

    rule.__name__ = f"complex_{getattr(product, '__name__', 'product')}"
    return rule


def _add_product_rule(product: RealProduct) -> Callable:
    """Rule for ``beta * self + alpha * (x ⋆ y)`` (addmm, addmv, addr, baddbmm, addbmm).

    As in eager (BLAS), ``beta == 0`` ignores ``self`` entirely, so NaN/inf there do not
    propagate; alpha and beta may be complex scalars.
    """

    @promoted("self", "x", "y")
    def rule(self, x, y, *, beta=1, alpha=1):
        # alpha (x ⋆ y), planar
        pr, pi = _scale(complex_product(product, x, y), alpha)
        if beta != 0:
            # + beta self
            sr, si = _scale(self, beta)
            pr, pi = padd(sr, pr), padd(si, pi)
        return pr, pi

    rule.__name__ = f"complex_add_{getattr(product, '__name__', 'product')}"
    return rule


def _batched_mm_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # sum_b x[b] @ y[b] as one GEMM: (n, b*m) @ (b*m, p)
    b, n, m = x.shape
    return torch.mm(x.transpose(0, 1).reshape(n, b * m), y.reshape(b * m, y.shape[-1]))


_batched_mm_sum.__name__ = "addbmm"


mm, bmm = torch.mm, torch.bmm
register(aten.mm.default)(_product_rule(mm))
register(aten.bmm.default)(_product_rule(bmm))
register(aten.mv.default)(_product_rule(torch.mv))
register(aten.dot.default)(_product_rule(torch.dot))
# vdot(a, b) = sum conj(a_k) b_k
register(aten.vdot.default)(_product_rule(torch.dot, conj_self=True))

register(aten.addmm.default)(_add_product_rule(mm))
register(aten.baddbmm.default)(_add_product_rule(bmm))
register(aten.addmv.default)(_add_product_rule(torch.mv))
register(aten.addr.default)(_add_product_rule(torch.outer))
register(aten.addbmm.default)(_add_product_rule(_batched_mm_sum))


@register(aten._trilinear.default)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    # nn.Bilinear's x1ᵀ W x2: sum over sumdim of i1 * i2 * i3, each unsqueezed at its expand
    # dims (one rank, where they broadcast), written as one einsum, whose complex products
    # are the GEMMs above rather than a broadcast product; unroll_dim only orders ATen's loops
    dims = range(i1.dim() + len(expand1))
    letter = {d: chr(ord("a") + d) for d in dims}

    def subscript(omitted):
        return "".join(letter[d] for d in dims if d not in omitted)

    equation = f"{subscript(expand1)},{subscript(expand2)},{subscript(expand3)}->{subscript(sumdim)}"
    return torch.einsum(equation, i1, i2, i3)


@register(aten.linalg_cross.default)
@promoted("self", "other")
def linalg_cross(self, other, *, dim=-1):
    # (a x b)_k = a_{k+1} b_{k+2} - a_{k+2} b_{k+1}, each term a complex product
    def cross(x, y):
        return torch.linalg.cross(x, y, dim=dim)

    return complex_product(cross, self, other)


# ---- the real embedding ----------------------------------------------------------------------
# A = Ar + i Ai acts on (xr, xi) like the real 2n x 2n matrix E(A) = [[Ar, -Ai], [Ai, Ar]],
# unitarily similar to diag(A, conj(A)): the same norm and condition number as A.


def real_embedding(a):
    return embed_parts(*parts(a))


def embed_parts(ar, ai):
    """E(A) = [[Ar, -Ai], [Ai, Ar]] of A = ar + i ai (``ai`` None for a real A)."""
    ai = torch.zeros_like(ar) if ai is None else ai
    top = torch.cat([ar, -ai], dim=-1)
    bottom = torch.cat([ai, ar], dim=-1)
    return torch.cat([top, bottom], dim=-2)


def hermitian_parts(ar, ai, upper: bool):
    """The parts of the Hermitian matrix that LAPACK's Hermitian routines (potrf, heevd) see
    in ``ar + i ai`` (``ai`` None for a real matrix): one triangle and the real part of the
    diagonal, H = T + T^H + diag(Re diag A), T the strict lower (``upper``: upper) triangle.
    The other triangle and the diagonal's imaginary part never reach H, even as NaN (triu/tril
    select, they do not multiply)."""
    hr = _strict_triangle(ar, upper) + _strict_triangle(ar, upper).mT + torch.diag_embed(ar.diagonal(dim1=-2, dim2=-1))
    hi = torch.zeros_like(hr) if ai is None else _strict_triangle(ai, upper) - _strict_triangle(ai, upper).mT
    return hr, hi


def _strict_triangle(x: torch.Tensor, upper: bool) -> torch.Tensor:
    """The strict upper (``upper``) or lower triangle of x, the rest zero."""
    return x.triu(1) if upper else x.tril(-1)


def interleaved_embedding(ar, ai):
    """E(A) with each entry a + bi as the 2 x 2 block [[a, -b], [b, a]] at rows and columns
    2i, 2i+1 (``real_embedding`` keeps the parts in blocks of n instead). The same map up to a
    permutation of rows and columns, so still a ring homomorphism with E(A^H) = E(A)^T, and it
    keeps triangles triangular: E(L) is lower triangular where L is."""
    # (..., n, m, 2) rows [a, -b] and [b, a], stacked to (..., n, 2, m, 2) = (2n, 2m) interleaved
    blocks = torch.stack([torch.stack([ar, -ai], dim=-1), torch.stack([ai, ar], dim=-1)], dim=-3)
    return blocks.flatten(-4, -3).flatten(-2, -1)


def _unstack(x, n):
    return ComplexTensor(x[..., :n, :], x[..., n:, :])


@register(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(A):
    # E is a ring homomorphism (E(AB) = E(A) E(B), E(A + B) = E(A) + E(B)), so it commutes
    # with the exponential's power series: exp(E(A)) = E(exp(A)), and exp(A) is the top-left
    # block + i the bottom-left block of the real exponential. The real exponential picks its
    # Taylor degree and scaling from the 1-norm, which for E(A) is within sqrt(2) of A's.
    # A 1 x 1 matrix is exp of its entry, as in eager (squaring a 2 x 2 embedding of a large
    # entry lost 64 eps at |a| = 30).
    n = A.shape[-1]
    if n == 1:
        return torch.exp(A)
    return _unstack(torch.linalg.matrix_exp(real_embedding(A))[..., :, :n], n)


# ---- solves, inverses and Cholesky: LAPACK on pairs -----------------------------------------
# getrf/getrs, trtrs, potrf/potrs on (re, im) pairs (rules/factorizations.py): eager's values and
# derivatives. The real LU and Cholesky of E(A) cost 2x to 4x eager's time at n = 16
# (docs/numerics.md); realify.onnx writes these ops with the complex LU and substitutions of
# realify/rules/lu.py and the embedded Cholesky below.
# the integer outputs (pivots, info), which come back as they are
_INTEGER_OUTPUTS = {aten._linalg_solve_ex.default: frozenset({2, 3}), aten.linalg_inv_ex.default: frozenset({1}),
                    aten.linalg_cholesky_ex.default: frozenset({1})}
for _op in (aten._linalg_solve_ex.default, aten.linalg_inv_ex.default, aten.linalg_solve_triangular.default,
            aten.triangular_solve.default, aten.cholesky_solve.default, aten.cholesky_inverse.default,
            aten.linalg_cholesky_ex.default, *([aten.cholesky.default] if hasattr(aten, "cholesky") else [])):
    register(_op)(lapack_rule(_op, _INTEGER_OUTPUTS.get(_op, frozenset())))


# ---- Cholesky through the interleaved embedding --------------------------------------------
# If H = L L^H (L lower triangular, positive real diagonal), then E(L) is real lower triangular
# with positive diagonal (blocks diag(l_ii, l_ii)) and E(L) E(L)^T = E(L L^H) = E(H): by the
# uniqueness of the Cholesky factor, the real Cholesky of the 2n x 2n E(H) is E(L), and L's
# parts are its blocks' first column, Re L = R[0::2, 0::2], Im L = R[1::2, 0::2]. upper=True
# factors H = U^H U with U = L^H: the real upper factor of E(H) is E(L)^T = E(U), read the same
# way. Backward-stable real Cholesky on E(H) (||E(H)||_2 = ||H||_2) gives a factor with
# ||R R^T - E(H)|| <= c n u ||H||, the bound of eager's zpotrf/cpotrf on H (docs/numerics.md).
#
# info: E(H)'s leading minors of even order 2k are E(H_k) (H_k: H's of order k), positive
# definite exactly when H_k is (each eigenvalue of H_k twice). Where H_1 .. H_{k-1} are positive
# definite and H_k is not, the real minors of order <= 2k-2 are (the odd ones are principal
# submatrices of positive definite E(H_j)), and the one of order 2k-1 or 2k is not (interlacing:
# the order-(2k-1) minor's smallest eigenvalue is at most E(H_k)'s second smallest, which is
# H_k's smallest). So the real info m maps to eager's k = ceil(m / 2), 0 staying 0.


def cholesky_parts(ar, ai, upper: bool):
    """(Re, Im of L or U, eager's info) of the Hermitian matrix ``ar + i ai``'s ``upper`` or lower
    triangle denotes, from the real Cholesky of its interleaved embedding (what realify.onnx
    writes potrf with)."""
    hr, hi = hermitian_parts(ar, ai, upper)
    R, info = torch.linalg.cholesky_ex(interleaved_embedding(hr, hi), upper=upper)
    # the diagonal blocks' off-diagonal entry (Im of the diagonal) is a sum of products that
    # cancel exactly in exact arithmetic only: eager's diagonal is exactly real
    return R[..., 0::2, 0::2], _strict_triangle(R[..., 1::2, 0::2], upper), torch.div(info + 1, 2,
                                                                                       rounding_mode="floor")
