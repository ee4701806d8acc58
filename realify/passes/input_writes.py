"""Inputs a compiled program writes in place: how their new values reach the caller's tensors.

The real program returns each written input's new value after its outputs
(``Boundary.mutated_inputs``); these passes on the real graph make that cheaper before the inner
compiler runs: without gradients the graph writes the caller's memory itself
(:func:`write_inputs_in_place`); otherwise, where the program writes only a region of an input,
the graph returns that region alone (:func:`return_written_regions`)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx
from torch.utils.checkpoint import CheckpointPolicy

from .cleanup import call_on_fakes, same_shape
from .layout import pair_part, stacks_pairs


def write_inputs_in_place(gm: fx.GraphModule, layouts: Sequence[str], shared: frozenset[int] = frozenset()) -> None:
    """Inputs the program writes are written by the graph itself, into the memory it was
    given, instead of coming back whole for the caller to copy in: each such output becomes
    ``copy_(input, new)``, which Inductor lowers to the write itself (``out[..., :m, :m] =
    block`` writes the block, not the whole tensor, and no copy follows the call).

    Only for inputs that reach the graph as the caller's memory (real tensors, complex ones
    entering as their pairs): where ``boundary.RealCall`` made a copy (conj, a dtype change),
    or the graph returns some other value, it still copies the new value in after the call.
    Only without gradients: a write the graph makes is hidden from autograd, and eager's write
    gives the caller's tensor a gradient history. Not for inputs in ``shared`` (examples that
    share memory with another input: AOTAutograd would make them views of one base, which it
    refuses for the pairs of a complex tensor; such calls run eagerly anyway, see aliasing.py)."""
    signature = gm.realify_signature
    placeholders = gm.graph.find_nodes(op="placeholder")
    output = gm.graph.output_node()
    results = list(output.args[0])
    first = signature.num_user_outputs
    for k, i in enumerate(signature.mutated_inputs):
        new, target = results[first + k], placeholders[i]
        if (signature.inputs[i] is not None and layouts[i] != "interleaved") or i in shared:
            continue
        if not isinstance(new, fx.Node) or not _same_geometry(new, target):
            continue
        with gm.graph.inserting_before(output):
            results[first + k] = gm.graph.call_function(torch.ops.aten.copy_.default, (target, new))
            results[first + k].meta["val"] = target.meta["val"]
    output.args = (tuple(results),)
    gm.recompile()


def return_written_regions(gm: fx.GraphModule, layouts: Sequence[str]) -> None:
    """An input the program writes only a region of (``spectrum[:, :, :m, :m] = modes``) comes
    back as that region's new value, which the caller's tensor gets in place of the whole new
    value (``boundary.Boundary.written_regions``). The graph still computes the whole value
    where it reads it; what goes is, per call, a copy of the whole tensor into the caller's
    and, under autograd, a gradient of the whole tensor's size for that output (zeros,
    wherever nothing reads the input afterwards, as in neuraloperator's spectral layers).

    Functionalization writes ``x[a:b, c:d] = v`` as ``slice_scatter(x, slice_scatter(x[a:b],
    v, 1, c, d), 0, a, b)``: the region is read off that nest, each level's base the slice of
    the input the levels above name, with static bounds; a slice of the pairs' own dim (the
    real part of a complex region) is not a region of the complex tensor."""
    signature = gm.realify_signature
    placeholders = gm.graph.find_nodes(op="placeholder")
    output = gm.graph.output_node()
    results = list(output.args[0])
    first = signature.num_user_outputs
    regions: list = [None] * len(signature.mutated_inputs)
    for k, i in enumerate(signature.mutated_inputs):
        complex_input = signature.inputs[i] is not None
        if complex_input and layouts[i] != "interleaved":
            continue
        found = _written_region(gm, results[first + k], placeholders[i], complex_input)
        if found is not None:
            regions[k], results[first + k] = found
    if any(r is not None for r in regions):
        output.args = (tuple(results),)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        gm.realify_signature = dataclasses.replace(signature, written_regions=tuple(regions))


def read_written_inputs_once(gm: fx.GraphModule) -> None:
    """Under autograd, an input the program writes is read through one copy of it taken
    before anything else, and that copy is what backward keeps.

    The caller's tensor gets its new value after the call (``boundary.RealCall``), and the
    graph's input is a view of it (its pairs) or, for a planar input, made from it. Where
    backward needs the old value (``z.mul_(w)``: the gradient of ``w`` is ``g conj(z)``),
    keeping the input itself would hand backward the new value; autograd's version check
    refuses that (eager's in-place op keeps a copy of the old value). The copy is
    ``realify::snapshot``, which no compiler pass removes as a no-op, tagged must-save, so
    AOTAutograd's partitioner keeps it rather than recomputing it from the input in
    backward; where backward reads no old value, nothing keeps it and Inductor folds it into
    the reads."""
    signature = gm.realify_signature
    if not signature.mutated_inputs:
        return
    placeholders = gm.graph.find_nodes(op="placeholder")
    for i in signature.mutated_inputs:
        target = placeholders[i]
        with gm.graph.inserting_after(placeholders[-1]):
            copy = call_on_fakes(gm.graph, torch.ops.realify.snapshot.default, target)
        if copy is None:
            continue
        copy.meta["recompute"] = CheckpointPolicy.MUST_SAVE
        target.replace_all_uses_with(copy, delete_user_cb=lambda user, copy=copy: user is not copy)
    gm.recompile()


def _written_region(gm: fx.GraphModule, new: Any, target: fx.Node, complex_input: bool
                    ) -> tuple[tuple, fx.Node] | None:
    """``(region, value)`` where ``new`` is ``target`` with only ``region`` replaced by
    ``value``, else None. A complex input's new value is either its pairs written
    (``slice_scatter`` nests on ``target``) or its two planes written alike and stacked into
    pairs; ``value`` is then the two planes' values, stacked."""
    if not (complex_input and isinstance(new, fx.Node) and stacks_pairs(new)):
        return _region_of_nest(new, target, None, pair_dim=complex_input)
    re, im = (_region_of_nest(plane, target, k, pair_dim=False) for k, plane in enumerate(new.args[0]))
    if re is None or im is None or re[0] != im[0]:
        return None
    with gm.graph.inserting_before(gm.graph.output_node()):
        value = call_on_fakes(gm.graph, torch.ops.aten.stack.default, [re[1], im[1]], -1)
    return None if value is None else (re[0], value)


def _region_of_nest(new: Any, target: fx.Node, plane: int | None, pair_dim: bool) -> tuple[tuple, fx.Node] | None:
    """``(region, value)`` where ``new`` is ``target`` (its plane ``plane`` where given) with
    only ``region`` replaced by ``value`` (nested ``slice_scatter``, each level's base that
    plane's slice the levels above name), else None; ``pair_dim``: the base's last dim is its
    pairs', not a dim of the complex value."""
    region: tuple = ()
    if not _scatters_into(new, target, plane, region):
        return None
    while True:
        base, value, dim, start, end, step = _slice_scatter_args(new)
        ndim = base.meta["val"].dim()
        if not all(isinstance(b, int) for b in (start, end, step)) or (pair_dim and dim % ndim == ndim - 1):
            return None
        region += ((dim % ndim, start, end, step),)
        if not _scatters_into(value, target, plane, region):
            return region, value
        new = value


def _scatters_into(node: Any, target: fx.Node, plane: int | None, region: tuple) -> bool:
    """Whether ``node`` is a ``slice_scatter`` into ``target``'s plane ``plane``, sliced by ``region``."""
    if not (isinstance(node, fx.Node) and node.target is torch.ops.aten.slice_scatter.default):
        return False
    return _view_path(_slice_scatter_args(node)[0], target) == (plane, region)


def _view_path(node: Any, target: fx.Node) -> tuple[int | None, tuple] | None:
    """``(plane, slices)`` where ``node`` is ``target`` sliced by ``slices`` (dims normalized), and
    of its pairs the plane ``plane`` (``select(..., -1, plane)``; None: the pairs), else None."""
    plane, slices = None, []
    while node is not target:
        if not isinstance(node, fx.Node):
            return None
        part = pair_part(node) if plane is None else None
        if node.target is torch.ops.aten.slice.Tensor:
            slices.append(_slice_args(node))
        elif part is not None:
            plane = part[1]
        else:
            return None
        node = node.args[0]
    return plane, tuple(reversed(slices))


def _slice_scatter_args(node: fx.Node) -> tuple:
    """``slice_scatter(input, src, dim=0, start=None, end=None, step=1)``'s arguments, complete."""
    names = ("input", "src", "dim", "start", "end", "step")
    given = dict(zip(names, node.args), **node.kwargs)
    return (given["input"], given["src"], *_bounds(given))


def _slice_args(node: fx.Node) -> tuple:
    """``slice.Tensor(input, dim=0, start=None, end=None, step=1)``'s bounds, dim normalized."""
    given = dict(zip(("input", "dim", "start", "end", "step"), node.args), **node.kwargs)
    dim, *rest = _bounds(given)
    return (dim % node.args[0].meta["val"].dim(), *rest)


def _bounds(given: dict) -> tuple:
    start, end = given.get("start"), given.get("end")
    return (given.get("dim", 0), 0 if start is None else start,
            sys.maxsize if end is None else end, given.get("step", 1))


def _same_geometry(a: fx.Node, b: fx.Node) -> bool:
    x, y = a.meta.get("val"), b.meta.get("val")
    return (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dtype == y.dtype
            and same_shape(x, y) and x.device == y.device)
