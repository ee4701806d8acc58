"""The translation of ``aten.expand`` that ONNX Runtime's optimizer keeps exact at sizes of 0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .graph_helpers import _ints, _shape
from .optional_imports import op


def expand(x, size: Sequence[Any], implicit: bool = False):
    """``x`` broadcast to ``size`` (-1 keeps a dim): ONNX ``Expand``, where each dim expanded to a
    static 0 is sliced to 0 first.

    ONNX Runtime's graph optimizer removes an ``Expand`` whose target is no larger than its
    input in every dim, taking 0 for no larger than 1: the values after it keep the input's
    size 1 where the model says 0, and the session fails (``Shape mismatch attempting to re-use
    buffer``). realify's pointwise formulas broadcast their operands, an empty one too. With the
    dim sliced to 0 the ``Expand`` no longer changes it.
    """
    zeros = [k for k, s in enumerate(size) if isinstance(s, int) and s == 0]
    if zeros:
        lead = len(size) - len(x.shape)
        if lead:  # the new leading dims, as size 1, so that each zero has a dim to slice
            x = op.Unsqueeze(x, _ints(list(range(lead))))
        x = op.Slice(x, _ints([0] * len(zeros)), _ints([0] * len(zeros)), _ints(zeros))
    # -1 (keep the dim) becomes 1, which Expand's broadcasting keeps alike
    return op.Expand(x, op.Abs(_shape(size)))
