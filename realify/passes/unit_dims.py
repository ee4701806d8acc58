"""Reshapes to symbolic sizes that hold literal 1s, as a reshape to the other sizes followed by
one ``unsqueeze`` per 1.

Why: a reshape's meta computes the stride of a size-1 dim among symbolic sizes as a ``Min`` of
its neighbours' (``Min(2 k, 2 k m)``). An elementwise op on that view (the parts of a GEMM's
operand folded to ``(1, b m, k)``, as torch's einsum and bmm-based contractions write them)
then orders its output's dims by comparing such strides, and torch.export's trace records that
comparison as a run-time check of sizes that holds at the example but not where every folded
size is 1: ``Guard failed: sym_min(2 k, 2 k m) != 2 k b m`` when the exported program is called at
size 1, a size its own ranges allow. Plain torch shows the same on a real program of that form.
An ``unsqueeze`` gives the new dim the stride ``size * stride`` of the dim after it, a product
of sizes that no comparison needs to guard. The values are the same views, so every front end
gets the rewrite; a reshape to static sizes is left as is.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .cleanup import call_on_fakes

aten = torch.ops.aten
_RESHAPES = (aten.reshape.default, aten.view.default)


def unit_dims_as_unsqueezes(gm: fx.GraphModule) -> None:
    """Rewrite each reshape or view to a shape with literal 1s among symbolic sizes as the
    reshape to the other sizes, then an ``unsqueeze`` at each 1's position (in order)."""
    graph = gm.graph
    changed = False
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target in _RESHAPES]:
        source, shape = node.args[0], node.args[1]
        if not isinstance(shape, (list, tuple)) or not any(isinstance(s, fx.Node) for s in shape):
            continue  # static sizes: a stride there is a number
        ones = [i for i, s in enumerate(shape) if isinstance(s, int) and s == 1]
        if not ones:
            continue
        with graph.inserting_before(node):
            result = call_on_fakes(graph, node.target, source, [s for i, s in enumerate(shape) if i not in ones])
            if result is None:
                continue  # the op refuses the shape without its 1s (no node was made)
            for dim in ones:
                result = call_on_fakes(graph, aten.unsqueeze.default, result, dim)
        result.meta = {**node.meta, "val": result.meta["val"]}
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()
