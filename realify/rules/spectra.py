"""Spectra through the real embedding: Hermitian eigenvalues, singular values, log|det|.

A = Ar + i Ai acts on (xr, xi) like the real 2n x 2n matrix
E(A) = [[Ar, -Ai], [Ai, Ar]] (realify.rules.linalg.real_embedding). E(A) is unitarily
similar to diag(A, conj(A)), so:

- for Hermitian A, E(A) is real symmetric and its eigenvalues are A's, each twice;
- for any m x n A, E(A)'s singular values are A's, each twice;
- det E(A) = det(A) det(conj A) = |det A|^2.

Sorted, the two copies of each value sit next to each other; a rule returns the mean of each
pair, which is the value itself in exact arithmetic. Backward-stable real solvers on E(A)
(||E(A)||_2 = ||A||_2) give each value with an error of order n u ||A||_2, the bound of
eager's complex LAPACK. Gradients are those of the real solvers on E(A): the embedding's
adjoint folds a pair's two eigenvectors (u and its rotation by i, [-y; x] for u = [x; y])
into the same complex gradient, so the mean of a pair differentiates like the value.

Eigenvectors and singular vectors have no rule: a degenerate value of A gives E(A) an
eigenspace in which real solvers return vectors that may be i-multiples of one another, and
no real-only selection keeps them independent. When a traced graph reads them, the rules
raise MissingRuleError (the compile backend runs the call as an eager island). ATen asks for
them even for ``eigvalsh``/``svdvals`` whenever a gradient may be needed, which includes
every traced call and every call on a tensor subclass, only for its own backward; realify
differentiates the real solver instead. Each front end therefore tells the op that nothing
reads its vectors where that is so (:data:`OPTIONAL_VECTORS`): a traced graph by its readers
(realify/passes/cleanup.py, ``unread_outputs_not_asked``), the eager ComplexTensor by the public
function called, whose result holds values only (realify/tensor.py).
"""

from __future__ import annotations

import torch

from ..errors import MissingRuleError
from ..runtime.complex_tensor import ComplexTensor
from . import register
from ._operands import parts
from .linalg import embed_parts, hermitian_parts

aten = torch.ops.aten

# The spectral ops whose vector outputs are optional: the argument that asks for them, and
# their output indices
OPTIONAL_VECTORS = {
    aten._linalg_eigh.default: ("compute_v", {1}),
    aten._linalg_svd.default: ("compute_uv", {0, 2}),
}

def no_vectors_asked(func, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments of the spectral op ``func`` with its vectors flag (``OPTIONAL_VECTORS``)
    off, where it is given: by position or by name."""
    flag = OPTIONAL_VECTORS[func][0]
    position = [a.name for a in func._schema.arguments].index(flag)
    if position < len(args) and flag not in kwargs:
        return (*args[:position], False, *args[position + 1:]), kwargs
    return args, {**kwargs, flag: False}


def _pair_means(values: torch.Tensor) -> torch.Tensor:
    # (..., 2k) sorted values, each present twice -> (..., k)
    return 0.5 * (values[..., 0::2] + values[..., 1::2])


def _no_vectors(like: torch.Tensor) -> ComplexTensor:
    # eager returns an empty complex tensor where vectors were not asked for
    empty = like.new_empty(0)
    return ComplexTensor(empty, empty.clone())


def _vectors(op, asked: bool, count: int, like: torch.Tensor, what: str, instead: str) -> list[ComplexTensor]:
    """``count`` empty vector outputs of ``op`` (real parts like ``like``), as eager returns
    where they were not asked for; MissingRuleError where they were (decided before anything
    is computed)."""
    if asked:
        raise MissingRuleError(op, detail=f"{what}: no real-only formula (realify/rules/spectra.py); "
                                          f"{instead} alone have a rule")
    return [_no_vectors(like) for _ in range(count)]


def hermitian_eigenvalues(ar, ai, UPLO="L") -> torch.Tensor:
    """Eigenvalues, ascending, of the Hermitian matrix whose ``UPLO`` triangle is that of
    ``ar + i ai`` (``ai`` None for a real one): pair means of eigvalsh(E(H))."""
    # eigh reads one triangle and the real part of the diagonal
    return _pair_means(torch.linalg.eigvalsh(embed_parts(*hermitian_parts(ar, ai, UPLO.upper() == "U"))))


def singular_values(ar, ai) -> torch.Tensor:
    """Singular values, descending, of ``ar + i ai``: pair means of svdvals(E(A))."""
    return _pair_means(torch.linalg.svdvals(embed_parts(ar, ai)))


@register(aten._linalg_eigh.default)
def linalg_eigh(A, UPLO="L", compute_v=True):
    vectors, = _vectors(aten._linalg_eigh.default, compute_v, 1, parts(A)[0],
                        "eigenvectors", "eigenvalues (linalg.eigvalsh)")
    return hermitian_eigenvalues(*parts(A), UPLO), vectors


@register(aten._linalg_svd.default)
def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    u, vh = _vectors(aten._linalg_svd.default, compute_uv, 2, parts(A)[0],
                     "singular vectors", "singular values (linalg.svdvals)")
    return u, singular_values(*parts(A)), vh
