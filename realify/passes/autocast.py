"""Complex mixed precision: autocast for complex products (opt in: ``config.complex_autocast``).

``torch.autocast`` runs a real matmul or convolution on bfloat16/float16 operands and leaves
complex ones alone: an op with a complex operand keeps complex64, in eager and in every
compiler (there is no complex bfloat16, and ``torch.chalf`` has few kernels). realify holds a
complex value as two float32 parts, so it can do for complex products what autocast does for
real ones: the real GEMMs and convolutions of a complex ``mm``/``bmm``/``einsum``/``matmul``/
``linear``/``conv*d`` take autocast's dtype, their results come back to float32 and everything
else stays as it was (FFTs, elementwise ops and reductions in float32, parameters, gradients
and optimizer state complex64).

Two steps, one per stage of :func:`realify.decompose`:

- while the program is traced into its functional graph (under the caller's autocast state,
  as eager runs it), :class:`MarkAutocastProducts` tags each complex product that runs where
  autocast is on for its device with autocast's dtype (``node.meta["custom"]``, which tracing
  copies onto every node made from it, so the real ops of its rule carry it too);
- on the real graph, :func:`lower_precision_products` casts the operands of each tagged real
  product to that dtype and its result back to float32.

Products stay in the textbook four-product form (realify/passes/gauss.py leaves tagged products
alone): Gauss's three-product form computes the imaginary part as a difference of products
whose size is that of the operands, not of the result, and at bfloat16's unit roundoff that
cancellation loses every bit of a small imaginary part (docs/numerics.md, "Complex mixed
precision").

Off by default: eager's semantics (complex ops in complex64 under autocast) stay the default,
so turning it on is a visible choice, as turning on autocast is.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..rules._contract import AUTOCAST_TAG as TAG
from ..rules.conv import spatial_list
from .cleanup import call_on_fakes

aten = torch.ops.aten

# the complex ops autocast would run in lower precision were they real, as they reach a
# functional graph (matmul, linear, einsum and conv*d are composites of these), and the real
# products of their rules that take the lower precision; matrix-vector and vector products stay
# float32: memory-bound, they gain nothing from narrower operands
PRODUCTS = frozenset({
    aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default, aten.addbmm.default,
    aten.convolution.default,
})


class MarkAutocastProducts(contextlib.AbstractContextManager):
    """While tracing the functional graph: each complex product that runs with autocast on for
    its device gets autocast's dtype as a tag on its node (and every node made from it).

    Autocast's state is read where the program calls torch (:class:`_AutocastAtCall`), not
    at the op: inside the kernel of an op autocast handles (mm, convolution), autocast
    reports itself off."""

    def __init__(self):
        self.at_call = _AutocastAtCall()
        self.tagging = _TagProducts(self.at_call)

    def __enter__(self):
        self.at_call.__enter__()
        self.tagging.__enter__()
        return self

    def __exit__(self, *exc):
        self.tagging.__exit__(*exc)
        return self.at_call.__exit__(*exc)


class _AutocastAtCall(TorchFunctionMode):
    """Autocast's dtype per device where it is on, as the program's current torch call
    started."""

    def __init__(self):
        super().__init__()
        self.dtypes: dict[str, torch.dtype] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        saved, self.dtypes = self.dtypes, {
            device: torch.get_autocast_dtype(device) for device in _DEVICES
            if torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)}
        try:
            if self.dtypes and func in _CONVOLUTIONS and any(_is_complex(x) for x in args[:3]):
                return _as_convolution(func, *args, **kwargs)
            return func(*args, **kwargs)
        finally:
            self.dtypes = saved


# PyTorch's composite convNd turns a complex convolution into three real ones (Gauss's form)
# before any mode sees it; where autocast is on, the program calls aten.convolution instead,
# which realify's rule expands in the four-product form the lower precision needs
_CONVOLUTIONS = {torch.conv1d: 1, torch.conv2d: 2, torch.conv3d: 3}


def _is_complex(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_complex


def _as_convolution(conv, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``conv`` (conv1d/2d/3d) as aten.convolution (string padding other than "valid": the
    composite, whose real products stay float32)."""
    if isinstance(padding, str):
        if padding != "valid":
            return conv(input, weight, bias, stride, padding, dilation, groups)
        padding = 0
    spatial = _CONVOLUTIONS[conv]
    unbatched = input.dim() == spatial + 1
    out = aten.convolution.default(input.unsqueeze(0) if unbatched else input, weight, bias,
                                   spatial_list(stride, spatial), spatial_list(padding, spatial),
                                   spatial_list(dilation, spatial), False, [0] * spatial, groups)
    return out.squeeze(0) if unbatched else out


_DEVICES = ("cpu", "cuda", "xpu", "mps")


class _TagProducts(TorchDispatchMode):
    def __init__(self, at_call: _AutocastAtCall):
        super().__init__()
        self.at_call = at_call

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dtype = self._dtype(func, args, kwargs) if fx_traceback.has_preserved_node_meta() else None
        if dtype is None:
            return func(*args, **kwargs)
        with fx_traceback.annotate({TAG: dtype}):
            return func(*args, **kwargs)

    def _dtype(self, func, args, kwargs) -> torch.dtype | None:
        if func not in PRODUCTS:
            return None
        tensors = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        if not any(x.dtype.is_complex for x in tensors):
            return None
        return self.at_call.dtypes.get(tensors[0].device.type)


def tagged_dtype(node: fx.Node) -> torch.dtype | None:
    """The lower precision a node was tagged with (None: not a product autocast reached)."""
    return node.meta.get("custom", {}).get(TAG)


def lower_precision_products(gm: fx.GraphModule) -> None:
    """Each tagged real product with float32 operands runs on operands cast to the tag's dtype
    (one cast per value and dtype), and its result is cast back to float32, as the complex
    product's other real ops expect."""
    for module in gm.modules():  # control flow's branches and bodies too
        if isinstance(module, fx.GraphModule) and _lower(module.graph):
            module.recompile()


def _lower(graph: fx.Graph) -> bool:
    casts: dict[tuple[fx.Node, torch.dtype], fx.Node] = {}
    changed = False
    for node in list(graph.nodes):
        dtype = tagged_dtype(node) if node.op == "call_function" and node.target in PRODUCTS else None
        if dtype is None or node.kwargs or not _all_float32(node):
            continue
        with graph.inserting_before(node):
            narrow = call_on_fakes(graph, node.target, *(_cast(graph, a, dtype, casts) for a in node.args))
            back = call_on_fakes(graph, aten._to_copy.default, narrow, dtype=torch.float32)
        for new in (narrow, back):
            new.meta = {**node.meta, "val": new.meta["val"]}
        node.replace_all_uses_with(back)
        graph.erase_node(node)
        changed = True
    return changed


def _all_float32(node: fx.Node) -> bool:
    values = [a.meta.get("val") for a in node.args if isinstance(a, fx.Node)]
    return all(isinstance(v, torch.Tensor) and v.dtype == torch.float32 for v in values)


def _cast(graph: fx.Graph, arg: Any, dtype: torch.dtype, casts: dict) -> Any:
    if not isinstance(arg, fx.Node):
        return arg
    if (arg, dtype) not in casts:
        casts[arg, dtype] = call_on_fakes(graph, aten._to_copy.default, arg, dtype=dtype)
    return casts[arg, dtype]
