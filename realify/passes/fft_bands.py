"""Real FFTs of which only a band of bins matters: transform only the band.

**Inverse transforms of a band.** A multi-dimensional ``c2r`` (``torch.fft.irfftn``,
``irfft2``) is a ``c2c`` over every transformed dimension but the last, then a
one-dimensional ``c2r`` over the last (the halved one); the FFT libraries compute it that
way. Where the spectrum is known to be zero from column ``m`` on in that last dimension, the
``c2c`` of those columns is zero too, so::

    c2r(X, dims) == c2r(pad(c2c(X[..., :m], dims[:-1]), to X's columns), dims[-1:])

with each step normalized by aten's same code (the scales multiply: ``1/(N1 N2) =
1/N1 * 1/N2``, and likewise the square roots). neuraloperator's spectral convolution writes
its ``m`` kept modes into a zero spectrum and inverts it, 9 of 33 columns in its default
model (docs/benchmarks.md, "Measurements behind design choices").

**Forward transforms read in a band.** The same model reads only the first ``m`` columns of
its forward ``rfft2``: the last dimension's transform then needs only those bins, and the
other dimensions' ``c2c`` only those columns; the rest of the spectrum is zeros that no
reader reads (the compiler computes what each reader reads of the padded result, never the
padding).

**The last dimension by a GEMM.** On CPU, the last dimension's transform of the band (the
final ``c2r``, the first ``r2c``) is a real matrix product with the DFT matrix of the band's
bins (realify/passes/dft_matrix.py) where that is faster than the FFT library (:func:`gemm_pays`);
elsewhere the inverse's last step stays a ``c2r``, padded inside the op.

Knowing where a spectrum is zero is a small analysis on the graph (:func:`zero_from`): fills
of zero, and writes of a block into them (``slice_scatter``), through the views, rolls,
gathers along other dimensions and scalings by finite non-negative constants that keep a
zero column zero; knowing which bins are read is its mirror image (:func:`read_below`):
slices, through views and rolls. Anything else counts as nonzero, or as read whole.

The pass runs on the compile backend's graphs, after the layout pass, and again on
Inductor's joint forward-and-backward graph (realify/passes/pipeline.py): a one-sided
transform's gradient is a ``c2r`` of the gradient of its modes, zero beyond them as the
forward's spectrum is, known only once AOTAutograd has made the backward. It rewrites only
where the band is at most half the columns (wider bands gain little, and near all of them
the band's copy and padding cost more than the ``c2c`` work saved).

Values: the ``c2c`` steps and a padded ``c2r`` give the full transform's bits (the columns
skipped hold zeros, whose transforms are exact zeros). A GEMM sums the band's ``2m - 1``
terms per output in another order than the FFT (rounding within a few units of the FFT's at
these widths); special values follow docs/numerics.md ("FFTs").
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx as fx

from ..runtime import ops  # noqa: F401  (registers the realify:: ops used below)
from .cleanup import call_on_fakes, keep_unread, same_shape
from .dft_matrix import dft_matrix, with_imaginary_bin_0, without_imaginary_bin_0

aten = torch.ops.aten
realify_ops = torch.ops.realify

__all__ = ["gemm_pays", "read_below", "take_band", "transform_only_bands", "transform_only_bands_in", "zero_from"]


def transform_only_bands(gm: fx.GraphModule) -> None:
    """Rewrite each ``realify::fft_c2r`` of ``gm`` (and of its control-flow submodules) whose
    input is zero beyond a band of at most half its last transformed dimension, and each
    one-sided r2c of which only such a band is read (module docstring)."""
    for module in gm.modules():
        if isinstance(module, fx.GraphModule) and transform_only_bands_in(module.graph):
            module.recompile()


def transform_only_bands_in(graph: fx.Graph) -> bool:
    """:func:`transform_only_bands` on one graph (not its subgraphs); whether it changed."""
    c2rs = graph.find_nodes(op="call_function", target=realify_ops.fft_c2r.default)
    r2cs = [node for op in (realify_ops.fft_r2c.default, realify_ops.fft_r2c_pairs.default)
            for node in graph.find_nodes(op="call_function", target=op)]
    if not sum(_band_only(graph, node) for node in c2rs) + sum(_read_band_only(graph, node) for node in r2cs):
        return False
    graph.eliminate_dead_code(is_impure_node=keep_unread)
    return True


def _band_only(graph: fx.Graph, c2r: fx.Node) -> bool:
    pairs, dims, normalization, last_size = c2r.args
    value = pairs.meta["val"]
    complex_dims = value.dim() - 1
    dims = [d % complex_dims for d in dims]
    if c2r.kwargs or not all(isinstance(s, int) for s in value.shape):
        return False
    band_dim, columns = dims[-1], value.shape[dims[-1]]
    band = zero_from(pairs, band_dim)
    if band is None or band == 0 or 2 * band > columns:
        return False
    by_gemm = band_dim == complex_dims - 1 and _on_blas(value) and gemm_pays(band, last_size, inverse=True)
    if len(dims) == 1 and not by_gemm:
        return False  # a one-dimensional c2r of a band: no c2c to save
    with graph.inserting_before(c2r):
        kept = take_band(graph, pairs, band_dim, band)
        if len(dims) > 1:
            kept = call_on_fakes(graph, realify_ops.fft_c2c_pairs.default, kept, dims[:-1], normalization, False)
        if by_gemm:
            result = _c2r_by_gemm(graph, kept, normalization, last_size)
        else:  # the op pads the bins past the band with zeros itself (realify/runtime/ops.py)
            result = call_on_fakes(graph, realify_ops.fft_c2r.default, kept, [band_dim], normalization, last_size)
    if result is None or not same_shape(result.meta["val"], c2r.meta["val"]):
        return False  # what it made, nothing reads: dead code
    c2r.replace_all_uses_with(result)
    graph.erase_node(c2r)  # a custom op: dead-code elimination keeps it
    return True


def _c2r_by_gemm(graph: fx.Graph, band: fx.Node, normalization: int, n: int) -> fx.Node:
    """The one-dimensional ``c2r`` of ``band`` (pairs, its last complex dim holding the first
    ``m`` bins of an ``n``-point signal's spectrum, the rest zero) as one real GEMM:
    ``band.reshape(-1, 2m) @ D`` (bin 0's imaginary part left out), ``D`` the matrix of
    :func:`realify.passes.dft_matrix.dft_matrix`."""
    shape = list(band.meta["val"].shape)
    rows = without_imaginary_bin_0(graph, call_on_fakes(graph, aten.reshape.default, band, [-1, 2 * shape[-2]]))
    matrix = dft_matrix(graph, band.meta["val"], shape[-2], n, normalization, mirrored=True)
    signal = call_on_fakes(graph, aten.mm.default, rows, matrix)
    return call_on_fakes(graph, aten.reshape.default, signal, [*shape[:-2], n])


def _on_blas(value: torch.Tensor) -> bool:
    """Whether a transform of ``value`` may run as a GEMM: on CPU (where :func:`gemm_pays` was
    measured), in float32 or float64."""
    return value.device.type == "cpu" and value.dtype in (torch.float32, torch.float64)


def gemm_pays(m: int, n: int, inverse: bool) -> bool:
    """Whether the GEMM of ``m`` bins of an ``n``-point transform (2 m n multiply-adds per row
    at BLAS speed) beats the FFT library's transform (about 5 n log2 n operations per row, run
    less efficiently) on CPU. The bounds come from timing both on CPU ("Measurements behind
    design choices", docs/benchmarks.md): the forward transform's GEMM wins up to about
    2m = 5 log2 n; the inverse's, which saves the padding of the missing bins and the FFT
    library's copies too, up to about twice that."""
    return 2 * m <= (10 if inverse else 5) * math.log2(n)


def _read_band_only(graph: fx.Graph, r2c: fx.Node) -> bool:
    """A one-sided r2c whose readers read only its first ``m`` bins along the last transformed
    dimension (the modes a spectral convolution keeps): those bins of the last dimension (by a
    GEMM where it pays, else the one-dimensional r2c cut to them), the other dimensions' c2c
    on them alone, zeros in the columns no one reads (a compiler computes what each reader
    reads of them, never the padding)."""
    x, dims, normalization, onesided = r2c.args
    value = x.meta["val"]
    dims = [d % value.dim() for d in dims]
    if not onesided or r2c.kwargs or not all(isinstance(s, int) for s in value.shape):
        return False
    n = value.shape[dims[-1]]
    columns = n // 2 + 1
    parts = r2c.target is realify_ops.fft_r2c.default  # (re, im) tuple, else pairs
    readers = list(r2c.users) if parts else [r2c]
    if parts and any(user.target is not operator.getitem for user in readers):
        return False
    bands = [read_below(reader, dims[-1]) for reader in readers]
    if None in bands or max(bands) == 0 or 2 * max(bands) > columns:
        return False
    m = max(bands)
    by_gemm = dims[-1] == value.dim() - 1 and _on_blas(value) and gemm_pays(m, n, inverse=False)
    if len(dims) == 1 and not by_gemm:
        return False  # a one-dimensional r2c of all bins: nothing to save
    with graph.inserting_before(r2c):
        if by_gemm:
            rows = call_on_fakes(graph, aten.reshape.default, x, [-1, n])
            matrix = dft_matrix(graph, value, m, n, normalization, mirrored=False)
            transposed = call_on_fakes(graph, aten.permute.default, matrix, [1, 0])
            bins = with_imaginary_bin_0(graph, call_on_fakes(graph, aten.mm.default, rows, transposed), rows)
            band = call_on_fakes(graph, aten.reshape.default, bins, [*value.shape[:-1], m, 2])
        else:
            last = call_on_fakes(graph, realify_ops.fft_r2c_pairs.default, x, dims[-1:], normalization, True)
            band = call_on_fakes(graph, aten.slice.Tensor, last, dims[-1], 0, m)
        if len(dims) > 1:
            band = call_on_fakes(graph, realify_ops.fft_c2c_pairs.default, band, dims[:-1], normalization, True)
        padding = [0, 0] * (value.dim() - dims[-1]) + [0, columns - m]
        pairs = call_on_fakes(graph, aten.constant_pad_nd.default, band, padding, 0.0)
        for reader in readers if parts else ():
            reader.replace_all_uses_with(call_on_fakes(graph, aten.select.int, pairs, -1, reader.args[1]))
            graph.erase_node(reader)
    if not parts:
        r2c.replace_all_uses_with(pairs)
    graph.erase_node(r2c)  # a custom op: dead-code elimination keeps it
    return True


def read_below(node: fx.Node, dim: int) -> int | None:
    """How many leading indices of ``node``'s dimension ``dim`` (counted from the front) its
    readers read, or None where some reader may read any (the mirror of :func:`zero_from`):
    slices of that dimension from a non-negative start read up to their end; slices of other
    dimensions, rolls along them, selects, clones and unsqueezes pass the question on."""
    widest = 0
    for user in node.users:
        read = _read_by(user, node, dim)
        if read is None:
            return None
        widest = max(widest, read)
    return widest


# readers of a tensor's shape and dtype alone (torch.zeros_like(spectrum))
_SHAPE_ONLY = {aten.zeros_like.default, aten.empty_like.default, aten.full_like.default, aten.ones_like.default,
               aten.new_zeros.default, aten.new_empty.default, aten.new_full.default, aten.new_ones.default}


def _read_by(user: fx.Node, node: fx.Node, dim: int) -> int | None:
    if user.op == "call_function" and user.target in _SHAPE_ONLY:
        return 0
    if (user.op != "call_function" or (user.kwargs and user.target is not aten.clone.default) or not user.args
            or user.args[0] is not node or node in user.args[1:]):
        return None
    target, args, ndim = user.target, user.args, _ndim(node)
    size = node.meta["val"].shape[dim]
    if target is aten.slice.Tensor:
        along, start, end, step = (*args[1:], *(0, None, None, 1)[len(args) - 1:])
        if along % ndim != dim:
            return read_below(user, dim)
        start, end = start or 0, size if end is None else end
        if not (isinstance(start, int) and isinstance(end, int) and start >= 0 and step == 1):
            return None
        return min(end + size if end < 0 else end, size)
    if target is aten.select.int:
        along = args[1] % ndim
        return read_below(user, dim - (along < dim)) if along != dim else None
    if target is aten.unsqueeze.default:
        new = args[1] % (ndim + 1)
        return read_below(user, dim + (new <= dim))
    moved_dims = _MOVES.get(target)
    if moved_dims is not None and dim not in moved_dims(user):
        return read_below(user, dim)
    return None


def take_band(graph: fx.Graph, node: fx.Node, dim: int, band: int) -> fx.Node:
    """``node[..., :band, ...]`` along ``dim``, sliced before a stack of parts into pairs (a
    compiler writes a stack into a buffer whole: only the band of each part is then
    computed)."""
    if node.target is aten.stack.default and _stacks_last(node):
        parts = [take_band(graph, part, dim, band) for part in node.args[0]]
        return call_on_fakes(graph, aten.stack.default, parts, -1)
    return call_on_fakes(graph, aten.slice.Tensor, node, dim, 0, band)


def zero_from(node: Any, dim: int) -> int | None:
    """An index of ``node``'s dimension ``dim`` (counted from the front) from which its value is
    known to be zero, or None. Each step of the chain followed asks its input about the same
    dimension, wherever that input holds it."""
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
    if target is aten.cat.default:  # the stack of parts into pairs, after decomposition
        return _cat_band(node, dim)
    if target is aten.unsqueeze.default:
        new = args[1] % _ndim(node)
        return None if new == dim else zero_from(args[0], dim - 1 if new < dim else dim)
    if target is aten.index.Tensor and _gathers_along_other_dim(node, dim):
        return zero_from(args[0], dim)
    if target is aten.mul.Tensor:  # the gradient of a one-sided spectrum, its mirrored bins halved
        return _scaled_band(node, dim)
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
    aten.roll.default: lambda n: (
        {d % _ndim(n) for d in n.args[2]} if len(n.args) > 2 and n.args[2] else set(range(_ndim(n)))),
    aten.clone.default: lambda n: set(),
    aten.alias.default: lambda n: set(),
    aten.select.int: lambda n: (
        set(range(_ndim(n.args[0]))) if n.args[1] % _ndim(n.args[0]) != _ndim(n.args[0]) - 1 else set()),
}


def _stacks_last(stack: fx.Node) -> bool:
    dim = stack.args[1] if len(stack.args) > 1 else 0
    return dim % _ndim(stack) == _ndim(stack) - 1


def _cat_band(cat: fx.Node, dim: int) -> int | None:
    joined = (cat.args[1] if len(cat.args) > 1 else 0) % _ndim(cat)
    if joined == dim or cat.kwargs:
        return None
    bands = [zero_from(part, dim) for part in cat.args[0]]
    return None if None in bands else max(bands)


def _gathers_along_other_dim(index: fx.Node, dim: int) -> bool:
    """``x[..., i, ...]``: one 1-D index tensor, on a dimension other than ``dim`` (every
    dimension keeps its place; fftshift's gradient is such a gather)."""
    indexed = [(d, i) for d, i in enumerate(index.args[1]) if i is not None]
    return (len(indexed) == 1 and indexed[0][0] != dim and isinstance(indexed[0][1], fx.Node)
            and indexed[0][1].meta["val"].dim() == 1)


def _scaled_band(mul: fx.Node, dim: int) -> int | None:
    """``x * s`` with ``x`` zero from a column on and ``s`` finite and non-negative (``+0 * s``
    is ``+0``; an infinite or NaN ``s`` would make a NaN, a negative one ``-0``), not widening
    ``x`` by broadcasting."""
    for x, scale in (mul.args, mul.args[::-1]):
        if (isinstance(x, fx.Node) and same_shape(x.meta["val"], mul.meta["val"])
                and _finite_non_negative(scale)):
            return zero_from(x, dim)
    return None


def _finite_non_negative(x: Any, dtype: torch.dtype | None = None) -> bool:
    """Whether ``x`` is a number (finite in ``dtype``), or a graph value made only of numbers,
    that are finite and >= 0: constants (``scalar_tensor``, ``full``), ``where`` between such
    values, and their views."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        largest = torch.finfo(dtype).max if dtype is not None and dtype.is_floating_point else math.inf
        return math.isfinite(x) and 0 <= x <= largest
    if not isinstance(x, fx.Node) or x.op != "call_function":
        return False
    dtype = x.meta["val"].dtype
    if x.target is aten.scalar_tensor.default:
        return _finite_non_negative(x.args[0], dtype)
    if x.target is aten.full.default:
        return _finite_non_negative(x.args[1], dtype)
    if x.target is aten.where.self:
        return _finite_non_negative(x.args[1], dtype) and _finite_non_negative(x.args[2], dtype)
    if x.target in _VIEWS:
        return _finite_non_negative(x.args[0])
    return False


_VIEWS = {aten.reshape.default, aten.view.default, aten.expand.default, aten.unsqueeze.default,
          aten.clone.default, aten.alias.default}


def _scatter_band(scatter: fx.Node, dim: int) -> int | None:
    """``slice_scatter(base, src, d, start, end, step)``: the base's band widened by where
    ``src`` lands."""
    base, src, d, start, _end, step = (*scatter.args, *(None,) * (6 - len(scatter.args)))[:6]
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
