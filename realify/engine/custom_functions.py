"""Custom ``torch.autograd.Function``s and tensor hooks in a captured program, kept with their own
backward.

Dynamo records a custom Function as ``autograd_function_apply(fwd, bwd, *args)``, its forward
and backward as graphs of their own, and a hook on an intermediate as ``register_hook(x, hook)``.
AOTAutograd (the inner compiler's autograd) differentiates the first by calling ``bwd`` and
runs the second on the gradient it hooks; realify's functionalizing trace has no rule for
either. Before that trace, each such node becomes ``realify::custom_function(key, args)``,
an opaque op on the program's (complex) values, and its graphs are decomposed on their own
into real graphs on ``(re, im)`` pairs (:func:`functions_as_opaque_calls`). The planarizing
trace turns the op back into ``autograd_function_apply`` on the real graphs
(:func:`planar_function_call`), so the inner compiler differentiates the real program with the
program's own backward. A hook is the Function whose forward is the identity and whose
backward is the hook.

Gradients cross as PyTorch's convention has them: the gradient of a complex value is
``dL/dRe + i dL/dIm``, which is the pair of gradients of its ``(re, im)`` pairs.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch._dispatch.python import enable_python_dispatcher
from torch._higher_order_ops.utils import unique_graph_id
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, get_proxy_mode, track_tensor_tree
from torch.utils._pytree import tree_map, tree_unflatten

from ..errors import MissingRuleError
from .dynamo_graph import source_line
from .grad_semantics import written_tensors

higher_order = torch.ops.higher_order
try:  # dynamo records hooks on intermediates in the graph from torch 2.15 (before, a graph break)
    from torch._higher_order_ops.register_hook import register_hook_op as _register_hook
except ImportError:
    _register_hook = None
_RECORDED = tuple(op for op in (higher_order.autograd_function_apply, _register_hook) if op is not None)


@dataclasses.dataclass
class _RealFunction:
    """A custom Function's forward and backward as real graphs on pairs, and what the op that
    stands for it returns (fake values of the complex program's outputs)."""
    forward: fx.GraphModule
    backward: fx.GraphModule
    outputs: list[torch.Tensor]
    non_differentiable: list[int]
    saved_for_backward: list[int]
    size_positions: list[int]  # where among the operands the (symbolic) integers go


_FUNCTIONS: dict[int, _RealFunction] = {}
_KEYS = itertools.count()


@torch.library.custom_op("realify::custom_function", mutates_args=())
def custom_function(key: int, args: list[torch.Tensor], sizes: list[int]) -> list[torch.Tensor]:
    """``args`` are the Function's tensor operands, ``sizes`` its integer ones (symbolic sizes
    dynamo passes where a Function reads a size of a tensor with symbolic sizes)."""
    raise RuntimeError("realify::custom_function stands for a custom autograd.Function inside a trace; "
                       "it never runs")


@custom_function.register_fake
def _(key, args, sizes):
    return [torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device=o.device) for o in _FUNCTIONS[key].outputs]


def functions_as_opaque_calls(gm: fx.GraphModule, decompose: Callable[..., fx.GraphModule]) -> fx.GraphModule:
    """``gm`` with each ``autograd_function_apply`` and ``register_hook`` node replaced by
    ``realify::custom_function`` on the same operands (its graphs decomposed by ``decompose``,
    :func:`realify.decompose` itself, and kept by key); ``gm`` itself where it has none."""
    if not any(n.op == "call_function" and n.target in _RECORDED for n in gm.graph.nodes):
        return gm
    gm = fx.GraphModule(gm, _copy(gm.graph))
    hooks = _Hooks(gm.graph)
    for node in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _RECORDED]:
        if node.target is _register_hook:
            tensor, hook, *free = node.args
            forward, backward = _hook_as_function(_module(gm, hook), len(free))
            key = _decompose_function(decompose, forward, backward, [_value(a) for a in (tensor, *free)],
                                      {"non_differentiable_idx": [], "saved_for_backward_idx": []}, node)
            hooks.add(node, key)
            continue
        forward_node, backward_node, *operands = node.args
        key = _decompose_function(decompose, _module(gm, forward_node), _module(gm, backward_node),
                                  [_value(a) for a in operands], dict(node.kwargs), node)
        with gm.graph.inserting_before(node):
            call = gm.graph.call_function(custom_function._opoverload, _call_args(key, operands))
        call.meta = dict(node.meta)
        node.replace_all_uses_with(call)
        gm.graph.erase_node(node)
        # the Function's graphs now live in the op's key; not a dead-code pass over the whole
        # graph, which would drop in-place method calls whose result nothing reads (v.mul_(w))
        for graph_node in (forward_node, backward_node):
            if not graph_node.users:
                gm.graph.erase_node(graph_node)
    gm.recompile()
    return gm


def _call_args(key: int, operands: Sequence[Any]) -> tuple[int, list[Any], list[Any]]:
    """``realify::custom_function``'s arguments for a Function's operands: its tensors, and
    apart from them the integers (symbolic sizes) it takes."""
    positions = _FUNCTIONS[key].size_positions
    return key, [a for i, a in enumerate(operands) if i not in positions], [operands[i] for i in positions]


class _Hooks:
    """Hooks on a graph's values as identity Functions. A tensor's hooks see its whole gradient,
    from every reader, those before the hook's registration too, and run in the order they were
    registered: the first hook on ``y`` becomes ``y' = f1(y)`` read by every reader of ``y``, and
    each later one is put between ``y`` and the hooks before it (``y' = f1(f2(y))``: backward
    runs f1's hook first)."""

    def __init__(self, graph: fx.Graph):
        self.graph = graph
        self.origin: dict[fx.Node, fx.Node] = {}     # a hooked value -> the value hooked
        self.innermost: dict[fx.Node, fx.Node] = {}  # a value -> the call of its last hook

    def add(self, node: fx.Node, key: int) -> None:
        tensor, _hook, *free = node.args
        y = self.origin.get(tensor, tensor)
        previous = self.innermost.get(y)
        # right after y, before every reader of it; a later hook on y, before the hooks before it
        anchor = self._compute_after(y if previous is None else previous.prev, y,
                                     [f for f in free if isinstance(f, fx.Node)], node)
        with self.graph.inserting_after(anchor):
            call = self.graph.call_function(custom_function._opoverload, _call_args(key, [y, *free]))
        with self.graph.inserting_after(call):
            hooked = self.graph.call_function(operator.getitem, (call, 0))
        call.meta, hooked.meta = dict(node.meta), dict(node.meta)
        if previous is None:
            y.replace_all_uses_with(hooked, delete_user_cb=lambda user: user is not call)
            node.replace_all_uses_with(hooked)
        else:
            previous.args = (previous.args[0], [hooked if a is y else a for a in previous.args[1]], previous.args[2])
            node.replace_all_uses_with(self.origin_result(y))
        self.origin[hooked] = y
        self.innermost[y] = call
        self.graph.erase_node(node)
        if isinstance(_hook, fx.Node) and _hook.op == "get_attr" and not _hook.users:
            self.graph.erase_node(_hook)  # the hook's graph now lives in the op's key

    def _compute_after(self, boundary: fx.Node, y: fx.Node, free: list[fx.Node], node: fx.Node) -> fx.Node:
        """Move what the hook reads (``free``), where it is computed after ``boundary``, to just
        after it, and return the last node moved (``boundary`` where none was). Refused where
        that computation reads ``y`` (or a hook's call), or writes or draws random numbers
        (moving it would reorder effects)."""
        position = {n: i for i, n in enumerate(self.graph.nodes)}
        needed, stack = set(), [f for f in free if position[f] > position[boundary]]
        while stack:
            n = stack.pop()
            if n in needed:
                continue
            if n is y or y in n.all_input_nodes or n.target is custom_function._opoverload or _effectful(n):
                self._refuse(node)
            needed.add(n)
            stack.extend(a for a in n.all_input_nodes if position[a] > position[boundary])
        anchor = boundary
        for n in sorted(needed, key=position.__getitem__):
            anchor.append(n)
            anchor = n
        return anchor

    def origin_result(self, y: fx.Node) -> fx.Node:
        """The value every reader of ``y`` reads: the result of its first hook."""
        return next(r for r, origin in self.origin.items() if origin is y and all(
            u.target is not custom_function._opoverload for u in r.users))

    def _refuse(self, node: fx.Node) -> None:
        raise MissingRuleError(_register_hook, where=source_line(node),
                               detail="a hook that reads a value computed from the hooked tensor, or computed after "
                                      "the hooked tensor's first reader with a write or a random draw",
                               advice="compute the tensors the hook reads before the hooked tensor is first used")


def _effectful(node: fx.Node) -> bool:
    """Whether a node writes a tensor or draws random numbers (its place in the program matters)."""
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    args = [_value(a) for a in node.args]
    kwargs = {k: _value(v) for k, v in node.kwargs.items()}
    return bool(written_tensors(node.target, args, kwargs)) or any(
        word in name for word in ("rand", "dropout", "bernoulli", "normal", "multinomial"))


def _copy(graph: fx.Graph) -> fx.Graph:
    copy = fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    return copy


def _module(gm: fx.GraphModule, node: fx.Node) -> fx.GraphModule:
    return operator.attrgetter(node.target)(gm)


def _value(x: Any) -> Any:
    return x.meta.get("example_value", x.meta.get("val")) if isinstance(x, fx.Node) else x


def _decompose_function(decompose: Callable[..., fx.GraphModule], forward: fx.GraphModule, backward: fx.GraphModule,
                        operands: list[Any], options: dict, node: fx.Node) -> int:
    """Decompose a custom Function's graphs (complex values as ``(re, im)`` pairs at their edges)
    and keep them under a new key."""
    where = source_line(node)
    if options.get("dirty_idx"):
        raise MissingRuleError(higher_order.autograd_function_apply, where=where,
                               detail="a custom autograd.Function that marks an input dirty (ctx.mark_dirty, an "
                                      "in-place forward)",
                               advice="return a new tensor from the Function's forward instead of writing its input")
    size_positions = [i for i, x in enumerate(operands) if isinstance(x, (int, torch.SymInt))]
    if not all(isinstance(x, torch.Tensor) for i, x in enumerate(operands) if i not in size_positions):
        raise MissingRuleError(higher_order.autograd_function_apply, where=where,
                               detail="a custom autograd.Function called with an argument that is neither a tensor "
                                      "nor an integer",
                               advice="pass tensors and integers (sizes) to the Function; compute other values "
                                      "inside it")
    operands = [_grad_free(x) for x in operands]
    # dynamo's fakes, run with the Python dispatcher: C++ meta kernels (torch.complex's) read
    # symbolic sizes as numbers, fixing them
    with enable_python_dispatcher():
        outputs, saved = (list(values) for values in forward(*operands))  # only their metadata is read
    real_forward = decompose(forward, operands, inputs="interleaved", outputs="interleaved")
    _refuse_writes(real_forward, where)
    _structure(real_forward)
    grads = [torch.empty_like(o) for o in outputs]
    real_backward = decompose(backward, [*grads, *[_grad_free(s) for s in saved]], inputs="interleaved",
                              outputs="interleaved")
    _refuse_writes(real_backward, where)
    for x, (g, complex_gradient) in zip(operands, _structure(real_backward)):
        if g is not None and complex_gradient and not x.dtype.is_complex:
            raise MissingRuleError(higher_order.autograd_function_apply, where=where,
                                   detail="a custom autograd.Function whose backward returns a complex gradient "
                                          "for a real input", advice="return a real gradient for each real input")
    key = next(_KEYS)
    _FUNCTIONS[key] = _RealFunction(real_forward, real_backward, outputs, list(options["non_differentiable_idx"]),
                                    list(options["saved_for_backward_idx"]), size_positions)
    return key


def _structure(gm: fx.GraphModule) -> list[tuple[Any, bool]]:
    """The real graph's outputs restructured as the program returned them (``tree_unflatten`` of
    its flat outputs by ``realify_signature.out_spec``: the output node is rewritten to match),
    and, for each top-level one, whether it stands for a complex value."""
    output = gm.graph.output_node()
    signature = gm.realify_signature
    flat = list(output.args[0])
    structured = tree_unflatten(flat, signature.out_spec)
    output.args = (structured,)
    gm.recompile()
    kinds = tree_unflatten([dtype is not None for dtype in signature.outputs], signature.out_spec)
    if not isinstance(structured, (tuple, list)):
        return [(structured, kinds)]
    return list(zip(structured, kinds))


def _refuse_writes(gm: fx.GraphModule, where: str | None) -> None:
    if gm.realify_signature.mutated_inputs:
        raise MissingRuleError(higher_order.autograd_function_apply, where=where,
                               detail="a custom autograd.Function whose forward or backward writes its inputs in place",
                               advice="compute new tensors inside the Function instead")


def _grad_free(x: Any) -> Any:
    return x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x


def _hook_as_function(hook: fx.GraphModule, free: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """A hook on a value as the custom Function whose forward is the identity (the hook's free
    variables saved for backward) and whose backward is the hook (the gradient unchanged where
    the hook returns None; none for the free variables)."""
    forward = fx.Graph()
    x = forward.placeholder("x")
    captured = [forward.placeholder(f"free_{i}") for i in range(free)]
    forward.output(((forward.call_method("clone", (x,)),), tuple(captured)))
    backward = fx.Graph()
    grad = backward.placeholder("grad")
    saved = [backward.placeholder(f"free_{i}") for i in range(free)]
    root = torch.nn.Module()
    root.hook = hook
    new = backward.call_module("hook", (grad, *saved))
    returns_none = hook.graph.output_node().args[0] is None
    backward.output((grad if returns_none else new, *([None] * free)))
    return fx.GraphModule(root, forward), fx.GraphModule(root, backward)


def release_functions(gm: fx.GraphModule) -> None:
    """Forget the decomposed graphs of the custom Functions ``gm`` calls: once planarized, the
    real graph holds them as submodules, and nothing looks them up by key again."""
    for node in gm.graph.find_nodes(op="call_function", target=custom_function._opoverload):
        _FUNCTIONS.pop(node.args[0], None)


def planar_function_call(key: int, args: Sequence[Any], sizes: Sequence[Any], as_real: Any,
                         from_real: Any) -> list[Any]:
    """The planarizing trace's node for ``realify::custom_function``: ``autograd_function_apply``
    on the real graphs, each complex operand passed as its pairs (``as_real``), each integer
    where the program passed it, each complex result taken from its pairs (``from_real``)."""
    function = _FUNCTIONS[key]
    tensors, integers = iter([as_real(a) for a in args]), iter(sizes)
    real_args = [next(integers) if i in function.size_positions else next(tensors)
                 for i in range(len(args) + len(sizes))]
    mode = get_proxy_mode()
    with disable_proxy_modes_tracing():
        fake_out = function.forward(*real_args)[0]
    options = {"non_differentiable_idx": function.non_differentiable,
               "saved_for_backward_idx": function.saved_for_backward}
    if mode is None:
        flat = list(higher_order.autograd_function_apply(function.forward, function.backward, *real_args, **options))
    else:
        tracer = mode.tracer
        _, forward_name = unique_graph_id(mode, prefix="custom_function_forward")
        tracer.root.register_module(forward_name, function.forward)
        _, backward_name = unique_graph_id(mode, prefix="custom_function_backward")
        tracer.root.register_module(backward_name, function.backward)
        proxy_args = tree_map(tracer.unwrap_proxy, (function.forward, function.backward, *real_args))
        proxy = tracer.create_proxy("call_function", higher_order.autograd_function_apply, proxy_args, options)
        flat = list(track_tensor_tree(tuple(fake_out), proxy, constant=None, tracer=tracer))
    return [from_real(x, o) for x, o in zip(flat, function.outputs)]

