"""Eager islands: a complex op with no planar rule runs as one opaque real-interface op.

The island is a ``torch.library`` custom op whose inputs and outputs are real tensors (each
complex operand travels as its real and imaginary parts), so the graph around it stays
real-only and the inner compiler treats it as an extern call. Inside, the parts are joined,
the original aten op runs eagerly on complex tensors, and the result is split again. Its
backward is a second opaque op that recomputes the op under autograd.

An island is correct but not fast; the compile backend warns once per op (:func:`island_warning`),
and ``realify.config.strict = True`` turns islands into :class:`MissingRuleError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import warnings
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..errors import RULES_PAGE, MissingRuleError
from ..runtime.complex_tensor import ComplexTensor
from ..runtime.dtypes import complex_of, pairs_of
from ..runtime.eager_dispatch import contiguous_copy, eager_dispatch

log = logging.getLogger("realify")
_REGISTRY: dict[str, _Island] = {}
_COUNTER = itertools.count()
_WARNED: set[str] = set()


@dataclasses.dataclass
class _Island:
    op: Any
    spec: Any  # pytree spec of (args, kwargs) with tensor leaves replaced by slots
    leaves: list[Any]  # non-tensor leaves, and for tensor slots: "c" (complex pair) or "r" (real)
    out_spec: Any = None
    out_kinds: list[str] | None = None

    def join(self, tensors: list[torch.Tensor]) -> tuple[tuple, dict]:
        it = iter(tensors)
        leaves = []
        for leaf in self.leaves:
            if leaf == ("tensor", "c"):
                re, im = next(it), next(it)
                leaves.append(complex_of(re, im))
            elif leaf == ("tensor", "r"):
                leaves.append(next(it))
            else:
                leaves.append(leaf)
        return tree_unflatten(leaves, self.spec)

    def run(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        args, kwargs = self.join(tensors)
        out = self.op(*args, **kwargs)
        flat, self.out_spec = tree_flatten(out)
        self.out_kinds = []
        result = []
        for x in flat:
            if isinstance(x, torch.Tensor) and x.dtype.is_complex:
                self.out_kinds.append("c")
                parts = pairs_of(x)
                result += [contiguous_copy(parts[..., 0]), contiguous_copy(parts[..., 1])]
            else:
                self.out_kinds.append("r")
                result.append(contiguous_copy(x) if isinstance(x, torch.Tensor) else torch.tensor(x))
        return result


@torch.library.custom_op("realify::eager_island", mutates_args=())
def eager_island(key: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    with eager_dispatch():
        return _REGISTRY[key].run(tensors)


@eager_island.register_fake
def _(key, tensors):
    return _REGISTRY[key].run(tensors)


@torch.library.custom_op("realify::eager_island_backward", mutates_args=())
def eager_island_backward(key: str, tensors: list[torch.Tensor], grads: list[torch.Tensor],
                          wrt: list[int]) -> list[torch.Tensor]:
    # Only the inputs that required a gradient are differentiated, as eager does: ops refuse
    # a gradient for some arguments (linalg.pinv's rtol, a tensor that pinverse makes)
    island = _REGISTRY[key]

    floating = [i for i, g in enumerate(grads) if g.is_floating_point()]

    def forward(*differentiable):
        full = list(tensors)
        for i, t in zip(wrt, differentiable):
            full[i] = t
        outs = island.run(full)
        return [outs[i] for i in floating if outs[i].is_floating_point()]

    with eager_dispatch(), _autograd_below_dispatch():
        leaves = [tensors[i].detach().requires_grad_() for i in wrt]
        outs = forward(*leaves)
        cotangents = [grads[i] for i in floating]
        pairs = [(o, g) for o, g in zip(outs, cotangents) if o.requires_grad]
        pulled = torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs],
                                     allow_unused=True) if pairs else [None] * len(leaves)
        got = dict(zip(wrt, pulled))
    # a new tensor (never an input's alias), laid out as the fake implementation says
    return [contiguous_copy(_grad_or_zeros(got.get(i), t)) for i, t in enumerate(tensors)]


@contextlib.contextmanager
def _autograd_below_dispatch():
    """Autograd back on inside a custom op's implementation, where the dispatcher has excluded
    it. torch.func.vjp would bring its own, but refuses the autograd.Function that
    torch.library builds for a user's custom op (no setup_context), so an island of such an
    op could not be differentiated."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    autograd = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradFunctionality)
    with torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded - autograd), \
            torch.enable_grad():
        yield


def _grad_or_zeros(g, t):
    return torch.zeros_like(t) if g is None else g


@eager_island_backward.register_fake
def _(key, tensors, grads, wrt):
    return [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in tensors]


def _setup_context(ctx, inputs, output):
    ctx.key, tensors = inputs
    ctx.wrt = [i for i, t in enumerate(tensors) if t.requires_grad and t.is_floating_point()]
    ctx.save_for_backward(*tensors)


def _backward(ctx, grads):
    tensors = list(ctx.saved_tensors)
    filled = list(grads)
    if any(g is None for g in filled):
        shapes = eager_island(ctx.key, tensors)
        filled = [torch.zeros_like(s) if g is None else g for s, g in zip(shapes, filled)]
    return None, eager_island_backward(ctx.key, tensors, filled, ctx.wrt)


eager_island.register_autograd(_backward, setup_context=_setup_context)


def island_call(op, args: tuple, kwargs: dict, node=None, detail: str | None = None, *, strict: bool = False):
    """Emit an eager island for ``op`` (called while tracing in the decompose engine);
    ``detail`` says why its rule declined, when it has one."""
    from .dynamo_graph import source_line, source_location

    where = source_line(node)
    if strict:
        raise MissingRuleError(op, where=where, detail=f"{detail}; strict mode forbids eager islands" if detail
                               else "strict mode forbids eager islands")
    name = str(op)
    if name not in _WARNED:
        _WARNED.add(name)
        message = island_warning(name, where, detail)
        location = source_location(node)
        if location is None:
            warnings.warn(message, stacklevel=2)
        else:  # shown at the user's line, as a warning from their own code would be
            warnings.warn_explicit(message, UserWarning, *location)
    log.info("eager island for %s at %s", name, where)
    leaves, spec = tree_flatten((args, kwargs))
    tensors: list[torch.Tensor] = []
    kinds: list[Any] = []
    for leaf in leaves:
        if isinstance(leaf, ComplexTensor):
            kinds.append(("tensor", "c"))
            tensors += [leaf.re, leaf.im]
        elif isinstance(leaf, torch.Tensor):
            kinds.append(("tensor", "r"))
            tensors.append(leaf)
        else:
            kinds.append(leaf)
    key = f"{name}#{next(_COUNTER)}"
    island = _REGISTRY[key] = _Island(op, spec, kinds)
    flat_out = torch.ops.realify.eager_island(key, tensors)
    it = iter(flat_out)
    outs = [ComplexTensor(next(it), next(it)) if kind == "c" else next(it) for kind in island.out_kinds]
    return tree_unflatten(outs, island.out_spec)


def island_warning(name: str, where: str | None, detail: str | None = None) -> str:
    """The warning for an op that runs as an eager island: the op, the user's line, and the two
    ways forward (a rule compiles it; strict mode makes it an error instead)."""
    why = f"has no planar rule for this call ({detail})" if detail else "has no planar rule"
    return (f"realify: {name} {why}, so it runs as an eager island (an opaque, uncompiled call on complex "
            f"tensors) at {where or 'a line the trace did not record'}. To compile it, write a rule for it "
            f"with realify.rules.register ({RULES_PAGE}); to fail here instead, pass "
            "realify.compile(..., strict=True) or set realify.config.strict = True.")


def islands_in(gm: torch.fx.GraphModule) -> list[str]:
    """The ops that run as eager islands in a decomposed graph."""
    return [n.args[0].rsplit("#", 1)[0] for n in gm.graph.nodes
            if n.op == "call_function" and n.target is torch.ops.realify.eager_island.default]
