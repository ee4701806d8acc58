"""Inductor post-grad pass: ``realify::cmul_pairs`` and ``realify::cmm_pairs`` lowered to ATen's
complex kernels (:class:`PairProductsToATen`).

``realify::cmul_pairs`` (realify/runtime/ops.py) multiplies complex values held as
real (re, im) pairs with ATen's vectorized complex kernel. As a Python custom op it costs two
trips through the Python dispatcher per call (its autograd wrapper and its kernel), a fixed
cost comparable to the kernel's own time on the rotary embedding's sizes. A post-grad pass,
run on the forward and the backward graph after AOTAutograd has split them (nothing is
differentiated after it), calls the same ATen kernel directly, through views that cost
nothing::

    cmul_pairs(a, b, conj_a, conj_b)
      = view_as_real(mul(conj?(view_as_complex(a)), conj?(view_as_complex(b))))

The complex values live only between those three ATen calls in Inductor's generated wrapper
(Inductor runs complex ops as ATen fallbacks); the graph realify hands over, and every kernel
Inductor generates, stay real. A conjugated factor is materialized with ``conj_physical``, the
copy eager's ``mul`` makes of a lazily conjugated operand anyway. Only products whose operands
are contiguous are rewritten: Inductor calls ``view_as_complex`` on a contiguous input
(``require_contiguous``), which would otherwise copy, and for a broadcast (expanded) operand
materialize the whole expansion. ``realify::cmm_pairs`` (small matrix products) is lowered the
same way to ``mm``/``bmm`` of the complex views, and always: an operand that is not contiguous
pairs is first laid out contiguous (:func:`realify.passes.gemm_operands.contiguous_operand`),
the copy BLAS would need anyway; a complex64 operand that is a view of contiguous pairs
(einsum's mode-major permutes) is copied as 8-byte words, its views replayed on a float64
bitcast of the pairs (:func:`_contiguous_pairs_operand`). A conjugated GEMM operand is
conjugated by the Inductor kernel that lays it out (:func:`_conjugated_operand`): ATen's
``bmm`` would copy it once more with ``conj_physical``, one more pass over the whole operand. A
product of inner dimension 1 (the backward's outer product of a matrix-vector product) is no
GEMM at all: it becomes the elementwise formula, broadcast, in Inductor
(:func:`_lower_outer_product`), one pass over the output where BLAS's GEMM kernel is slower.
Both measured on S4D's training step (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._prims_common import is_contiguous_or_false
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..runtime import ops as _ops  # noqa: F401  (registers realify::cmul_pairs and cmm_pairs, which this pass rewrites)
from .gemm_operands import contiguous_operand, fake_value

aten = torch.ops.aten


class PairProductsToATen(CustomGraphPass):
    """Post-grad pass: ``realify::cmul_pairs`` -> ATen ``view_as_complex``/``mul``/``view_as_real``,
    ``realify::cmm_pairs`` likewise with ``mm``/``bmm``."""

    def __call__(self, graph: fx.Graph) -> None:
        factors: dict[tuple[fx.Node, bool], fx.Node] = {}  # one complex view per operand, shared by its products
        for node in list(graph.nodes):
            if node.op == "call_function" and node.target in _PAIR_PRODUCTS:
                _lower(graph, node, factors)

    def uuid(self) -> Any:
        # part of Inductor's FX graph cache key: bump when the rewrite changes
        return "realify.PairProductsToATen.v7"


def _lower(graph: fx.Graph, node: fx.Node, factors: dict) -> None:
    a, b, conj_a, conj_b = node.args
    if node.target is torch.ops.realify.cmm_pairs.default:
        if statically_known_true(a.meta["val"].shape[-2] == 1):
            _lower_outer_product(graph, node)
            return
        # a GEMM operand is copied to BLAS's layout anyway: lay it out contiguous (free where
        # Inductor computes it), so that its complex view is free; a conjugated one is
        # conjugated by that same kernel (ATen's bmm would copy it once more to conjugate it)
        a, b = (_conjugated_operand(graph, node, x) if conj else x if _contiguous_pairs(x)
                else _contiguous_pairs_operand(graph, node, x) for x, conj in ((a, conj_a), (b, conj_b)))
        conj_a = conj_b = False
        product_op = aten.mm.default if node.meta["val"].dim() == 3 else aten.bmm.default
    elif all(_contiguous_pairs(x) for x in (a, b)):
        product_op = aten.mul.Tensor
    else:
        return
    with graph.inserting_before(node):
        za = _complex_factor(graph, a, conj_a, factors)
        zb = _complex_factor(graph, b, conj_b, factors)
        product = _call(graph, product_op, za, zb)
        pairs = _call(graph, aten.view_as_real.default, product)
    node.replace_all_uses_with(pairs)
    graph.erase_node(node)


def _parts(graph: fx.Graph, pairs: fx.Node, conj: bool) -> tuple[fx.Node, fx.Node]:
    re, im = (_call(graph, aten.select.int, pairs, -1, part) for part in (0, 1))
    return re, (_call(graph, aten.neg.default, im) if conj else im)


def _interleave(graph: fx.Graph, re: fx.Node, im: fx.Node) -> fx.Node:
    # stack's decomposition, which has run before post-grad passes
    return _call(graph, aten.cat.default, [_call(graph, aten.unsqueeze.default, x, -1) for x in (re, im)], -1)


def _conjugated_operand(graph: fx.Graph, before: fx.Node, pairs: fx.Node) -> fx.Node:
    """(re, -im) of ``pairs``, contiguous: one Inductor kernel (IEEE negation, what
    ``conj_physical`` computes)."""
    with graph.inserting_before(before):
        conjugated = _interleave(graph, *_parts(graph, pairs, True))
    return contiguous_operand(graph, before, conjugated)


def _lower_outer_product(graph: fx.Graph, node: fx.Node) -> None:
    """A complex product of inner dimension 1, ``a' @ b'`` = ``a' * b'`` broadcast, in Inductor:
    (ar br - ai bi, ar bi + ai br) with the conjugated factors' imaginary parts negated. The
    backward of a matrix-vector product makes these; BLAS runs them as a GEMM that moves the
    whole output through a kernel built for reuse."""
    a, b, conj_a, conj_b = node.args
    with graph.inserting_before(node):
        (ar, ai), (br, bi) = _parts(graph, a, conj_a), _parts(graph, b, conj_b)
        # (.., m, 1) parts of a times (.., 1, n) parts of b broadcast to (.., m, n); + 0 as a
        # GEMM's sum starts from +0, so that a -0 product comes out +0, as eager's does
        re = _call(graph, aten.sub.Tensor, _call(graph, aten.mul.Tensor, ar, br), _call(graph, aten.mul.Tensor, ai, bi))
        im = _call(graph, aten.add.Tensor, _call(graph, aten.mul.Tensor, ar, bi), _call(graph, aten.mul.Tensor, ai, br))
        pairs = _interleave(graph, *(_call(graph, aten.add.Tensor, part, 0.0) for part in (re, im)))
    node.replace_all_uses_with(pairs)
    graph.erase_node(node)


def _complex_factor(graph: fx.Graph, pairs: fx.Node, conj: bool, factors: dict) -> fx.Node:
    """The complex view of ``pairs`` (conjugated if ``conj``), made once per graph: the rotary
    embedding's frequency table is a factor of two products."""
    if (pairs, conj) not in factors:  # made before its first product, so before every later one
        z = _call(graph, aten.view_as_complex.default, pairs)
        factors[pairs, conj] = _call(graph, aten.conj_physical.default, z) if conj else z
    return factors[pairs, conj]


def _call(graph: fx.Graph, target: Any, *args: Any) -> fx.Node:
    """A new node with its fake value, computed in the fake mode of its (first) input."""
    node = graph.call_function(target, args)
    vals = fx.node.map_aggregate(args, lambda a: a.meta["val"] if isinstance(a, fx.Node) else a)
    with next(iter(node.all_input_nodes)).meta["val"].fake_mode:
        node.meta["val"] = target(*vals)
    return node




def _contiguous_pairs(x: Any) -> bool:
    """A node whose value is a contiguous real (..., 2) tensor at an even offset, known without
    adding a guard on symbolic sizes."""
    val = fake_value(x)
    return (isinstance(val, torch._subclasses.FakeTensor) and val.dtype in (torch.float32, torch.float64)
            and val.dim() > 0 and statically_known_true(val.shape[-1] == 2) and is_contiguous_or_false(val)
            and statically_known_true(val.storage_offset() % 2 == 0))


_PAIR_PRODUCTS = (torch.ops.realify.cmul_pairs.default, torch.ops.realify.cmm_pairs.default)


def _contiguous_pairs_operand(graph: fx.Graph, before: fx.Node, x: fx.Node) -> fx.Node:
    """Pairs ``x`` laid out contiguous. complex64 pairs that are views of contiguous pairs are
    copied as one 8-byte word per element: the views are replayed on a float64 bitcast of the
    contiguous pairs (a free ATen view), so Inductor's copy kernel moves words; a copy of the
    float32 pairs themselves vectorizes along the pair dimension, two lanes per vector
    operation (a partial load and store per element, several times slower)."""
    views, root = [], x
    while isinstance(root, fx.Node) and root.op == "call_function":
        args = _view_of_words(root)
        if args is None:
            break
        views.append((root.target, args))
        root = root.args[0]
    if not views or not _contiguous_pairs(root) or root.meta["val"].dtype != torch.float32:
        return contiguous_operand(graph, before, x)
    with graph.inserting_before(before):
        words = _call(graph, aten.squeeze.dim, _call(graph, aten.view.dtype, root, torch.float64), -1)
        for target, args in reversed(views):
            words = _call(graph, target, words, *args)
        words = contiguous_operand(graph, before, words)
        return _call(graph, aten.view.dtype, _call(graph, aten.unsqueeze.default, words, -1), torch.float32)


_WORD_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
                         aten.permute.default, aten.unsqueeze.default, aten.transpose.int, aten.slice.Tensor,
                         aten.select.int})


def _view_of_words(view: fx.Node) -> tuple | None:
    """The arguments that take ``view``, a view of pairs, of the words instead (the same
    tensor without its pair dimension); None for any other node, or a view that touches the
    pair dimension (the last)."""
    target, args = view.target, view.args[1:]
    if target not in _WORD_VIEWS or view.kwargs or not isinstance(view.args[0], fx.Node):
        return None
    n = view.args[0].meta["val"].dim()

    def kept(*dims: int) -> bool:  # normalized dims, none of them the pair dimension
        return all(d % n != n - 1 for d in dims)

    if target in (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default):
        size = args[0]  # -1 keeps a size only in expand (in a view it infers one)
        return (list(size[:-1]),) if size[-1] == 2 or (size[-1] == -1 and target is aten.expand.default) else None
    if target is aten.permute.default:
        dims = args[0]
        return (list(dims[:-1]),) if dims[-1] % n == n - 1 else None
    if target is aten.unsqueeze.default:
        dim = args[0] % (n + 1)
        return (dim,) if dim < n else None
    if target in (aten.transpose.int, aten.slice.Tensor, aten.select.int):
        dims = args[:2] if target is aten.transpose.int else args[:1]
        if not kept(*dims):
            return None
        return (*(d % n for d in dims), *args[len(dims):])
    return None
