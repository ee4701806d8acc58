"""Stage 2 of :func:`realify.decompose`: re-run the functional graph with every complex value held
as a :class:`ComplexTensor`, each complex op through its planar rule (control flow's branches
and bodies too), and trace the real ops that result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch._dispatch.python import enable_python_dispatcher
from torch._ops import HigherOrderOperator, OpOverload
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, make_fx
from torch.fx.experimental.symbolic_shapes import free_symbols
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..errors import DECOMPOSE_ADVICE, MissingRuleError
from ..passes.cleanup import keep_unread
from ..rules import apply_checked, apply_rule
from ..rules._operands import stacked_pairs
from ..runtime.boundary import Boundary, enter, is_complex, leave, resolve_lazy_bits
from ..runtime.complex_tensor import ComplexTensor
from ..runtime.ops import stop_gradient
from .custom_functions import custom_function, planar_function_call
from .dynamo_graph import source_line

aten = torch.ops.aten


def symbolic(inputs: list[Any]) -> bool:
    """Whether any input has symbolic sizes or is a symbolic number (dynamic shapes, or dynamo's
    automatic dynamic recompile after a size changed, which passes sizes as inputs of their
    own). Such traces need the Python dispatcher, as AOTAutograd uses: some C++ kernels read
    concrete sizes or offsets (a complex slice's ``storage_offset()``, ``constant_pad_nd``'s
    pads) and raise on symbolic ones. A tensor counts by its sizes' kind, not their symbols: a
    size torch.export specialized (``Dim.AUTO`` on an example of size 0 or 1 elsewhere in the
    tensor) stays a SymInt of a constant, on which those kernels raise all the same."""
    return any((isinstance(x, torch.Tensor) and x._has_symbolic_sizes_strides)
               or (isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) and free_symbols(x))
               for x in inputs)


def planarize(functional: fx.GraphModule, signature: Boundary, boundary_inputs: list[Any], on_missing,
              on_complex_op=None) -> tuple[fx.GraphModule, Boundary]:
    """The real graph of ``functional`` between the boundary ``signature`` describes, and that
    boundary as the real graph has it (with ``"complex"`` layouts, writes to inputs happen in
    the graph: no mutated inputs left for the caller)."""
    eager_outputs = signature.eager_outputs

    def planar_program(*args):
        values = [enter(a, c, signature.layout_of(i)) for i, (a, c) in enumerate(zip(args, signature.input_complex))]
        with _RouteComplexCreation():
            outs = PlanarInterpreter(functional, on_missing, on_complex_op).run(*values)
        n = signature.num_user_outputs
        views = signature.output_views if eager_outputs else [None] * n
        strides = signature.output_strides if eager_outputs else [None] * n
        # outputs that are views of inputs: the caller takes them from its inputs (None here)
        user = [None if view is not None else leave(o, signature.output_layout, stride)
                for o, view, stride in zip(outs[:n], views, strides)]
        mutated = outs[signature.num_user_outputs :]
        if signature.input_layout == "complex":
            # write back in the graph; callers see no extra outputs
            for i, new in zip(signature.mutated_inputs, mutated):
                args[i].copy_(leave(new, "complex") if isinstance(new, ComplexTensor) else new)
            return user
        return user + [leave(o, signature.output_layout) for o in mutated]

    # Autocast is off here: the functional graph already holds every cast autocast makes in
    # eager (it was traced under the caller's autocast state), and it makes none for complex
    # ops, so the real ops of their rules must keep their dtypes, as eager's complex kernels do.
    with fx_traceback.preserve_node_meta(), torch._C._DisableAutocast(), \
            (enable_python_dispatcher() if symbolic(boundary_inputs) else nullcontext()):
        planar = make_fx(planar_program, tracing_mode="real")(*boundary_inputs)
    # values nothing reads go; random ops stay, so the random stream stays eager's
    planar.graph.eliminate_dead_code(is_impure_node=keep_unread)
    planar.recompile()
    if signature.input_layout == "complex":
        signature = dataclasses.replace(signature, mutated_inputs=())
        resolve_lazy_bits(planar, signature)
    return planar, signature


class _RouteComplexCreation(TorchDispatchMode):
    """While planarizing, an op that would *create* a complex tensor from real arguments (a
    complex ``dtype=``, a Python complex scalar) — called by a rule or by a PyTorch
    decomposition, not by the graph itself — goes through the rule table too. Higher-order
    operators (the real ``cond`` of :meth:`PlanarInterpreter._planar_cond`) pass through."""

    supports_higher_order_operators = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = tree_leaves((args, kwargs))
        if not any(isinstance(x, ComplexTensor) for x in leaves) and any(
                isinstance(x, complex) or (isinstance(x, torch.dtype) and x.is_complex) for x in leaves):
            return apply_rule(func, args, kwargs)
        return func(*args, **kwargs)


# ops of the functional graph that autograd has no derivative for, which the inner compiler
# differentiates: on real values too, they become their rule's real ops (``x[i] = v`` on a real
# tensor ``x`` is ``copy(x[i], v)``, the rule's ``v.to(x.dtype).expand(...).clone()``)
_RULE_ON_REAL_VALUES = frozenset({torch.ops.aten.copy.default})


class PlanarInterpreter(fx.Interpreter):
    """Runs a functional aten graph with complex values held as ComplexTensor."""

    def __init__(self, gm: fx.GraphModule, on_missing=None, on_complex_op=None):
        super().__init__(gm)
        self.on_missing = on_missing
        self.on_complex_op = on_complex_op  # observer: (op, node) for each complex op met

    def run_node(self, n: fx.Node) -> Any:
        self.current = n
        return super().run_node(n)

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        if not is_complex(value):
            return value
        # a complex constant: split it now, outside tracing, into two real constants
        with unset_fake_temporarily(), disable_proxy_modes_tracing():
            value = value.resolve_conj().resolve_neg()
            return ComplexTensor(value.real.clone(), value.imag.clone())

    def call_function(self, target, args, kwargs):
        if target is aten.detach.default:
            # the program's stop-gradients (realify/engine/grad_semantics.py): make_fx would record
            # aten.detach as aten.alias, which autograd differentiates through
            target = stop_gradient._opoverload
        complex_op = isinstance(target, (OpOverload, HigherOrderOperator)) and self._touches_complex(args, kwargs)
        if complex_op and self.on_complex_op is not None:
            self.on_complex_op(target, self.current)
        if target is custom_function._opoverload:
            return planar_function_call(*args, as_real=_as_pairs_tensor, from_real=_from_pairs_tensor)
        if isinstance(target, OpOverload) and (complex_op or target in _RULE_ON_REAL_VALUES):
            try:
                return apply_checked(target, args, kwargs, where=lambda: source_line(self.current))
            except MissingRuleError as err:
                if self.on_missing is not None:
                    return self.on_missing(target, args, kwargs, self.current, err.detail)
                raise MissingRuleError(target, where=source_line(self.current), advice=DECOMPOSE_ADVICE,
                                       detail=str(err.op) if err.op is not target else err.detail) from None
        if isinstance(target, HigherOrderOperator) and self._touches_complex(args, kwargs):
            if target is torch.ops.higher_order.cond:
                return self._planar_cond(*args, **kwargs)
            if target is torch.ops.higher_order.while_loop:
                return self._planar_while_loop(*args, **kwargs)
            if target in (torch.ops.higher_order.scan, torch.ops.higher_order.map_impl):
                return self._planar_over_slices(target, *args, **kwargs)
            # other higher-order ops on complex values: their bodies would need planarizing as
            # graphs of their own, as those of the four above are
            detail = ("higher-order op on complex values: realify decomposes cond, while_loop, scan and map, and "
                      "inlines associative_scan and nested_compile_region, only")
            if self.on_missing is not None:
                return self.on_missing(target, args, kwargs, self.current, detail)
            raise MissingRuleError(target, where=source_line(self.current), detail=detail, advice=DECOMPOSE_ADVICE)
        return super().call_function(target, args, kwargs)

    def _planar_cond(self, pred: Any, true_graph: fx.GraphModule, false_graph: fx.GraphModule,
                     operands: Sequence[Any]) -> list[Any]:
        """``torch.cond`` on complex values as a real ``cond``: each complex operand passes as
        its two parts, each branch is planarized like the graph itself (nested control flow
        too), and each complex result comes back from its two parts."""
        kinds = _kinds(operands)
        result_kinds: list[list[bool]] = []
        branches = [self._planar_subgraph(g, kinds, result_kinds, as_pairs=True) for g in (true_graph, false_graph)]
        flat = torch.ops.higher_order.cond(pred, *branches, tuple(_as_parts(operands)))
        return [ComplexTensor(x[..., 0], x[..., 1]) if complex_result else x
                for x, complex_result in zip(flat, result_kinds[0])]

    def _planar_while_loop(self, cond_graph: fx.GraphModule, body_graph: fx.GraphModule,
                           carried: Sequence[Any], additional: Sequence[Any]) -> list[Any]:
        """``while_loop`` on complex values as a real ``while_loop``, carried and additional
        values passing as parts, as for :meth:`_planar_cond`."""
        kinds = _kinds([*carried, *additional])
        condition = self._planar_subgraph(cond_graph, kinds, [], as_parts=False)
        body = self._planar_subgraph(body_graph, kinds, [])
        flat = torch.ops.higher_order.while_loop(condition, body, tuple(_as_parts(carried)),
                                                 tuple(_as_parts(additional)))
        return _from_parts(flat, _kinds(carried))

    def _planar_over_slices(self, op: HigherOrderOperator, body_graph: fx.GraphModule,
                            *groups: Sequence[Any]) -> list[Any]:
        """``scan(combine, init, xs, additional)`` or ``map_impl(body, xs, args)`` on complex
        values as the same real op: every operand group passes as parts (each part of a
        scanned or mapped sequence runs along the same leading dimension), the body is
        planarized, and the results (a scan's final carry and stacked outputs, a map's stacked
        outputs) come back from their parts."""
        result_kinds: list[list[bool]] = []
        body = self._planar_subgraph(body_graph, _kinds([v for group in groups for v in group]), result_kinds)
        flat = op(body, *(_as_parts(group) for group in groups))
        return _from_parts(flat, result_kinds[0])

    def _planar_subgraph(self, graph: fx.GraphModule, kinds: list[bool], result_kinds: list[list[bool]],
                         as_parts: bool = True, as_pairs: bool = False) -> Callable:
        """A branch or loop body of control flow as a function of real parts: it rebuilds the
        complex values, planarizes ``graph`` on them and returns its results as parts (noting
        which were complex in ``result_kinds``), as one ``(..., 2)`` tensor of pairs per complex
        result where ``as_pairs`` is on, or as they are where ``as_parts`` is off (a loop
        condition's boolean)."""
        def run(*parts):
            results = PlanarInterpreter(graph, self.on_missing, self.on_complex_op).run(*_from_parts(parts, kinds))
            if not as_parts:
                return results
            result_kinds.append(_kinds(results))
            return tuple(_as_fresh_pairs(results) if as_pairs else _as_parts(results))
        return run

    def _touches_complex(self, args, kwargs) -> bool:
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, (ComplexTensor, complex)) or (isinstance(leaf, torch.dtype) and leaf.is_complex):
                return True
        return any(is_complex(v) for v in tree_leaves(self.current.meta.get("val")))


# Control flow's operands and results as real parts. cond, while_loop, scan and map forbid
# operands that alias one another and results that alias operands, and the parts of one
# complex value usually share a storage (views of one interleaved input), so the parts are
# copies; while_loop also wants its body's results laid out as its carried values, hence
# contiguous ones.
def _kinds(values: Sequence[Any]) -> list[bool]:
    return [isinstance(v, ComplexTensor) for v in values]


def _as_parts(values: Sequence[Any]) -> list[Any]:
    return [p.clone(memory_format=torch.contiguous_format) if isinstance(p, torch.Tensor) else p
            for v in values for p in ((v.re, v.im) if isinstance(v, ComplexTensor) else (v,))]


def _as_fresh_pairs(values: Sequence[Any]) -> list[Any]:
    # a cond's results: a complex one as one tensor of pairs, whose gradient reaches cond's
    # backward as one tensor. As two parts, their gradients would be two views of one tensor
    # wherever the parts are put back together (a stack), and AOTAutograd refuses a cond
    # backward whose inputs alias ("cond_true might be aliasing the input or the output").
    return [torch.stack([v.re, v.im], -1) if isinstance(v, ComplexTensor)
            else v.clone(memory_format=torch.contiguous_format) if isinstance(v, torch.Tensor) else v
            for v in values]


def _as_pairs_tensor(x: Any) -> Any:
    return stacked_pairs(x) if isinstance(x, ComplexTensor) else x


def _from_pairs_tensor(x: Any, like: Any) -> Any:
    return ComplexTensor(x[..., 0], x[..., 1]) if is_complex(like) else x


def _from_parts(parts: Sequence[Any], kinds: Sequence[bool]) -> list[Any]:
    it = iter(parts)
    return [ComplexTensor(next(it), next(it)) if c else next(it) for c in kinds]
