"""How the compile backend runs Inductor.

It runs ``compile_fx`` with realify's graph passes, config changes, decomposition table,
lowerings and code-generation changes. Every change applies to
realify's compiles only (config patches and context managers around ``compile_fx_inner``);
what other ``torch.compile`` calls in the process can see are the lowerings registered for ops
only realify's graphs hold undecomposed (:func:`_register_lowerings`). All hold on every
supported torch release; where a release needs something of its own, the change says so.

Graph passes (declared in realify/passes/pipeline.py, installed after any the caller set):

- joint-graph: inverse real FFTs of a spectrum zero beyond a band transform only the band, in
  the backward graph too (``TransformOnlyBands``, realify/passes/inductor_joint_graph.py);
- post-grad: ``realify::cmul_pairs`` and ``realify::cmm_pairs`` as ATen's complex kernels
  (``PairProductsToATen``, realify/passes/pair_products_to_aten.py); GEMM operands laid out for
  BLAS (``GemmOperandsForBLAS``, realify/passes/gemm_operands.py); then two passes that rewrite
  nothing and key Inductor's caches: :class:`AccurateExpm1` and :class:`RealifyDecompositions`.

Config changes:

- ``cpp.enable_tiling_heuristics`` off (:data:`VECTORIZE_PAIRS`): kernels that read (re, im)
  pairs stay vectorized;
- ``joint_graph_constant_folding`` off (:data:`KEEP_SIGNED_ZEROS`): ``x + 0`` stays (it turns
  ``-0`` into ``+0``, as eager's kernels do).

Decompositions (:func:`realify_decomposition_table`):

- ``aten.unfold_backward`` not decomposed (:data:`KEEP_AS_ATEN`): ATen's kernel runs it,
  through an ATen-fallback lowering registered explicitly;
- 1x1 convolutions on CPU, forward and backward, as batched matrix products
  (realify/passes/pointwise_conv.py): BLAS's GEMM, faster than oneDNN's convolution on these
  shapes (their sums in another order).

While realify's graphs compile (:func:`_realify_codegen`):

- vectorized CPU ``expm1`` by ATen's accurate vector function instead of ``exp(x) - 1``
  (:class:`AccurateExpm1`); :func:`accurate_expm1` gives it to programs Inductor compiles
  outside the backend, such as :func:`realify.export`'s under AOTInductor;
- Inductor's "no code generation for complex operators" warning silenced
  (:func:`_complex_warning_silenced`): the pair-products lowering's complex values are
  deliberate;
- scalar outputs allowed in the graph's fake mode (:func:`_scalar_outputs_allowed`): ``scan``
  and ``map`` lower to a ``while_loop`` that reads its step with ``.item()``, so control flow
  compiles.

The graph passes, the tiling heuristic, ``unfold_backward`` and the complex warning change how
a real graph runs, never a value (but for the pair-products lowering's outer products, which
round each part's two products as the formula says, where BLAS may fuse a multiply-add); the
constant folding and ``expm1`` changes keep the values the rules compute, which Inductor's
graph passes and code generator would change; the 1x1 convolutions sum in another order.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import pathlib
import unittest.mock
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass

from .passes import pipeline
from .passes.pointwise_conv import pointwise_convolution, pointwise_convolution_backward
from .runtime import ops as _ops  # registers the realify:: ops lowered here (fusion_barrier, snapshot, ...)

aten = torch.ops.aten


class PassSequence(CustomGraphPass):
    """Several graph passes, run in order, as one value of Inductor's pass settings.

    Inductor's pass settings take a single pass on some torch builds, a list on others.
    ``setting`` is the value already there (None, a pass, a list or another sequence);
    ``passes`` run after it. Cacheable when every pass is: its uuid is theirs, in order.
    """

    passes: tuple[Any, ...]

    def __init__(self, setting: Any, *passes: Any) -> None:
        before = () if setting is None else setting.passes if isinstance(setting, PassSequence) else (
            tuple(setting) if isinstance(setting, (list, tuple)) else (setting,))
        self.passes = (*before, *passes)

    def __call__(self, graph: fx.Graph) -> None:
        """Run each pass on ``graph``, in order."""
        for graph_pass in self.passes:
            graph_pass(graph)

    def uuid(self) -> Any:
        """Return the passes' uuids in order, or None (not cacheable) where one pass has none."""
        ids = tuple(p.uuid() if isinstance(p, CustomGraphPass) else None for p in self.passes)
        return None if None in ids else ids


class AccurateExpm1(CustomGraphPass):
    """Vectorized CPU ``expm1`` without cancellation near 0.

    A graph pass for Inductor's post-grad pass settings that leaves the graph as it is and
    keys Inductor's caches; the change itself is in code generation, made while realify's
    graphs compile (and inside :func:`accurate_expm1`). It takes no arguments.

    Inductor's vectorized C++ has written ``expm1(x)`` as ``x.exp() - 1`` (for speed), which
    cancels near 0: ``expm1(1e-8)`` came out 0 in float32, and compiled, ``sin(0.5 + 1e-8i)``
    had imaginary part 0 instead of ``8.8e-9`` (complex ``sin``, ``cos``, ``sinh``, ``cosh``
    and ``expm1`` need expm1 for their small parts). While realify's graphs are generated
    (:func:`_realify_codegen`), Inductor writes ``x.expm1()`` instead: ATen's vector expm1
    (Sleef's, within 1 ulp, the function eager's own vectorized ``torch.expm1`` calls), for
    every dtype and vector width. Scalar code already calls ``std::expm1``. Where a torch
    release's Inductor writes that call itself, the change keeps it.

    See Also
    --------
    accurate_expm1 : the same code generation for programs Inductor compiles outside the backend.

    Notes
    -----
    The change is in code generation, not in the graph, so this pass leaves the graph as it
    is: it is listed among the post-grad passes because its :meth:`uuid` is part of
    Inductor's FX graph cache key, so that a real graph compiled by plain Inductor
    (``exp(x) - 1``) and the same graph compiled by realify never share a cached kernel.

    Writing Taylor's series (realify/runtime/expm1.py) into the kernel as Inductor IR instead is as
    accurate and runs a little faster, but its ops are inlined into every consumer during code
    generation, which more than doubles compile time (docs/benchmarks.md, "Measurements behind design choices").

    Examples
    --------
    >>> import torch
    >>> from realify.inductor import AccurateExpm1
    >>> graph_pass = AccurateExpm1()
    >>> graph_pass.uuid()
    'realify.AccurateExpm1.v4: Vectorized::expm1'
    >>> def small_parts(x):
    ...     return torch.expm1(x)
    >>> graph = torch.fx.symbolic_trace(small_parts).graph
    >>> before = str(graph)
    >>> graph_pass(graph)
    >>> str(graph) == before
    True
    """

    def __call__(self, graph: fx.Graph) -> None:
        """Leave ``graph`` as it is: the pass only keys Inductor's caches."""
        pass

    def uuid(self) -> Any:
        """Return the key this pass adds to Inductor's FX graph cache (a new version on each change)."""
        return "realify.AccurateExpm1.v4: Vectorized::expm1"


def _vector_expm1(x: Any) -> str:
    """C++ for a vectorized ``expm1``: ATen's accurate vector function."""
    return f"{x}.expm1()"


# Inductor's vector code generator falls back to the scalar function of the same name where a
# loop cannot be vectorized (float64 tails, say): the name must be expm1's.
_vector_expm1.__name__ = "expm1"


@contextlib.contextmanager
def _accurate_vector_expm1() -> Iterator[None]:
    """Make Inductor's C++ vector code call ``Vectorized::expm1`` while in this context.

    This holds in this process only: Inductor's experimental out-of-process code generation
    does not see it (a warning says so).
    """
    from torch._inductor import compile_fx
    from torch._inductor.codegen.cpp import CppVecOverrides

    if compile_fx.fx_compile_mode != compile_fx.FxCompileMode.NORMAL:
        _warn_out_of_process(compile_fx.fx_compile_mode.name)

    inductor_expm1 = CppVecOverrides.__dict__["expm1"]
    # Inductor's vector code generation is patched while realify's graphs compile, by design
    CppVecOverrides.expm1 = staticmethod(_vector_expm1)  # type: ignore[method-assign]
    try:
        yield
    finally:
        CppVecOverrides.expm1 = inductor_expm1  # type: ignore[method-assign]


@contextlib.contextmanager
def accurate_expm1() -> Iterator[None]:
    """Give programs Inductor compiles *outside* realify's backend an accurate vectorized ``expm1``.

    realify's backend does this by itself. A real-only program from :func:`realify.export`
    compiled by plain Inductor or AOTInductor gets Inductor's own vectorized ``expm1`` instead,
    which some torch releases write as ``exp(x) - 1``: there it loses the small parts of complex
    ``sin``, ``cos``, ``sinh``, ``cosh`` and ``expm1`` near 0 (``sin(0.5 + 1e-8i)`` compiles to
    imaginary part 0, for ``8.8e-9``). Compiled inside this context, the code calls ATen's
    vector ``expm1`` (:class:`AccurateExpm1`), the function eager's own ``torch.expm1`` calls.

    Returns
    -------
    contextlib.AbstractContextManager
        A context manager (``with accurate_expm1():``, binding nothing) that holds the change
        while it is open.

    Raises
    ------
    None
        Whatever the compiles inside it raise passes through; the change is undone on the way out.

    Warns
    -----
    UserWarning
        Where Inductor generates code out of process (``TORCHINDUCTOR_FX_COMPILE_MODE`` set),
        which the change does not reach.

    See Also
    --------
    AccurateExpm1 : the graph pass that keys the kernels compiled in the context.

    Notes
    -----
    The code is generated while the context is open: ``torch.compile`` compiles on the first
    call, so make that call inside it; AOTInductor compiles in
    ``torch._inductor.aoti_compile_and_package``, which goes inside it::

        with accurate_expm1():
            path = torch._inductor.aoti_compile_and_package(ep)

    The context also
    adds :class:`AccurateExpm1` to Inductor's post-grad passes (after any already set), so that
    the kernels it compiles are cached apart from plain Inductor's. Everything Inductor
    compiles in this process while the context is open is affected.

    Examples
    --------
    This example runs Inductor (a C++ compile of a few seconds), as ``torch.compile``'s default
    backend, not realify's:

    >>> import torch
    >>> from realify.inductor import accurate_expm1
    >>> def small_growth(x):
    ...     return torch.expm1(x)
    >>> compiled = torch.compile(small_growth)
    >>> x = torch.full((64,), 1e-8)
    >>> with accurate_expm1():
    ...     y = compiled(x)  # the first call compiles, inside the context
    >>> torch.equal(y, torch.expm1(x))
    True
    >>> bool((y > 0).all())
    True
    """
    from torch._inductor import config as inductor_config

    passes = PassSequence(inductor_config.post_grad_custom_post_pass, AccurateExpm1())
    with inductor_config.patch(post_grad_custom_post_pass=passes), _accurate_vector_expm1():
        yield


# Inductor's CPU code generator runs a loop as scalar code when 12% or more of its loads and
# stores are non-contiguous (cpp.enable_tiling_heuristics), and it counts every stride-2
# access to (re, im) pairs as one. A kernel reading pairs then calls scalar libm for every
# transcendental, several times slower than vectorized code with gathered loads (the STFT
# mask's tanh(|m|) exp(i angle(m)); docs/benchmarks.md, "Measurements behind design choices").
# realify's graphs read pairs wherever values enter interleaved, so the heuristic is off for
# them (a caller's own value in inner_options wins).
VECTORIZE_PAIRS = {"cpp.enable_tiling_heuristics": False}

# Inductor's joint-graph constant folding also removes "no-op" arithmetic: x + 0 (since torch
# 2.14 with a Python 0 too), which is not a no-op for x = -0 (-0 + 0 = +0). Rules write
# "+ 0" exactly where eager's kernel adds a zero part (a real numerator in a complex
# division: rsqrt(-4 - 0j) = -0 + 0.5j); folding it flips that sign.
KEEP_SIGNED_ZEROS = {"joint_graph_constant_folding": False}


def reads_pairs_fast(config_patches: dict[str, Any]) -> bool:
    """Tell whether Inductor, with these ``inner_options``, runs kernels that read (re, im) pairs vectorized.

    The backend then lets every complex input enter as its own pairs, a free view
    (realify/backend.py), instead of splitting it into planes.
    """
    return all(config_patches.get(key, value) == value for key, value in VECTORIZE_PAIRS.items())


# Ops Inductor would decompose that run faster as ATen calls. unfold_backward is the
# overlap-add of istft (signal and window envelope) and the backward of stft's framing;
# decomposed, it becomes a scatter-add with atomic adds, many times slower than ATen's kernel
# (docs/benchmarks.md, "Measurements behind design choices").
KEEP_AS_ATEN = (torch.ops.aten.unfold_backward.default,)


def _register_lowerings() -> None:
    """Register the lowerings Inductor needs for the ops realify's graphs hold undecomposed.

    Each op of :data:`KEEP_AS_ATEN` gets Inductor's ATen-fallback lowering, explicitly;
    ``realify::fusion_barrier`` its lowering (a stored buffer), ``realify::snapshot`` Inductor's
    clone.

    Left to Inductor, an op that reaches it undecomposed gets an implicit fallback, which
    raises ``make_fallback(...): a decomposition exists`` whenever the ``CI`` environment
    variable is set (a check meant for PyTorch's own CI); registering it here, without that
    check, is what the implicit path does otherwise. It changes nothing for other programs:
    their decomposition tables still decompose these ops before Inductor lowers anything.
    Inputs are made contiguous, the layout Inductor's implicit fallback asks of ATen ops in
    a backward graph; the values reaching these ops come out of Inductor's own kernels,
    contiguous already.
    """
    from torch._inductor import lowering

    for op in KEEP_AS_ATEN:
        if op not in lowering.lowerings:
            lowering.make_fallback(op, layout_constraint=lowering.require_contiguous, warn=False,
                                   override_decomp=True)
    if _ops.fusion_barrier._opoverload not in lowering.lowerings:
        lowering.register_lowering(_ops.fusion_barrier._opoverload, type_promotion_kind=None)(_stored)
    if _ops.straight_through._opoverload not in lowering.lowerings:
        # the value itself: only autograd, already done, tells it from its value
        lowering.register_lowering(_ops.straight_through._opoverload, type_promotion_kind=None)(
            lambda value, source: value)
    if _ops.snapshot._opoverload not in lowering.lowerings:
        lowering.register_lowering(_ops.snapshot._opoverload, type_promotion_kind=None)(
            lowering.lowerings[torch.ops.aten.clone.default])


def _stored(x: Any) -> Any:
    """``realify::fusion_barrier``: the value itself, held in a buffer of its own."""
    x.realize()
    return x


def inductor_compiler(config_patches: dict[str, Any]) -> Callable:
    """Return Inductor's ``compile_fx`` for realify's real graphs, forward and backward alike.

    It runs realify's post-grad and joint-graph passes after any the caller set,
    :data:`VECTORIZE_PAIRS` unless the caller set it, and Inductor's decompositions less
    :data:`KEEP_AS_ATEN`.
    """
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    _register_lowerings()
    patches = {**VECTORIZE_PAIRS, **KEEP_SIGNED_ZEROS, **config_patches,
               "post_grad_custom_post_pass": PassSequence(
                   config_patches.get("post_grad_custom_post_pass"),
                   *pipeline.inductor_post_grad_passes(AccurateExpm1(), RealifyDecompositions())),
               "joint_custom_post_pass": PassSequence(config_patches.get("joint_custom_post_pass"),
                                                      *pipeline.inductor_joint_graph_passes())}
    compile_real = functools.partial(compile_fx, inner_compile=_realify_codegen(compile_fx_inner),
                                     config_patches=patches)

    @functools.wraps(compile_fx)
    def compile_with_realify_decompositions(gm: fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        with _decompositions_for_realify():
            return compile_real(gm, example_inputs, **kwargs)

    return compile_with_realify_decompositions


def realify_decomposition_table() -> dict[Any, Callable]:
    """Return Inductor's decomposition table as realify's graphs need it.

    That is Inductor's table less :data:`KEEP_AS_ATEN`, plus the kernels of
    ``realify::pointwise`` and 1x1 convolutions on CPU as batched matrix products
    (realify/passes/pointwise_conv.py).
    """
    from torch._inductor.decomposition import select_decomp_table

    from .rules._derivative import decompositions as pointwise_decompositions

    table = {op: fn for op, fn in select_decomp_table().items() if op not in KEEP_AS_ATEN}
    table.update(pointwise_decompositions())
    table[aten.convolution.default] = pointwise_convolution
    table[aten.convolution_backward.default] = pointwise_convolution_backward
    return table


@contextlib.contextmanager
def _decompositions_for_realify() -> Iterator[None]:
    """Make Inductor read its decompositions from :func:`realify_decomposition_table`.

    The context is open while one realify graph compiles. The table is not passed as
    ``compile_fx(decompositions=...)``: a table passed in is pickled into the FX graph cache's
    key, which cannot pickle most of its functions, so every realify graph bypassed Inductor's
    and AOTAutograd's on-disk caches; the function itself pickles by name (its effect on the
    key: :class:`RealifyDecompositions`). compile_fx hands the function on to the code
    generation of a backward compiled later.
    """
    import torch._inductor.compile_fx as compile_fx_module

    with unittest.mock.patch.object(compile_fx_module, "select_decomp_table", realify_decomposition_table):
        yield


class RealifyDecompositions(CustomGraphPass):
    """A graph pass that rewrites nothing: its :meth:`uuid` puts realify's code into cache keys.

    Inductor's and AOTAutograd's cache keys see the graphs and the name of the decomposition
    table's function but not what realify's decompositions and rules make of a graph.
    """

    def __call__(self, graph: fx.Graph) -> None:
        """Leave ``graph`` as it is: the pass only keys Inductor's caches."""
        pass

    def uuid(self) -> Any:
        """Return a key that changes with any of realify's source files."""
        return f"realify.code.{_realify_source_hash()}"


@functools.cache
def _realify_source_hash() -> str:
    package = pathlib.Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _warn_out_of_process(mode: str) -> None:
    warnings.warn(f"realify: Inductor generates code out of process (TORCHINDUCTOR_FX_COMPILE_MODE={mode}); "
                  "its vectorized expm1 there is exp(x) - 1, which loses the small parts of complex "
                  "sin/cos/sinh/cosh/expm1 near 0. Unset TORCHINDUCTOR_FX_COMPILE_MODE for full accuracy.",
                  stacklevel=2)


def _realify_codegen(inner_compile: Callable) -> Callable:
    """Wrap Inductor's ``compile_fx_inner`` with three changes that hold while it runs.

    ``compile_fx_inner`` generates and compiles the code of one graph; the changes are for
    realify's graphs only (module docstring):

    - vectorized ``expm1`` by ATen's accurate function (:class:`AccurateExpm1`);
    - no warning that Inductor "does not support code generation for complex operators". It
      warns once per process when it meets a complex value; the three ATen calls of the
      pairs-product lowering (realify/passes/pair_products_to_aten.py) are the only complex
      values in a realify graph, and deliberate, so the warning would mislead. It stays armed for every other program;
    - scalar outputs allowed in the graph's fake mode, so that ``scan`` and ``map`` (also the
      real ones that planarizing complex ones makes) compile: Inductor rewrites them into a
      ``while_loop`` that reads its step as a Python integer (``.item()``), which otherwise
      fails ("DataDependentOutputException: aten._local_scalar_dense") for every program,
      complex or not, unless dynamo's ``capture_scalar_outputs`` was on.
    """

    @functools.wraps(inner_compile)
    def compile_realify_graph(gm: fx.GraphModule, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        with _complex_warning_silenced(), _accurate_vector_expm1(), _scalar_outputs_allowed(example_inputs):
            return inner_compile(gm, example_inputs, *args, **kwargs)

    return compile_realify_graph


@contextlib.contextmanager
def _scalar_outputs_allowed(example_inputs: Any) -> Iterator[None]:
    mode = torch._guards.detect_fake_mode(example_inputs)
    if mode is None or mode.allow_scalar_outputs:
        yield
        return
    mode.allow_scalar_outputs = True
    try:
        yield
    finally:
        mode.allow_scalar_outputs = False


@contextlib.contextmanager
def _complex_warning_silenced() -> Iterator[None]:
    from torch._inductor import lowering

    warn_once = getattr(lowering, "_warn_complex_not_supported", None)
    armed = warn_once is not None and hasattr(warn_once, "cache_info") and warn_once.cache_info().currsize == 0
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Torchinductor does not support code generation for complex")
        try:
            yield
        finally:
            if armed and warn_once is not None:
                warn_once.cache_clear()
