"""``realify.explain(fn, *args, **kwargs)``: what realify would do with a program, without
compiling it.

Dynamo captures the program's graphs as ``torch.compile`` would (``torch._dynamo.explain``:
the graphs and the reasons for each graph break); each graph is then decomposed as the
backend decomposes it, with an observer on the rule table. Nothing is handed to Inductor and
nothing is cached: the report costs the capture and realify's own decompose time.
"""

from __future__ import annotations

import collections
import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

from .engine.custom_functions import custom_function
from .engine.decompose import decompose
from .engine.dynamo_graph import source_line
from .rules import describe_rule


@dataclasses.dataclass
class ComplexOp:
    """A complex op of a graph (ATen level, as the rules see it) and who handles it."""

    op: str
    count: int
    rule: str | None  # the rule's qualified name, or the generic path; None: an eager island
    where: str | None  # the user's source line of its first use


@dataclasses.dataclass
class GraphReport:
    """One graph dynamo captured: its complex ops, the eager islands among them (op -> why),
    and the ops of the real graph realify makes of it, complex values entering and leaving as
    ``(re, im)`` pairs as under Inductor (what the inner compiler receives)."""

    index: int
    complex_ops: list[ComplexOp]
    islands: dict[str, str]
    real_ops: collections.Counter
    error: str | None = None  # the graph could not be decomposed (strict-mode errors and the like)


@dataclasses.dataclass
class GraphBreak:
    reason: str
    where: str | None
    advice: str | None = None  # how to keep the graph whole, where the break is a known one


# Graph breaks that third-party packages cause and a user can remove: (a file path fragment of a
# frame on the break's stack, what to do). Each break is a graph boundary, a guard check and a
# compiled call, and it stops fusion across it.
KNOWN_BREAKS = (
    ("/opt_einsum/",
     "opt_einsum's contract breaks the graph where realify's stand-ins for its bookkeeping do not "
     "apply (inside shared_intermediates(), or a path search made during the call); torch.einsum "
     "contracts in the graph (it uses opt_einsum's path search itself). With tensorly (neuraloperator "
     "turns its opt_einsum plugin on), call tensorly.plugins.use_default_einsum() after the imports"),
)


@dataclasses.dataclass
class Explanation:
    """The data behind :func:`explain`'s printout (``str(explanation)``)."""

    graphs: list[GraphReport]
    graph_breaks: list[GraphBreak]

    @property
    def islands(self) -> dict[str, str]:
        return {op: why for g in self.graphs for op, why in g.islands.items()}

    def __str__(self) -> str:
        lines = [f"realify.explain: {len(self.graphs)} graph(s), {len(self.graph_breaks)} graph break(s), "
                 f"{len(self.islands)} op(s) as eager islands"]
        for g in self.graphs:
            total = sum(op.count for op in g.complex_ops)
            lines.append(f"\ngraph {g.index}: {total} complex op call(s) of {len(g.complex_ops)} op(s); "
                         f"real graph: {sum(g.real_ops.values())} op(s)")
            if g.error:
                lines.append(f"  could not be decomposed: {g.error}")
            for op in g.complex_ops:
                handler = op.rule or f"EAGER ISLAND: {g.islands.get(op.op, 'no rule')}"
                lines.append(f"  {op.op} x{op.count}  ->  {handler}" + (f"\n      at {op.where}" if op.where else ""))
            if g.real_ops:
                common = ", ".join(f"{name} {n}" for name, n in g.real_ops.most_common(8))
                more = len(g.real_ops) - 8
                lines.append(f"  real ops: {common}" + (f", ... ({more} more kinds)" if more > 0 else ""))
        for i, b in enumerate(self.graph_breaks, 1):
            lines.append(f"\ngraph break {i}: {b.reason}" + (f"\n  at {b.where}" if b.where else "")
                         + (f"\n  to keep one graph: {b.advice}" if b.advice else ""))
        return "\n".join(lines)


def explain(fn: Callable, *args: Any, **kwargs: Any) -> Explanation:
    """Run ``fn(*args, **kwargs)`` through dynamo's capture (not compiled; the program runs
    eagerly) and report, per captured graph, each complex op with the rule that handles it (or
    why it would be an eager island), the real graph's op counts, and the graph breaks with
    their reasons and source lines. ``print(realify.explain(model, x))`` for the printout; the
    returned :class:`Explanation` holds the same as data."""
    captured = torch._dynamo.explain(fn)(*args, **kwargs)
    graphs = [_report(i, gm) for i, gm in enumerate(captured.graphs, 1)]
    breaks = [GraphBreak(_first_line(r.reason), _frame(r.user_stack[-1]) if r.user_stack else None,
                         _advice(r.user_stack or ()))
              for r in captured.break_reasons]
    return Explanation(graphs, breaks)


def _report(index: int, gm: fx.GraphModule) -> GraphReport:
    examples = [n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder")]
    counts: collections.Counter = collections.Counter()
    first_use: dict[str, str | None] = {}
    islands: dict[str, str] = {}

    def observe(op: Any, node: fx.Node) -> None:
        counts[str(op)] += 1
        first_use.setdefault(str(op), source_line(node))

    def island(op, args, kwargs, node=None, detail=None):
        from .engine.islands import island_call

        islands.setdefault(str(op), detail or "no planar rule")
        return island_call(op, args, kwargs, node, detail)

    real = None
    error = None
    if any(isinstance(x, torch.Tensor) and x.dtype.is_complex for x in examples) or _creates_complex(gm):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # islands are listed, not warned about
                real = decompose(gm, examples, inputs="interleaved", outputs="interleaved", on_missing=island,
                                 on_complex_op=observe)
        except Exception as e:
            error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    complex_ops = [ComplexOp(op, n, None if op in islands else _rule_of(op), first_use.get(op))
                   for op, n in counts.most_common()]
    real_ops = collections.Counter(_name(n.target) for n in (real.graph.nodes if real is not None else ())
                                   if n.op == "call_function")
    return GraphReport(index, complex_ops, islands, real_ops, error)


def _creates_complex(gm: fx.GraphModule) -> bool:
    """A graph whose inputs are real may still make complex values (an FFT, ``view_as_complex``)."""
    return any(isinstance(v, torch.Tensor) and v.dtype.is_complex
               for n in gm.graph.nodes for v in [n.meta.get("example_value")])


def _rule_of(op_name: str) -> str | None:
    op = _op_named(op_name)
    if op is custom_function._opoverload:
        return ("a custom autograd.Function or hook: its forward and backward decomposed "
                "(realify.engine.custom_functions)")
    return describe_rule(op) if op is not None else "higher-order op, planarized with its bodies"


def _op_named(name: str) -> Any:
    """The op overload ``str(op)`` names (``aten.mul.Tensor``), or None."""
    namespace, _, rest = name.partition(".")
    packet_name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace, None), packet_name, None)
    return getattr(packet, overload or "default", None) if isinstance(packet, torch._ops.OpOverloadPacket) else None


def _name(target: Any) -> str:
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def _advice(stack: Any) -> str | None:
    files = [frame.filename.replace("\\", "/") for frame in stack]
    return next((advice for fragment, advice in KNOWN_BREAKS if any(fragment in f for f in files)), None)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def _frame(frame: Any) -> str:
    return f"{frame.filename}:{frame.lineno} in {frame.name}" + (f": {frame.line.strip()}" if frame.line else "")
