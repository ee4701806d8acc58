"""Inverse real FFTs of a spectrum that is zero beyond a band: transform only the band.

A multi-dimensional ``c2r`` (``torch.fft.irfftn``, ``irfft2``) is a ``c2c`` over every
transformed dimension but the last, then a one-dimensional ``c2r`` over the last (the halved
one); the FFT libraries compute it that way. Where the spectrum is known to be zero from
column ``m`` on in that last dimension, the ``c2c`` of those columns is zero too, so::

    c2r(X, dims) == c2r(pad(c2c(X[..., :m], dims[:-1]), to X's columns), dims[-1:])

with each step normalized by aten's same code (the scales multiply: ``1/(N1 N2) =
1/N1 * 1/N2``, and likewise the square roots). neuraloperator's spectral convolution writes
its ``m`` kept modes into a zero spectrum and inverts it, 9 of 33 columns in its default
model (docs/benchmarks.md, run 25, and "Measurements behind design choices"). The result
equals the full transform's: the columns skipped hold zeros, whose transforms are exact
zeros.

Knowing where a spectrum is zero is a small analysis on the graph (:func:`zero_from`): fills
of zero, and writes of a block into them (``slice_scatter``), through the views and rolls
that move no element across the band's dimension. Anything else is assumed nonzero.

The pass runs on the compile backend's graphs (realify/backend.py), after the layout pass,
and only where the band is at most half the columns (wider bands gain little, and near all
of them the band's copy and padding cost more than the ``c2c`` work saved).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from . import ops  # noqa: F401  (registers the realify:: ops used below)
from .passes import call_on_fakes, keep_unread

aten = torch.ops.aten
realify_ops = torch.ops.realify

__all__ = ["take_band", "transform_only_bands", "zero_from"]


def transform_only_bands(gm: fx.GraphModule) -> None:
    """Rewrite each ``realify::fft_c2r`` of ``gm`` (and of its control-flow submodules) whose
    input is zero beyond a band of at most half its last transformed dimension (module
    docstring)."""
    for module in gm.modules():
        if not isinstance(module, fx.GraphModule):
            continue
        c2rs = module.graph.find_nodes(op="call_function", target=realify_ops.fft_c2r.default)
        if sum(_band_only(module.graph, node) for node in c2rs):
            module.graph.eliminate_dead_code(is_impure_node=keep_unread)
            module.recompile()


def _band_only(graph: fx.Graph, c2r: fx.Node) -> bool:
    pairs, dims, normalization, last_size = c2r.args
    shape = pairs.meta["val"].shape
    complex_dims = len(shape) - 1
    dims = [d % complex_dims for d in dims]
    if len(dims) < 2 or c2r.kwargs or not all(isinstance(s, int) for s in shape):
        return False
    band_dim, columns = dims[-1], shape[dims[-1]]
    band = zero_from(pairs, band_dim)
    if band is None or band == 0 or 2 * band > columns:
        return False
    with graph.inserting_before(c2r):
        kept = take_band(graph, pairs, band_dim, band)
        inner = call_on_fakes(graph, realify_ops.fft_c2c_pairs.default, kept, dims[:-1], normalization, False)
        # the op pads the bins past the band with zeros itself (realify/ops.py)
        result = call_on_fakes(graph, realify_ops.fft_c2r.default, inner, [band_dim], normalization, last_size)
    if result is None or result.meta["val"].shape != c2r.meta["val"].shape:
        return False  # what it made, nothing reads: dead code
    c2r.replace_all_uses_with(result)
    graph.erase_node(c2r)  # a custom op: dead-code elimination keeps it
    return True


def take_band(graph: fx.Graph, node: fx.Node, dim: int, band: int) -> fx.Node:
    """``node[..., :band, ...]`` along ``dim``, sliced before a stack of parts into pairs (a
    compiler writes a stack into a buffer whole: only the band of each part is then
    computed)."""
    if node.target is aten.stack.default and _stacks_last(node):
        parts = [take_band(graph, part, dim, band) for part in node.args[0]]
        return call_on_fakes(graph, aten.stack.default, parts, -1)
    return call_on_fakes(graph, aten.slice.Tensor, node, dim, 0, band)


def zero_from(node: Any, dim: int) -> int | None:
    """An index of ``node``'s dimension ``dim`` from which its value is known to be zero, or
    None. ``dim`` counts from the front and means the same dimension along the chain followed
    (each step keeps the dimensions before the last)."""
    if not isinstance(node, fx.Node) or node.op != "call_function":
        return None
    target, args = node.target, node.args
    if target in _ZERO_FILLS:
        return 0 if _ZERO_FILLS[target](*args, **node.kwargs) else None
    if target is aten.stack.default and _stacks_last(node):
        bands = [zero_from(part, dim) for part in args[0]]
        return None if None in bands else max(bands)
    if target is aten.slice_scatter.default:
        return _scatter_band(node, dim)
    moved_dims = _MOVES.get(target)
    if moved_dims is not None and node.kwargs == {} and dim not in moved_dims(node):
        return zero_from(args[0], dim)
    return None


_ZERO_FILLS = {
    aten.zeros.default: lambda size, **kw: True,
    aten.full.default: lambda size, value, **kw: value == 0,
    aten.zeros_like.default: lambda x, **kw: True,
    aten.full_like.default: lambda x, value, **kw: value == 0,
    aten.new_zeros.default: lambda x, size, **kw: True,
}


def _ndim(node: fx.Node) -> int:
    return node.meta["val"].dim()


# element moves that keep the dimensions before the last, and the dimensions each moves
# elements along (a value zero from a column on stays so along any other dimension)
_MOVES = {
    aten.slice.Tensor: lambda n: {n.args[1] % _ndim(n) if len(n.args) > 1 else 0},
    aten.roll.default: lambda n: {d % _ndim(n) for d in n.args[2]} if len(n.args) > 2 and n.args[2] else set(range(_ndim(n))),
    aten.clone.default: lambda n: set(),
    aten.alias.default: lambda n: set(),
    aten.select.int: lambda n: set(range(_ndim(n.args[0]))) if n.args[1] % _ndim(n.args[0]) != _ndim(n.args[0]) - 1 else set(),
}


def _stacks_last(stack: fx.Node) -> bool:
    dim = stack.args[1] if len(stack.args) > 1 else 0
    return dim % _ndim(stack) == _ndim(stack) - 1


def _scatter_band(scatter: fx.Node, dim: int) -> int | None:
    """``slice_scatter(base, src, d, start, end, step)``: the base's band widened by where
    ``src`` lands."""
    base, src, d, start, end, step = (*scatter.args, *(None,) * (6 - len(scatter.args)))[:6]
    d = (0 if d is None else d) % _ndim(scatter)
    base_band, src_band = zero_from(base, dim), zero_from(src, dim)
    if base_band is None or scatter.kwargs:
        return None
    if d != dim:
        return None if src_band is None else max(base_band, src_band)
    if step not in (None, 1) or not isinstance(start, int) or start < 0:
        return None
    landed = src.meta["val"].shape[dim] if src_band is None else src_band
    return max(base_band, start + landed)
