"""The torch.compile backend: ``torch.compile(fn, backend="realify")``.

The backend is registered with dynamo under the name ``"realify"`` (an entry point of the
package), and :func:`realify.compile` is ``torch.compile`` with it.

Dynamo hands over a graph that may hold complex tensors. realify decomposes it into a
real-only graph (:func:`realify.decompose`) whose complex inputs arrive as their own
``(*shape, 2)`` pairs (a free ``view_as_real``; under an inner compiler other than Inductor,
large inputs are split into planes once instead: see "Boundary layouts" in
docs/architecture.md) and whose complex outputs are computed straight into the interleaved
``(*shape, 2)`` layout, so that ``torch.view_as_complex`` turns them back into complex
tensors for free. That real graph goes to the inner compiler (Inductor by default), which
differentiates it for training: forward and backward are both real. The compiled graph runs
through :class:`realify.runtime.boundary.RealCall`, which also writes back the inputs the program
mutated in place.

Examples
--------
>>> import torch
>>> import realify
>>> "realify" in torch._dynamo.list_backends()
True

``torch.compile(fn, backend="realify")`` compiles the real graph with Inductor;
:func:`realify.compile` chooses another inner compiler, here none (``"eager"``):

>>> def rotate(z, angle):
...     return z * torch.exp(1j * angle)
>>> z = torch.tensor([1 + 2j, 3 - 1j])
>>> angle = torch.tensor([0.5, -0.25])
>>> compiled = realify.compile(rotate, inner="eager")
>>> torch.allclose(compiled(z, angle), rotate(z, angle))
True
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves

from . import config
from .compile_arguments import check_compile_arguments, inductor_config
from .engine.decompose import decompose
from .engine.dynamo_graph import in_place_refusal_in, source_line
from .engine.islands import island_call, islands_in
from .errors import OptionsChangedError
from .passes import gemm_form, pipeline
from .runtime.boundary import Layout, RealCall, signature_of, split
from .runtime.complex_tensor import ComplexTensor

log = logging.getLogger("realify")

Inner = str | Callable[[fx.GraphModule, list], Callable]


def realify_backend(gm: fx.GraphModule, example_inputs: Sequence[Any], *, inner: Inner = "inductor",
                    strict: bool | None = None, **inner_options: Any) -> Callable:
    """Compile a graph dynamo captured: decompose its complex values, hand the real graph to ``inner``.

    This is the function ``torch.compile(fn, backend="realify")`` calls, once per graph dynamo
    captures; :func:`realify.compile` passes it ``inner``, ``strict`` and ``inner_options``. A
    graph without complex values goes to ``inner`` as it is. A graph over tensor subclasses
    (DTensor) first runs the subclasses' own dispatch through AOTAutograd, and realify compiles
    the plain forward and backward graphs that come out of it.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        The graph dynamo captured.
    example_inputs : sequence
        Dynamo's example inputs of ``gm`` (fake tensors, symbolic sizes).
    inner : str or callable, default "inductor"
        The compiler that receives the real graph: ``"inductor"``, ``"eager"`` (the real graph
        run as it is, uncompiled), the name of any registered dynamo backend, or a backend
        callable ``(gm, example_inputs) -> callable``.
    strict : bool, optional
        True raises :class:`~realify.MissingRuleError` for a complex op without a rule, False
        runs it as an eager island (a warning names it); by default ``realify.config.strict``.
    **inner_options : Any
        Keyword arguments for the inner compiler. For Inductor, its config keys, and
        ``torch.compile``'s ``mode`` and ``options``, which dynamo passes its backend and which
        mean what they mean for ``torch.compile``'s default backend.

    Returns
    -------
    callable
        The compiled graph: it takes the caller's complex tensors, returns complex outputs in
        eager's layout, and writes back the inputs the program mutated in place.

    Raises
    ------
    realify.MissingRuleError
        ``strict`` is on and a complex op of ``gm`` has no rule.
    realify.InputMetadataChangeError
        The program changes the shape or strides of an input in place.
    ValueError
        For Inductor, ``inner_options`` names a mode or config key Inductor does not have.
    TypeError
        For Inductor, a mode or config value has the wrong type.
    realify.OptionsChangedError
        Raised by the returned callable, when it is called after ``gemm_multiplications``,
        ``gemm_form`` or ``complex_autocast`` changed in :mod:`realify.config` (dynamo does not
        guard on them).

    See Also
    --------
    realify.compile : ``torch.compile`` with this backend, checking its arguments at once.
    realify.decompose : the engine that makes the real graph.

    Notes
    -----
    Dynamo calls the backend at the first call of the compiled function and wraps what it
    raises in its own ``BackendCompilerFailed``; :func:`realify.compile` re-raises realify's
    own errors as they are. An op that eager refuses on its operands' dtypes leaves the graph to
    run as captured, so the call raises eager's own error where eager raises it. Under
    ``torch.autocast``, the real graph already holds eager's casts, so the inner compiler runs
    with autocast off.

    Examples
    --------
    >>> import functools
    >>> import torch
    >>> import realify
    >>> backend = functools.partial(realify.realify_backend, inner="eager")
    >>> def rotate(z, angle):
    ...     return z * torch.exp(1j * angle)
    >>> compiled = torch.compile(rotate, backend=backend, fullgraph=True)
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> angle = torch.tensor([0.5, -0.25])
    >>> torch.allclose(compiled(z, angle), rotate(z, angle))
    True
    """
    if inner == "inductor":
        inner_options = inductor_config(inner_options)
    if _holds_tensor_subclasses(gm, example_inputs):
        return _through_subclass_dispatch(gm, example_inputs, inner, inner_options, strict)
    inner_fn = _resolve_inner(inner, inner_options)
    if not _has_complex(gm, example_inputs):
        return inner_fn(gm, list(example_inputs))
    strict = config.strict if strict is None else strict
    captured = gm
    gm, lifted = _lift_tensor_attributes(gm, example_inputs)
    example_inputs = [*example_inputs, *lifted]
    trace_inputs = _trace_inputs(gm, example_inputs)
    all_pairs = (inner == "inductor" and _inductor_reads_pairs_fast(inner_options)) or _reads_storage(gm)
    layouts = [_boundary_layout(x, all_pairs) for x in trace_inputs]
    start = time.perf_counter()
    try:
        # each complex GEMM in the form config.gemm_form picks (measured by default): the
        # compile backend's choice alone, export's programs keep standard ops
        with gemm_form.choosing(config.gemm_form):
            real_gm = decompose(gm, trace_inputs, inputs=layouts, outputs="interleaved",
                                on_missing=functools.partial(island_call, strict=strict),
                                fusion_barriers=inner == "inductor", eager_outputs=True, check_inputs=False,
                                pair_products=config.interleaved_products,
                                cpu_vector_bytes=host_cpu_vector_bytes() if _targets_cpu(trace_inputs) else None)
    except Exception as err:
        refused_op = getattr(err, "eager_refusal", None)
        if refused_op is None:
            raise
        # an op eager refuses on these operands' dtypes (realify/rules/_contract.py): the graph
        # runs as captured, so the call raises eager's own error where eager raises it, as it
        # does under the default backend
        log.warning("eager refuses %s in the graph%s; it runs as captured, raising eager's error",
                    refused_op, _first_source_line(captured))
        return _naming_the_line(_generated_forward(captured), err)
    signature = signature_of(real_gm)
    real_examples = [_split_example(x, layout) if c else x
                     for x, c, layout in zip(trace_inputs, signature.input_complex, layouts)]
    differentiable = _needs_grad(real_examples)
    pipeline.compile_backend_real_graph(real_gm, layouts, inductor=inner == "inductor", differentiable=differentiable,
                                        shared_inputs=_with_shared_storage(real_examples))
    # realify's own share of the compile time (the rest is the inner compiler's), and the
    # graphs it decomposed (DDPOptimizer hands over one piece per gradient bucket)
    decompose_s = time.perf_counter() - start
    # dynamo's counters are Counters of ints; this one keeps seconds
    torch._dynamo.utils.counters["realify"]["decompose_s"] += decompose_s  # type: ignore[assignment]
    torch._dynamo.utils.counters["realify"]["graphs"] += 1
    where = _first_source_line(captured)
    if log.isEnabledFor(logging.INFO):  # counting the graph's ops is work only the log line needs
        log.info("decomposed the graph%s into %d real op(s) in %.2f s; compiling it with %s", where,
                 sum(1 for n in real_gm.graph.nodes if n.op == "call_function"), decompose_s,
                 inner if isinstance(inner, str) else getattr(inner, "__name__", "the inner compiler"))
    islands = islands_in(real_gm)
    if islands:
        log.warning("%d op(s) run as eager islands: %s", len(islands), ", ".join(sorted(set(islands))))
    # under autocast, the real graph already holds eager's casts (see decompose): the inner
    # compiler must not add its own to the real ops of complex rules, at compile or run time
    autocast = torch._C._is_any_autocast_enabled()
    start = time.perf_counter()
    absent = _drop_absent_outputs(real_gm)
    with torch._C._DisableAutocast() if autocast else contextlib.nullcontext():
        compiled = inner_fn(real_gm, real_examples)
    if absent is not None:
        compiled = _WithAbsentOutputs(compiled, *absent)
    log.info("compiled the graph%s in %.2f s", where, time.perf_counter() - start)
    # writes to inputs come back as extra outputs, copied in after the call; outputs that are
    # views of inputs are taken from those inputs (boundary.RealCall)
    # the written regions the pipeline recorded are in the signature it left on the graph
    call = RealCall(compiled, signature_of(real_gm), appended=lifted, autocast_off=autocast,
                    on_shared_write=_RunCapturedOnSharedWrite(captured, len(signature.inputs)))
    return _CompiledUnderOptions(call, where)


@functools.cache
def host_cpu_vector_bytes() -> int:
    """Return the width of the vector registers eager's CPU prod kernel runs on, in bytes.

    That is for this build and machine (ATen's Vectorized types): 16 bytes on ARM without
    256-bit SVE, 32 otherwise. An AVX-512 machine runs the AVX2 kernel: ATen builds an
    AVX-512 variant only of the kernels registered for it (ALSO_REGISTER_AVX512_DISPATCH), and
    prod's is not. The compile backend compiles for the machine it runs on; this is where it
    reads the machine, handing the width down to the pass that copies eager's order
    (realify/passes/product_order.py).
    """
    capability = torch.backends.cpu.get_cpu_capability()
    if platform.machine().lower() in ("aarch64", "arm64") and capability != "SVE256":
        return 16
    return 32


def _targets_cpu(example_inputs: Sequence[Any]) -> bool:
    """Tell whether the compiled graph runs on the CPU: every tensor it is given is there.

    A graph given no tensors makes its tensors on the default device.
    """
    devices = {x.device.type for x in example_inputs if isinstance(x, torch.Tensor)}
    return devices == {"cpu"} if devices else torch.get_default_device().type == "cpu"


def _drop_absent_outputs(gm: fx.GraphModule) -> tuple[frozenset[int], int] | None:
    """Remove the graph's ``None`` outputs before the inner compiler sees it.

    Those are outputs the caller takes as views of inputs or of other outputs
    (``Boundary.output_views``): AOTAutograd reads a value for every output where the graph's
    first call runs on fake inputs (DDPOptimizer's pieces). Returns their positions and the
    number of outputs, or None where there are none.
    """
    output = gm.graph.output_node()
    outs = list(cast(Sequence[Any], output.args[0]))
    absent = frozenset(i for i, o in enumerate(outs) if o is None)
    if not absent:
        return None
    output.args = ([o for o in outs if o is not None],)
    gm.recompile()
    return absent, len(outs)


class _WithAbsentOutputs:
    """A compiled graph's outputs with ``None`` again where :func:`_drop_absent_outputs` took it out."""

    def __init__(self, compiled: Callable, absent: frozenset[int], count: int):
        self.compiled, self.absent, self.count = compiled, absent, count

    def __call__(self, *args: Any) -> list[Any]:
        outs = iter(self.compiled(*args))
        return [None if i in self.absent else next(outs) for i in range(self.count)]


def _holds_tensor_subclasses(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Tell whether the program takes or makes tensor subclasses, whose dispatch must run first.

    These are DTensors (inputs, or made inside by ``DTensor.from_local``), whose own dispatch
    must run before realify sees plain tensors.
    """
    def subclass(x: Any) -> bool:
        return is_traceable_wrapper_subclass(x) and not isinstance(x, ComplexTensor)

    return any(subclass(x) for x in example_inputs) or any(
        subclass(v) for n in gm.graph.nodes for v in tree_leaves(n.meta.get("example_value")))


def _through_subclass_dispatch(gm: fx.GraphModule, example_inputs: Sequence[Any], inner: Inner, inner_options: dict,
                               strict: bool | None) -> Callable:
    """Compile a program over tensor subclasses (DTensor) through AOTAutograd.

    AOTAutograd runs the subclasses' own dispatch (a DTensor's sharding propagation and
    collectives) on the complex program, and realify compiles the forward and backward graphs
    it yields, whose tensors are plain (a DTensor's local shards) and may be complex. The
    subclasses never see realify's real ops: their sharding rules know the complex program's
    ops, as in eager.
    """
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    # an in-place write of a complex result into a real DTensor: AOTAutograd's functionalization
    # below turns it into an op and a copy that drops the imaginary part, so it is checked first
    refusal = in_place_refusal_in(gm)
    if refusal is not None:
        # as for a plain graph (realify_backend): the graph runs as captured, raising eager's error
        log.warning("eager refuses %s in the graph%s; it runs as captured, raising eager's error",
                    refusal.eager_refusal, _first_source_line(gm))  # type: ignore[attr-defined]
        return gm.forward

    def compile_plain(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        return make_boxed_func(realify_backend(gm, example_inputs, inner=inner, strict=strict, **inner_options))

    return aot_module_simplified(gm, list(example_inputs), fw_compiler=compile_plain, bw_compiler=compile_plain)


class _CompiledUnderOptions:
    """The compiled call, refusing to run once an option that changes its values has changed.

    It refuses once such an option differs from what it was compiled under: dynamo guards on
    autocast and grad mode, not on realify's options, and would otherwise keep running code
    compiled for the old value (a program compiled with complex_autocast off would silently
    stay in float32 after it is turned on, and one compiled with it on would stay in bfloat16
    after it is turned off).
    """

    OPTIONS = ("gemm_multiplications", "gemm_form", "complex_autocast")

    def __init__(self, call: RealCall, where: str):
        self.call = call
        # read on every call: one C-level attrgetter of all the names, not a getattr per name
        self.read = operator.attrgetter(*self.OPTIONS)
        self.values = self.read(config)
        self.where = where

    def __call__(self, *args: Any) -> Any:
        if self.read(config) != self.values:
            self._refuse()
        return self.call(*args)

    def _refuse(self):
        changed = ", ".join(f"{name} from {old!r} to {getattr(config, name)!r}"
                            for name, old in zip(self.OPTIONS, self.values) if getattr(config, name) != old)
        raise OptionsChangedError(
            f"realify.config changed since this function was compiled ({changed}){self.where}; "
            "compiled code keeps the options it was compiled under. Set the option for every call of the "
            "compiled function (realify.config.patch around all of them, or assign it once), or call "
            "torch._dynamo.reset() after changing it to compile again.")


def _naming_the_line(run: Callable, refusal: BaseException) -> Callable:
    """Wrap ``run`` (the captured graph) so that eager's error, raised where eager raises it, is raised as ``refusal``.

    ``refusal`` has eager's type and message with the user's line appended: the captured
    graph's traceback ends in dynamo's generated code, not the user's.
    """

    def captured(*args: Any) -> Any:
        try:
            return run(*args)
        except type(refusal) as raised:
            if str(refusal).startswith(str(raised)):
                raise refusal.with_traceback(raised.__traceback__) from None
            raise

    return captured


def _generated_forward(gm: fx.GraphModule) -> Callable:
    """Return ``gm``'s generated code, to call without fx's module call.

    That call prints the graph's code and the failing line to stderr for any error, where
    eager's raise prints nothing. A lazily recompiled graph (dynamo's) gets its code first.
    """
    real_recompile = getattr(gm, "real_recompile", None)
    if real_recompile is not None:
        real_recompile()
    return type(gm).forward.__get__(gm)


def _first_source_line(gm: fx.GraphModule) -> str:
    """`` (graph starting at <the user's line of its first traced node>)``, or nothing."""
    first = next((n for n in gm.graph.nodes if n.meta.get("stack_trace")), None)
    return f" (graph starting at {source_line(first)})" if first is not None else ""


def _lift_tensor_attributes(gm: fx.GraphModule,
                            example_inputs: Sequence[Any]) -> tuple[fx.GraphModule, list[torch.Tensor]]:
    """Return a copy of ``gm`` whose last inputs are the tensors it reads as attributes, and those tensors.

    Where there are none, ``gm`` itself and no tensors; dynamo's own graph is left as it is,
    dynamo reads it after the backend returns.

    Dynamo hands some tensors over as attributes of the graph (``get_attr``), not inputs: a
    compiled optimizer step's parameters and state, which it marks static. Read as constants,
    their complex values would be split once, at compile time, and go stale; written in place
    (``p.add_(...)``), they cannot be functionalized at all. As inputs, passed by the runtime on
    every call, they are read fresh, and in-place writes to them are written back like writes
    to any input. Each new input keeps dynamo's fake value of the attribute.
    """
    attributes = [n for n in gm.graph.nodes
                  if n.op == "get_attr" and isinstance(operator.attrgetter(n.target)(gm), torch.Tensor)]
    if not attributes:
        return gm, []
    graph, copies = fx.Graph(), dict[fx.Node, fx.Node]()
    graph.output(graph.graph_copy(gm.graph, copies))
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    anchor = placeholders[-1] if placeholders else None
    fake_mode = torch._guards.detect_fake_mode(list(example_inputs))
    lifted = []
    inputs: dict[str, fx.Node] = {}  # one input per attribute, however many nodes read it
    for original in attributes:
        node = copies[original]
        target = str(node.target)  # a get_attr node's target is the attribute's dotted name
        if target not in inputs:
            value = operator.attrgetter(target)(gm)
            first = next(iter(graph.nodes))
            with graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(first):
                anchor = inputs[target] = graph.placeholder(node.name)
            anchor.meta = dict(node.meta)
            if "example_value" not in anchor.meta and fake_mode is not None:
                anchor.meta["example_value"] = fake_mode.from_tensor(value, static_shapes=True)
            lifted.append(value)
        node.replace_all_uses_with(inputs[target])
        graph.erase_node(node)
    return fx.GraphModule(gm, graph), lifted


def _needs_grad(examples: Sequence[Any]) -> bool:
    """Tell whether the compiled graph may be differentiated.

    Dynamo guards grad mode and each input's ``requires_grad``, so what holds for the examples
    holds at every call.
    """
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in examples)


def _with_shared_storage(examples: Sequence[Any]) -> frozenset[int]:
    """Return the positions of tensor examples whose storage another example shares."""
    seen: dict[Any, list[int]] = {}
    for i, x in enumerate(examples):
        if isinstance(x, torch.Tensor):
            seen.setdefault(StorageWeakRef(x.untyped_storage()), []).append(i)
    return frozenset(i for positions in seen.values() if len(positions) > 1 for i in positions)


def _trace_inputs(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any]:
    """Return dynamo's own fake inputs of ``gm``, or ``example_inputs`` where it has none.

    Dynamo's fakes are static where dynamo specialized a shape, symbolic where it did not, and
    in dynamo's fake mode, which the inner compiler then shares.
    """
    fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if len(fakes) == len(example_inputs) and all(
            isinstance(v, torch._subclasses.FakeTensor) or not isinstance(e, torch.Tensor)
            for v, e in zip(fakes, example_inputs)):
        return [_grad_free_unless(v, e) if isinstance(e, torch.Tensor) else e for v, e in zip(fakes, example_inputs)]
    return list(example_inputs)


def _grad_free_unless(fake: torch.Tensor, example: torch.Tensor) -> torch.Tensor:
    """Return ``fake`` without ``requires_grad`` where the caller's tensor has none.

    Dynamo traced the program's in-place ops on its fakes, so a fake written with a value that
    requires grad (``out[modes] = weights * x``) requires it too, and the inner compiler would
    compute a gradient, the input's whole size, that nothing asks for.
    """
    if fake.requires_grad and not example.requires_grad:
        return fake.detach()
    return fake


class _RunCapturedOnSharedWrite:
    """The backend's answer to inputs that share memory with one the compiled graph writes in place.

    Such inputs are ``f(z, z.conj())``, ``f(z, view_as_real(z))``, overlapping slices: the real
    graph read both before the write, where eager's later reads see it, so such a call runs
    ``captured``, dynamo's own graph, eagerly on the caller's tensors (gradients too), with a
    warning the first time (docs/architecture.md, "Inputs that share memory").
    """

    def __init__(self, captured: fx.GraphModule, count: int):
        self.captured = captured
        self.input_names = _caller_input_names(captured, count)  # dynamo drops its sources later
        self.warned = False

    def __call__(self, args: tuple, written: int, other: int) -> Any:
        if not self.warned:
            self.warned = True
            names = self.input_names
            log.warning(
                "%s shares memory with %s, which the compiled graph writes in place; realify's real "
                "graph reads every input before it writes any, so this call (and any other like it) runs "
                "dynamo's captured graph eagerly instead, with eager's results. To run it compiled, pass "
                "tensors that do not overlap (for example, .clone() one of them).",
                names[other], names[written])
        return self.captured(*args)


def _caller_input_names(gm: fx.GraphModule, count: int) -> list[str]:
    """Return the caller's name of each graph input (dynamo's source, as ``L['a']``), for messages.

    Graph attributes lifted to inputs follow (_lift_tensor_attributes).
    """
    names = []
    for node in gm.graph.find_nodes(op="placeholder"):
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None)
        names.append(f"input {name}" if isinstance(name, str) else f"input {node.name}")
    attributes = dict.fromkeys(n.target for n in gm.graph.nodes
                               if n.op == "get_attr" and isinstance(operator.attrgetter(n.target)(gm), torch.Tensor))
    names += [f"graph attribute {target}" for target in attributes]
    return names + [f"input {i}" for i in range(len(names), count)]


# Where a complex input enters the real graph as its own interleaved (re, im) pairs (a free
# view_as_real) rather than split into planes (one copy pass per call, torch.stack):
# - under Inductor, every input, unless the caller turned Inductor's tiling heuristic back on
#   (realify.inductor.reads_pairs_fast). Inductor's kernels read the pairs with vectorized
#   gathered loads (realify.inductor.VECTORIZE_PAIRS), so the first kernel that reads an input
#   deinterleaves it for free (the GEMM operand split fused with its Gauss sum costs less than
#   a separate stack would); FFT ops read pairs natively.
# - for other inner compilers, inputs up to SMALL_INPUT elements: splitting has a fixed cost
#   per input per call, more than stride-2 loads of so little data (the rotary frequency
#   table); larger inputs are split once, planar.
# Measured: docs/benchmarks.md, "Measurements behind design choices".
# - every input of a graph that reads storage directly (as_strided): a view of the input's
#   own storage keeps its offsets, where a planar copy would not.
SMALL_INPUT = 1 << 14


def _boundary_layout(x: Any, all_pairs: bool) -> Layout:
    """How a complex input enters the real graph (see above): "interleaved" or "planar"."""
    if not (isinstance(x, torch.Tensor) and x.dtype.is_complex) or x.dtype == torch.complex32:
        return "planar"
    return "interleaved" if all_pairs or _static_numel_at_most(x, SMALL_INPUT) else "planar"


def _inductor_reads_pairs_fast(options: dict) -> bool:
    from .inductor import reads_pairs_fast  # imports Inductor: only when it is the inner compiler

    return reads_pairs_fast(options)


def _reads_storage(gm: fx.GraphModule) -> bool:
    return any(n.target in _STORAGE_READERS for n in gm.graph.nodes)


_STORAGE_READERS = {torch.as_strided, "as_strided", "as_strided_", torch.ops.aten.as_strided.default}


def _static_numel_at_most(x: torch.Tensor, limit: int) -> bool:
    numel = x.numel()
    return isinstance(numel, int) and numel <= limit


def _split_example(x: torch.Tensor, layout: Layout) -> torch.Tensor:
    if isinstance(x, torch._subclasses.FakeTensor):
        with x.fake_mode:
            return split(x, layout)
    return split(x, layout)


def _has_complex(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    if any(isinstance(x, torch.Tensor) and x.dtype.is_complex for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        for v in tree_leaves(node.meta.get("example_value", node.meta.get("val"))):
            if isinstance(v, torch.Tensor) and v.dtype.is_complex:
                return True
    return any(isinstance(a, complex) for n in gm.graph.nodes for a in tree_leaves((n.args, n.kwargs)))


def _resolve_inner(inner: Inner, options: dict) -> Callable:
    if callable(inner):
        return functools.partial(inner, **options) if options else inner
    if inner == "eager":
        return lambda gm, example_inputs: gm.forward
    if inner == "inductor":
        from .inductor import inductor_compiler

        return inductor_compiler(options)
    from torch._dynamo.backends.registry import lookup_backend

    backend = lookup_backend(inner)
    return functools.partial(backend, **options) if options else backend


def compile(fn: Callable | None = None, *, inner: Inner = "inductor", strict: bool | None = None,
            inner_options: dict | None = None, **torch_compile_options: Any) -> Callable:
    """Compile ``fn`` with ``torch.compile`` and the realify backend.

    ``realify.compile(fn)`` is ``torch.compile(fn, backend="realify")``, with the choice of the
    compiler that receives the real graph, and realify's own errors raised as they are (dynamo
    would wrap them in its ``BackendCompilerFailed``). Called without ``fn``, it returns a
    decorator. A compiled module stays a module.

    Parameters
    ----------
    fn : callable or torch.nn.Module, optional
        The function or module to compile; left out, ``realify.compile(...)`` returns a
        decorator that compiles the function it decorates.
    inner : str or callable, default "inductor"
        The compiler that receives the real graph: ``"inductor"``, ``"eager"`` (no compilation,
        for testing), the name of any registered dynamo backend, or a backend callable
        ``(gm, example_inputs) -> callable``.
    strict : bool, optional
        True raises :class:`~realify.MissingRuleError` for ops without a rule instead of running
        them as eager islands; by default ``realify.config.strict`` decides.
    inner_options : dict, optional
        The inner compiler's keyword arguments (for Inductor, config keys such as
        ``{"max_autotune": True}``).
    **torch_compile_options : Any
        Other keyword arguments of ``torch.compile`` (``dynamic``, ``fullgraph``, ``mode``,
        ``options``, ...); under Inductor, ``mode`` and ``options`` mean what they mean for
        ``torch.compile``'s default backend.

    Returns
    -------
    callable
        The compiled function (or module), or, without ``fn``, a decorator that makes one.

    Raises
    ------
    ValueError
        At once: an unknown inner compiler, Inductor mode or Inductor option (the message names
        the closest), or options for ``inner="eager"``, which takes none.
    TypeError
        At once: an argument of the wrong type, an unknown keyword argument, or ``backend=``
        (choose the compiler with ``inner``).
    realify.MissingRuleError
        At the first call (when dynamo compiles), with ``strict`` on, for a complex op without a
        rule; realify's other errors are raised at that call as they are too.
    realify.OptionsChangedError
        At a call after ``gemm_multiplications``, ``gemm_form`` or ``complex_autocast`` changed
        in :mod:`realify.config` since the function was compiled.

    See Also
    --------
    realify_backend : the backend itself.
    realify.explain : which ops of a program realify decomposes and which it runs as islands.

    Notes
    -----
    The arguments are checked here, not at the first call, where dynamo calls the backend and
    a misspelled compiler or option would otherwise surface.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def rotate(z, angle):
    ...     return z * torch.exp(1j * angle)
    >>> compiled = realify.compile(rotate, inner="eager")
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> angle = torch.tensor([0.5, -0.25])
    >>> torch.allclose(compiled(z, angle), rotate(z, angle))
    True

    As a decorator, with ``torch.compile``'s own options:

    >>> @realify.compile(inner="eager", fullgraph=True)
    ... def energy(z):
    ...     return (z * z.conj()).real.sum()
    >>> energy(z)
    tensor(15.)

    A misspelled argument fails at once, not at the first call:

    >>> realify.compile(rotate, fulgraph=True)
    Traceback (most recent call last):
        ...
    TypeError: realify.compile got an unknown keyword argument 'fulgraph' (did you mean 'fullgraph'?); ...

    Compiled code keeps the options it was compiled under:

    >>> with realify.config.patch(gemm_multiplications=4):
    ...     compiled(z, angle)
    Traceback (most recent call last):
        ...
    realify.errors.OptionsChangedError: realify.config changed since this function was compiled ...
    """
    check_compile_arguments(inner, strict, inner_options, torch_compile_options)
    backend = functools.partial(realify_backend, inner=inner, strict=strict, **(inner_options or {}))
    functools.update_wrapper(backend, realify_backend)
    if fn is None:
        return lambda f: _raising_realify_errors(torch.compile(f, backend=backend, **torch_compile_options))
    return _raising_realify_errors(torch.compile(fn, backend=backend, **torch_compile_options))


def _raising_realify_errors(compiled: Callable) -> Callable:
    """Make ``compiled`` raise realify's own errors where dynamo would wrap them.

    realify's errors (:class:`~realify.MissingRuleError`, ...) are raised where dynamo would
    raise its ``BackendCompilerFailed`` around them.

    Dynamo calls the backend lazily, on the first call of the compiled function, and wraps
    whatever the backend raises in ``BackendCompilerFailed`` (the original error only in its
    ``inner_exception``, with no ``__cause__``), so ``except realify.MissingRuleError`` would
    never match. The realify error is re-raised from dynamo's, which stays chained to it: the
    traceback shows both, the user's call first. A compiled module (dynamo's
    ``OptimizedModule``) stays a module: its ``forward`` is wrapped.
    """

    def unwrap(exc: BaseException) -> BaseException | None:
        from .errors import RealifyError

        seen = set()
        while isinstance(exc, torch._dynamo.exc.BackendCompilerFailed) and id(exc) not in seen:
            seen.add(id(exc))
            exc = exc.inner_exception
        return exc if isinstance(exc, RealifyError) else None

    def reraising(call: Callable) -> Callable:
        @functools.wraps(call)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except torch._dynamo.exc.BackendCompilerFailed as failed:
                error = unwrap(failed)
                if error is None:
                    raise
                raise error.with_traceback(None) from failed
        return run

    if isinstance(compiled, torch.nn.Module):
        compiled.forward = reraising(compiled.forward)
        return compiled
    return reraising(compiled)
