"""``as_strided`` in ONNX: addressing the storage a view shares, not the view.

ONNX tensors have no storage: torch.onnx writes ``as_strided(x, size, stride, offset)`` as a
gather from ``x`` flattened, which is eager's result only where ``x`` is its storage
(contiguous, at offset 0). realify's rule for a complex ``as_strided`` reads each part of an
interleaved input at its storage positions (``as_strided(select(pairs, -1, k), size,
2 stride, 2 offset + k)``), a view of the pairs. With an explicit offset, ``as_strided`` reads
its input's storage alone, whatever the input's own strides and offset, so it reads the same
elements from the tensor that view was taken of: the pairs, which are their storage.
"""

from __future__ import annotations

import torch
from torch._prims_common import is_contiguous_or_false
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten


def read_storage_roots(ep: torch.export.ExportedProgram) -> None:
    """Point each ``as_strided`` with an explicit storage offset whose input is a chain of views
    of a tensor that is its own storage (contiguous, at offset 0) at that tensor instead."""
    changed = False
    for node in ep.graph.find_nodes(op="call_function", target=aten.as_strided.default):
        if len(node.args) < 4 or node.args[3] is None or not isinstance(node.args[0], torch.fx.Node):
            continue
        root = node.args[0]
        while root.op == "call_function" and getattr(root.target, "is_view", False) \
                and isinstance(root.args[0], torch.fx.Node):
            root = root.args[0]
        value = root.meta.get("val")
        if root is not node.args[0] and isinstance(value, torch.Tensor) and _is_own_storage(value):
            node.replace_input_with(node.args[0], root)
            changed = True
    if changed:
        ep.graph.eliminate_dead_code()
        ep.graph_module.recompile()


def _is_own_storage(value: torch.Tensor) -> bool:
    # contiguous at offset 0 for every size it may take: neither test guards on a symbolic size
    return statically_known_true(value.storage_offset() == 0) and is_contiguous_or_false(value)
