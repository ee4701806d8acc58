"""``realify.explain(fn, *args, **kwargs)``: what realify would do with a program, without compiling it.

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
    """A complex op of a graph (ATen level, as the rules see it) and who handles it.

    Attributes
    ----------
    op : str
        The op overload's name, as ``str(op)`` writes it (``"aten.mul.Tensor"``).
    count : int
        How many calls of it the graph makes on complex values.
    rule : str or None
        The qualified name of the rule that handles it, or a description of the generic path
        (a custom autograd.Function, a higher-order op); None where it would be an eager
        island (:attr:`GraphReport.islands` says why).
    where : str or None
        The user's source line of its first use (``file:line in function: code``), where the
        graph recorded one.

    See Also
    --------
    GraphReport : the graph report that lists them.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def f(z):
    ...     return z * z + 1
    >>> report = realify.explain(f, torch.tensor([1 + 2j, 3 - 1j]))
    >>> [(op.op, op.count) for op in report.graphs[0].complex_ops]
    [('aten.mul.Tensor', 1), ('aten.add.Tensor', 1)]
    >>> report.graphs[0].complex_ops[0].rule
    'realify.rules.arithmetic.mul'
    >>> report.graphs[0].complex_ops[0].where
    '<doctest ...>:2 in f: return z * z + 1'
    """

    op: str
    count: int
    rule: str | None  # the rule's qualified name, or the generic path; None: an eager island
    where: str | None  # the user's source line of its first use


@dataclasses.dataclass
class GraphReport:
    """One graph dynamo captured, as realify would decompose it.

    Attributes
    ----------
    index : int
        The graph's number, from 1, in the order dynamo captured them.
    complex_ops : list of ComplexOp
        Its complex ops, each with the rule that handles it, most called first.
    islands : dict of str to str
        The eager islands among them: op name -> why it has no rule.
    real_ops : collections.Counter
        The ops of the real graph realify makes of it (op name -> calls), complex values
        entering and leaving as ``(re, im)`` pairs as under Inductor: what the inner compiler
        receives. Empty where the graph has no complex values, or could not be decomposed.
    error : str or None
        Why the graph could not be decomposed (``"TypeName: first line of the message"``:
        strict-mode errors and the like); None where it could.

    See Also
    --------
    Explanation : the report, one GraphReport per graph.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def f(z):
    ...     return z * z + 1
    >>> graph = realify.explain(f, torch.tensor([1 + 2j, 3 - 1j])).graphs[0]
    >>> graph.index, len(graph.complex_ops), graph.islands, graph.error
    (1, 2, {}, None)
    >>> graph.real_ops["aten.mul.Tensor"] > 0                  # the complex product's real products
    True
    """

    index: int
    complex_ops: list[ComplexOp]
    islands: dict[str, str]
    real_ops: collections.Counter
    error: str | None = None  # the graph could not be decomposed (strict-mode errors and the like)


@dataclasses.dataclass
class GraphBreak:
    """A graph break dynamo made in the program.

    Attributes
    ----------
    reason : str
        The first line of dynamo's reason for the break.
    where : str or None
        The user's source line of the break, where dynamo recorded one.
    advice : str or None
        How to keep the graph whole, where the break is a known one (:data:`KNOWN_BREAKS`).
    """

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
    """The data behind :func:`explain`'s printout (``str(explanation)``).

    Attributes
    ----------
    graphs : list of GraphReport
        One report per graph dynamo captured, in order.
    graph_breaks : list of GraphBreak
        The graph breaks between them: each one's reason, source line and, where the break is a
        known one, how to keep the graph whole.

    See Also
    --------
    explain : makes it.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def f(z):
    ...     return torch.fft.fft(z) * 2
    >>> report = realify.explain(f, torch.tensor([1 + 2j, 3 - 1j]))
    >>> len(report.graphs), report.graph_breaks, report.islands
    (1, [], {})
    >>> str(report).splitlines()[0]
    'realify.explain: 1 graph(s), 0 graph break(s), 0 op(s) as eager islands'
    """

    graphs: list[GraphReport]
    graph_breaks: list[GraphBreak]

    @property
    def islands(self) -> dict[str, str]:
        """The eager islands of every graph: op name -> why it has no rule (empty where every complex op has one)."""
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
    """Report what realify would do with ``fn(*args, **kwargs)``, without compiling it.

    The call runs through dynamo's capture (not compiled: the program runs eagerly), and the
    report lists, per captured graph, each complex op with the rule that handles it (or why it
    would be an eager island), the real graph's op counts, and the graph breaks with their
    reasons and source lines. ``print(realify.explain(model, x))`` shows the printout; the
    returned :class:`Explanation` holds the same as data.

    Parameters
    ----------
    fn : callable
        The program: a module or a function.
    *args : Any
        Its positional arguments.
    **kwargs : Any
        Its keyword arguments.

    Returns
    -------
    Explanation
        The graphs, their complex ops and islands, and the graph breaks; ``str()`` of it is
        the printout.

    Raises
    ------
    Exception
        Whatever ``fn(*args, **kwargs)`` raises, as it runs. A graph realify cannot decompose
        raises nothing: its :attr:`GraphReport.error` says why.

    See Also
    --------
    Explanation : the report.

    Notes
    -----
    Dynamo captures the program's graphs as ``torch.compile`` would (``torch._dynamo.explain``:
    the graphs and the reasons for each graph break); each graph is then decomposed as the
    backend decomposes it, with an observer on the rule table. Nothing is handed to Inductor
    and nothing is cached: the report costs the capture and realify's own decompose time.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def f(z):
    ...     y = torch.fft.fft(z) * 2
    ...     torch._dynamo.graph_break()
    ...     return y.abs()
    >>> report = realify.explain(f, torch.tensor([1 + 2j, 3 - 1j]))
    >>> print(report)
    realify.explain: 2 graph(s), 1 graph break(s), 0 op(s) as eager islands
    <BLANKLINE>
    graph 1: 2 complex op call(s) of 2 op(s); real graph: ... op(s)
      aten._fft_c2c.default x1  ->  realify.rules.fft.fft_c2c
          at <doctest ...>:2 in f: y = torch.fft.fft(z) * 2
      aten.mul.Tensor x1  ->  realify.rules.arithmetic.mul
          at <doctest ...>:2 in f: y = torch.fft.fft(z) * 2
      real ops: ...
    graph break 1: ...
      at <doctest ...>:3 in f: torch._dynamo.graph_break()
    >>> report.islands
    {}
    """
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
    """Whether a graph makes complex values, as one whose inputs are real may (an FFT, ``view_as_complex``)."""
    return any(isinstance(v, torch.Tensor) and v.dtype.is_complex
               for n in gm.graph.nodes for v in [n.meta.get("example_value")])


def _rule_of(op_name: str) -> str | None:
    op = _op_named(op_name)
    if op is custom_function._opoverload:
        return ("a custom autograd.Function or hook: its forward and backward decomposed "
                "(realify.engine.custom_functions)")
    return describe_rule(op) if op is not None else "higher-order op, planarized with its bodies"


def _op_named(name: str) -> Any:
    """Return the op overload ``str(op)`` names (``aten.mul.Tensor``), or None."""
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
