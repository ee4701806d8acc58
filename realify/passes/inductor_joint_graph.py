"""Inductor joint-graph pass: :func:`realify.passes.fft_bands.transform_only_bands_in` on the forward
and backward graph before AOTAutograd splits them (:class:`TransformOnlyBands`). Changes how a
real graph runs, never a value."""

from __future__ import annotations

from typing import Any

import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass

from .fft_bands import transform_only_bands_in


class TransformOnlyBands(CustomGraphPass):
    """Joint-graph pass: :func:`realify.passes.fft_bands.transform_only_bands_in` on the forward and
    backward graph before AOTAutograd splits them (the gradient of a one-sided FFT whose modes
    were cut is a ``c2r`` of a band; once split, the zeros it is written into may be a tensor
    the forward saved, of contents unknown to the backward graph)."""

    def __call__(self, graph: fx.Graph) -> None:
        transform_only_bands_in(graph)

    def uuid(self) -> Any:
        return "realify.TransformOnlyBands.v1"
