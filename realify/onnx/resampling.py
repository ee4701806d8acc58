"""The translation of ``F.interpolate(mode="nearest-exact")`` as realify's trace writes it,
``aten._upsample_nearest_exact{1,2,3}d.default``, for which torch.onnx has none (it translates
the ``.vec`` overload torch.export keeps by decomposing it first), for real programs too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .graph_helpers import _shape
from .optional_imports import op


def upsample_nearest_exact(x, output_size: Sequence[Any], *scales: float | None):
    """``out[..., i] = x[..., min(floor((i + 1/2) / s), n - 1)]`` along each resampled dim, where
    ``s`` is the scale given or else ``size / n``: ONNX ``Resize`` in nearest mode with half-pixel
    coordinates, ``(i + 1/2) / s - 1/2``, rounded half up (the same index), and clamped."""
    resize = dict(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")
    if scales and all(s is not None for s in scales):  # the scales the kernel maps by; sizes follow from them
        factors = op.Constant(value_floats=[1.0, 1.0, *(float(s) for s in scales if s is not None)])
        return op.Resize(x, None, factors, None, **resize)
    return op.Resize(x, None, None, op.Concat(op.Shape(x, start=0, end=2), _shape(output_size), axis=0), **resize)
