"""Global options. Change them with ``realify.config.patch(...)`` (a context manager and
decorator) or by assignment, e.g. ``realify.config.gemm_multiplications = 4``.

- ``gemm_multiplications`` (3 or 4): complex matrix products (mm, bmm, addmm, baddbmm,
  addbmm and what lowers to them: matmul, einsum, linear, ...) and ``aten.convolution`` as 3
  real products (Gauss/Karatsuba, 25% fewer flops) or 4 (the textbook formula), in every
  traced graph (compile, export, decompose: realify/passes/gauss.py, read when a graph is traced); the
  eager ComplexTensor computes the textbook form. PyTorch's own ``conv1d/2d/3d`` and
  ``conv_transpose*d`` on complex inputs are three real convolutions (Gauss's form) before
  realify sees them, so 4 does not reach those calls (under ``complex_autocast`` conv*d is
  traced as ``aten.convolution``, in 4 products). See docs/numerics.md for the error bound
  that makes 3 the default.
- ``interleaved_products`` (bool): in the compile backend, a complex product whose factor
  already sits interleaved in memory (``view_as_complex`` of a real tensor, as in rotary
  embeddings) runs on the (re, im) pairs with the ``realify::cmul_pairs`` op (ATen's
  vectorized complex kernel) instead of planar arithmetic on stride-2 loads; and a small
  matrix product (``mm``/``bmm`` with ``m n k / (m k + k n + m n)`` below
  ``realify.passes.layout.PAIRS_GEMM_INTENSITY``, about 576 x 576 square) runs as BLAS's complex GEMM
  on the pairs (``realify::cmm_pairs``, eager's rounding), whatever ``gemm_multiplications``
  says: converting to planes costs more there than the real GEMMs save (the layout pass,
  realify/passes/layout.py, read when a graph compiles). Off, every product is planar real
  arithmetic, as in what ``realify.export`` produces for runtimes that know only standard ops.
- ``complex_autocast`` (bool, default False): under ``torch.autocast``, the real GEMMs and
  convolutions of complex matmul/bmm/einsum/linear/conv*d run on autocast's dtype (bfloat16 or
  float16 operands, float32 results), as autocast runs real ones; FFTs, elementwise ops and
  reductions stay float32 and parameters complex64 (realify/passes/autocast.py, read when a graph is
  traced: compile and decompose; the eager ComplexTensor computes complex64). Off, complex ops
  keep complex64 under autocast, as in eager. docs/numerics.md ("Complex mixed precision")
  gives the error bound.

A function compiled by the backend raises ``realify.OptionsChangedError`` when called after
``gemm_multiplications`` or ``complex_autocast`` changed (dynamo does not guard on them).
- ``strict`` (bool): in the compile backend, raise MissingRuleError for a complex op with no
  rule instead of running it as an eager island.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from .errors import closest

gemm_multiplications: int = 3
interleaved_products: bool = True
complex_autocast: bool = False
strict: bool = False

_module = sys.modules[__name__]
_OPTIONS = ("gemm_multiplications", "interleaved_products", "complex_autocast", "strict")


def _validate(name: str, value: Any) -> None:
    if name not in _OPTIONS:
        raise AttributeError(f"realify.config has no option {name!r}{closest(name, _OPTIONS)}; options are "
                             f"{', '.join(_OPTIONS)}")
    if name == "gemm_multiplications" and value not in (3, 4):
        raise ValueError(f"gemm_multiplications must be 3 or 4, got {value!r}")
    if name in ("interleaved_products", "complex_autocast", "strict") and not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


class _Patch(contextlib.ContextDecorator):
    def __init__(self, changes: dict[str, Any]):
        for name, value in changes.items():
            _validate(name, value)
        self.changes = changes
        self.saved: list[dict[str, Any]] = []

    def __enter__(self):
        self.saved.append({name: getattr(_module, name) for name in self.changes})
        for name, value in self.changes.items():
            setattr(_module, name, value)
        return self

    def __exit__(self, *exc):
        for name, value in self.saved.pop().items():
            setattr(_module, name, value)
        return False


def patch(**changes: Any) -> _Patch:
    """Temporarily set options: ``with realify.config.patch(gemm_multiplications=4): ...``."""
    return _Patch(changes)


def snapshot() -> dict[str, Any]:
    """The current value of every option (part of the compile cache key)."""
    return {name: getattr(_module, name) for name in _OPTIONS}
