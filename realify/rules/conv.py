"""Convolution: aten.convolution, aten._convolution and the composite convNd /
conv_transposeNd ops (for graphs that keep them: pre-dispatch and export IR).

Eager dispatch never shows a complex aten.convolution to the table: PyTorch's composite
convNd ops turn complex operands into 3 real convolutions over ``view_as_real`` before the
ComplexTensor sees them, and aten.convolution itself refuses complex autograd; so no rule for
aten.convolution_backward is needed (traced graphs differentiate the real convolutions). A
program's own call of aten.convolution on complex CPU tensors raises eager's error (its CPU
kernels take no complex operand: realify/rules/_contract.py); the rule below computes the
convolutions ``complex_autocast`` writes for conv*d and those of other devices.

A convolution is bilinear in (input, weight), so the complex product expands into real
convolutions of the parts exactly like a complex matrix product (the shared
:func:`realify.rules._algebra.complex_product`): 4, or 2 when only one side is complex (the
traced graph may trade one of the 4 for additions: realify/passes/gauss.py). Stride, padding,
dilation, groups, transposition and output_padding pass through unchanged to every real
convolution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import register
from ._algebra import complex_product, padd
from ._operands import promoted

aten = torch.ops.aten
Part = Any


def _channel_view(bias: Part, spatial_dims: int) -> Part:
    # (C,) -> (C, 1, ..., 1): broadcasts over batched (N, C, *S) and unbatched (C, *S) outputs
    return None if bias is None else bias.reshape([-1] + [1] * spatial_dims)


@promoted("input", "weight", "bias")
def _complex_conv(input, weight, bias, conv: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
    """conv(x, w) + b for complex or real operands, ``conv`` a real convolution without bias."""
    # conv(x, w) + b = (conv(xr, wr) - conv(xi, wi) + br) + (conv(xr, wi) + conv(xi, wr) + bi) i,
    # the products evaluated by complex_product; the bias is added once to each part after
    # the products
    (xr, xi), (wr, wi) = input, weight
    br, bi = bias if bias is not None else (None, None)
    spatial = wr.dim() - 2
    unbatched = xr.dim() == spatial + 1
    if unbatched:  # the composite convNd ops accept (C, *S); aten.convolution wants (N, C, *S)
        xr, xi = xr.unsqueeze(0), None if xi is None else xi.unsqueeze(0)
    re, im = complex_product(conv, (xr, xi), (wr, wi))
    if unbatched:
        re, im = re.squeeze(0), None if im is None else im.squeeze(0)
    return padd(re, _channel_view(br, spatial)), padd(im, _channel_view(bi, spatial))


def _real_conv(stride, padding, dilation, transposed, output_padding, groups, pre_pad=None):
    def conv(x, w):
        if pre_pad is not None:
            x = torch.nn.functional.pad(x, pre_pad)
        return aten.convolution.default(x, w, None, stride, padding, dilation, transposed, output_padding, groups)

    return conv


@register(aten.convolution.default)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return _complex_conv(input, weight, bias, _real_conv(stride, padding, dilation, transposed, output_padding, groups))


@register(aten._convolution.default)
def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                 benchmark=False, deterministic=False, cudnn_enabled=True, allow_tf32=True):
    # the backend-selection flags do not change the result
    return convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def spatial_list(value, spatial: int) -> list:
    # an int or a 1-element list applies to every spatial dim
    if not isinstance(value, (list, tuple)):
        return [value] * spatial
    return list(value) * spatial if len(value) == 1 else list(value)


def _string_padding(padding: str, weight, stride, dilation) -> tuple[list, list | None]:
    """Symmetric padding for aten.convolution and an extra right-side pad (or None)."""
    spatial = weight.dim() - 2
    if padding == "valid":
        return [0] * spatial, None
    if padding != "same":
        raise ValueError(f"invalid padding string {padding!r}, expected 'valid' or 'same'")
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    # output size = input size: total padding d (k - 1) per dim, the odd unit on the right
    total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    left = [t // 2 for t in total]
    extra = [t - 2 * half for t, half in zip(total, left)]
    if not any(extra):
        return left, None
    pre_pad = []
    for e in reversed(extra):  # F.pad lists the last dim first
        pre_pad += [0, e]
    return left, pre_pad


@register(aten.conv1d.default, aten.conv2d.default, aten.conv3d.default, aten.conv1d.padding,
          aten.conv2d.padding, aten.conv3d.padding, aten._convolution_mode.default)
def conv_nd(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    spatial = weight.dim() - 2
    stride, dilation = spatial_list(stride, spatial), spatial_list(dilation, spatial)
    if isinstance(padding, str):
        padding, pre_pad = _string_padding(padding, weight, stride, dilation)
    else:
        padding, pre_pad = spatial_list(padding, spatial), None
    return _complex_conv(input, weight, bias,
                         _real_conv(stride, padding, dilation, False, [0] * spatial, groups, pre_pad))


@register(aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.conv_transpose3d.input)
def conv_transpose_nd(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    spatial = weight.dim() - 2
    stride, padding, output_padding, dilation = (spatial_list(v, spatial)
                                                 for v in (stride, padding, output_padding, dilation))
    return _complex_conv(input, weight, bias, _real_conv(stride, padding, dilation, True, output_padding, groups))
