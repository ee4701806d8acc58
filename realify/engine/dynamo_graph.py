"""What a program hands realify's functionalizing trace, and where its nodes came from.

:class:`DynamoGraphRunner` runs a graph from dynamo or torch.export inside the trace (functorch
levels, nested compile regions, ``associative_scan``); :class:`SourceLines` records the user's
source line for the nodes a trace of a plain callable makes; :func:`source_line` reads it back
for error messages.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch._dispatch.python import enable_python_dispatcher
from torch._functorch import predispatch
from torch._higher_order_ops.associative_scan import generic_associative_scan
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, guard_or_true
from torch.utils._pytree import tree_leaves

from ..rules._contract import in_place_refusal, writes_in_place
from ..runtime.ops import fusion_barrier
from .grad_semantics import GradSemantics


class DynamoGraphRunner(fx.Interpreter):
    """Runs dynamo's graph inside realify's functionalizing trace. Four kinds of node need
    more than a call:

    - functorch transforms inside the program (``torch.vmap``, ``torch.func.grad``; also
      ``associative_scan``'s generic mode, which dynamo inlines as a vmap of its combine
      function): dynamo numbered their levels with no transform outside them, and
      ``torch.func.functionalize`` is itself one, so each level moves up by the depth of the
      transforms the trace runs under (otherwise functorch's internal assert
      ``layer.key() == TransformType::Functionalize`` fails);
    - ``invoke_subgraph`` (a ``torch.compiler.nested_compile_region``), which functionalizing
      it here does not support: its graph runs inline;
    - ``wrap_with_set_grad_enabled`` (torch.export's ``no_grad`` and ``set_grad_enabled``
      regions): its graph runs inline in its grad mode, where :class:`GradSemantics` sees it;
    - ``associative_scan`` as a higher-order op (its ``pointwise`` mode), which
      functionalization has no rule for: it runs as the log-depth sequence of ordinary ops
      its eager kernel runs (combine neighbouring pairs, recurse on the half, combine back:
      2 log2(n) calls of the combine function).

    Either way the complex combine of a linear recurrence (``(a1 a2, a2 b1 + b2)``, as in LRU
    and S5 models) planarizes like any other code and compiles into fused real kernels. The
    results of each outermost vmap, and of each such combine step, pass through
    ``realify::fusion_barrier`` (realify/runtime/ops.py): Inductor stores them rather than inlining
    a log-depth scan's levels into one another."""

    # functorch's level arguments, by position
    _LEVEL_ARG: ClassVar[dict[Any, int]] = {getattr(module, name): position for module, name, position in [
        (predispatch, "_add_batch_dim", 2), (predispatch, "_remove_batch_dim", 1),
        (predispatch, "_unwrap_for_grad", 1), (torch._C._functorch, "_wrap_for_grad", 1),
        (torch._C._functorch, "_unwrap_for_grad", 1),
    ]}

    def __init__(self, gm: fx.GraphModule, grad_semantics: GradSemantics | None = None,
                 decompositions: dict | None = None):
        super().__init__(gm)
        self.grad_semantics = grad_semantics  # eager autograd's view of the program, kept in the trace
        self.decompositions = decompositions or {}  # ops whose nodes run as these functions instead

    def run_node(self, n: fx.Node) -> Any:
        if n.op in ("call_function", "call_method"):
            self._check_in_place(n)
        semantics = self.grad_semantics
        if semantics is None or not semantics.active or n.op not in ("call_function", "call_method", "call_module"):
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        with fx_traceback.set_current_meta(n):  # what it adds to the trace is placed at the node's line
            return semantics.call(lambda: super(DynamoGraphRunner, self).run_node(n), n.target, args, kwargs,
                                  lambda: tree_leaves(list(self.env.values())))

    def _check_in_place(self, n: fx.Node) -> None:
        error = in_place_refusal_at(n, self.fetch_args_kwargs_from_env)
        if error is not None:
            raise error

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.level_offset = torch._C._functorch.maybe_current_level() or 0
        return super().run(*args, **kwargs)

    def call_function(self, target, args, kwargs):
        position = self._LEVEL_ARG.get(target)
        if position is not None and self.level_offset:
            args = (*args[:position], args[position] + self.level_offset, *args[position + 1:])
        if target in self.decompositions:
            return self.decompositions[target](*args, **kwargs)
        if target is torch.ops.higher_order.invoke_subgraph:
            # a nested_compile_region: inlined (compiled with its callers, not once for all)
            subgraph, _identifier, *operands = args
            return DynamoGraphRunner(subgraph, self.grad_semantics, self.decompositions).run(*operands)
        if target is torch.ops.higher_order.wrap_with_set_grad_enabled:
            # torch.export's no_grad / set_grad_enabled region: run inline in its grad mode, so
            # the grad semantics see what it computes without grad (the trace itself is grad-free)
            enabled, subgraph, *operands = args
            with torch.set_grad_enabled(enabled):
                return DynamoGraphRunner(subgraph, self.grad_semantics, self.decompositions).run(*operands)
        if target is torch.ops.higher_order.associative_scan:
            combine_fn, xs, additional = args
            def stored_step(*operands):
                return [fusion_barrier(x) for x in tree_leaves(combine_fn(*operands))]
            return generic_associative_scan(stored_step, list(xs), dim=0, additional_inputs=tuple(additional))
        result = super().call_function(target, args, kwargs)
        if target is predispatch._remove_batch_dim and args[1] == self.level_offset + 1:
            # the result of an outermost vmap (each step of a log-depth scan): stored, not
            # inlined into its readers (realify/runtime/ops.py, "fusion barrier")
            return fusion_barrier(result)
        return result


def in_place_refusal_at(n: fx.Node, values: Callable[[fx.Node], tuple[tuple, dict]]) -> BaseException | None:
    """Eager's refusal of the call ``n`` (a ``call_function``/``call_method`` node) where it
    writes a complex result into a real tensor, on its arguments' ``values``; None elsewhere.

    The functional form of the call (realify/rules/_contract.py) no longer shows the write, so
    it is checked on the call as written. The values are fetched only for an in-place call."""
    func = getattr(torch.Tensor, n.target, None) if n.op == "call_method" else n.target
    if func is None or not writes_in_place(func) or not n.args or not isinstance(n.args[0], fx.Node):
        return None
    args, kwargs = values(n)
    return in_place_refusal(func, args, kwargs, where=functools.partial(source_line, n))


def in_place_refusal_in(gm: fx.GraphModule) -> BaseException | None:
    """The first of ``gm``'s calls that :func:`in_place_refusal_at` refuses, on dynamo's
    example values (before anything runs the graph), or None."""
    def examples(n: fx.Node) -> tuple[tuple, dict]:
        return fx.node.map_aggregate((n.args, n.kwargs),
                                     lambda x: x.meta.get("example_value") if isinstance(x, fx.Node) else x)

    calls = (n for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
    return next((e for n in calls if (e := in_place_refusal_at(n, examples)) is not None), None)


def source_line(node: fx.Node | None) -> str | None:
    """The user's source line that made ``node``, as ``file:line in function: code``.

    ``stack_trace`` is a formatted traceback, outermost frame first: dynamo records the user's
    frames (inlined calls too), torch.export an ``nn.Module.forward``'s line, and decompose's own
    trace of a plain callable the innermost frame outside torch and realify
    (:class:`SourceLines`). Graphs built by hand have none: the node's name is all there is."""
    if node is None:
        return None
    return line_of_trace(node.meta.get("stack_trace")) or f"graph node {node.name} (no source line was recorded)"


def line_of_trace(trace: str | None) -> str | None:
    """The innermost frame of a recorded stack trace, as :func:`source_line` gives it."""
    if not trace:
        return None
    frames = _FRAME.findall(trace)
    if frames:
        filename, line, function, code = frames[-1]
        where = f"{filename}:{line} in {function}"
        return f"{where}: {code.strip()}" if code.strip() else where
    lines = [text.strip() for text in trace.strip().splitlines() if text.strip()]
    return " | ".join(lines[-2:])


def source_location(node: fx.Node | None) -> tuple[str, int] | None:
    """``(filename, line)`` of the user's source line that made ``node``, where recorded (a
    warning about the node is shown there, not inside realify)."""
    trace = node.meta.get("stack_trace") if node is not None else None
    frames = _FRAME.findall(trace) if trace else []
    if not frames:
        return None
    filename, line, _, _ = frames[-1]
    return filename, int(line)


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in ([^\n]+)\n?([^\n]*)')


class SourceLines(torch.overrides.TorchFunctionMode):
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


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    # ATen's linear of an input of 3 or more dims with a bias: x flattened to a matrix,
    # bias + x w^T in one addmm, the result viewed back. Its C++ kernel reads the sizes as
    # integers under functionalization, which fixes symbolic ones to their example values.
    if bias is None or x.dim() < 3:
        return torch.ops.aten.linear.default(x, weight, bias)
    out = torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight.t())
    return out.view(*x.shape[:-1], out.shape[-1])


def _tensor_split(x: torch.Tensor, *args: Any, known: dict[int, int], **kwargs: Any) -> Any:
    # Split points given as a tensor: ATen's kernel reads the tensor's data and numel() in C++,
    # which a trace at symbolic sizes cannot. The points are read as numbers instead (unbacked
    # ints where they are data), after the checks eager makes first; those failing go to eager's
    # kernel for its error.
    points = args[0] if args else kwargs.get("tensor_indices_or_sections", kwargs.get("indices_or_sections"))
    readable = (isinstance(points, torch.Tensor) and points.dtype == torch.long and points.dim() <= 1
                and points.device.type == "cpu" and x.dim() > 0)
    if not readable:
        return torch.tensor_split(x, *args, **kwargs)
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if points.dim() == 0:
        # a number of sections: it is the number of results, which no trace leaves open. Where
        # the example's value is known (an input of a static trace), the graph is made for it
        # and checks at run time that the tensor still holds it, as a static trace fixes sizes
        sections = known.get(id(points))
        if sections is None:
            return torch.tensor_split(x, points.item(), dim)
        torch.ops.aten._assert_async.msg(
            points == sections,
            f"tensor_split: the graph was traced for {sections} sections given as a tensor; it "
            f"holds another number now (trace the program again for it)")
        return torch.tensor_split(x, sections, dim)
    # the number of points fixes the number of results: a size the program cannot leave symbolic.
    # The trace assumes the points ascending within [0, size] (slice's size formula asks); the
    # program's slices clamp and wrap them as eager's do, so other points give eager's values
    found = [points[k].item() for k in range(points.shape[0])]
    for before, point in zip([0, *found], found):
        torch._check(point >= before)
        torch._check(point <= x.shape[dim])
    with enable_python_dispatcher():  # slices at unbacked points: the C++ meta asks for numbers
        return torch.tensor_split(x, found, dim)


def _narrow(x: torch.Tensor, dim: int, start: Any, length: int, *, known: dict[int, int]) -> Any:
    # A start given as a tensor, read as a number. Dynamo makes it a backed size (a guarded
    # value) and ATen's narrow takes it as one. Where it is data (an unbacked int: a plain
    # callable's trace), ATen wraps a negative start as start + size * (start < 0), a case
    # split no slice's size formula decides; written as start mod size instead (Python's mod,
    # in [0, size) for start in [-size, size); a start of size itself comes out 0, right for
    # the only length eager allows there, 0), the slice [w, w + length) has the length as its
    # size. Eager's range checks are the trace's assumptions, and checked at run time on the
    # tensor (start >= -size, and start + size * (start < 0) + length <= size).
    readable = (isinstance(start, torch.Tensor) and start.dim() == 0 and start.dtype == torch.long
                and start.device.type == "cpu" and x.dim() > 0 and isinstance(dim, int))
    if not readable:
        return torch.narrow(x, dim, start, length)
    dim = dim + x.dim() if dim < 0 else dim
    size = x.shape[dim]
    first = start.item()
    if not free_unbacked_symbols(first) or guard_or_true(size == 0):  # no mod by an empty dim
        return torch.narrow(x, dim, first, length)
    torch.ops.aten._assert_async.msg(
        (start >= -size) & (torch.where(start < 0, start + size, start) + length <= size),
        f"narrow(): start out of range, or start + length ({length}) exceeds dimension size ({size})")
    torch._check(first >= -size)
    torch._check(first <= size)
    wrapped = first % size
    torch._check(wrapped + length <= size)
    with enable_python_dispatcher():  # as in _tensor_split
        return torch.ops.aten.slice.Tensor(x, dim, wrapped, wrapped + length)


class TraceForms(torch.overrides.TorchFunctionMode):
    """Ops whose C++ composite kernels cannot be traced as they are run as Python compositions
    of the same ATen ops:

    - in every trace, ops that read a tensor's data in C++ (split points given as a tensor),
      which a fake tensor does not have: the composition reads them as numbers;
    - in symbolic traces, ops that read sizes as integers (fixing symbolic sizes to the
      example's, so a program exported with a dynamic dim or compiled for a second shape would
      be baked to one size): the composition keeps sizes symbolic."""

    _DATA_FORMS: ClassVar[dict[Any, Any]] = {
        torch.tensor_split: _tensor_split, torch.Tensor.tensor_split: _tensor_split,
        torch.ops.aten.tensor_split.tensor_indices_or_sections: _tensor_split,
        torch.narrow: _narrow, torch.Tensor.narrow: _narrow, torch.ops.aten.narrow.Tensor: _narrow,
    }
    _SIZE_FORMS: ClassVar[dict[Any, Any]] = {torch._C._nn.linear: _linear, torch.ops.aten.linear.default: _linear}

    def __init__(self, symbolic: bool, known: dict[int, int] | None = None):
        """``known``: the values of integer scalar tensors the program is called with, by
        ``id`` of the tensor it sees (the inputs of a static trace of real tensors)."""
        super().__init__()
        known = {} if known is None else known
        self.forms = {**{func: functools.partial(form, known=known) for func, form in self._DATA_FORMS.items()},
                      **(self._SIZE_FORMS if symbolic else {})}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # the mode is off while it handles a call: the composition's own ops go straight on
        return self.forms.get(func, func)(*args, **(kwargs or {}))
