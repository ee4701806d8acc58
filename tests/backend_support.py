"""Helpers for compile-backend tests: recording inner compilers and graph inspection."""

from __future__ import annotations

import torch
from torch._dynamo.backends.common import aot_autograd
from torch.utils._pytree import tree_leaves


def complex_nodes(gm: torch.fx.GraphModule) -> list[str]:
    """Every node of ``gm`` whose value (or an input placeholder) is complex."""
    found = []
    for node in gm.graph.nodes:
        for v in tree_leaves(node.meta.get("val", node.meta.get("example_value"))):
            if isinstance(v, torch.Tensor) and v.dtype.is_complex:
                found.append(node.format_node())
    return found


class RecordingInner:
    """An inner compiler that records the forward and backward graphs it receives."""

    def __init__(self):
        self.graphs: list[tuple[str, torch.fx.GraphModule]] = []

        def keep(kind):
            def compiler(gm, example_inputs):
                self.graphs.append((kind, gm))
                return gm.forward if hasattr(gm, "forward") else gm
            return compiler

        self.backend = aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))

    def __call__(self, gm, example_inputs):
        self.graphs.append(("dynamo", gm))
        return self.backend(gm, example_inputs)

    def kinds(self) -> set[str]:
        return {k for k, _ in self.graphs}

    def complex_nodes(self) -> list[str]:
        return [f"{k}: {n}" for k, gm in self.graphs for n in complex_nodes(gm)]
