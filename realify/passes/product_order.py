"""The order of complex products along a dimension: each ``realify::complex_prod`` of a real
graph (the prod rule's) expanded into real ops, in the device-neutral order
(realify/runtime/products.py) or, where the compile backend targets a CPU, in the order of
eager's CPU kernel for the vector width it is given (:func:`eager_cpu_product`), so that
infinite and NaN parts come out as eager's there. The width is data: this module reads nothing
of the machine it runs on (the front end does, realify/backend.py).
"""

from __future__ import annotations

import functools

import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from ..runtime.ops import complex_prod
from ..runtime.products import chain_product, cmul, empty_product, fold, narrow_parts, neutral_product, times_one


def expand_complex_products(gm: fx.GraphModule, cpu_vector_bytes: int | None) -> None:
    """Each ``realify::complex_prod`` of ``gm`` (and of its control-flow submodules) as real ops:
    eager's CPU order for vectors of ``cpu_vector_bytes`` bytes, or the device-neutral order
    where it is None."""
    order = neutral_product if cpu_vector_bytes is None else functools.partial(eager_cpu_product,
                                                                               vector_bytes=cpu_vector_bytes)
    for module in gm.modules():  # control flow's branches and bodies too
        if not isinstance(module, fx.GraphModule):
            continue
        products = module.graph.find_nodes(op="call_function", target=complex_prod._opoverload)
        for node in products:
            _expand(module.graph, node, order)
        if products:
            module.recompile()


def _expand(graph: fx.Graph, node: fx.Node, order) -> None:
    """Replace ``node`` by the real ops ``order`` traces on its operands' fake values."""
    re, im, dim = node.args
    values = re.meta["val"], im.meta["val"]
    # the ops run as written: the caller's autocast (decompose may run under it) must not cast them
    with values[0].fake_mode, torch._C._DisableAutocast():
        traced = make_fx(lambda r, i: list(order(r, i, dim)), tracing_mode="real")(*values)
    inputs = traced.graph.find_nodes(op="placeholder")
    before = set(graph.nodes)
    with graph.inserting_before(node):
        parts = graph.graph_copy(traced.graph, dict(zip(inputs, (re, im))))
    # the source line and tags the rule's own ops carried, as planarize records them
    inherited = {k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta")}
    for new in graph.nodes:
        if new not in before:
            new.meta = {**inherited, **new.meta}
    for user in list(node.users):  # getitem(node, i)
        user.replace_all_uses_with(parts[user.args[1]])
        graph.erase_node(user)
    graph.erase_node(node)


# ---- eager's CPU order ------------------------------------------------------------------------


def _block(re: torch.Tensor, vector_bytes: int) -> int:
    """``B``: the complex entries in four of eager's vector registers of ``vector_bytes`` bytes
    (16 complex64 with AVX2's 32)."""
    return 4 * max(1, vector_bytes // (2 * re.element_size()))


def _eager_order_product(re: torch.Tensor, im: torch.Tensor, dim: int, vector_bytes: int):
    """Product along ``dim`` (kept with size 1) in the order eager's CPU kernel multiplies a
    contiguous run of ``n`` entries.

    Eager starts from 1 + 0i. Below one block of ``B`` entries (four vector registers: 16
    complex64 or 8 complex128 with AVX2) it multiplies left to right, ``((1 z0) z1) z2 ...``.
    From one block on, entry ``k`` of the first ``B * (n // B)`` goes to lane ``k mod B``;
    each lane is the product of its entries left to right (:func:`chain_product`), lanes
    ``v, V+v, 2V+v, 3V+v`` are joined as ``(l0 l1)(l2 l3)`` (``V = B / 4``), those ``V``
    products left to right, then ``1 + 0i`` times that, then the remaining ``n mod B`` entries
    left to right.
    """
    n = re.shape[dim]
    if n == 0:
        return empty_product(re, dim)
    lanes_of = _block(re, vector_bytes)
    count = n // lanes_of
    if count == 0:
        return fold(re, im, dim, 1, times_one(*narrow_parts(re, im, dim, 0, 1)))
    shape = list(re.shape)
    blocked = [*shape[:dim], count, lanes_of, *shape[dim + 1:]]
    lr, li = chain_product(re.narrow(dim, 0, count * lanes_of).reshape(blocked),
                           im.narrow(dim, 0, count * lanes_of).reshape(blocked), dim)
    lr, li = lr.squeeze(dim), li.squeeze(dim)  # the B lanes along dim
    width = lanes_of // 4  # V
    q = [narrow_parts(lr, li, dim, j * width, width) for j in range(4)]
    vr, vi = cmul(*cmul(*q[0], *q[1]), *cmul(*q[2], *q[3]))
    acc = times_one(*fold(vr, vi, dim, 1, narrow_parts(vr, vi, dim, 0, 1)))
    return fold(re, im, dim, count * lanes_of, acc)


def eager_cpu_product(re: torch.Tensor, im: torch.Tensor, dim: int, vector_bytes: int):
    """Product along ``dim`` (kept with size 1) in eager's CPU order for a contiguous tensor,
    on vectors of ``vector_bytes`` bytes.

    Reducing the last dimension (or one followed by size-1 dimensions only), each output is
    a contiguous run (:func:`_eager_order_product`). Along an outer dimension, one step along
    ``dim`` spans ``K`` outputs: eager reduces the first ``B * (K // B)`` in blocks of ``B``
    adjacent outputs, each ``1 + 0i`` times the product of its entries taken left to right,
    and the remaining outputs one by one as a contiguous run would be."""
    inner = 1
    for size in re.shape[dim + 1:]:
        inner *= size
    lanes_of = _block(re, vector_bytes)
    blocked = (inner // lanes_of) * lanes_of
    if inner <= 1 or blocked == 0 or re.shape[dim] == 0:
        return _eager_order_product(re, im, dim, vector_bytes)
    shape = list(re.shape)
    flat = [*shape[:dim], shape[dim], inner]
    re, im = re.reshape(flat), im.reshape(flat)
    head = times_one(*chain_product(*narrow_parts(re, im, dim + 1, 0, blocked), dim))
    if blocked < inner:
        rest = _eager_order_product(*narrow_parts(re, im, dim + 1, blocked, inner - blocked), dim, vector_bytes)
        head = torch.cat([head[0], rest[0]], dim + 1), torch.cat([head[1], rest[1]], dim + 1)
    out = [*shape[:dim], 1, *shape[dim + 1:]]
    return head[0].reshape(out), head[1].reshape(out)
