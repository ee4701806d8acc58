"""Pointwise (1x1) convolutions on CPU as batched matrix products, for the graphs the compile
backend hands to Inductor.

A convolution whose kernel covers one position (``nn.Conv1d(c, o, 1)``, ``nn.Conv2d(c, o, 1)``:
the channel mixing of neuraloperator's FNO, its skip connections and channel MLPs, the 1x1
layers of CNNs), with unit stride, no padding and one group, is a matrix product per batch
element::

    y[n, o, s] = sum_c w[o, c] x[n, c, s] + bias[o]      (s: every spatial position)

ATen runs it on CPU through oneDNN's convolution, whose forward and backward for these shapes
are slower than BLAS's GEMM on the same data (1.4x and 1.6x on neuraloperator's channel
mixing: docs/benchmarks.md, "Measurements behind design choices"). Written as ``bmm`` of the weight (expanded over the
batch, no copy) with the input viewed as ``(n, c, s)`` (no copy either), the forward is one
GEMM per batch element, and AOTAutograd differentiates it into GEMMs too: the backward's
``convolution_backward`` (the larger cost) becomes ``bmm`` for the input's gradient and
``bmm`` plus a sum over the batch for the weight's.

The decomposition applies only to CPU float32 and float64 tensors with static sizes; every
other convolution returns ``NotImplemented`` and keeps ATen's kernel. Values are the same sums
in another order (rounding differs as between two convolution algorithms).
"""

from __future__ import annotations

import math
from typing import Any

import torch

aten = torch.ops.aten


def pointwise_convolution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: Any,
                          padding: Any, dilation: Any, transposed: bool, output_padding: Any,
                          groups: int) -> Any:
    """``aten.convolution`` of a 1x1 kernel as ``bmm`` (see the module's docstring), or
    ``NotImplemented``."""
    if not _pointwise(x, weight, stride, padding, transposed, output_padding, groups):
        return NotImplemented
    n, c, *space = x.shape
    o = weight.shape[0]
    positions = math.prod(space)
    w = aten.expand.default(aten.reshape.default(weight, [1, o, c]), [n, o, c])
    y = aten.bmm.default(w, aten.view.default(x, [n, c, positions]))
    y = aten.view.default(y, [n, o, *space])
    if bias is not None:
        y = aten.add.Tensor(y, aten.view.default(bias, [o] + [1] * len(space)))
    return y


def pointwise_convolution_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bias_sizes: Any,
                                   stride: Any, padding: Any, dilation: Any, transposed: bool,
                                   output_padding: Any, groups: int, output_mask: list[bool]) -> Any:
    """``aten.convolution_backward`` of a 1x1 kernel as ``bmm``, or ``NotImplemented``:

        grad_x[n] = w^T grad[n],   grad_w = sum_n grad[n] x[n]^T,   grad_bias = sum_{n,s} grad

    (AOTAutograd differentiates ``convolution`` above the decompositions, so the forward's
    decomposition alone leaves oneDNN's backward in the graph)."""
    if not (_pointwise(x, weight, stride, padding, transposed, output_padding, groups) and grad.is_contiguous()):
        return NotImplemented
    n, c, *space = x.shape
    o = weight.shape[0]
    positions = math.prod(space)
    g = aten.view.default(grad, [n, o, positions])
    grad_x = grad_w = grad_bias = None
    if output_mask[0]:
        w_t = aten.expand.default(aten.unsqueeze.default(aten.t.default(aten.reshape.default(weight, [o, c])), 0),
                                  [n, c, o])
        grad_x = aten.view.default(aten.bmm.default(w_t, g), x.shape)
    if output_mask[1]:
        x_t = aten.transpose.int(aten.view.default(x, [n, c, positions]), 1, 2)
        grad_w = aten.view.default(aten.sum.dim_IntList(aten.bmm.default(g, x_t), [0]), weight.shape)
    if output_mask[2]:
        grad_bias = aten.sum.dim_IntList(g, [0, 2])
    return grad_x, grad_w, grad_bias


def _pointwise(x: torch.Tensor, weight: torch.Tensor, stride: Any, padding: Any, transposed: bool,
               output_padding: Any, groups: int) -> bool:
    static = all(isinstance(d, int) for d in (*x.shape, *weight.shape, *x.stride()))
    return (static and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            and weight.dtype == x.dtype and x.dim() >= 3 and groups == 1 and not transposed
            and all(k == 1 for k in weight.shape[2:]) and all(s == 1 for s in stride)
            and all(p == 0 for p in padding) and all(p == 0 for p in output_padding)
            and x.is_contiguous())
