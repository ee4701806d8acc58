"""decompose: the one engine that turns a program on complex tensors into a real-only graph.

Two traces, both under the caller's fake mode:

1. **functionalize** the program to aten ops (``make_fx`` + ``functionalize``; a graph from
   dynamo or torch.export runs through :class:`~realify.engine.dynamo_graph.DynamoGraphRunner`), so
   that views and in-place ops have exact semantics; in-place writes to inputs become extra
   outputs (the caller writes them back; realify/passes/cleanup.py);
2. **planarize** (realify/engine/planarize.py): re-run that functional graph with every complex value
   held as a :class:`ComplexTensor`, each complex op through its planar rule, and trace the
   real ops that result.

The layout in which complex inputs and outputs cross the graph's edges is the caller's choice
(realify/runtime/boundary.py: ``"complex"``, ``"planar"`` or ``"interleaved"``).
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch._decomp import decomposition_table
from torch._dispatch.python import enable_python_dispatcher
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._pytree import tree_flatten

from .. import config
from ..errors import MissingRuleError, RealifyError
from ..passes import pipeline
from ..passes.autocast import MarkAutocastProducts
from ..runtime.boundary import (
    Boundary,
    Layout,
    boundary_example,
    check_real_graph,
    eager_layouts,
    input_aliases,
    input_layouts,
    is_complex,
)
from .custom_functions import functions_as_opaque_calls, release_functions
from .dynamo_graph import DynamoGraphRunner, SourceLines, TraceForms
from .grad_semantics import GradSemantics
from .planarize import planarize, symbolic

log = logging.getLogger("realify")
aten = torch.ops.aten


def decompose(
    program: Callable | fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    inputs: Layout | Sequence[Layout] = "complex",
    outputs: Layout = "complex",
    on_missing: Callable[[OpOverload, tuple, dict, fx.Node | None, str], Any] | None = None,
    fusion_barriers: bool = False,
    eager_outputs: bool = False,
    pair_products: bool = False,
    gemm_multiplications: int | None = None,
    complex_autocast: bool | None = None,
    on_complex_op: Callable[[Any, fx.Node], None] | None = None,
    cpu_vector_bytes: int | None = None,
    decompositions: dict | None = None,
    check_inputs: bool = True,
) -> fx.GraphModule:
    """Return a GraphModule equivalent to ``program`` with no complex dtype inside.

    With the default ``"complex"`` layouts the result takes and returns the same values as
    ``program``, and complex values exist only at its edges; with ``"interleaved"`` or
    ``"planar"`` layouts they cross the edges as real pairs, and where inputs and outputs both
    do, the graph is real-only throughout. The result's ``realify_signature``
    (:class:`~realify.runtime.boundary.Boundary`) says which inputs and outputs are complex and
    which inputs the program mutated (their new values follow the user outputs; with
    ``"complex"`` layouts they are written back in the graph). The result returns its outputs
    as a flat list.

    Parameters
    ----------
    program : callable or torch.fx.GraphModule
        A GraphModule (from dynamo or torch.export, say) or any traceable callable.
    example_inputs : sequence
        Real or fake tensors (and Python scalars) ``program`` is called with; the graph is
        specialized to their shapes, unless they are fake tensors with symbolic shapes.
    inputs : {"complex", "interleaved", "planar"} or sequence of them, default "complex"
        How complex inputs cross the graph's edge (realify/runtime/boundary.py): as complex
        tensors, as real ``(..., 2)`` pairs (``torch.view_as_real``), or as real ``(2, ...)``
        planes. A sequence gives one layout per input ("planar" for some, "interleaved" for
        others; "complex" only for all of them).
    outputs : {"complex", "interleaved", "planar"}, default "complex"
        How complex outputs cross the graph's edge.
    on_missing : callable, optional
        ``on_missing(op, args, kwargs, node, detail)`` may handle a complex op without a rule,
        its result standing for the op's (the compile backend turns it into an eager island);
        by default a :class:`~realify.MissingRuleError` names the op and its source line.
    fusion_barriers : bool, default False
        Keep the ``realify::fusion_barrier`` ops that mark each step of a log-depth scan (for
        Inductor, which stores their values rather than inlining them; realify/runtime/ops.py);
        by default the result holds standard ops only.
    eager_outputs : bool, default False
        Give the outputs eager's memory layout, as far as ``program``'s graph metadata tells it
        (a GraphModule from dynamo or torch.export; by default, and for other programs, outputs
        are laid out as computed, complex ones contiguous): an output that is a view of an input
        is left to the caller, who takes it from that input at each call (``None`` in the
        graph's outputs; ``Boundary.output_views``), and every other user output has eager's
        strides (for an ``"interleaved"`` complex output, ``(2 s..., 1)`` for eager's ``s``),
        which the graph writes directly.
    pair_products : bool, default False
        Also run products with a complex value that sits in memory as (re, im) pairs on the
        pairs (``realify::cmul_pairs``, what the compile backend does). Such values stay pairs
        through views and where they are put back together either way
        (realify/passes/layout.py).
    gemm_multiplications : {3, 4}, optional
        The real products of a complex matrix product or convolution: 3 with Gauss's form
        (realify/passes/gauss.py) or the textbook 4; by default
        ``realify.config.gemm_multiplications``.
    complex_autocast : bool, optional
        Complex products traced where ``torch.autocast`` is on run their real products on
        autocast's dtype, always in the four-product form (realify/passes/autocast.py); by
        default ``realify.config.complex_autocast``.
    on_complex_op : callable, optional
        ``on_complex_op(op, node)`` observes each complex op of the functional graph as it is
        planarized (:func:`realify.explain` lists them).
    cpu_vector_bytes : int, optional
        Products along a dim (``prod``) multiply in the order of eager's CPU kernel on vectors
        of that many bytes (the compile backend passes its CPU's,
        ``realify.backend.host_cpu_vector_bytes()``); by default in the device-neutral order,
        whose special values may differ from a device's own (docs/numerics.md, "Reductions").
    decompositions : dict, optional
        Op -> function: replaces the nodes of a GraphModule ``program`` that call those ops,
        before the trace reaches their device's kernels (``realify.export`` passes
        :data:`EXPORT_FORMS`).
    check_inputs : bool, default True
        Where complex inputs cross as real pairs ("interleaved" or "planar"), the result names
        an input passed as a complex tensor, or as a real one of the wrong shape, before its
        real ops fail on it (:class:`PairsCheck`, which raises :class:`~realify.RealifyError`).
        The compile backend turns it off: its runtime makes the pairs itself, and a hook on the
        graph would change AOTAutograd's cache key at every compile.

    Returns
    -------
    torch.fx.GraphModule
        The real graph, with its calling convention in ``realify_signature``.

    Raises
    ------
    ValueError
        ``gemm_multiplications`` (or the option it defaults to) is not 3 or 4, or ``inputs``
        gives a number of layouts other than the number of inputs, or mixes "complex" with
        other layouts.
    realify.MissingRuleError
        A complex op has no rule and no ``on_missing`` handles it; the message names the op
        and the program's line that called it.
    realify.InputMetadataChangeError
        The program changes the shape or strides of an input in place (``z.t_()``).
    realify.ComplexLeakError
        A complex value remains inside the real graph (a rule's fault, not the caller's).

    See Also
    --------
    realify.compile : the compile backend, which decomposes each graph dynamo captures.
    realify.explain : which complex ops a program holds, and which have rules.

    Notes
    -----
    Two traces, both under the caller's fake mode: the program is functionalized to aten ops,
    so that views and in-place ops have exact semantics, then re-run with every complex value
    held as a :class:`~realify.ComplexTensor`, each complex op through its planar rule, and
    the real ops that result are traced.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def energy_plus_one(z):
    ...     return z * z.conj() + 1
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> gm = realify.decompose(energy_plus_one, [z], inputs="interleaved", outputs="interleaved")
    >>> any(n.meta["val"].is_complex() for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor))
    False
    >>> gm(torch.view_as_real(z))
    [tensor([[ 6.,  0.],
            [11.,  0.]])]

    With the default layouts the graph takes and returns complex tensors; a complex matrix
    product becomes 3 real ones (4 with ``gemm_multiplications=4``):

    >>> a = torch.tensor([[1 + 1j, 2 - 1j], [0.5j, 3 + 0j]])
    >>> gm = realify.decompose(torch.matmul, [a, a])
    >>> torch.allclose(gm(a, a)[0], a @ a)
    True
    >>> sum(n.target is torch.ops.aten.mm.default for n in gm.graph.nodes)
    3
    """
    multiplications = config.gemm_multiplications if gemm_multiplications is None else gemm_multiplications
    if multiplications not in (3, 4):
        raise ValueError(f"decompose: gemm_multiplications must be 3 or 4, got {multiplications!r}")
    lower_precision = config.complex_autocast if complex_autocast is None else complex_autocast
    fake_mode = _fake_mode_of(example_inputs)
    fake_inputs = [_to_fake(fake_mode, x) for x in example_inputs]
    scalar_values = _scalar_values(example_inputs)  # read outside the fake mode, which would fake them
    requires_grad = [isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs]
    try:
        with fake_mode:
            functional, signature = _functionalize(program, fake_inputs, lower_precision, requires_grad,
                                                   decompositions or {}, scalar_values)
            signature = dataclasses.replace(signature, input_layout=input_layouts(inputs, len(fake_inputs)),
                                            output_layout=outputs, eager_outputs=eager_outputs)
            boundary_inputs = [boundary_example(x, signature.layout_of(i)) for i, x in enumerate(fake_inputs)]
            try:
                planar, signature = planarize(functional, signature, boundary_inputs, on_missing, on_complex_op)
            finally:
                release_functions(functional)  # the real graph holds their graphs now
    except MissingRuleError as err:
        # the same error, without what torch.fx's interpreter appended to its message on the
        # way out (the failing node's repr and "Use tlparse ..."): the message already names
        # the op and the user's line
        raise MissingRuleError(err.op, where=err.where, detail=err.detail, advice=err.advice) from None
    check_real_graph(planar, signature)
    placeholders = planar.graph.find_nodes(op="placeholder")
    complex_inputs = frozenset(n for n, c in zip(placeholders, signature.input_complex) if c)
    pipeline.real_graph(planar, complex_inputs, cpu_vector_bytes=cpu_vector_bytes, pair_products=pair_products,
                        gemm_multiplications=multiplications, complex_autocast=lower_precision,
                        fusion_barriers=fusion_barriers)
    planar.realify_signature = signature
    if check_inputs:
        _check_calls(planar, signature, _parameter_names(program))
    return planar


# ---- the result's calling convention --------------------------------------------------------


def _check_calls(gm: fx.GraphModule, signature: Boundary, names: Sequence[str]) -> None:
    """Make ``gm`` check, at each call, the inputs it takes as real pairs (:class:`PairsCheck`)."""
    check = PairsCheck(signature, names)
    if check.pairs:
        gm.register_forward_pre_hook(check)


class PairsCheck:
    """A decomposed graph's forward pre-hook: complex inputs taken as real pairs must arrive as pairs.

    Each complex input that crosses as real pairs (the "interleaved" or "planar" layout) is
    checked. A complex tensor passed there instead would fail inside the graph, on its real ops
    (``IndexError: Dimension out of range``); this names the input and what to pass. A class,
    not a closure: a GraphModule's pickle holds its hooks.
    """

    def __init__(self, signature: Boundary, names: Sequence[str]):
        self.names = list(names)
        self.pairs = [(i, dtype, signature.layout_of(i), signature.real_dtype(dtype))
                      for i, dtype in enumerate(signature.inputs)
                      if dtype is not None and signature.layout_of(i) != "complex"]

    def __call__(self, module: fx.GraphModule, args: tuple) -> None:
        """Raise :class:`~realify.RealifyError` for an input in ``args`` that is not the pairs it should be."""
        for i, dtype, layout, real in self.pairs:
            if i < len(args) and isinstance(args[i], torch.Tensor):
                problem = _pairs_problem(args[i], layout, dtype, real)
                if problem is not None:
                    raise RealifyError(self._named(i, problem))

    def _named(self, i: int, problem: str) -> str:
        """``problem`` about input ``i``, with the program's name for it where known."""
        name = self.names[i] if i < len(self.names) else None
        label = f"input {i} ({name})" if name else f"input {i}"
        return problem.format(input=label, z=name or "z")


# what each layout's pairs are, and how a caller makes them from a complex tensor z
_PAIRS = {"interleaved": ("(..., 2)", "(re, im) pairs in the last dim", "torch.view_as_real({z})"),
          "planar": ("(2, ...)", "real parts, then imaginary parts, in the first dim",
                     "torch.stack([{z}.real, {z}.imag])")}


def _pairs_problem(x: torch.Tensor, layout: str, dtype: torch.dtype, real: torch.dtype) -> str | None:
    """Say what is wrong with ``x`` as the pairs of a ``dtype`` input in ``layout`` (None: nothing).

    ``{input}`` and ``{z}`` are left in the message for the input's label and name.
    """
    shape, order, make = _PAIRS[layout]
    wanted = (f"takes it as a real {real} tensor of shape {shape}, the {order} of a {dtype} value "
              f"(decompose(..., inputs={layout!r}))")
    if x.dtype.is_complex:
        return (f"{{input}} is a {x.dtype} tensor, but this graph from realify.decompose is real-only: it {wanted}. "
                f"Pass {make}, or call the graph with the complex tensors through "
                "realify.runtime.boundary.RealCall(gm, gm.realify_signature)")
    size = x.shape[0 if layout == "planar" else -1] if x.dim() else None
    if size is None or (isinstance(size, int) and size != 2):  # a symbolic size: traced, not called
        return f"{{input}} is a {x.dtype} tensor of shape {tuple(x.shape)}, but this graph {wanted}: pass {make}"
    return None


# ---- stage 1: functionalize ---------------------------------------------------------------

# The recurrent layers (LSTM, GRU, RNN) as PyTorch's decompositions into their cells' ops: traced
# to aten, a real LSTM otherwise becomes its CPU kernel, aten.mkldnn_rnn_layer, which no exporter
# knows (torch.export keeps aten.lstm, which torch.onnx translates). realify.export passes these;
# the compile backend keeps the kernel, as the default backend does.
def _cells(decomposition: Callable) -> Callable:
    # with oneDNN on, the decomposition itself picks the CPU kernel
    def run(*args: Any, **kwargs: Any) -> Any:
        with torch.backends.mkldnn.flags(enabled=False):
            return decomposition(*args, **kwargs)
    return run


RECURRENT_FORMS = {op: _cells(decomposition_table[op])
                   for packet in (aten.lstm, aten.gru, aten.rnn_tanh, aten.rnn_relu)
                   for op in (packet.input, packet.data)}
# Real ops torch.export keeps whose CompositeExplicitAutograd kernel the functionalizing trace
# would run instead, as PyTorch's core-ATen decomposition of them: the program then computes
# what torch.export's program decomposed to core ATen computes (binary_cross_entropy_with_logits'
# kernel is written with log(exp(-m) + exp(-x - m)), its decomposition with log1p(exp(-|x|)))
EXPORT_FORMS = {**RECURRENT_FORMS,
                aten.binary_cross_entropy_with_logits.default:
                    decomposition_table[aten.binary_cross_entropy_with_logits.default]}


def _fake_mode_of(example_inputs: Sequence[Any]) -> FakeTensorMode:
    """Return the fake mode to trace ``example_inputs`` under.

    That is the fake mode of fake example inputs (symbolic shapes stay symbolic), or of the
    trace that calls realify (dynamo's, where a graph's only inputs are symbolic sizes, whose
    symbols only that mode's ShapeEnv knows); for real inputs a fresh static one, so that
    shapes are specialized exactly as the caller's.
    """
    for x in example_inputs:
        if isinstance(x, torch._subclasses.FakeTensor):
            return x.fake_mode
    if any(isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) for x in example_inputs):
        context = torch._guards.TracingContext.try_get()
        if context is not None and context.fake_mode is not None:
            return context.fake_mode
    # a ShapeEnv lets data-dependent ops (nonzero, masked_select) trace with unbacked sizes;
    # inputs are still fakified with static shapes (see _to_fake)
    return FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())


def _to_fake(fake_mode: FakeTensorMode, x: Any) -> Any:
    """Return a fake, grad-free stand-in: the traced graph is pure; autograd differentiates it later."""
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


def _scalar_values(example_inputs: Sequence[Any]) -> list[int | None]:
    """Return the values of real (not fake) integer scalar tensors among the inputs, None elsewhere.

    They are the one input data a static trace may fix, with a check at run time (the number
    of sections of ``tensor_split``, TraceForms).
    """
    return [int(x) if (isinstance(x, torch.Tensor) and not isinstance(x, torch._subclasses.FakeTensor)
                       and x.dim() == 0 and x.dtype == torch.long and x.device.type == "cpu") else None
            for x in example_inputs]


def _functionalize(program: Callable, fake_inputs: list[Any], mark_autocast: bool,
                   requires_grad: Sequence[bool], decompositions: dict,
                   scalar_values: Sequence[int | None] = ()) -> tuple[fx.GraphModule, Boundary]:
    holder: dict[str, Any] = {}
    if isinstance(program, fx.GraphModule):
        program = functions_as_opaque_calls(program, decompose)

    symbolic_trace = symbolic(fake_inputs)

    def flat_program(*args):
        known = {id(a): v for a, v in zip(args, scalar_values) if v is not None}
        with MarkAutocastProducts() if mark_autocast else nullcontext(), TraceForms(symbolic_trace, known):
            if isinstance(program, fx.GraphModule):  # dynamo's and torch.export's nodes carry their own
                holder["grad"] = GradSemantics(args, requires_grad)
                result = DynamoGraphRunner(program, holder["grad"], decompositions).run(*args)
            else:
                with SourceLines():
                    result = program(*args)
        flat, holder["spec"] = tree_flatten(result)
        holder["aliases"] = input_aliases(flat, args)
        return flat

    def trace(python_dispatcher: bool) -> fx.GraphModule:
        with fx_traceback.preserve_node_meta(), (enable_python_dispatcher() if python_dispatcher else nullcontext()):
            return make_fx(
                torch.func.functionalize(flat_program, remove="mutations_and_views"),
                tracing_mode="real",
            )(*fake_inputs)

    try:
        traced = trace(python_dispatcher=symbolic_trace)
    except DataDependentOutputException:
        # a C++ composite read a tensor value (istft's window check): with the Python
        # dispatcher it runs its Python decomposition instead, which traces (as dynamo does).
        # Not the default: it also swaps ops realify has rules for (upsampling) for
        # decompositions that are not defined on complex values.
        traced = trace(python_dispatcher=True)
    mutated = pipeline.functional_graph(traced, _parameter_names(program))
    out_node = traced.graph.output_node()
    outs = list(out_node.args[0])
    num_user = len(outs) - len(mutated)
    views, strides = eager_layouts(program, holder["aliases"])
    signature = Boundary(
        inputs=tuple(_complex_dtype(x) for x in fake_inputs),
        outputs=tuple(_complex_dtype(o.meta.get("val") if isinstance(o, fx.Node) else o) for o in outs[:num_user]),
        mutated_inputs=tuple(mutated),
        out_spec=holder["spec"],
        output_views=tuple(views),
        output_strides=tuple(strides),
        hidden_writes=holder["grad"].hidden(mutated) if "grad" in holder else frozenset(),
    )
    return traced, signature


def _parameter_names(program: Callable) -> list[str]:
    """Return the program's names for its inputs, as far as it tells them (for messages)."""
    if isinstance(program, fx.GraphModule):
        return [n.name for n in program.graph.find_nodes(op="placeholder")]
    try:
        return list(inspect.signature(program).parameters)
    except (TypeError, ValueError):
        return []


def _complex_dtype(x: Any) -> torch.dtype | None:
    return x.dtype if is_complex(x) else None
