"""Spectra: Hermitian eigenvalues and eigenvectors, singular values and vectors.

Every rule runs LAPACK's complex routine on pairs (realify/runtime/complex_lapack.py): eager's
values, and eager's vectors with eager's phases, where asked for. No real-arithmetic route gives
those phases: the real embedding E(A) = [[Ar, -Ai], [Ai, Ar]] has A's values twice, and a
degenerate value of A gives it an eigenspace in which real solvers return vectors that may be
i-multiples of one another. Values alone (``eigvalsh``, ``svdvals``, the norms and condition
numbers made of them) run the routine without vectors, as eager does where no gradient is
needed, and differentiate by eager's formula, which recomputes the vectors in the backward.
realify.onnx writes Hermitian eigenproblems as Jacobi sweeps (realify/rules/jacobi.py).

ATen asks for vectors even for ``eigvalsh``/``svdvals`` whenever a gradient may be needed,
which includes every traced call and every call on a tensor subclass. Each front end tells the
op that nothing reads its vectors where that is so (:data:`OPTIONAL_VECTORS`): a traced graph
by its readers (realify/passes/cleanup.py, ``unread_outputs_not_asked``), the eager
ComplexTensor by the public function called, whose result holds values only (realify/tensor.py).
"""

from __future__ import annotations

import torch

from ..runtime.complex_lapack import pairs_op
from ..runtime.complex_tensor import ComplexTensor
from . import register
from ._operands import parts
from .factorizations import lapack_rule

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


def _no_vectors(like: torch.Tensor) -> ComplexTensor:
    # eager returns an empty complex tensor where vectors were not asked for
    empty = like.new_empty(0)
    return ComplexTensor(empty, empty.clone())


def _pairs_or_real(ar, ai) -> tuple[list[bool], torch.Tensor]:
    # (complex_args, A) for a pairs op: a real matrix (ai None) goes to the real routine
    return ([False], ar) if ai is None else ([True], torch.stack([ar, ai], dim=-1))


def hermitian_eigenvalues(ar, ai, UPLO="L") -> torch.Tensor:
    """Eigenvalues, ascending, of the Hermitian matrix whose ``UPLO`` triangle is that of
    ``ar + i ai`` (``ai`` None for a real one): LAPACK's heevd without vectors."""
    return pairs_op(aten._linalg_eigh.default)(*_pairs_or_real(ar, ai), UPLO, False)[0]


def singular_values(ar, ai) -> torch.Tensor:
    """Singular values, descending, of ``ar + i ai``: LAPACK's gesdd without vectors."""
    return pairs_op(aten._linalg_svd.default)(*_pairs_or_real(ar, ai), False, False)[1]


_eigh_with_vectors = lapack_rule(aten._linalg_eigh.default, real_outputs=frozenset({0}))
_svd_with_vectors = lapack_rule(aten._linalg_svd.default, real_outputs=frozenset({1}))


@register(aten._linalg_eigh.default)
def linalg_eigh(A, UPLO="L", compute_v=True):
    # with vectors: LAPACK's on pairs (rules/factorizations.py), for eager's phases
    if compute_v:
        return _eigh_with_vectors(A, UPLO, compute_v)
    return hermitian_eigenvalues(*parts(A), UPLO), _no_vectors(parts(A)[0])


@register(aten._linalg_svd.default)
def linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    if compute_uv:
        return _svd_with_vectors(A, full_matrices, compute_uv, driver=driver)
    return _no_vectors(parts(A)[0]), singular_values(*parts(A)), _no_vectors(parts(A)[0])
