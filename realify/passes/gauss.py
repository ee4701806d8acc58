"""Complex matrix products with three real products instead of four (Gauss), decided on the
real graph after planarizing.

The product rules (realify/rules/linalg.py, conv.py) write the textbook form of a complex
bilinear product ``⋆``: ``(Ar + Ai i) ⋆ (Br + Bi i) = (Ar⋆Br - Ai⋆Bi) + (Ar⋆Bi + Ai⋆Br) i``.
Whether to spend four real products or three is a cost decision about the whole product, not
part of its formula, so it is made here, once, for every front end that traces
(:func:`realify.decompose` with ``gemm_multiplications=3``, the default of
``realify.config.gemm_multiplications``): the imaginary part ``Ar⋆Bi + Ai⋆Br`` becomes
``T3 - T1 - T2`` with ``T3 = (Ar + Ai)⋆(Br + Bi)``, ``T1 = Ar⋆Br``, ``T2 = Ai⋆Bi`` (the real
part's products, computed anyway). docs/numerics.md ("Complex GEMM: 3M vs 4M") bounds the
error of each form.

Only products that cost ``O(n)`` flops per element read are rewritten (mm, bmm, convolution:
:data:`COMPUTE_BOUND`): a matrix-vector or vector product is memory-bound, and forming
``Ar + Ai`` would cost more than the product saved. The eager ComplexTensor front end, which
runs rules one call at a time, computes the textbook form. In the compile backend, a matrix
product whose measured or forced form is four products (realify/passes/gemm_form.py) is left
as it is.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from .autocast import tagged_dtype
from .cleanup import call_on_fakes, keep_unread, same_shape
from .gemm_form import FORM_KEY

aten = torch.ops.aten

# the real products worth trading for additions: GEMMs and convolutions (bias None: bilinear)
COMPUTE_BOUND = frozenset({aten.mm.default, aten.bmm.default, aten.convolution.default})


def gauss_products(gm: fx.GraphModule) -> None:
    """Rewrite each ``P(a, d) + P(c, b)`` whose cross terms ``P(a, b)`` and ``P(c, d)`` the graph
    also computes (a complex product's parts) as ``P(a + c, b + d) - P(a, b) - P(c, d)``."""
    for module in gm.modules():  # control flow's branches and bodies too
        if not isinstance(module, fx.GraphModule):
            continue
        changed = False
        # a product of a rewritten product (a chain, multi_dot) matches in the next round
        while _rewrite(module.graph):
            changed = True
        if changed:
            module.graph.eliminate_dead_code(is_impure_node=keep_unread)
            module.recompile()


def _rewrite(graph: fx.Graph) -> bool:
    order = {node: i for i, node in enumerate(graph.nodes)}
    same = _value_numbers(graph)
    products = {}  # (target, operands' value numbers, other arguments) -> first node computing it
    for node in graph.nodes:
        if _is_product(node):
            products.setdefault(_product_key(node, *node.args[:2], same), node)
    changed = False
    for add in list(graph.find_nodes(op="call_function", target=aten.add.Tensor)):
        terms = _cross_terms(add, products, same)
        if terms is None:
            continue
        (a, d), (c, b), t1, t2 = terms
        if max(order[t1], order[t2]) > order[add]:
            continue
        target, rest = t1.target, t1.args[2:]
        with graph.inserting_before(add):
            gauss = call_on_fakes(graph, target, call_on_fakes(graph, aten.add.Tensor, a, c),
                                  call_on_fakes(graph, aten.add.Tensor, b, d), *rest)
            if gauss is None:
                continue
            im = call_on_fakes(graph, aten.sub.Tensor, call_on_fakes(graph, aten.sub.Tensor, gauss, t1), t2)
        add.replace_all_uses_with(im)
        graph.erase_node(add)
        changed = True
    return changed


def _cross_terms(add: fx.Node, products: dict, same: dict):
    """For ``add = P(a, d) + P(c, b)``: its terms' operands and the nodes of ``P(a, b)`` and
    ``P(c, d)``, where the graph computes both; None otherwise."""
    if add.kwargs or len(add.args) != 2 or not all(_is_product(t) for t in add.args):
        return None
    left, right = add.args
    if left.target is not right.target or left.args[2:] != right.args[2:]:
        return None
    (a, d), (c, b) = left.args[:2], right.args[:2]
    t1 = products.get(_product_key(left, a, b, same))
    t2 = products.get(_product_key(left, c, d, same))
    if t1 is None or t2 is None:
        return None
    value = add.meta.get("val")
    if not isinstance(value, torch.Tensor) or not all(same_shape(t.meta["val"], value) for t in (left, right, t1, t2)):
        return None
    return (a, d), (c, b), t1, t2


def _is_product(node: Any) -> bool:
    if not (isinstance(node, fx.Node) and node.op == "call_function" and node.target in COMPUTE_BOUND):
        return False
    if node.kwargs or not all(isinstance(x, fx.Node) for x in node.args[:2]):
        return False
    if tagged_dtype(node) is not None:
        return False  # a lower-precision product keeps four products (realify/passes/autocast.py)
    if node.meta.get(FORM_KEY) == "4m":
        return False  # the compile backend chose four products for it (realify/passes/gemm_form.py)
    return node.target is not aten.convolution.default or node.args[2] is None


def _product_key(product: fx.Node, x: fx.Node, y: fx.Node, same: dict) -> tuple:
    return product.target, same.get(x, x), same.get(y, y), repr(product.args[2:])


def _value_numbers(graph: fx.Graph) -> dict[fx.Node, fx.Node]:
    """Each node's representative: the first node that computes the same pure aten op of the
    same values (a rule's helper may take one view of an operand twice)."""
    first: dict[tuple, fx.Node] = {}
    same: dict[fx.Node, fx.Node] = {}
    for node in graph.nodes:
        if node.op != "call_function" or keep_unread(node):
            same[node] = node
            continue
        key = (node.target, _canonical(node.args, same), _canonical(sorted(node.kwargs.items()), same))
        same[node] = first.setdefault(key, node)
    return same


def _canonical(value: Any, same: dict) -> Any:
    if isinstance(value, fx.Node):
        return same.get(value, value)  # a node this round made: its own value
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v, same) for v in value)
    return repr(value)  # numbers, dtypes, symbolic sizes (unhashable) as written
