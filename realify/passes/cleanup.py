"""FX clean-up passes on the functional and the real graphs: in-place views and writes to inputs
made functional (an in-place change of an input's metadata refused), ``*_copy`` ops back to
views, fusion barriers removed, and which unread nodes stay.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch
import torch.fx as fx
from torch._ops import OpOverload
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..errors import InputMetadataChangeError
from ..runtime.ops import fusion_barrier, stop_gradient

aten = torch.ops.aten


def inplace_views_to_functional(gm: fx.GraphModule) -> None:
    """In-place view ops that functionalization keeps (C++ composites such as stft apply them
    to their own intermediates) become out-of-place views, where the viewed value has no
    other user (otherwise the in-place metadata change is visible elsewhere: left as is)."""
    for node in gm.graph.nodes:
        functional = _INPLACE_VIEWS.get(node.target)
        if functional is not None and len(node.args[0].users) == 1:
            node.target = functional
    gm.recompile()


_INPLACE_VIEWS = {
    aten.transpose_.default: aten.transpose.int, aten.squeeze_.dim: aten.squeeze.dim,
    aten.squeeze_.default: aten.squeeze.default, aten.squeeze_.dims: aten.squeeze.dims,
    aten.unsqueeze_.default: aten.unsqueeze.default, aten.t_.default: aten.t.default,
    aten.swapdims_.default: aten.swapdims.default, aten.as_strided_.default: aten.as_strided.default,
}


def refuse_metadata_changes_of_inputs(gm: fx.GraphModule, names: Sequence[str]) -> None:
    """An in-place view of an input (``z.t_()``, ``z.unsqueeze_(0)``) changes the caller's tensor's
    shape or strides. Functionalization leaves it as ``as_strided_(input, size, stride)``
    followed by a copy of the new values, which no layout of the input at the graph's edge
    (complex, or real pairs or planes) can carry out: raise, naming the input, rather than fail
    inside the trace. (The compile backend never sees this: dynamo applies such a change to
    the caller's tensor outside the graph.)"""
    placeholders = gm.graph.find_nodes(op="placeholder")
    for node in gm.graph.find_nodes(op="call_function", target=aten.as_strided_.default):
        base = node.args[0]
        if base not in placeholders:
            continue
        val = base.meta.get("val")
        offset = node.args[3] if len(node.args) > 3 and node.args[3] is not None else val.storage_offset()
        new = (list(node.args[1]), list(node.args[2]), offset)
        if (list(val.shape), list(val.stride()), val.storage_offset()) == new:
            continue  # squeeze_() of a tensor without size-1 dims and the like: no change
        i = placeholders.index(base)
        name = f"input {i}" + (f" ({names[i]})" if i < len(names) else "")
        raise InputMetadataChangeError(
            f"the program changes the shape or strides of its {name} in place, from "
            f"{tuple(val.shape)} to {tuple(node.args[1])} (an in-place view: t_, transpose_, unsqueeze_, squeeze_, "
            f"as_strided_, ...); a decomposed or exported graph cannot change its caller's tensor's metadata.\n"
            f"  What to do: use the out-of-place view (z.t() for z.t_()) and return its result; "
            f"realify.compile(...) runs such programs as written.")


def mutations_to_outputs(gm: fx.GraphModule) -> list[int]:
    """Turn trailing ``copy_(input, new_value)`` nodes into extra graph outputs."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    new_values: dict[int, fx.Node] = {}
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default and node.args[0] in index:
            new_values[index[node.args[0]]] = node.args[1]
            node.replace_all_uses_with(node.args[1])
            gm.graph.erase_node(node)
    out_node = gm.graph.output_node()
    mutated = sorted(new_values)
    out_node.args = (list(out_node.args[0]) + [new_values[i] for i in mutated],)
    gm.graph.lint()
    gm.recompile()
    return mutated


def copies_to_views(gm: fx.GraphModule, *, keep_copies: bool = False) -> None:
    """Functionalization turned every view into its ``*_copy`` variant (``slice_copy``,
    ``permute_copy``, ...). In a graph that mutates nothing the view itself has the same value,
    and consumers handle views far better: Inductor has no lowering for some ``*_copy`` ops
    and runs each as an extern copy (the FNO block had 12 extern ``slice_copy`` calls per
    forward), a copy's fresh layout hides the real strides from the rules, and torch.onnx has
    no translation for ``slice_copy``.

    A copy's result is contiguous and a view's may not be, so ``view`` becomes ``reshape``
    (same value; copies only where it must). Copies stay copies where ``keep_copies`` (the
    caller writes to inputs after the graph ran: a view would see the write) or where the
    graph reads storage directly (``as_strided``, dtype views); a graph with in-place ops is
    left as it is."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    if any(isinstance(n.target, OpOverload) and n.target._schema.is_mutable for n in nodes):
        return
    keep_copies = keep_copies or any(n.target in _STRIDE_DEPENDENT for n in nodes)
    for node in nodes:
        if node.target in _RESHAPES or (not keep_copies and node.target is aten.view_copy.default):
            node.target = aten.reshape.default
        elif not keep_copies:
            node.target = view_variant(node.target) or node.target
    gm.recompile()


_STRIDE_DEPENDENT = {aten.as_strided.default, aten.as_strided_copy.default, aten.view.dtype,
                     aten.view_copy.dtype, aten.as_strided_scatter.default}


_RESHAPES = {aten.view.default, aten._unsafe_view.default}


@functools.cache
def view_variant(op: Any) -> OpOverload | None:
    """``aten.X_copy.overload`` -> ``aten.X.overload`` where that is a view op, else None."""
    if not isinstance(op, OpOverload) or op.namespace != "aten":
        return None
    name = op._schema.name.split("::")[-1]
    if not name.endswith("_copy") or name == "lift_fresh_copy":
        return None
    base = getattr(aten, name[: -len("_copy")], None)
    overload = op._overloadname
    if base is None or overload not in base.overloads():
        return None
    view = getattr(base, overload)
    return view if view.is_view else None


def keep_unread(node: fx.Node) -> bool:
    """Whether a node stays in the graph although nothing reads it: anything but a pure aten op
    or one of realify's own pure ops (FX counts random ops as impure; custom ops are kept, and
    realify's that run a user's code: eager islands, custom autograd.Functions). A dead
    realify op would be a dead computation in every graph after it, and in ONNX a form for
    one size (a scan's rounds) of a value nothing reads."""
    target = node.target
    if target is operator.getitem:  # an output of a multi-output op: kept where the op must be
        return keep_unread(node.args[0]) if isinstance(node.args[0], fx.Node) else False
    if node.is_impure() or not isinstance(target, OpOverload):
        return True
    if target.namespace == "realify":
        return target._opname in _USER_CODE
    return target.namespace != "aten"


_USER_CODE = {"eager_island", "eager_island_backward", "custom_function"}


def strip_fusion_barriers(gm: fx.GraphModule) -> None:
    """Remove ``realify::fusion_barrier`` nodes (each reader reads the value itself)."""
    for module in gm.modules():  # control flow's branches and bodies too
        if not isinstance(module, fx.GraphModule):
            continue
        barriers = module.graph.find_nodes(op="call_function", target=fusion_barrier._opoverload)
        for node in barriers:
            node.replace_all_uses_with(node.args[0])
            module.graph.erase_node(node)
        if barriers:
            module.recompile()


def stop_gradients_as_detach(gm: fx.GraphModule) -> None:
    """``realify::stop_gradient`` nodes as ``aten.detach``, which every consumer of a real graph
    knows (autograd stops there; Inductor and ONNX drop it)."""
    for module in gm.modules():  # control flow's branches and bodies too
        if not isinstance(module, fx.GraphModule):
            continue
        stops = module.graph.find_nodes(op="call_function", target=stop_gradient._opoverload)
        for node in stops:
            node.target = aten.detach.default
        if stops:
            module.recompile()


def unread_outputs_not_asked(gm: fx.GraphModule) -> None:
    """Where nothing reads a spectral op's vectors (rules/spectra.py, ``OPTIONAL_VECTORS``),
    the op is asked not to compute them, so that its rule needs no formula for them."""
    from ..rules.spectra import OPTIONAL_VECTORS, no_vectors_asked

    for module in gm.modules():  # control flow's branches and bodies too
        if not isinstance(module, fx.GraphModule):
            continue
        for op, (_, outputs) in OPTIONAL_VECTORS.items():
            for node in module.graph.find_nodes(op="call_function", target=op):
                if any(u.target is not operator.getitem for u in node.users):
                    continue  # the whole tuple is read
                if {u.args[1] for u in node.users if u.users} & outputs:  # a getitem nothing reads is dead
                    continue
                node.args, node.kwargs = no_vectors_asked(op, node.args, node.kwargs)
        module.recompile()


def call_on_fakes(graph: fx.Graph, target: Any, *args: Any, fake_mode: Any = None, **kwargs: Any) -> fx.Node | None:
    """A new node with its fake value (computed in its first input's fake mode, or in
    ``fake_mode`` for a node made from constants alone), or None where the op refuses those
    values (the node is not made); ``kwargs`` hold no nodes."""
    vals = [a.meta["val"] if isinstance(a, fx.Node) else
            [x.meta["val"] if isinstance(x, fx.Node) else x for x in a] if isinstance(a, list) else a for a in args]
    if fake_mode is None:
        first = next(v for v in vals if isinstance(v, torch.Tensor) or isinstance(v, list))
        fake_mode = (first[0] if isinstance(first, list) else first).fake_mode
    try:
        # the node runs as written: the caller's autocast (decompose may run under it) must
        # not change the dtype its fake value records
        # an op at data-dependent arguments (a slice at points read from a tensor) may make
        # sizes of its own (fresh unbacked symbols): no trace binds them to this node, and left
        # pending they would fail the next trace in this shape environment (the inner compiler's)
        shape_env = fake_mode.shape_env
        fresh = shape_env.ignore_fresh_unbacked_symbols() if shape_env is not None else nullcontext()
        with fake_mode, torch._C._DisableAutocast(), fresh:
            value = target(*vals, **kwargs)
    except RuntimeError:
        return None
    node = graph.call_function(target, args, kwargs)
    node.meta["val"] = value
    return node



def same_shape(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two fake values provably have one shape: sizes may be symbolic or data-dependent,
    and a rewrite that needs them equal must not add a guard (a recompile, or a failed trace)."""
    return a.dim() == b.dim() and all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape))
