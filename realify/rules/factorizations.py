"""Factorizations with vectors: QR (``linalg.qr``, ``geqrf``, ``householder_product``, ``ormqr``),
eigendecompositions (``linalg.eig``/``eigvals``, ``linalg.eigh`` with vectors), the SVD with
vectors, ``pinv``, ``matrix_sqrth``, ``polar`` and the LDL family.

Each rule calls the op's real-interface twin on (re, im) pairs (realify/runtime/complex_lapack.py):
the device's complex LAPACK routine, eager's derivative. The values are eager's, bit for bit,
phases of eigenvectors and singular vectors included: no real-arithmetic formulation gives
those phases (a real solver on the embedding E(A) returns any vector of a 2-dimensional
eigenspace, realify/rules/spectra.py), and none compiles to faster code than the LAPACK call
(docs/numerics.md, "Factorizations"). Eigenvalues and singular values alone keep their
real-embedding rules (realify/rules/spectra.py calls these where vectors are asked for).
"""

from __future__ import annotations

from typing import Any

import torch

from ..runtime.complex_lapack import pairs_op
from ..runtime.complex_tensor import ComplexTensor, as_complex_tensor
from . import register
from ._operands import stacked_pairs

aten = torch.ops.aten

# Arguments that stay real whatever the others are: pinv's tolerances
_REAL_ARGUMENTS = frozenset({"atol", "rtol"})


def lapack_rule(op: torch._ops.OpOverload, real_outputs: frozenset[int] = frozenset()):
    """The rule that runs ``op`` on pairs: complex (and, beside them, real floating) tensor
    arguments as pairs, the results other than ``real_outputs`` (indices of real or integer
    results) as ComplexTensors."""
    names = [a.name for a in op._schema.arguments]
    defaults = [a.default_value if a.has_default_value() else None for a in op._schema.arguments]
    single = len(op._schema.returns) == 1

    def rule(*args: Any, **kwargs: Any) -> Any:
        values = [as_complex_tensor(v) for v in
                  (*args, *[kwargs.get(n, d) for n, d in zip(names[len(args):], defaults[len(args):])])]
        any_complex = any(isinstance(v, ComplexTensor) for v in values)
        # a real matrix beside complex ones is a complex one with zero imaginary part, as in eager
        complex_args = [isinstance(v, ComplexTensor) or (any_complex and name not in _REAL_ARGUMENTS and
                                                        isinstance(v, torch.Tensor) and v.is_floating_point())
                        for name, v in zip(names, values)]
        values = [stacked_pairs(v) if c else v for c, v in zip(complex_args, values)]
        result = pairs_op(op)(complex_args, *values)
        if single:
            return _planar(result)
        return tuple(x if k in real_outputs else _planar(x) for k, x in enumerate(result))

    rule.__name__ = rule.__qualname__ = f"{op._schema.name.split('::')[1]}_on_pairs"
    return rule


def _planar(pairs: torch.Tensor) -> ComplexTensor:
    # contiguous parts, as eager's results are contiguous: the views a program takes of them
    # (L.mH, Q[..., :k]) then have eager's strides in each part
    return ComplexTensor(pairs[..., 0].contiguous(), pairs[..., 1].contiguous())


for _op in (aten.linalg_qr.default, aten.geqrf.default, aten.linalg_householder_product.default,
            aten.ormqr.default, aten.linalg_eig.default, aten.linalg_pinv.atol_rtol_tensor,
            aten.linalg_ldl_solve.default):
    register(_op)(lapack_rule(_op))
register(aten.linalg_ldl_factor_ex.default)(lapack_rule(aten.linalg_ldl_factor_ex.default, frozenset({1, 2})))
# residuals, rank and singular values are real; the output shapes depend on the values (the
# residuals are empty unless A is full rank and tall), so only the eager ComplexTensor runs it:
# traced front ends stop at its fake kernel, and dynamo graph-breaks before it
register(aten.linalg_lstsq.default)(lapack_rule(aten.linalg_lstsq.default, frozenset({1, 2, 3})))
for _name in ("linalg_matrix_sqrth", "linalg_polar"):  # ATen ops since torch 2.15
    if hasattr(aten, _name):
        _op = getattr(aten, _name).default
        register(_op)(lapack_rule(_op))
