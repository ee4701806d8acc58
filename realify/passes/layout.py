"""The layout pass: where complex values sit in memory, decided after planarizing.

Rules are formulas on planar parts. A complex value that sits in memory as (re, im) pairs, an
input that enters interleaved or a ``view_as_complex`` in the program, enters the real graph
as the two parts ``select(P, -1, 0)`` and ``select(P, -1, 1)`` of one real ``(..., 2)`` tensor
``P``. Whether to keep working on ``P`` itself is this pass's decision, made by four
rewrites, each a pattern and its replacement, applied in one walk over the graph in order (a
rewrite's result is already in the form the later patterns look for; rule 4 applies at the
FFT, before the nodes that rule 1 and 2 then rewrite; the walk repeats while it changes
something, since rule 3 can make an earlier FFT's result wanted only as pairs):

1. **A view of a part is a part of the view**: ``V(select(P, -1, k))`` becomes
   ``select(V'(P), -1, k)``, ``V'`` the same view with the pair dimension kept last
   (unsqueeze, squeeze, slice, select, expand, view, permute, transpose; ``roll`` along
   given dims, which moves elements as a view would; and a contiguous ``clone``, einsum's copy
   of an operand it cannot view as matrices), one ``V'(P)`` node shared by both parts. The
   rotary embedding's ``freqs[None, :, None, :]`` stays pairs. Writes of a part into the same
   part of other pairs (``slice_scatter``, ``select_scatter``: ``out[..., :m,
   :m] = block``) are the same write of the pairs into the pairs, one node for both parts:
   a data-movement kernel then copies whole pairs, contiguous in both, instead of writing
   each part with stride-2 stores (neuraloperator's spectral convolution writes its mixed
   modes into a zero spectrum, rolls it and hands it to the inverse FFT as pairs).
2. **Parts put back together are the pairs**: ``stack([select(P, -1, 0), select(P, -1, 1)],
   -1)`` (``view_as_real`` of such a value, an FFT's input) becomes ``P``: no copy. Two parts
   filled with one constant (``torch.zeros`` of a complex dtype, a spectrum to write modes
   into) stacked into pairs are that constant filled into pairs: one contiguous fill where
   the stack writes each part with stride-2 stores. Two parts computed alike from the two
   parts of pairs, the same elementwise ops with the same other operands (``x * 2``, ``x * r
   + y`` for a real ``r``, ``(x - y) / 2``), stacked into pairs are those ops on the pairs:
   ``op(select(P, -1, 0), t)`` and ``op(select(P, -1, 1), t)`` stacked become ``op(P, t')``,
   ``t'`` a tensor operand shared by both parts given a trailing dim of 1 (a 0-d one, which
   takes part in type promotion as a number, stays 0-d). Each part's planar kernel reads and
   writes every other element; the ops on the pairs run one contiguous, vectorized loop
   (docs/benchmarks.md, "Measurements behind design choices").
3. **A product on pairs** (the compile backend only, ``realify.config.interleaved_products``):
   the planar product ``(ar br - ai bi, ar bi + ai br)`` of two complex values, one of which
   the program itself viewed as pairs, becomes ``realify::cmul_pairs`` on the pairs, ATen's
   vectorized complex kernel (a factor without pairs is stacked into them, a copy the
   compiler fuses into the kernel that computes it). There the product usually goes straight
   back out through ``view_as_real`` (rotary embeddings), and the planar formula would gather
   the pairs and scatter the result with stride-2 accesses: about twice ATen's kernel's time
   even vectorized (docs/benchmarks.md, "Measurements behind design choices"). Products of
   inputs that entered interleaved stay planar where they feed other arithmetic, which a
   compiler fuses with the planar formula, and go to the pairs where the product's result is
   only wanted as pairs: stacked back into pairs, directly or through ops computed alike on
   both parts (rule 2), as a rotation of interleaved values returned interleaved is. A
   conjugated factor (``b.conj()``: its imaginary part negated) is the pairs' op's flag, not
   a copy. Exported programs keep standard ops only.
   A **matrix product** (``mm``, ``bmm``) of small arithmetic intensity, ``m n k / (m k + k n
   + m n)`` below :data:`PAIRS_GEMM_INTENSITY` (inner dimension ``k`` at least
   :data:`PAIRS_GEMM_MIN_INNER`), becomes ``realify::cmm_pairs``, BLAS's
   complex GEMM on the pairs, whatever its factors' layout: on planes, splitting the
   operands and interleaving the result move every element through memory once more, which
   the real GEMMs (three with Gauss's form) repay only for large products. That is the
   threshold rule; the compile backend instead picks each matrix product's form (pairs, 4
   real products or Gauss's 3) by timing them at its shapes, with this rule where it times
   nothing (realify/passes/gemm_form.py), and writes the choice on the real products.
   Tagged products (complex autocast) stay planar: they run in lower precision.

4. **An FFT whose result is only wanted as pairs computes the pairs**: where every use of
   the planar parts of ``realify::fft_c2c``/``fft_r2c`` (through views and rolls on them, and
   ops computed alike on both) ends in a stack back into pairs or a copy into the parts of
   pairs, the FFT becomes its ``*_pairs`` variant, which returns the FFT library's own
   interleaved result: no split into planes and back. Rules 1 and 2 then carry the views,
   rolls (``fftshift``), ops and stacks over to the pairs.
   A spectrum that leaves the graph (at a graph break, or as an output) costs no copy.

Rules 1, 2 and 4 change no value and no layout a caller can see (the graph's outputs are laid out
by realify/runtime/boundary.py); rule 3 changes how a product rounds only as ATen's complex kernel
(or BLAS's complex GEMM) rounds it: eager's rounding.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..runtime import ops  # noqa: F401  (registers the realify:: ops rule 4 rewrites)
from . import gemm_form
from .autocast import tagged_dtype
from .cleanup import call_on_fakes, keep_unread, same_shape
from .gemm_form import PAIRS_GEMM_INTENSITY, PAIRS_GEMM_MIN_INNER

aten = torch.ops.aten


def place_pairs(gm: fx.GraphModule, *, products: bool = False, boundary: frozenset[fx.Node] = frozenset(),
                gemm_multiplications: int = 3) -> None:
    """Apply the rewrites above to ``gm``; rule 3 only with ``products``, never to a product
    whose pairs all come from ``boundary`` (the placeholders of complex inputs). In the
    compile backend (:func:`realify.passes.gemm_form.current` holds a choice), rule 3's
    matrix products take the form realify/passes/gemm_form.py picks, among the pairs (with
    ``products``), 4 real products and Gauss's 3 (with ``gemm_multiplications`` 3).

    The walk repeats while it changes the graph (at most :data:`_MAX_WALKS` times): a product
    rule 3 moves onto pairs stacks its factors into pairs, which can make an FFT earlier in the
    graph one whose result is only wanted as pairs (rule 4) on the next walk; neuraloperator's
    spectral convolution reads the forward FFT's modes into such a product."""
    how = gemm_form.current()
    choice = gemm_form.Choice("threshold" if how is None else how, products, gemm_multiplications == 3)
    # outside the compile backend, matrix products are only looked at for the pairs
    matrices = products or how is not None
    changed = False
    for _ in range(_MAX_WALKS):
        if not _walk(gm.graph, products, boundary, choice, matrices):
            break
        changed = True
        gm.graph.eliminate_dead_code(is_impure_node=keep_unread)  # the next walk sees only live uses
    if changed:
        gm.recompile()


_MAX_WALKS = 3


def _walk(graph: fx.Graph, products: bool, boundary: frozenset[fx.Node], choice: gemm_form.Choice,
          matrices: bool) -> bool:
    views: dict[tuple, fx.Node] = {}  # V'(P) nodes made so far, shared by the parts of P
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in _FFT_PAIRS:
            changed |= _fft_as_pairs(graph, node)
        elif node.target in _ON_PAIRS:
            changed |= _view_of_part(graph, node, views)
        elif node.target in _SCATTERS_ON_PAIRS:
            changed |= _scatter_of_parts(graph, node, views)
        elif node.target is aten.stack.default:
            changed |= _parts_stacked(graph, node)
        elif matrices and node.target is aten.sub.Tensor:  # matrices holds with products
            changed |= _product_on_pairs(graph, node, boundary, products, choice, matrices)
    return changed


# ---- rule 1: views ---------------------------------------------------------------------------


def _dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


# Each view op on a part, as the op and arguments that take the same view of the pairs (``p``:
# the pairs' fake value, ``n``: the part's number of dimensions).
_VIEWS_ON_PAIRS: dict[Any, Callable[..., tuple[Any, tuple]]] = {
    aten.unsqueeze.default: lambda p, n, dim: (aten.unsqueeze.default, (_dim(dim, n + 1),)),
    # the pairs' last dim is 2, never squeezed: squeezing them all squeezes the part's, at
    # every size (a list of the dims of size 1 would fix them at the trace's sizes)
    aten.squeeze.default: lambda p, n: (aten.squeeze.default, ()),
    aten.squeeze.dim: lambda p, n, dim: (aten.squeeze.dims, ([_dim(dim, n)] if n else [],)),
    aten.squeeze.dims: lambda p, n, dims: (aten.squeeze.dims, ([_dim(d, n) for d in dims] if n else [],)),
    aten.slice.Tensor: lambda p, n, dim=0, start=None, end=None, step=1:
        (aten.slice.Tensor, (_dim(dim, n), start, end, step)),
    aten.select.int: lambda p, n, dim, index: (aten.select.int, (_dim(dim, n), index)),
    aten.expand.default: lambda p, n, size, implicit=False: (aten.expand.default, ([*size, 2],)),
    aten.view.default: lambda p, n, size: (aten.view.default, ([*size, 2],)),
    aten._unsafe_view.default: lambda p, n, size: (aten._unsafe_view.default, ([*size, 2],)),
    aten.permute.default: lambda p, n, dims: (aten.permute.default, ([*(_dim(d, n) for d in dims), n],)),
    aten.transpose.int: lambda p, n, d0, d1: (aten.transpose.int, (_dim(d0, n), _dim(d1, n))),
}
# element moves that act on positions as views do (a roll without dims rolls the flattened
# tensor, which on pairs would move parts between elements: left as it is)
_ON_PAIRS = {
    **_VIEWS_ON_PAIRS,
    aten.roll.default: lambda p, n, shifts, dims=(): (
        (aten.roll.default, (shifts, [_dim(d, n) for d in dims])) if dims else None),
    # a contiguous copy of a part is a part of a contiguous copy of the pairs (einsum copies an
    # operand it cannot view as a matrix; the copy then moves whole pairs)
    aten.clone.default: lambda p, n, memory_format=None:
        (aten.clone.default, (), _CONTIGUOUS) if memory_format == torch.contiguous_format else None,
}
_CONTIGUOUS = {"memory_format": torch.contiguous_format}


def _moves_parts(node: fx.Node) -> bool:
    """Whether ``node`` is an element move of its first argument that rule 1 may carry over to
    pairs (keywords: only a copy's memory format). A copy read, itself or through views, by
    the graph's output or by control flow stays: the parts of one copy of the pairs would be
    values that alias each other, which outputs and control flow's operands must not."""
    if node.target is aten.clone.default:
        return not _read_beyond_aten(node)
    return node.target in _ON_PAIRS and not node.kwargs


def _read_beyond_aten(node: fx.Node) -> bool:
    """Whether ``node``, or a view of it, is read by the output or by anything but an aten op."""
    todo = [node]
    while todo:
        for user in todo.pop().users:
            if user.op == "output" or not (isinstance(user.target, torch._ops.OpOverload)
                                           and user.target.namespace == "aten"):
                return True
            if user.target in _VIEWS_ON_PAIRS or user.target is aten.alias.default:
                todo.append(user)
    return False


# a part written into a part at given positions: the same write of the pairs into the pairs
_SCATTERS_ON_PAIRS: dict[Any, Callable[..., tuple]] = {
    aten.slice_scatter.default: lambda n, dim=0, start=None, end=None, step=1: (_dim(dim, n), start, end, step),
    aten.select_scatter.default: lambda n, dim, index: (_dim(dim, n), index),
}


def _scatter_of_parts(graph: fx.Graph, node: fx.Node, views: dict) -> bool:
    """``scatter(select(P, -1, k), select(Q, -1, k), ...)`` becomes ``select(scatter(P, Q,
    ...), -1, k)``, one ``scatter(P, Q)`` shared by both parts."""
    into, src = pair_part(node.args[0]), pair_part(node.args[1])
    if into is None or src is None or into[1] != src[1] or node.kwargs:
        return False
    (pairs, k), (src_pairs, _) = into, src
    if pairs.meta["val"].dtype != src_pairs.meta["val"].dtype:
        return False
    args = _SCATTERS_ON_PAIRS[node.target](pairs.meta["val"].dim() - 1, *node.args[2:])
    return _part_of_shared(graph, node, views, k, node.target, pairs, src_pairs, *args)


def _view_of_part(graph: fx.Graph, node: fx.Node, views: dict) -> bool:
    part = pair_part(node.args[0])
    if part is None or not _moves_parts(node):
        return False
    pairs, k = part
    p = pairs.meta["val"]
    on_pairs = _ON_PAIRS[node.target](p, p.dim() - 1, *node.args[1:], **node.kwargs)
    if on_pairs is None:
        return False
    op, args, *kwargs = on_pairs
    return _part_of_shared(graph, node, views, k, op, pairs, *args, **(kwargs[0] if kwargs else {}))


def _part_of_shared(graph: fx.Graph, node: fx.Node, views: dict, k: int, op: Any, *args: Any, **kwargs: Any) -> bool:
    """Replace ``node`` by part ``k`` of ``op(*args, **kwargs)`` on pairs, made once for both
    parts (``views`` holds those made so far)."""
    # sizes may be symbolic: keyed as written
    key = (op, *(a if isinstance(a, fx.Node) else repr(a) for a in args), repr(kwargs))
    made = views.get(key)
    if made is None:
        with graph.inserting_before(node):
            made = call_on_fakes(graph, op, *args, **kwargs)
        if made is None:
            return False
        views[key] = made
    with graph.inserting_before(node):
        replacement = call_on_fakes(graph, aten.select.int, made, -1, k)
    node.replace_all_uses_with(replacement)
    return True


# ---- rule 2: stacks --------------------------------------------------------------------------


def _parts_stacked(graph: fx.Graph, node: fx.Node) -> bool:
    if not stacks_pairs(node):
        return False
    last_before = node.prev  # what the rewrites below make, they insert before the stack
    pairs = _pairs_of(*node.args[0]) or _filled_pairs(graph, node) or _alike_on_pairs(graph, node, *node.args[0])
    if pairs is None or not same_shape(pairs.meta["val"], node.meta["val"]):
        # a lift declined partway leaves nothing behind (the next walk would see it again)
        while node.prev is not last_before:
            graph.erase_node(node.prev)
        return False
    node.replace_all_uses_with(_laid_out_as(graph, node, pairs))
    return True


# ops whose result depends on their operand's strides, not only its values
_READS_STRIDES = (aten.view.default, aten._unsafe_view.default, aten.view.dtype, aten.as_strided.default)


def _laid_out_as(graph: fx.Graph, stack: fx.Node, pairs: fx.Node) -> fx.Node:
    """``pairs``, or a contiguous copy of it where they are strided (a strided input's) and an op
    reading the stack's result depends on the contiguous strides the stack gave it."""
    if (all(statically_known_true(a == b) for a, b in zip(pairs.meta["val"].stride(), stack.meta["val"].stride()))
            or not any(user.target in _READS_STRIDES for user in stack.users)):
        return pairs
    with graph.inserting_before(stack):
        return call_on_fakes(graph, aten.clone.default, pairs, memory_format=torch.contiguous_format)


def _alike_on_pairs(graph: fx.Graph, stack: fx.Node, re: Any, im: Any) -> fx.Node | None:
    """The pairs ``op(..)``, made before ``stack``, where ``re`` and ``im`` are the same
    elementwise ``op`` of the two parts of pairs (or of two values computed alike in turn) and
    of operands shared by both; None for any other parts. Each part replaced is read by the
    stack or the next op of the chain alone: a part read elsewhere too would be computed twice."""
    if not (_computed_alike(re, im) and len(re.users) == 1 and len(im.users) == 1):
        return None
    args = []
    for a, b in zip(re.args, im.args):
        if _one_value(a, b):
            args.append(_shared_operand(graph, stack, a))
        else:
            args.append(_pairs_of(a, b) or _alike_on_pairs(graph, stack, a, b))
        if args[-1] is None:
            return None
    with graph.inserting_before(stack):
        pairs = call_on_fakes(graph, re.target, *args, **re.kwargs)
    if pairs is None or pairs.meta["val"].dtype != re.meta["val"].dtype:
        return None  # what it made, nothing reads: dead code
    return pairs


def _one_value(a: Any, b: Any) -> bool:
    """Whether operands ``a`` and ``b`` are one value: one node, two reads of one constant
    attribute, or equal numbers (-0.0 and 0.0 are two)."""
    if isinstance(a, fx.Node) or isinstance(b, fx.Node):
        return a is b or (isinstance(a, fx.Node) and isinstance(b, fx.Node)
                          and a.op == b.op == "get_attr" and a.target == b.target)
    return type(a) is type(b) and a == b and _signbit(a) == _signbit(b)


def _computed_alike(re: Any, im: Any) -> bool:
    """Whether ``re`` and ``im`` are two calls of one elementwise, deterministic aten op with
    the same keywords (none of them a node) and as many arguments, none a list."""
    if not (isinstance(re, fx.Node) and isinstance(im, fx.Node) and re is not im
            and re.op == im.op == "call_function" and re.target is im.target):
        return False
    op = re.target
    return (isinstance(op, torch._ops.OpOverload) and torch.Tag.pointwise in op.tags
            and torch.Tag.nondeterministic_seeded not in op.tags and len(re.args) == len(im.args)
            and re.kwargs == im.kwargs and not any(isinstance(v, fx.Node) for v in re.kwargs.values())
            and not any(isinstance(a, (list, tuple)) for a in (*re.args, *im.args)))


def _shared_operand(graph: fx.Graph, stack: fx.Node, operand: Any) -> Any:
    """``operand`` of both parts as an operand of the op on pairs: a tensor of one or more
    dims gains a trailing dim of 1, to broadcast over the pair dim."""
    value = operand.meta.get("val") if isinstance(operand, fx.Node) else None
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return operand
    with graph.inserting_before(stack):
        return call_on_fakes(graph, aten.unsqueeze.default, operand, -1)


_FILLS = {aten.zeros.default: lambda size, **kw: (size, 0, kw),
          aten.full.default: lambda size, value, **kw: (size, value, kw)}


def _signbit(value: Any) -> bool:
    return isinstance(value, float) and math.copysign(1.0, value) < 0


def _filled_pairs(graph: fx.Graph, stack: fx.Node) -> fx.Node | None:
    """``full(size + [2], value)`` for ``stack([re, im], -1)`` of two fills of ``size`` with one
    ``value`` (and dtype, device), made before the stack; None for any other parts."""
    fills = [_FILLS[n.target](*n.args, **n.kwargs) if isinstance(n, fx.Node) and n.target in _FILLS else None
             for n in stack.args[0]]
    if fills[0] is None or fills[0] != fills[1] or _signbit(fills[0][1]) != _signbit(fills[1][1]):
        return None  # (-0.0 == 0.0)
    size, value, kwargs = fills[0]
    with graph.inserting_before(stack):
        pairs = graph.call_function(aten.full.default, ([*size, 2], value), kwargs)
    pairs.meta = {**stack.meta, "val": stack.meta["val"]}
    return pairs


# ---- rule 3: products ------------------------------------------------------------------------


_MATRIX_PRODUCTS = (aten.mm.default, aten.bmm.default)


def _product_on_pairs(graph: fx.Graph, sub: fx.Node, boundary: frozenset[fx.Node], products: bool,
                      choice: gemm_form.Choice, matrices: bool) -> bool:
    """``sub`` = ar br - ai bi of a planar product (realify/rules/_algebra.py, ``cmul``), whose
    imaginary part ar bi + ai br is another node: both replaced by the parts of
    ``cmul_pairs`` where a factor is pairs the program made (with ``products``), or of
    ``cmm_pairs`` for a matrix product whose chosen form is the pairs (with ``matrices``)."""
    for target in (aten.mul.Tensor, *_MATRIX_PRODUCTS) if products else _MATRIX_PRODUCTS:
        factors = _product_factors(sub, target)
        if factors is not None:
            break
    else:
        return False
    (ar, ai, br, bi), add = factors
    (a, conj_a), (b, conj_b) = _pairs_or_conjugate(ar, ai), _pairs_or_conjugate(br, bi)
    dtype = sub.meta["val"].dtype
    if dtype not in (torch.float32, torch.float64) or any(
            p is not None and p.meta["val"].dtype != dtype for p in (a, b)):
        return False
    if target is aten.mul.Tensor:
        pairs_op = torch.ops.realify.cmul_pairs.default
        if not (any(p is not None and _root(p) not in boundary for p in (a, b)) or _only_as_pairs(sub, add)):
            return False
    else:
        pairs_op = torch.ops.realify.cmm_pairs.default
        if not matrices or any(tagged_dtype(p) is not None for p in (*sub.args, *add.args)):
            return False
        if _matrix_form(sub, add, (ar, ai, a), (br, bi, b), choice) != "pairs":
            return False
    with graph.inserting_before(sub):
        a = a if a is not None else call_on_fakes(graph, aten.stack.default, [ar, ai], -1)
        b = b if b is not None else call_on_fakes(graph, aten.stack.default, [br, bi], -1)
        product = call_on_fakes(graph, pairs_op, a, b, conj_a, conj_b)
        if product is None or product.meta["val"].shape[:-1] != sub.meta["val"].shape:
            return False  # what it made, nothing reads: dead code
        re, im = (call_on_fakes(graph, aten.select.int, product, -1, k) for k in (0, 1))
    sub.replace_all_uses_with(re)
    add.replace_all_uses_with(im)
    return True


def _product_factors(sub: fx.Node, target: Any) -> tuple[tuple[fx.Node, ...], fx.Node] | None:
    """The parts (ar, ai, br, bi) of a planar product's factors and its imaginary part's node,
    where ``sub`` is ``P(ar, br) - P(ai, bi)`` and ``P(ar, bi) + P(ai, br)`` exists, ``P`` the
    real product ``target``."""
    if len(sub.args) != 2 or sub.kwargs:
        return None
    left, right = sub.args
    if not (_is_product(left, target) and _is_product(right, target)):
        return None
    (ar, br), (ai, bi) = left.args, right.args
    if not all(isinstance(x, fx.Node) for x in (ar, ai, br, bi)):
        return None
    for user in ar.users:
        if _is_product(user, target) and user.args == (ar, bi):
            for add in user.users:
                if (add.target is aten.add.Tensor and not add.kwargs and len(add.args) == 2 and add.args[0] is user
                        and _is_product(add.args[1], target) and add.args[1].args == (ai, br)):
                    return (ar, ai, br, bi), add
    return None


def _is_product(node: Any, target: Any) -> bool:
    return isinstance(node, fx.Node) and node.target is target and len(node.args) == 2 and not node.kwargs


def _matrix_form(sub: fx.Node, add: fx.Node, a: tuple, b: tuple, choice: gemm_form.Choice) -> str:
    """The form of the complex matrix product whose real part is ``sub`` and imaginary part
    ``add`` (``a``, ``b``: each factor's planes and pairs or None), picked once and written on
    its four real products (realify/passes/gauss.py leaves those marked "4m" as they are)."""
    terms = (*sub.args, *add.args)
    form = terms[0].meta.get(gemm_form.FORM_KEY)
    if form is not None:
        return form
    rule = "pairs" if choice.pairs and _small_matrix_product(sub.args[0]) else ("3m" if choice.gauss else "4m")
    product = terms[0]
    inner = product.args[0].meta["val"].shape[-1]
    form, how = gemm_form.decide(choice, _described(product, a, b), inner if isinstance(inner, int) else None, rule)
    for term in terms:
        term.meta[gemm_form.FORM_KEY] = form
    if gemm_form.current() is not None:
        gemm_form.count(form, how)
    return form


def _described(product: fx.Node, *factors: tuple) -> gemm_form.MatrixProduct | None:
    """The product as :mod:`realify.passes.gemm_form` times it; None where a size or stride
    is symbolic."""
    operands = []
    for re, im, pairs in factors:
        if pairs is not None:
            layout = _static_layout(pairs)
            operands.append(gemm_form.Operand(layout) if layout is not None else None)
        else:
            planes = tuple(_static_layout(p) for p in (re, im))
            operands.append(gemm_form.Operand(None, planes) if None not in planes else None)
    value = product.meta["val"]
    if None in operands:
        return None
    op = "mm" if product.target is aten.mm.default else "bmm"
    return gemm_form.MatrixProduct(op, operands[0], operands[1], str(value.dtype).removeprefix("torch."),
                                   str(value.device))


def _static_layout(node: fx.Node) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    try:
        shape, stride = tuple(value.shape), tuple(value.stride())
    except RuntimeError:  # a layout fake tensors do not know
        return None
    if not all(type(d) is int for d in (*shape, *stride)):
        return None
    return shape, stride


def _small_matrix_product(product: fx.Node) -> bool:
    """A matrix product whose static sizes put it below :data:`PAIRS_GEMM_INTENSITY`, with an
    inner dimension of at least :data:`PAIRS_GEMM_MIN_INNER`."""
    *_, m, k = product.args[0].meta["val"].shape
    n = product.args[1].meta["val"].shape[-1]
    if not all(isinstance(d, int) for d in (m, k, n)):
        return False  # symbolic sizes: no guard is added for a layout choice
    return k >= PAIRS_GEMM_MIN_INNER and m * n * k < PAIRS_GEMM_INTENSITY * (m * k + k * n + m * n)


def _pairs_or_conjugate(re: fx.Node, im: fx.Node) -> tuple[fx.Node | None, bool]:
    """``(P, False)`` for the parts of pairs ``P``, ``(P, True)`` for those of their conjugate
    (``im`` is ``neg(select(P, -1, 1))``: a ``conj()`` factor, which the pairs products take as
    a flag rather than a copy), else ``(None, False)``."""
    pairs = _pairs_of(re, im)
    if pairs is None and isinstance(im, fx.Node) and im.target is aten.neg.default and not im.kwargs:
        pairs = _pairs_of(re, im.args[0])
        return pairs, pairs is not None
    return pairs, False


def _pairs_of(re: fx.Node, im: fx.Node) -> fx.Node | None:
    first, second = pair_part(re), pair_part(im)
    if first is None or second is None or first[0] is not second[0] or (first[1], second[1]) != (0, 1):
        return None
    return first[0]


def _root(pairs: fx.Node) -> fx.Node:
    """The node whose memory ``pairs`` views (through rule 1's views)."""
    while pairs.op == "call_function" and pairs.target in _VIEWS_ON_PAIRS:
        pairs = pairs.args[0]
    return pairs



# ---- rule 4: FFTs ------------------------------------------------------------------------------

_FFT_PAIRS = {
    torch.ops.realify.fft_c2c.default: torch.ops.realify.fft_c2c_pairs.default,
    torch.ops.realify.fft_r2c.default: torch.ops.realify.fft_r2c_pairs.default,
}


def _fft_as_pairs(graph: fx.Graph, fft: fx.Node) -> bool:
    parts = list(fft.users)
    if fft.kwargs or sorted(p.args[1] if p.target is operator.getitem else None for p in parts) != [0, 1]:
        return False
    if not _only_as_pairs(*sorted(parts, key=lambda p: p.args[1])):
        return False
    with graph.inserting_before(fft):
        pairs = call_on_fakes(graph, _FFT_PAIRS[fft.target], *fft.args)
    if pairs is None:
        return False
    for part in parts:
        with graph.inserting_before(part):
            part.replace_all_uses_with(call_on_fakes(graph, aten.select.int, pairs, -1, part.args[1]))
        graph.erase_node(part)
    graph.erase_node(fft)  # an op realify made: dead-code elimination keeps such ops
    return True


def stacks_pairs(node: fx.Node) -> bool:
    """``stack([re, im], -1)``: two values into pairs."""
    if node.target is not aten.stack.default or len(node.args[0]) != 2:
        return False
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    out = node.meta.get("val")
    return isinstance(out, torch.Tensor) and _dim(dim, out.dim()) == out.dim() - 1


# ---- what rules 2, 3 and 4 ask: are parts only put back into pairs? -----------------------


def _only_as_pairs(re: fx.Node, im: fx.Node) -> bool:
    """Whether the two parts of one complex value are read only to be put back into pairs:
    followed together through what rules 1 and 2 carry over to pairs (the same element move of
    each part; the same elementwise op of each part, read by it alone, with operands rule 2
    takes), they end in a stack of the two into pairs that something reads as pairs (parts of
    the stack read back are followed again), or in copies into the two parts of one output's
    pairs (realify/runtime/boundary.py ``leave``)."""
    todo, read_as_pairs = [(re, im)], False
    while todo:
        u, v = todo.pop()
        mates = {}
        for x in u.users:
            y = _mate(x, u, v)
            if y is None or y in mates:
                return False
            mates[y] = x
        if set(mates) != set(v.users):
            return False
        for y, x in mates.items():
            if x is y:
                read_back = _parts_read_back(x)
                if read_back is None:
                    return False
                todo.extend(read_back[0])
                read_as_pairs |= read_back[1]
            elif x.target is aten.copy_.default:
                read_as_pairs = True
            else:
                todo.append((x, y))
    return read_as_pairs


def _mate(x: fx.Node, u: fx.Node, v: fx.Node) -> fx.Node | None:
    """The reader of part ``v`` that does to it what ``x`` does to part ``u`` (``x`` itself for
    the stack of the two), where ``x`` is one of the readers :func:`_only_as_pairs` follows."""
    if stacks_pairs(x):
        return x if x.args[0] == [u, v] else None
    if x.target is aten.copy_.default:
        into = pair_part(x.args[0])
        return next((y for y in v.users if into is not None and into[1] == 0 and x.args[1] is u
                     and y.target is aten.copy_.default and y.args[1] is v
                     and pair_part(y.args[0]) == (into[0], 1)), None)
    if _moves_parts(x) and x.args[0] is u:
        return next((y for y in v.users if y.target is x.target and y.args[0] is v and y.args[1:] == x.args[1:]
                     and y.kwargs == x.kwargs and _moves_parts(y)), None)
    if len(u.users) != 1 or len(v.users) != 1:
        return None  # rule 2 lifts parts read by the alike op alone
    y = next(iter(v.users))
    positions = [i for i, a in enumerate(x.args) if a is u]
    if not (_computed_alike(x, y) and positions and positions == [i for i, a in enumerate(y.args) if a is v]):
        return None
    others = [(a, b) for i, (a, b) in enumerate(zip(x.args, y.args)) if i not in positions]
    return y if all(_one_value(a, b) or _pairs_of(a, b) is not None or _computed_alike(a, b)
                    for a, b in others) else None


def _parts_read_back(stack: fx.Node) -> tuple[list[tuple[fx.Node, fx.Node]], bool] | None:
    """The two parts of ``stack`` read back (``select(stack, -1, k)``), as a list of one pair or
    none, and whether anything reads ``stack`` as pairs; None where only one part is read back."""
    parts: dict[int, list[fx.Node]] = {}
    read_as_pairs = False
    for reader in stack.users:
        part = pair_part(reader)
        if part is not None and reader.args[0] is stack:
            parts.setdefault(part[1], []).append(reader)
        else:
            read_as_pairs = True
    if not parts:
        return [], read_as_pairs
    if sorted(parts) != [0, 1] or len(parts[0]) != 1 or len(parts[1]) != 1:
        return None
    return [(parts[0][0], parts[1][0])], read_as_pairs


# ---- shared ------------------------------------------------------------------------------------


def pair_part(node: Any) -> tuple[fx.Node, int] | None:
    """``(P, k)`` where ``node`` is ``select(P, -1, k)`` of a real ``(..., 2)`` tensor ``P``."""
    if not (isinstance(node, fx.Node) and node.op == "call_function" and node.target is aten.select.int):
        return None
    pairs, dim, k = node.args
    p = pairs.meta.get("val") if isinstance(pairs, fx.Node) else None
    if not (isinstance(p, torch.Tensor) and p.dim() >= 1 and p.is_floating_point()
            and statically_known_true(p.shape[-1] == 2) and _dim(dim, p.dim()) == p.dim() - 1
            and isinstance(k, int) and k in (0, 1, -2, -1)):
        return None
    return pairs, k % 2
