"""decompose: the one engine that turns a program on complex tensors into a real-only graph.

Two traces, both under the caller's fake mode:

1. **functionalize** the program to aten ops (``make_fx`` + ``functionalize``), so that views
   and in-place ops have exact semantics; in-place writes to inputs become extra outputs
   (the caller writes them back);
2. **planarize**: re-run that functional graph with every complex value held as a
   :class:`ComplexTensor`, each complex op through its planar rule, and trace the real ops
   that result.

The boundary layout of complex inputs and outputs is the caller's choice:
``"complex"`` (same signature as the program; split/merge happen at the graph's edges),
``"planar"`` (a real ``(2, *shape)`` tensor: ``[0]`` real part, ``[1]`` imaginary part) or
``"interleaved"`` (a real ``(*shape, 2)`` tensor, PyTorch's own storage order, a free view of
a complex tensor via ``torch.view_as_real``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import operator
import os
import re
import sys
import traceback
from contextlib import nullcontext
from typing import Any, Callable, Literal, Sequence

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch._dispatch.python import enable_python_dispatcher
from torch._functorch import predispatch
from torch._higher_order_ops.associative_scan import generic_associative_scan
from torch._ops import HigherOrderOperator, OpOverload
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode, unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_symbols
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, make_fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten, tree_leaves

from ._dtypes import real_dtype
from .errors import DECOMPOSE_ADVICE, ComplexLeakError, MissingRuleError
from .aliasing import OutputView, contiguous_strides, needs_restride
from .ops import fusion_barrier
from .rules import apply_rule, outputs_unused
from .tensor import ComplexTensor

log = logging.getLogger("realify")
aten = torch.ops.aten
Layout = Literal["complex", "planar", "interleaved"]


@dataclasses.dataclass
class Signature:
    """How the real graph's flat inputs/outputs map to the program's."""

    input_complex: list[bool]
    output_complex: list[bool]  # user outputs, then the new values of mutated inputs
    mutated_inputs: list[int]
    num_user_outputs: int
    out_spec: Any
    input_layout: Layout | list[Layout]  # one for all inputs, or one per input
    output_layout: Layout
    # per user output, as far as the program's graph metadata tells (see _eager_layouts):
    # where eager's is a view of an input, how to take it from that input (with
    # decompose(eager_outputs=True) the caller does, and the graph returns None in its place)
    output_views: list[OutputView | None] = dataclasses.field(default_factory=list)
    # and eager's strides, in the output's own elements, where static (with
    # eager_outputs=True the graph lays the output out so)
    output_strides: list[tuple[int, ...] | None] = dataclasses.field(default_factory=list)

    def layout_of(self, i: int) -> Layout:
        return self.input_layout if isinstance(self.input_layout, str) else self.input_layout[i]


def decompose(
    program: Callable | fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    inputs: Layout | Sequence[Layout] = "complex",
    outputs: Layout = "complex",
    on_missing: Callable[[OpOverload, tuple, dict, fx.Node | None], Any] | None = None,
    fusion_barriers: bool = False,
    eager_outputs: bool = False,
) -> fx.GraphModule:
    """Return a GraphModule equivalent to ``program`` with no complex dtype inside.

    ``program`` is a GraphModule or any traceable callable; ``example_inputs`` are real or
    fake tensors (and Python scalars) it is called with. With the default ``"complex"``
    layouts the result takes and returns the same values as ``program``; complex values
    exist only at its edges. The result's ``realify_signature`` (:class:`Signature`) says
    which inputs/outputs are complex and which inputs the program mutated (their new values
    follow the user outputs; with ``"complex"`` layouts they are written back in the graph).
    ``inputs`` may also give one layout per input ("planar" for some, "interleaved" for
    others; "complex" only for all of them).

    ``on_missing(op, args, kwargs, node, detail)`` may handle a complex op without a rule (the
    compile backend turns it into an eager island); by default a
    :class:`~realify.errors.MissingRuleError` names the op and its source line.

    ``fusion_barriers=True`` keeps the ``realify::fusion_barrier`` ops that mark each step of
    a log-depth scan (for Inductor, which stores their values rather than inlining them;
    realify/ops.py); by default the result holds standard ops only.

    ``eager_outputs=True`` gives the outputs eager's memory layout, as far as ``program``'s
    graph metadata tells it (a GraphModule from dynamo or torch.export; by default, and for
    other programs, outputs are laid out as computed, complex ones contiguous): an output
    that is a view of an input is left to the caller, who takes it from that input at each
    call (``None`` in the graph's outputs; :attr:`Signature.output_views`), and every other
    user output has eager's strides (for an ``"interleaved"`` complex output, ``(2 s..., 1)``
    for eager's ``s``), which the graph writes directly.
    """
    fake_mode = _fake_mode_of(example_inputs)
    fake_inputs = [_to_fake(fake_mode, x) for x in example_inputs]
    try:
        with fake_mode:
            functional, signature = _functionalize(program, fake_inputs)
            signature.input_layout, signature.output_layout = _input_layouts(inputs, len(fake_inputs)), outputs
            boundary_inputs = [_boundary_example(x, signature.layout_of(i)) for i, x in enumerate(fake_inputs)]
            planar = _planarize(functional, signature, boundary_inputs, on_missing, eager_outputs)
    except MissingRuleError as err:
        # the same error, without what torch.fx's interpreter appended to its message on the
        # way out (the failing node's repr and "Use tlparse ..."): the message already names
        # the op and the user's line
        raise MissingRuleError(err.op, where=err.where, detail=err.detail, advice=err.advice) from None
    _check_real(planar, signature)
    if not fusion_barriers:
        _strip_fusion_barriers(planar)
    planar.realify_signature = signature
    return planar


def _input_layouts(inputs: Layout | Sequence[Layout], count: int) -> Layout | list[Layout]:
    if isinstance(inputs, str):
        return inputs
    layouts = list(inputs)
    if len(layouts) != count:
        raise ValueError(f"decompose: {len(layouts)} input layouts for {count} inputs")
    if "complex" in layouts and set(layouts) != {"complex"}:
        raise ValueError("decompose: the 'complex' input layout cannot be mixed with others")
    return layouts


# ---- stage 1: functionalize ---------------------------------------------------------------


def _fake_mode_of(example_inputs: Sequence[Any]) -> FakeTensorMode:
    """The fake mode of fake example inputs (symbolic shapes stay symbolic); for real
    inputs a fresh static one, so that shapes are specialized exactly as the caller's."""
    for x in example_inputs:
        if isinstance(x, torch._subclasses.FakeTensor):
            return x.fake_mode
    # a ShapeEnv lets data-dependent ops (nonzero, masked_select) trace with unbacked sizes;
    # inputs are still fakified with static shapes (see _to_fake)
    return FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())


def _to_fake(fake_mode: FakeTensorMode, x: Any) -> Any:
    """A fake, grad-free stand-in: the traced graph is pure; autograd differentiates it later."""
    if not isinstance(x, torch.Tensor):
        return x
    if not isinstance(x, torch._subclasses.FakeTensor):
        x = fake_mode.from_tensor(x, static_shapes=True)
    with fake_mode:
        if x.requires_grad:
            x = x.detach()
        if x.is_conj() or x.is_neg():  # lazy views: the boundary resolves them at run time
            x = x.resolve_conj().resolve_neg()
    return x


def _symbolic(inputs: list[Any]) -> bool:
    """Whether any input has symbolic sizes (dynamic shapes, or dynamo's automatic dynamic
    recompile after a size changed). Such traces need the Python dispatcher, as AOTAutograd
    uses: some C++ kernels read concrete sizes or offsets (a complex slice's
    ``storage_offset()``, ``constant_pad_nd``'s pads) and raise on symbolic ones."""
    return any(isinstance(x, torch.Tensor) and free_symbols(x) for x in inputs)


def _functionalize(program: Callable, fake_inputs: list[Any]) -> tuple[fx.GraphModule, Signature]:
    holder: dict[str, Any] = {}

    def flat_program(*args):
        if isinstance(program, fx.GraphModule):  # dynamo's and torch.export's nodes carry their own
            result = _DynamoGraphRunner(program).run(*args)
        else:
            with _SourceLines():
                result = program(*args)
        flat, holder["spec"] = tree_flatten(result)
        holder["aliases"] = _input_aliases(flat, args)
        return flat

    def trace(python_dispatcher: bool) -> fx.GraphModule:
        with fx_traceback.preserve_node_meta(), (enable_python_dispatcher() if python_dispatcher else nullcontext()):
            return make_fx(
                torch.func.functionalize(flat_program, remove="mutations_and_views"),
                tracing_mode="real",
            )(*fake_inputs)

    try:
        traced = trace(python_dispatcher=_symbolic(fake_inputs))
    except DataDependentOutputException:
        # a C++ composite read a tensor value (istft's window check): with the Python
        # dispatcher it runs its Python decomposition instead, which traces (as dynamo does).
        # Not the default: it also swaps ops realify has rules for (upsampling) for
        # decompositions that are not defined on complex values.
        traced = trace(python_dispatcher=True)
    _inplace_views_to_functional(traced)
    mutated = _mutations_to_outputs(traced)
    copies_to_views(traced)
    out_node = traced.graph.output_node()
    outs = list(out_node.args[0])
    num_user = len(outs) - len(mutated)
    signature = Signature(
        input_complex=[_is_complex(x) for x in fake_inputs],
        output_complex=[_is_complex(o.meta.get("val")) if isinstance(o, fx.Node) else False for o in outs],
        mutated_inputs=mutated,
        num_user_outputs=num_user,
        out_spec=holder["spec"],
        input_layout="complex",
        output_layout="complex",
    )
    signature.output_views, signature.output_strides = _eager_layouts(program, holder["aliases"])
    return traced, signature


def _input_aliases(outputs: list[Any], inputs: Sequence[Any]) -> list[tuple[int, bool] | None]:
    """Per output of the functionalizing trace: ``(i, whole)`` where it shares memory with
    input ``i`` (a view of it; ``whole`` where it is that input itself), else None. Each input
    has a functional storage of its own, so this names the input the program viewed even
    where the example inputs share memory."""
    storages = {StorageWeakRef(x.untyped_storage()): i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    aliases: list[tuple[int, bool] | None] = []
    for out in outputs:
        i = storages.get(StorageWeakRef(out.untyped_storage())) if isinstance(out, torch.Tensor) else None
        aliases.append(None if i is None else (i, out is inputs[i]))
    return aliases


def _eager_layouts(program: Callable, aliases: list[tuple[int, bool] | None]
                   ) -> tuple[list[OutputView | None], list[tuple[int, ...] | None]]:
    """Per user output: how to take it from its input where eager's is a view of one, and
    eager's strides where they are static (for :func:`_leave`), from the values ``program``'s
    graph recorded for its inputs and outputs (dynamo's ``example_value``, torch.export's
    ``val``: fake tensors with eager's strides, offsets and conj bits). The functional trace
    itself cannot tell: it turns every view into a copy."""
    views: list[OutputView | None] = [None] * len(aliases)
    strides: list[tuple[int, ...] | None] = [None] * len(aliases)
    if not isinstance(program, fx.GraphModule):
        return views, strides
    def recorded(node: Any) -> Any:
        return node.meta.get("example_value", node.meta.get("val")) if isinstance(node, fx.Node) else node
    inputs = [recorded(n) for n in program.graph.find_nodes(op="placeholder")]
    outputs = [recorded(n) for n in tree_leaves(program.graph.output_node().args)]
    if len(outputs) != len(aliases):
        return views, strides
    for k, (value, alias) in enumerate(zip(outputs, aliases)):
        if not isinstance(value, torch.Tensor):
            continue
        if alias is not None and alias[0] < len(inputs) and _same_storage(value, inputs[alias[0]]):
            views[k] = OutputView.of(value, inputs[alias[0]], *alias)
            if views[k] is not None:
                continue
        if all(isinstance(v, int) for v in (*value.shape, *value.stride())):
            strides[k] = tuple(value.stride())
    return views, strides


def _same_storage(value: torch.Tensor, base: Any) -> bool:
    """Whether the program's recorded output views its recorded input: the functional trace
    can alias where eager copies (a reshape of an expanded input is a copy in eager)."""
    if not isinstance(base, torch.Tensor):
        return False
    try:
        return StorageWeakRef(value.untyped_storage()) == StorageWeakRef(base.untyped_storage())
    except (RuntimeError, NotImplementedError):  # no storage to compare: trust the trace
        return True


class _DynamoGraphRunner(fx.Interpreter):
    """Runs dynamo's graph inside realify's functionalizing trace. Three kinds of node need
    more than a call:

    - functorch transforms inside the program (``torch.vmap``, ``torch.func.grad``; also
      ``associative_scan``'s generic mode, which dynamo inlines as a vmap of its combine
      function): dynamo numbered their levels with no transform outside them, and
      ``torch.func.functionalize`` is itself one, so each level moves up by the depth of the
      transforms the trace runs under (otherwise functorch's internal assert
      ``layer.key() == TransformType::Functionalize`` fails);
    - ``invoke_subgraph`` (a ``torch.compiler.nested_compile_region``), which functionalizing
      it here does not support: its graph runs inline;
    - ``associative_scan`` as a higher-order op (its ``pointwise`` mode), which
      functionalization has no rule for: it runs as the log-depth sequence of ordinary ops
      its eager kernel runs (combine neighbouring pairs, recurse on the half, combine back:
      2 log2(n) calls of the combine function).

    Either way the complex combine of a linear recurrence (``(a1 a2, a2 b1 + b2)``, as in LRU
    and S5 models) planarizes like any other code and compiles into fused real kernels. The
    results of each outermost vmap, and of each such combine step, pass through
    ``realify::fusion_barrier`` (realify/ops.py): Inductor stores them rather than inlining
    a log-depth scan's levels into one another."""

    # functorch's level arguments, by position
    _LEVEL_ARG = {
        predispatch._add_batch_dim: 2,
        predispatch._remove_batch_dim: 1,
        predispatch._unwrap_for_grad: 1,
        torch._C._functorch._wrap_for_grad: 1,
        torch._C._functorch._unwrap_for_grad: 1,
    }

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.level_offset = torch._C._functorch.maybe_current_level() or 0
        return super().run(*args, **kwargs)

    def call_function(self, target, args, kwargs):
        position = self._LEVEL_ARG.get(target)
        if position is not None and self.level_offset:
            args = (*args[:position], args[position] + self.level_offset, *args[position + 1:])
        if target is torch.ops.higher_order.invoke_subgraph:
            # a nested_compile_region: inlined (compiled with its callers, not once for all)
            subgraph, _identifier, *operands = args
            return _DynamoGraphRunner(subgraph).run(*operands)
        if target is torch.ops.higher_order.associative_scan:
            combine_fn, xs, additional = args
            def stored_step(*operands):
                return [fusion_barrier(x) for x in tree_leaves(combine_fn(*operands))]
            return generic_associative_scan(stored_step, list(xs), dim=0, additional_inputs=tuple(additional))
        result = super().call_function(target, args, kwargs)
        if target is predispatch._remove_batch_dim and args[1] == self.level_offset + 1:
            # the result of an outermost vmap (each step of a log-depth scan): stored, not
            # inlined into its readers (realify/ops.py, "fusion barrier")
            return fusion_barrier(result)
        return result


_INPLACE_VIEWS = {
    aten.transpose_.default: aten.transpose.int, aten.squeeze_.dim: aten.squeeze.dim,
    aten.squeeze_.default: aten.squeeze.default, aten.squeeze_.dims: aten.squeeze.dims,
    aten.unsqueeze_.default: aten.unsqueeze.default, aten.t_.default: aten.t.default,
    aten.swapdims_.default: aten.swapdims.default, aten.as_strided_.default: aten.as_strided.default,
}


def _inplace_views_to_functional(gm: fx.GraphModule) -> None:
    """In-place view ops that functionalization keeps (C++ composites such as stft apply them
    to their own intermediates) become out-of-place views, where the viewed value has no
    other user (otherwise the in-place metadata change is visible elsewhere: left as is)."""
    for node in gm.graph.nodes:
        functional = _INPLACE_VIEWS.get(node.target)
        if functional is not None and len(node.args[0].users) == 1:
            node.target = functional
    gm.recompile()


def _mutations_to_outputs(gm: fx.GraphModule) -> list[int]:
    """Turn trailing ``copy_(input, new_value)`` nodes into extra graph outputs."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    new_values: dict[int, fx.Node] = {}
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default and node.args[0] in index:
            new_values[index[node.args[0]]] = node.args[1]
            node.replace_all_uses_with(node.args[1])
            gm.graph.erase_node(node)
    out_node = gm.graph.output_node()
    mutated = sorted(new_values)
    out_node.args = (list(out_node.args[0]) + [new_values[i] for i in mutated],)
    gm.graph.lint()
    gm.recompile()
    return mutated


def _is_complex(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_complex


# ---- stage 2: planarize -------------------------------------------------------------------


def _boundary_example(x: Any, layout: Layout) -> Any:
    if not _is_complex(x) or layout == "complex":
        return x
    parts = torch.view_as_real(x.to(torch.complex64)).to(real_dtype(x.dtype)) if x.dtype == torch.complex32 else torch.view_as_real(x)
    if layout == "planar":
        return parts.movedim(-1, 0).contiguous()
    return parts.contiguous()


def _enter(x: Any, is_complex: bool, layout: Layout) -> Any:
    """A boundary input as the value the functional graph expects."""
    if not is_complex:
        return x
    if layout == "planar":
        return ComplexTensor(x[0], x[1])
    if layout == "interleaved":
        return ComplexTensor.from_pairs(x, multiply_as_pairs=False)
    # real/imag (not view_as_real) so that a conj- or neg-view input works at run time too
    return ComplexTensor(torch.real(x), torch.imag(x))


def _leave(x: Any, layout: Layout, stride: tuple[int, ...] | None = None) -> Any:
    """A graph output in the boundary layout; with ``stride`` (eager's, in the output's own
    elements), laid out with those strides where a real or ``"interleaved"`` output has others."""
    if not isinstance(x, ComplexTensor):
        return _restrided(x, stride) if stride is not None and isinstance(x, torch.Tensor) else x
    if layout == "planar":
        return torch.stack([x.re, x.im])
    if layout == "interleaved":
        if stride is not None and needs_restride(x.shape, contiguous_strides(x.shape), stride):
            # each part written straight into its place: one kernel under Inductor, where a
            # stack and then a copy into this layout would be two passes
            out = torch.empty_strided((*x.shape, 2), (*(2 * s for s in stride), 1), dtype=x.re.dtype, device=x.device)
            out.select(-1, 0).copy_(x.re)
            out.select(-1, 1).copy_(x.im)
            return out
        return torch.stack([x.re, x.im], dim=-1)
    return torch.complex(x.re, x.im)


def _restrided(x: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """``x`` with strides ``stride``, where it has others: a copy into a buffer with those
    strides, which a compiler writes in place (Inductor keeps the strides of its graph's
    outputs)."""
    if not needs_restride(x.shape, x.stride(), stride):
        return x
    return torch.empty_strided(x.shape, stride, dtype=x.dtype, device=x.device).copy_(x)


def _planarize(functional: fx.GraphModule, signature: Signature, boundary_inputs: list[Any], on_missing,
               eager_outputs: bool = False) -> fx.GraphModule:
    def planar_program(*args):
        values = [_enter(a, c, signature.layout_of(i)) for i, (a, c) in enumerate(zip(args, signature.input_complex))]
        with _RouteComplexCreation():
            outs = PlanarInterpreter(functional, on_missing).run(*values)
        n = signature.num_user_outputs
        views = signature.output_views if eager_outputs else [None] * n
        strides = signature.output_strides if eager_outputs else [None] * n
        # outputs that are views of inputs: the caller takes them from its inputs (None here)
        user = [None if view is not None else _leave(o, signature.output_layout, stride)
                for o, view, stride in zip(outs[:n], views, strides)]
        mutated = outs[signature.num_user_outputs :]
        if signature.input_layout == "complex":
            # write back in the graph; callers see no extra outputs
            for i, new in zip(signature.mutated_inputs, mutated):
                args[i].copy_(_leave(new, "complex") if isinstance(new, ComplexTensor) else new)
            return user
        return user + [_leave(o, signature.output_layout) for o in mutated]

    # Autocast is off here: the functional graph already holds every cast autocast makes in
    # eager (it was traced under the caller's autocast state), and it makes none for complex
    # ops, so the real ops of their rules must keep their dtypes, as eager's complex kernels do.
    with fx_traceback.preserve_node_meta(), torch._C._DisableAutocast(), \
            (enable_python_dispatcher() if _symbolic(boundary_inputs) else nullcontext()):
        planar = make_fx(planar_program, tracing_mode="real")(*boundary_inputs)
    # values nothing reads (placeholders a rule made for unread outputs, see
    # realify.rules.unused_outputs) go; random ops stay, so the random stream stays eager's
    planar.graph.eliminate_dead_code(is_impure_node=_keep_unread)
    planar.recompile()
    if signature.input_layout == "complex":
        signature.mutated_inputs = []
        _resolve_lazy_bits(planar, signature)
    return planar


def _keep_unread(node: fx.Node) -> bool:
    """Whether a node stays in the graph although nothing reads it: anything but a pure aten
    op (FX counts random ops as impure; custom ops such as eager islands are kept too)."""
    return node.is_impure() or not isinstance(node.target, OpOverload) or node.target.namespace != "aten"


def copies_to_views(gm: fx.GraphModule, *, keep_copies: bool = False) -> None:
    """Functionalization turned every view into its ``*_copy`` variant (``slice_copy``,
    ``permute_copy``, ...). In a graph that mutates nothing the view itself has the same value,
    and consumers handle views far better: Inductor has no lowering for some ``*_copy`` ops
    and runs each as an extern copy (the FNO block had 12 extern ``slice_copy`` calls per
    forward), a copy's fresh layout hides the real strides from the rules, and torch.onnx has
    no translation for ``slice_copy``.

    A copy's result is contiguous and a view's may not be, so ``view`` becomes ``reshape``
    (same value; copies only where it must). Copies stay copies where ``keep_copies`` (the
    caller writes to inputs after the graph ran: a view would see the write) or where the
    graph reads storage directly (``as_strided``, dtype views); a graph with in-place ops is
    left as it is."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    if any(isinstance(n.target, OpOverload) and n.target._schema.is_mutable for n in nodes):
        return
    keep_copies = keep_copies or any(n.target in _STRIDE_DEPENDENT for n in nodes)
    for node in nodes:
        if node.target in _RESHAPES or (not keep_copies and node.target is aten.view_copy.default):
            node.target = aten.reshape.default
        elif not keep_copies:
            node.target = _view_variant(node.target) or node.target
    gm.recompile()


_STRIDE_DEPENDENT = {aten.as_strided.default, aten.as_strided_copy.default, aten.view.dtype,
                     aten.view_copy.dtype, aten.as_strided_scatter.default}
_RESHAPES = {aten.view.default, aten._unsafe_view.default}


@functools.cache
def _view_variant(op: Any) -> OpOverload | None:
    """``aten.X_copy.overload`` -> ``aten.X.overload`` where that is a view op, else None."""
    if not isinstance(op, OpOverload) or op.namespace != "aten":
        return None
    name = op._schema.name.split("::")[-1]
    if not name.endswith("_copy") or name == "lift_fresh_copy":
        return None
    base = getattr(aten, name[: -len("_copy")], None)
    overload = op._overloadname
    if base is None or overload not in base.overloads():
        return None
    view = getattr(base, overload)
    return view if view.is_view else None


def _resolve_lazy_bits(gm: fx.GraphModule, signature: Signature) -> None:
    """Complex placeholders first pass through resolve_conj/resolve_neg (no-ops unless the
    caller passes a lazy conj/neg view, which the traced view_as_real could not read)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, is_complex in zip(placeholders, signature.input_complex):
        if not is_complex:
            continue
        users = [u for u in node.users if u.target is not aten.copy_.default]
        with gm.graph.inserting_after(node):
            resolved_conj = gm.graph.call_function(aten.resolve_conj.default, (node,))
        with gm.graph.inserting_after(resolved_conj):
            resolved = gm.graph.call_function(aten.resolve_neg.default, (resolved_conj,))
        resolved_conj.meta["val"] = resolved.meta["val"] = node.meta.get("val")
        for user in users:
            user.replace_input_with(node, resolved)
    gm.recompile()


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


class PlanarInterpreter(fx.Interpreter):
    """Runs a functional aten graph with complex values held as ComplexTensor."""

    def __init__(self, gm: fx.GraphModule, on_missing=None):
        super().__init__(gm)
        self.on_missing = on_missing

    def run_node(self, n: fx.Node) -> Any:
        self.current = n
        return super().run_node(n)

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        if not _is_complex(value):
            return value
        # a complex constant: split it now, outside tracing, into two real constants
        with unset_fake_temporarily(), disable_proxy_modes_tracing():
            value = value.resolve_conj().resolve_neg()
            return ComplexTensor(value.real.clone(), value.imag.clone())

    def call_function(self, target, args, kwargs):
        if isinstance(target, OpOverload) and self._touches_complex(args, kwargs):
            try:
                with outputs_unused(_unused_outputs(self.current)):
                    return apply_rule(target, args, kwargs)
            except MissingRuleError as err:
                if self.on_missing is not None:
                    return self.on_missing(target, args, kwargs, self.current, err.detail)
                raise MissingRuleError(target, where=_where(self.current), advice=DECOMPOSE_ADVICE,
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
            raise MissingRuleError(target, where=_where(self.current), detail=detail, advice=DECOMPOSE_ADVICE)
        return super().call_function(target, args, kwargs)

    def _planar_cond(self, pred: Any, true_graph: fx.GraphModule, false_graph: fx.GraphModule,
                     operands: Sequence[Any]) -> list[Any]:
        """``torch.cond`` on complex values as a real ``cond``: each complex operand passes as
        its two parts, each branch is planarized like the graph itself (nested control flow
        too), and each complex result comes back from its two parts."""
        kinds = _kinds(operands)
        result_kinds: list[list[bool]] = []
        branches = [self._planar_subgraph(g, kinds, result_kinds) for g in (true_graph, false_graph)]
        flat = torch.ops.higher_order.cond(pred, *branches, tuple(_as_parts(operands)))
        return _from_parts(flat, result_kinds[0])

    def _planar_while_loop(self, cond_graph: fx.GraphModule, body_graph: fx.GraphModule,
                           carried: Sequence[Any], additional: Sequence[Any]) -> list[Any]:
        """``while_loop`` on complex values as a real ``while_loop``, carried and additional
        values passing as parts, as for :meth:`_planar_cond`."""
        kinds = _kinds([*carried, *additional])
        condition = self._planar_subgraph(cond_graph, kinds, [], as_parts=False)
        body = self._planar_subgraph(body_graph, kinds, [])
        flat = torch.ops.higher_order.while_loop(condition, body, tuple(_as_parts(carried)), tuple(_as_parts(additional)))
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
                         as_parts: bool = True) -> Callable:
        """A branch or loop body of control flow as a function of real parts: it rebuilds the
        complex values, planarizes ``graph`` on them and returns its results as parts (noting
        which were complex in ``result_kinds``), or as they are where ``as_parts`` is off (a
        loop condition's boolean)."""
        def run(*parts):
            results = PlanarInterpreter(graph, self.on_missing).run(*_from_parts(parts, kinds))
            if not as_parts:
                return results
            result_kinds.append(_kinds(results))
            return tuple(_as_parts(results))
        return run

    def _touches_complex(self, args, kwargs) -> bool:
        for leaf in tree_leaves((args, kwargs)):
            if isinstance(leaf, (ComplexTensor, complex)) or (isinstance(leaf, torch.dtype) and leaf.is_complex):
                return True
        return any(_is_complex(v) for v in tree_leaves(self.current.meta.get("val")))


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


def _from_parts(parts: Sequence[Any], kinds: Sequence[bool]) -> list[Any]:
    it = iter(parts)
    return [ComplexTensor(next(it), next(it)) if c else next(it) for c in kinds]


def _strip_fusion_barriers(gm: fx.GraphModule) -> None:
    """Remove ``realify::fusion_barrier`` nodes (each reader reads the value itself)."""
    for module in gm.modules():  # control flow's branches and bodies too
        if not isinstance(module, fx.GraphModule):
            continue
        barriers = module.graph.find_nodes(op="call_function", target=fusion_barrier._opoverload)
        for node in barriers:
            node.replace_all_uses_with(node.args[0])
            module.graph.erase_node(node)
        if barriers:
            module.recompile()


def _unused_outputs(node: fx.Node) -> frozenset[int]:
    """The outputs of a multi-output node that no node reads (all of them are used when a
    user takes the whole tuple)."""
    val = node.meta.get("val")
    if not isinstance(val, (tuple, list)) or any(u.target is not operator.getitem for u in node.users):
        return frozenset()
    used = {u.args[1] for u in node.users if u.users}  # a getitem nothing reads is dead
    return frozenset(i for i in range(len(val)) if i not in used)


def _where(node: fx.Node | None) -> str | None:
    """The user's source line that made ``node``, as ``file:line in function: code``.

    ``stack_trace`` is a formatted traceback, outermost frame first: dynamo records the user's
    frames (inlined calls too), torch.export an ``nn.Module.forward``'s line, and decompose's own
    trace of a plain callable the innermost frame outside torch and realify
    (:class:`_SourceLines`). Graphs built by hand have none: the node's name is all there is."""
    if node is None:
        return None
    trace = node.meta.get("stack_trace")
    if trace:
        frames = _FRAME.findall(trace)
        if frames:
            filename, line, function, code = frames[-1]
            return f"{filename}:{line} in {function}: {code.strip()}" if code.strip() else f"{filename}:{line} in {function}"
        lines = [l.strip() for l in trace.strip().splitlines() if l.strip()]
        return " | ".join(lines[-2:])
    return f"graph node {node.name} (no source line was recorded)"


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n?([^\n]*)')


class _SourceLines(torch.overrides.TorchFunctionMode):
    """Records, for the nodes a trace of a plain callable creates, the user's source line.

    ``make_fx`` records stack traces only for frames of an ``nn.Module.forward``: a plain
    function's nodes would have none, and a missing rule could only be placed by a graph node
    name. Each torch call the program makes (a function, method or operator) sets the trace's
    current stack trace (``torch.fx.traceback.set_stack_trace``, which nodes copy while node
    meta is preserved) to the innermost frame outside torch and realify, for the duration of
    the call; calls torch makes internally run with the mode off, so they keep the user's
    line."""

    _SKIP = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(self._SKIP):
            frame = frame.f_back
        if frame is None or not fx_traceback.has_preserved_node_meta():
            return func(*args, **(kwargs or {}))
        before = fx_traceback.get_current_meta().get("stack_trace")
        fx_traceback.set_stack_trace(traceback.format_stack(frame, limit=1))
        try:
            return func(*args, **(kwargs or {}))
        finally:
            fx_traceback.set_stack_trace([before] if before else [])


def _check_real(gm: fx.GraphModule, signature: Signature) -> None:
    """Raise if a complex value remains anywhere but at a 'complex' boundary."""
    leaks = []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if not any(_is_complex(v) for v in tree_leaves(node.meta.get("val"))):
            continue
        if _is_boundary_conversion(node):
            continue
        leaks.append(f"{node.format_node()}")
    if leaks:
        raise ComplexLeakError("complex values remain in the decomposed graph:\n  " + "\n  ".join(leaks[:10]))


_SPLITS = (aten.real.default, aten.imag.default, aten.view_as_real.default, aten.resolve_conj.default,
           aten.resolve_neg.default, aten.clone.default)


def _is_boundary_conversion(node: fx.Node) -> bool:
    """Split of a complex placeholder, or merge into a complex output / written-back input."""
    if node.target in _SPLITS:
        source = node.args[0]
        while source.target in (aten.resolve_conj.default, aten.resolve_neg.default):
            source = source.args[0]
        return source.op == "placeholder"
    if node.target is aten.complex.default:
        return all(u.op == "output" or u.target is aten.copy_.default for u in node.users)
    if node.target is aten.copy_.default:
        return node.args[0].op == "placeholder"
    return False
