"""Inductor post-grad pass: GEMM operands laid out for BLAS (:class:`GemmOperandsForBLAS`), and the
lowering it inserts (:func:`contiguous_operand`), which realify/passes/pair_products_to_aten.py
uses too. Changes how a real graph runs, never a value."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten


class GemmOperandsForBLAS(CustomGraphPass):
    """Post-grad pass: GEMM operands that would reach BLAS with no unit stride get a
    contiguous layout.

    BLAS reads a matrix along a unit stride. For an operand with none, ATen's bmm copies matrix
    by matrix: einsum's batch-major permutes give the FNO weights as 256 matrices with strides
    (1, 8192, 256), and those small copies cost several times the bmm itself (measured in
    docs/benchmarks.md, "Measurements behind design choices").

    Two kinds of operand get there:

    - a view whose recorded strides say so (a graph input's planes, a permute): mm and bmm;
    - a batch of matrices Inductor computes itself (a pointwise op, or a view of one): its
      recorded strides may be contiguous, yet Inductor lays the buffer out in the order it
      reads its inputs, a permuted order in backward graphs (the FNO's weight gradients).

    Such an operand goes through :func:`_blas_operand`, a lowering (called by Inductor on its
    own IR, as its pattern matcher's replacements are) that requires a contiguous layout: a
    buffer Inductor has not laid out yet is simply fixed contiguous, so the kernel computing
    it writes it that way at no cost; anything else is copied once, in one fused kernel.
    """

    def __call__(self, graph: fx.Graph) -> None:
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target not in (aten.mm.default, aten.bmm.default):
                continue
            for i, x in enumerate(node.args[:2]):
                if _no_unit_stride(x) or (node.target is aten.bmm.default and _computed_by_inductor(x)):
                    node.update_arg(i, contiguous_operand(graph, node, x))

    def uuid(self) -> Any:
        return "realify.GemmOperandsForBLAS.v3"


def _blas_operand(x: Any) -> Any:
    """Inductor lowering (the FX node's target): ``x`` with a contiguous layout."""
    from torch._inductor import ir

    return ir.ExternKernel.require_contiguous(x)


_blas_operand._inductor_lowering_function = True  # type: ignore[attr-defined]
# the output's metadata for Inductor's FakeTensorUpdater (torch >= 2.14 recomputes it when an
# input's changes, e.g. after reinplacing, and refuses a lowering function without one)
_blas_operand._inductor_lowering_output_metadata_fn = lambda x: x.contiguous()  # type: ignore[attr-defined]


def _no_unit_stride(x: Any) -> bool:
    """A matrix operand known (without a guard) to have neither contiguous rows nor columns."""
    val = fake_value(x)
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return False
    return all(statically_known_true(val.stride(d) != 1) and statically_known_true(val.shape[d] > 1) for d in (-1, -2))


def _computed_by_inductor(x: Any) -> bool:
    """A batch of matrices (more than one, none of them a vector) computed by an Inductor
    kernel: a pointwise aten op, or a view of one."""
    val = fake_value(x)
    if not (isinstance(val, torch.Tensor) and val.dim() == 3 and all(statically_known_true(n > 1) for n in val.shape)):
        return False
    while isinstance(x, fx.Node) and x.op == "call_function" and isinstance(x.target, torch._ops.OpOverload):
        if torch.Tag.pointwise in x.target.tags:
            return True
        if not (x.target.is_view or x.target in (aten.reshape.default, aten._unsafe_view.default)):
            return False
        x = x.args[0]
    return False



def fake_value(x: Any) -> Any:
    """The fake value recorded on a graph node (None for constants and unrecorded nodes)."""
    return x.meta.get("val") if isinstance(x, fx.Node) else None



def contiguous_operand(graph: fx.Graph, before: fx.Node, x: fx.Node) -> fx.Node:
    """``x`` through :func:`_blas_operand`: laid out contiguous by Inductor."""
    with graph.inserting_before(before):
        operand = graph.call_function(_blas_operand, (x,))
    with x.meta["val"].fake_mode:
        operand.meta["val"] = x.meta["val"].contiguous()
    return operand
