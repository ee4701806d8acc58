"""What autograd sees in the captured program, kept in realify's functionalizing trace.

realify traces the program on grad-free fake tensors and hands the real graph to an inner
compiler that differentiates it (Inductor's AOTAutograd). Everything eager's autograd would
have read from the *running* program is gone from such a trace: grad mode (``no_grad``,
``inference_mode``, ``set_grad_enabled``), which values require grad, and which writes it
records. Differentiated as traced, the real graph would send gradients through values the
program cut from the gradient path. :class:`GradSemantics` follows the program as eager's
autograd would, node by node, and writes what it decides into the trace:

- a floating-point or complex value computed with grad disabled from values that require
  grad passes through ``aten.detach`` (the program's own ``detach`` is traced as it is); the
  planarizing trace turns each into ``realify::stop_gradient`` on each part, and decompose
  hands the inner compiler ``aten.detach`` in its place (realify/runtime/ops.py);
- a write that autograd does not record (with grad disabled, or through an alias that does
  not share the written tensor's gradient history: ``w.detach().mul_(2)``) leaves the
  gradient path of every tensor that requires grad and shares the memory as it was: its new
  value reaches later readers through ``realify::straight_through(new, old)``, whose
  gradient goes to the old value unchanged, and an input written only so is written back by
  the caller with grad disabled (``Boundary.hidden_writes``), as eager writes it.

Dynamo guards on grad mode and on each input's ``requires_grad``, so what holds at tracing
holds at every call of the compiled graph.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ..runtime.ops import straight_through

aten = torch.ops.aten

# Python's in-place operators on tensors (dynamo records ``x += y`` as operator.iadd)
_INPLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
    operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
    operator.imatmul, operator.setitem,
})
_DETACH = frozenset({"detach", torch.Tensor.detach, torch.detach, aten.detach.default})


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def written_tensors(target: Any, args: Sequence[Any], kwargs: dict) -> list[torch.Tensor]:
    """The tensors a call writes in place: the ``self`` of a trailing-underscore method or
    function (``mul_``, ``torch.relu_``, ``_foreach_add_``: every tensor of its first
    argument), the target of Python's in-place operators and ``__setitem__``, an aten op's
    written arguments (its schema), and ``out=``."""
    written: list[Any] = []
    name = _name(target)
    if isinstance(target, torch._ops.OpOverload):
        for argument, value in zip(target._schema.arguments, itertools.chain(args, itertools.repeat(None))):
            if argument.alias_info is not None and argument.alias_info.is_write:
                written.append(value if value is not None else kwargs.get(argument.name))
    elif target in _INPLACE_OPERATORS or name == "__setitem__" or (
            name.endswith("_") and not name.endswith("__") and name != "requires_grad_"):
        written.append(args[0] if args else None)
    if "out" in kwargs:
        written.append(kwargs["out"])
    return [t for t in tree_leaves(written) if isinstance(t, torch.Tensor)]


def _differentiable(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.dtype.is_floating_point or x.dtype.is_complex)


class GradSemantics:
    """Eager autograd's view of a program traced node by node: which values require grad, which
    share a gradient history, and which writes autograd records (see the module's docstring).
    ``requires_grad`` gives each traced input's flag (the caller's).

    Tensors fall into *families*, the tensors whose gradient history one write changes: a
    tensor and the views taken of it with grad enabled (eager's differentiable views). A
    ``detach``, or a view taken with grad disabled, starts a family of its own, as every new
    value does."""

    def __init__(self, inputs: Sequence[Any], requires_grad: Sequence[bool]):
        self.requires = WeakIdKeyDictionary()  # tensor -> its gradient history (an int), if it requires grad
        self.family = WeakIdKeyDictionary()    # tensor -> its family (an int)
        self.ids = itertools.count()
        self.inputs = list(inputs)
        for x, flag in zip(inputs, requires_grad):
            if flag and _differentiable(x):
                self.requires[x] = next(self.ids)
        self.visible_writes: set[int] = set()  # inputs written where autograd sees it
        self.hidden_writes: set[int] = set()   # inputs written where it does not

    @property
    def active(self) -> bool:
        return len(self.requires) > 0

    def hidden(self, mutated_inputs: Sequence[int]) -> frozenset[int]:
        """The inputs the program writes of which autograd sees no write."""
        return frozenset(i for i in mutated_inputs if i in self.hidden_writes and i not in self.visible_writes)

    def call(self, run: Callable[[], Any], target: Any, args: Sequence[Any], kwargs: dict,
             live: Callable[[], Sequence[Any]]) -> Any:
        """``run()`` (the node's call), with what autograd would see of it written into the trace;
        ``live()`` are the values the program may still read (aliases of a written tensor: asked
        for only where the call writes, as a graph's values are many)."""
        grad = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        operands = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        from_grad = any(x in self.requires for x in operands)
        written = written_tensors(target, args, kwargs)
        if written:
            return self._write(run, grad, written, from_grad, live)
        result = run()
        detaching = target in _DETACH
        if from_grad and not grad and not detaching:  # the program's own detach is traced as it is
            result = tree_map(lambda x: aten.detach.default(x) if _differentiable(x) else x, result)
        for out in tree_leaves(result):
            if not isinstance(out, torch.Tensor) or any(out is x for x in operands):
                continue
            # a view taken with grad enabled shares its operand's family and history
            base = None if detaching or not grad else next((x for x in operands if _aliases(out, x)), None)
            self.family[out] = self._family(base) if base is not None else next(self.ids)
            if grad and from_grad and _differentiable(out) and not detaching:
                inherited = base is not None and base in self.requires
                self.requires[out] = self.requires[base] if inherited else next(self.ids)
        return result

    def _family(self, x: torch.Tensor) -> int:
        if x not in self.family:
            self.family[x] = next(self.ids)
        return self.family[x]

    def _write(self, run: Callable[[], Any], grad: bool, written: list[torch.Tensor], from_grad: bool,
               live: Callable[[], Sequence[Any]]) -> Any:
        families = {self._family(w) for w in written}
        tensors = {id(x): x for x in itertools.chain(self.inputs, live()) if isinstance(x, torch.Tensor)}
        candidates = [x for x in tensors.values() if any(_aliases(x, w) for w in written)]
        # autograd records a write with grad enabled in the history of the written tensor's
        # family; every other tensor that requires grad and shares the memory keeps its history
        recorded = [x for x in candidates if grad and self._family(x) in families]
        unseen = [x for x in candidates if x in self.requires and not any(x is r for r in recorded)]
        for i, x in enumerate(self.inputs):
            if any(x is c for c in candidates):
                (self.visible_writes if any(x is r for r in recorded) else self.hidden_writes).add(i)
        with torch.no_grad():
            old = [x.clone() for x in unseen]
        result = run()
        with torch.no_grad():
            for x, before in zip(unseen, old):
                x.copy_(straight_through(x, before))
        if grad and from_grad:
            history = next((self.requires[x] for x in recorded if x in self.requires), None)
            history = next(self.ids) if history is None else history
            for x in recorded:
                self.requires[x] = history
        return result


def _aliases(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a is b or torch._C._is_alias_of(a, b)
