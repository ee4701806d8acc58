"""How the compile backend runs Inductor: ``compile_fx`` with three post-grad passes and a
joint-graph pass, two config changes, one decomposition left out and two added, one
code-generation change and two settings that hold only while realify's own graphs compile.
Items 1, 3, 4, 5, 7 and 10 change how a real graph runs, never a value (but for item 4's outer
products, which round each part's two products as the formula says, where BLAS may fuse a
multiply-add); 2 and 6 keep the values the rules compute, which Inductor's graph passes and
code generator would change; 8 lets control flow compile; 9 runs real
convolutions as other real kernels (their sums in another order). Every item applies to realify's
compiles only (config patches and context managers around ``compile_fx_inner``); what other
``torch.compile`` calls in the process can see are two lowerings registered for ops only
realify's graphs hold undecomposed (:func:`_register_lowerings`). All hold on every supported
torch release; where a release needs something of its own, the item says so.

1. ``cpp.enable_tiling_heuristics`` off (:data:`VECTORIZE_PAIRS`): kernels that read
   (re, im) pairs stay vectorized.
2. ``joint_graph_constant_folding`` off (:data:`KEEP_SIGNED_ZEROS`): ``x + 0`` stays (it
   turns ``-0`` into ``+0``, as eager's kernels do).
3. ``aten.unfold_backward`` not decomposed (:data:`KEEP_AS_ATEN`): ATen's kernel runs it,
   through an ATen-fallback lowering registered explicitly.
4. A lowering of ``realify::cmul_pairs`` and ``realify::cmm_pairs`` to ATen's complex kernels
   (:class:`PairProductsToATen`).
5. GEMM operands laid out for BLAS (:class:`GemmOperandsForBLAS`).
6. Vectorized CPU ``expm1`` by ATen's accurate vector function instead of ``exp(x) - 1``
   (:class:`AccurateExpm1`); :func:`accurate_expm1` gives it to programs Inductor compiles
   outside the backend, such as :func:`realify.export`'s under AOTInductor.
7. Inductor's "no code generation for complex operators" warning silenced while realify's
   graphs compile (:func:`_complex_warning_silenced`): item 4's complex values are deliberate.
8. Scalar outputs allowed in the graph's fake mode while realify's graphs compile
   (:func:`_scalar_outputs_allowed`): ``scan`` and ``map`` lower to a ``while_loop`` that
   reads its step with ``.item()``.
9. 1x1 convolutions on CPU, forward and backward, as batched matrix products
   (realify/passes/pointwise_conv.py, in :func:`realify_decomposition_table`): BLAS's GEMM, faster
   than oneDNN's convolution on these shapes.
10. Inverse real FFTs of a spectrum zero beyond a band transform only the band, in the
   backward graph too (:class:`TransformOnlyBands`, realify/passes/fft_bands.py).

About the fourth: ``realify::cmul_pairs`` (realify/runtime/ops.py) multiplies complex values held as
real (re, im) pairs with ATen's vectorized complex kernel. As a Python custom op it costs two
trips through the Python dispatcher per call (its autograd wrapper and its kernel), a fixed
cost comparable to the kernel's own time on the rotary embedding's sizes. A post-grad pass,
run on the forward and the backward graph after AOTAutograd has split them (nothing is
differentiated after it), calls the same ATen kernel directly, through views that cost
nothing::

    cmul_pairs(a, b, conj_a, conj_b)
      = view_as_real(mul(conj?(view_as_complex(a)), conj?(view_as_complex(b))))

The complex values live only between those three ATen calls in Inductor's generated wrapper
(Inductor runs complex ops as ATen fallbacks); the graph realify hands over, and every kernel
Inductor generates, stay real. A conjugated factor is materialized with ``conj_physical``,
the copy eager's ``mul`` makes of a lazily conjugated operand anyway. Only products whose
operands are contiguous are rewritten: Inductor calls ``view_as_complex`` on a contiguous
input (``require_contiguous``), which would otherwise copy, and for a broadcast (expanded)
operand materialize the whole expansion. ``realify::cmm_pairs`` (small matrix products) is
lowered the same way to ``mm``/``bmm`` of the complex views, and always: an operand that is
not contiguous pairs is first laid out contiguous (:func:`_blas_operand`), the copy BLAS
would need anyway; a complex64 operand that is a view of contiguous pairs (einsum's
mode-major permutes) is copied as 8-byte words, its views replayed on a float64 bitcast of
the pairs (:func:`_contiguous_pairs_operand`). A conjugated GEMM operand is conjugated by
the Inductor kernel that lays it out (:func:`_conjugated_operand`): ATen's ``bmm`` would
copy it once more with ``conj_physical``, one more pass over the whole operand. A product of
inner dimension 1 (the backward's outer product of a matrix-vector product) is no GEMM at
all: it becomes the elementwise formula, broadcast, in Inductor
(:func:`_lower_outer_product`), one pass over the output where BLAS's GEMM kernel is slower.
Both measured on S4D's training step in docs/benchmarks.md, "After run 28".
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import pathlib
import unittest.mock
import warnings
from typing import Any, Callable, Iterator

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._prims_common import is_contiguous_or_false
from torch.fx.experimental.symbolic_shapes import guard_or_false

from .runtime import ops as _ops  # registers realify::cmul_pairs (which a pass rewrites) and fusion_barrier
from .passes.fft_bands import transform_only_bands_in
from .passes.pointwise_conv import pointwise_convolution, pointwise_convolution_backward

aten = torch.ops.aten


class PassSequence(CustomGraphPass):
    """Several graph passes, run in order, as one value of Inductor's pass settings (which take
    a single pass on some torch builds, a list on others). ``setting`` is the value already
    there (None, a pass, a list or another sequence); ``passes`` run after it. Cacheable when
    every pass is: its uuid is theirs, in order."""

    def __init__(self, setting: Any, *passes: Any) -> None:
        before = () if setting is None else setting.passes if isinstance(setting, PassSequence) else (
            tuple(setting) if isinstance(setting, (list, tuple)) else (setting,))
        self.passes = (*before, *passes)

    def __call__(self, graph: fx.Graph) -> None:
        for graph_pass in self.passes:
            graph_pass(graph)

    def uuid(self) -> Any:
        ids = tuple(p.uuid() if isinstance(p, CustomGraphPass) else None for p in self.passes)
        return None if None in ids else ids


class PairProductsToATen(CustomGraphPass):
    """Post-grad pass: ``realify::cmul_pairs`` -> ATen ``view_as_complex``/``mul``/``view_as_real``,
    ``realify::cmm_pairs`` likewise with ``mm``/``bmm``."""

    def __call__(self, graph: fx.Graph) -> None:
        factors: dict[tuple[fx.Node, bool], fx.Node] = {}  # one complex view per operand, shared by its products
        for node in list(graph.nodes):
            if node.op == "call_function" and node.target in _PAIR_PRODUCTS:
                _lower(graph, node, factors)

    def uuid(self) -> Any:
        # part of Inductor's FX graph cache key: bump when the rewrite changes
        return "realify.PairProductsToATen.v7"


def _lower(graph: fx.Graph, node: fx.Node, factors: dict) -> None:
    a, b, conj_a, conj_b = node.args
    if node.target is torch.ops.realify.cmm_pairs.default:
        if guard_or_false(a.meta["val"].shape[-2] == 1):
            _lower_outer_product(graph, node)
            return
        # a GEMM operand is copied to BLAS's layout anyway: lay it out contiguous (free where
        # Inductor computes it), so that its complex view is free; a conjugated one is
        # conjugated by that same kernel (ATen's bmm would copy it once more to conjugate it)
        a, b = (_conjugated_operand(graph, node, x) if conj else x if _contiguous_pairs(x)
                else _contiguous_pairs_operand(graph, node, x) for x, conj in ((a, conj_a), (b, conj_b)))
        conj_a = conj_b = False
        product_op = aten.mm.default if node.meta["val"].dim() == 3 else aten.bmm.default
    elif all(_contiguous_pairs(x) for x in (a, b)):
        product_op = aten.mul.Tensor
    else:
        return
    with graph.inserting_before(node):
        za = _complex_factor(graph, a, conj_a, factors)
        zb = _complex_factor(graph, b, conj_b, factors)
        product = _call(graph, product_op, za, zb)
        pairs = _call(graph, aten.view_as_real.default, product)
    node.replace_all_uses_with(pairs)
    graph.erase_node(node)


def _parts(graph: fx.Graph, pairs: fx.Node, conj: bool) -> tuple[fx.Node, fx.Node]:
    re, im = (_call(graph, aten.select.int, pairs, -1, part) for part in (0, 1))
    return re, (_call(graph, aten.neg.default, im) if conj else im)


def _interleave(graph: fx.Graph, re: fx.Node, im: fx.Node) -> fx.Node:
    # stack's decomposition, which has run before post-grad passes
    return _call(graph, aten.cat.default, [_call(graph, aten.unsqueeze.default, x, -1) for x in (re, im)], -1)


def _conjugated_operand(graph: fx.Graph, before: fx.Node, pairs: fx.Node) -> fx.Node:
    """(re, -im) of ``pairs``, contiguous: one Inductor kernel (IEEE negation, what
    ``conj_physical`` computes)."""
    with graph.inserting_before(before):
        conjugated = _interleave(graph, *_parts(graph, pairs, True))
    return _contiguous_operand(graph, before, conjugated)


def _lower_outer_product(graph: fx.Graph, node: fx.Node) -> None:
    """A complex product of inner dimension 1, ``a' @ b'`` = ``a' * b'`` broadcast, in Inductor:
    (ar br - ai bi, ar bi + ai br) with the conjugated factors' imaginary parts negated. The
    backward of a matrix-vector product makes these; BLAS runs them as a GEMM that moves the
    whole output through a kernel built for reuse."""
    a, b, conj_a, conj_b = node.args
    with graph.inserting_before(node):
        (ar, ai), (br, bi) = _parts(graph, a, conj_a), _parts(graph, b, conj_b)
        # (.., m, 1) parts of a times (.., 1, n) parts of b broadcast to (.., m, n); + 0 as a
        # GEMM's sum starts from +0, so that a -0 product comes out +0, as eager's does
        re = _call(graph, aten.sub.Tensor, _call(graph, aten.mul.Tensor, ar, br), _call(graph, aten.mul.Tensor, ai, bi))
        im = _call(graph, aten.add.Tensor, _call(graph, aten.mul.Tensor, ar, bi), _call(graph, aten.mul.Tensor, ai, br))
        pairs = _interleave(graph, *(_call(graph, aten.add.Tensor, part, 0.0) for part in (re, im)))
    node.replace_all_uses_with(pairs)
    graph.erase_node(node)


def _complex_factor(graph: fx.Graph, pairs: fx.Node, conj: bool, factors: dict) -> fx.Node:
    """The complex view of ``pairs`` (conjugated if ``conj``), made once per graph: the rotary
    embedding's frequency table is a factor of two products."""
    if (pairs, conj) not in factors:  # made before its first product, so before every later one
        z = _call(graph, aten.view_as_complex.default, pairs)
        factors[pairs, conj] = _call(graph, aten.conj_physical.default, z) if conj else z
    return factors[pairs, conj]


def _call(graph: fx.Graph, target: Any, *args: Any) -> fx.Node:
    """A new node with its fake value, computed in the fake mode of its (first) input."""
    node = graph.call_function(target, args)
    vals = fx.node.map_aggregate(args, lambda a: a.meta["val"] if isinstance(a, fx.Node) else a)
    with next(iter(node.all_input_nodes)).meta["val"].fake_mode:
        node.meta["val"] = target(*vals)
    return node


def _fake_value(x: Any) -> Any:
    """The fake value recorded on a graph node (None for constants and unrecorded nodes)."""
    return x.meta.get("val") if isinstance(x, fx.Node) else None


def _contiguous_pairs(x: Any) -> bool:
    """A node whose value is a contiguous real (..., 2) tensor at an even offset, known without
    adding a guard on symbolic sizes."""
    val = _fake_value(x)
    return (isinstance(val, torch._subclasses.FakeTensor) and val.dtype in (torch.float32, torch.float64)
            and val.dim() > 0 and guard_or_false(val.shape[-1] == 2) and is_contiguous_or_false(val)
            and guard_or_false(val.storage_offset() % 2 == 0))


_PAIR_PRODUCTS = (torch.ops.realify.cmul_pairs.default, torch.ops.realify.cmm_pairs.default)


def _contiguous_operand(graph: fx.Graph, before: fx.Node, x: fx.Node) -> fx.Node:
    """``x`` through :func:`_blas_operand`: laid out contiguous by Inductor."""
    with graph.inserting_before(before):
        operand = graph.call_function(_blas_operand, (x,))
    with x.meta["val"].fake_mode:
        operand.meta["val"] = x.meta["val"].contiguous()
    return operand


def _contiguous_pairs_operand(graph: fx.Graph, before: fx.Node, x: fx.Node) -> fx.Node:
    """Pairs ``x`` laid out contiguous. complex64 pairs that are views of contiguous pairs are
    copied as one 8-byte word per element: the views are replayed on a float64 bitcast of the
    contiguous pairs (a free ATen view), so Inductor's copy kernel moves words; a copy of the
    float32 pairs themselves vectorizes along the pair dimension, two lanes per vector
    operation (a partial load and store per element, several times slower)."""
    views, root = [], x
    while isinstance(root, fx.Node) and root.op == "call_function":
        args = _view_of_words(root)
        if args is None:
            break
        views.append((root.target, args))
        root = root.args[0]
    if not views or not _contiguous_pairs(root) or root.meta["val"].dtype != torch.float32:
        return _contiguous_operand(graph, before, x)
    with graph.inserting_before(before):
        words = _call(graph, aten.squeeze.dim, _call(graph, aten.view.dtype, root, torch.float64), -1)
        for target, args in reversed(views):
            words = _call(graph, target, words, *args)
        words = _contiguous_operand(graph, before, words)
        return _call(graph, aten.view.dtype, _call(graph, aten.unsqueeze.default, words, -1), torch.float32)


_WORD_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
                         aten.permute.default, aten.unsqueeze.default, aten.transpose.int, aten.slice.Tensor,
                         aten.select.int})


def _view_of_words(view: fx.Node) -> tuple | None:
    """The arguments that take ``view``, a view of pairs, of the words instead (the same
    tensor without its pair dimension); None for any other node, or a view that touches the
    pair dimension (the last)."""
    target, args = view.target, view.args[1:]
    if target not in _WORD_VIEWS or view.kwargs or not isinstance(view.args[0], fx.Node):
        return None
    n = view.args[0].meta["val"].dim()

    def kept(*dims: int) -> bool:  # normalized dims, none of them the pair dimension
        return all(d % n != n - 1 for d in dims)

    if target in (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default):
        size = args[0]  # -1 keeps a size only in expand (in a view it infers one)
        return (list(size[:-1]),) if size[-1] == 2 or (size[-1] == -1 and target is aten.expand.default) else None
    if target is aten.permute.default:
        dims = args[0]
        return (list(dims[:-1]),) if dims[-1] % n == n - 1 else None
    if target is aten.unsqueeze.default:
        dim = args[0] % (n + 1)
        return (dim,) if dim < n else None
    if target in (aten.transpose.int, aten.slice.Tensor, aten.select.int):
        dims = args[:2] if target is aten.transpose.int else args[:1]
        if not kept(*dims):
            return None
        return (*(d % n for d in dims), *args[len(dims):])
    return None


class GemmOperandsForBLAS(CustomGraphPass):
    """Post-grad pass: GEMM operands that would reach BLAS with no unit stride get a
    contiguous layout.

    BLAS reads a matrix along a unit stride. For an operand with none, ATen's bmm copies matrix
    by matrix: einsum's batch-major permutes give the FNO weights as 256 matrices with strides
    (1, 8192, 256), and those small copies cost several times the bmm itself (measured in
    docs/benchmarks.md, "Measurements behind design choices").

    Two kinds of operand get there:

    - a view whose recorded strides say so (a graph input's planes, a permute): mm and bmm;
    - a batch of matrices Inductor computes itself (a pointwise op, or a view of one): its
      recorded strides may be contiguous, yet Inductor lays the buffer out in the order it
      reads its inputs, a permuted order in backward graphs (the FNO's weight gradients).

    Such an operand goes through :func:`_blas_operand`, a lowering (called by Inductor on its
    own IR, as its pattern matcher's replacements are) that requires a contiguous layout: a
    buffer Inductor has not laid out yet is simply fixed contiguous, so the kernel computing
    it writes it that way at no cost; anything else is copied once, in one fused kernel.
    """

    def __call__(self, graph: fx.Graph) -> None:
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target not in (aten.mm.default, aten.bmm.default):
                continue
            for i, x in enumerate(node.args[:2]):
                if _no_unit_stride(x) or (node.target is aten.bmm.default and _computed_by_inductor(x)):
                    node.update_arg(i, _contiguous_operand(graph, node, x))

    def uuid(self) -> Any:
        return "realify.GemmOperandsForBLAS.v3"


def _blas_operand(x: Any) -> Any:
    """Inductor lowering (the FX node's target): ``x`` with a contiguous layout."""
    from torch._inductor import ir

    return ir.ExternKernel.require_contiguous(x)


_blas_operand._inductor_lowering_function = True  # type: ignore[attr-defined]
# the output's metadata for Inductor's FakeTensorUpdater (torch >= 2.14 recomputes it when an
# input's changes, e.g. after reinplacing, and refuses a lowering function without one)
_blas_operand._inductor_lowering_output_metadata_fn = lambda x: x.contiguous()  # type: ignore[attr-defined]


def _no_unit_stride(x: Any) -> bool:
    """A matrix operand known (without a guard) to have neither contiguous rows nor columns."""
    val = _fake_value(x)
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return False
    return all(guard_or_false(val.stride(d) != 1) and guard_or_false(val.shape[d] > 1) for d in (-1, -2))


def _computed_by_inductor(x: Any) -> bool:
    """A batch of matrices (more than one, none of them a vector) computed by an Inductor
    kernel: a pointwise aten op, or a view of one."""
    val = _fake_value(x)
    if not (isinstance(val, torch.Tensor) and val.dim() == 3 and all(guard_or_false(n > 1) for n in val.shape)):
        return False
    while isinstance(x, fx.Node) and x.op == "call_function" and isinstance(x.target, torch._ops.OpOverload):
        if torch.Tag.pointwise in x.target.tags:
            return True
        if not (x.target.is_view or x.target in (aten.reshape.default, aten._unsafe_view.default)):
            return False
        x = x.args[0]
    return False


class AccurateExpm1(CustomGraphPass):
    """Vectorized CPU ``expm1`` without cancellation near 0.

    Inductor's vectorized C++ writes ``expm1(x)`` as ``x.exp() - 1`` (for speed), which
    cancels near 0: ``expm1(1e-8)`` came out 0 in float32, and compiled, ``sin(0.5 + 1e-8i)``
    had imaginary part 0 instead of ``8.8e-9`` (complex ``sin``, ``cos``, ``sinh``, ``cosh``
    and ``expm1`` need expm1 for their small parts). While realify's graphs are generated
    (:func:`_realify_codegen`), Inductor writes ``x.expm1()`` instead: ATen's vector expm1
    (Sleef's, within 1 ulp, the function eager's own vectorized ``torch.expm1`` calls), for
    every dtype and vector width. Scalar code already calls ``std::expm1``.

    The change is in code generation, not in the graph, so this pass leaves the graph as it
    is: it is listed among the post-grad passes because its :meth:`uuid` is part of
    Inductor's FX graph cache key, so that a real graph compiled by plain Inductor
    (``exp(x) - 1``) and the same graph compiled by realify never share a cached kernel.

    Writing Taylor's series (realify/runtime/expm1.py) into the kernel as Inductor IR instead is as
    accurate and runs a little faster, but its ops are inlined into every consumer during code
    generation, which more than doubles compile time (docs/benchmarks.md, "Measurements behind design choices").
    """

    def __call__(self, graph: fx.Graph) -> None:
        pass

    def uuid(self) -> Any:
        return "realify.AccurateExpm1.v4: Vectorized::expm1"


def _vector_expm1(x: Any) -> str:
    """C++ for a vectorized ``expm1``: ATen's accurate vector function."""
    return f"{x}.expm1()"


# Inductor's vector code generator falls back to the scalar function of the same name where a
# loop cannot be vectorized (float64 tails, say): the name must be expm1's.
_vector_expm1.__name__ = "expm1"


@contextlib.contextmanager
def _accurate_vector_expm1() -> Iterator[None]:
    """Inductor's C++ vector code calls ``Vectorized::expm1`` while in this context (in this
    process: Inductor's experimental out-of-process code generation does not see it)."""
    from torch._inductor import compile_fx
    from torch._inductor.codegen.cpp import CppVecOverrides

    if compile_fx.fx_compile_mode != compile_fx.FxCompileMode.NORMAL:
        _warn_out_of_process(compile_fx.fx_compile_mode.name)

    inductor_expm1 = CppVecOverrides.__dict__["expm1"]
    CppVecOverrides.expm1 = staticmethod(_vector_expm1)
    try:
        yield
    finally:
        CppVecOverrides.expm1 = inductor_expm1


@contextlib.contextmanager
def accurate_expm1() -> Iterator[None]:
    """Accurate vectorized ``expm1`` for programs Inductor compiles *outside* realify's backend.

    realify's backend does this by itself. A real-only program from :func:`realify.export`
    compiled by plain Inductor or AOTInductor gets Inductor's ``exp(x) - 1`` instead, and
    loses the small parts of complex ``sin``, ``cos``, ``sinh``, ``cosh`` and ``expm1`` near
    0 (``sin(0.5 + 1e-8i)`` compiles to imaginary part 0 there, for ``8.8e-9``). Compile
    inside this context to get ATen's vector ``expm1`` (:class:`AccurateExpm1`)::

        from realify.inductor import accurate_expm1

        with accurate_expm1():
            path = torch._inductor.aoti_compile_and_package(ep)

    The code is generated while the context is open: ``torch.compile`` compiles on the first
    call, so make that call inside it. The context also adds :class:`AccurateExpm1` to
    Inductor's post-grad passes (after any already set), so that the kernels it compiles are
    cached apart from plain Inductor's. Everything Inductor compiles in this process while
    the context is open is affected.
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
    """Whether Inductor, with these ``inner_options``, runs kernels that read interleaved
    (re, im) pairs vectorized: the backend then lets every complex input enter as its own
    pairs, a free view (realify/backend.py), instead of splitting it into planes."""
    return all(config_patches.get(key, value) == value for key, value in VECTORIZE_PAIRS.items())


# Ops Inductor would decompose that run faster as ATen calls. unfold_backward is the
# overlap-add of istft (signal and window envelope) and the backward of stft's framing;
# decomposed, it becomes a scatter-add with atomic adds, many times slower than ATen's kernel
# (docs/benchmarks.md, "Measurements behind design choices").
KEEP_AS_ATEN = (torch.ops.aten.unfold_backward.default,)


def _register_lowerings() -> None:
    """Give each op of :data:`KEEP_AS_ATEN` Inductor's ATen-fallback lowering, explicitly, and
    ``realify::fusion_barrier`` its lowering (a stored buffer), ``realify::snapshot`` Inductor's
    clone.

    Left to Inductor, an op that reaches it undecomposed gets an implicit fallback, which
    raises ``make_fallback(...): a decomposition exists`` whenever the ``CI`` environment
    variable is set (a check meant for PyTorch's own CI); registering it here, without that
    check, is what the implicit path does otherwise. It changes nothing for other programs:
    their decomposition tables still decompose these ops before Inductor lowers anything.
    Inputs are made contiguous, the layout Inductor's implicit fallback asks of ATen ops in
    a backward graph; the values reaching these ops come out of Inductor's own kernels,
    contiguous already."""
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
    """Inductor's ``compile_fx`` for realify's real graphs, forward and backward alike:
    realify's post-grad and joint-graph passes after any the caller set, :data:`VECTORIZE_PAIRS` unless the
    caller set it, and Inductor's decompositions less :data:`KEEP_AS_ATEN`."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    _register_lowerings()
    patches = {**VECTORIZE_PAIRS, **KEEP_SIGNED_ZEROS, **config_patches,
               "post_grad_custom_post_pass": PassSequence(config_patches.get("post_grad_custom_post_pass"),
                                                          PairProductsToATen(), GemmOperandsForBLAS(), AccurateExpm1(),
                                                          RealifyDecompositions()),
               "joint_custom_post_pass": PassSequence(config_patches.get("joint_custom_post_pass"),
                                                      TransformOnlyBands())}
    compile_real = functools.partial(compile_fx, inner_compile=_realify_codegen(compile_fx_inner), config_patches=patches)

    @functools.wraps(compile_fx)
    def compile_with_realify_decompositions(gm: fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        with _decompositions_for_realify():
            return compile_real(gm, example_inputs, **kwargs)

    return compile_with_realify_decompositions


def realify_decomposition_table() -> dict[Any, Callable]:
    """Inductor's decomposition table as realify's graphs need it: less :data:`KEEP_AS_ATEN`,
    plus the kernels of ``realify::pointwise`` and 1x1 convolutions on CPU as batched matrix
    products (realify/passes/pointwise_conv.py)."""
    from torch._inductor.decomposition import select_decomp_table

    from .rules._derivative import decompositions as pointwise_decompositions

    table = {op: fn for op, fn in select_decomp_table().items() if op not in KEEP_AS_ATEN}
    table.update(pointwise_decompositions())
    table[aten.convolution.default] = pointwise_convolution
    table[aten.convolution_backward.default] = pointwise_convolution_backward
    return table


@contextlib.contextmanager
def _decompositions_for_realify() -> Iterator[None]:
    """While one realify graph compiles, Inductor reads its decompositions from
    :func:`realify_decomposition_table`. Not passed as ``compile_fx(decompositions=...)``: a
    table passed in is pickled into the FX graph cache's key, which cannot pickle most of its
    functions, so every realify graph bypassed Inductor's and AOTAutograd's on-disk caches;
    the function itself pickles by name (its effect on the key: :class:`RealifyDecompositions`).
    compile_fx hands the function on to the code generation of a backward compiled later."""
    import torch._inductor.compile_fx as compile_fx_module

    with unittest.mock.patch.object(compile_fx_module, "select_decomp_table", realify_decomposition_table):
        yield


class TransformOnlyBands(CustomGraphPass):
    """Joint-graph pass: :func:`realify.passes.fft_bands.transform_only_bands_in` on the forward and
    backward graph before AOTAutograd splits them (the gradient of a one-sided FFT whose modes
    were cut is a ``c2r`` of a band; once split, the zeros it is written into may be a tensor
    the forward saved, of contents unknown to the backward graph)."""

    def __call__(self, graph: fx.Graph) -> None:
        transform_only_bands_in(graph)

    def uuid(self) -> Any:
        return "realify.TransformOnlyBands.v1"


class RealifyDecompositions(CustomGraphPass):
    """No rewrite: its :meth:`uuid` puts realify's code into Inductor's and AOTAutograd's cache
    keys, which see the graphs and the name of the decomposition table's function but not
    what realify's decompositions and rules make of a graph."""

    def __call__(self, graph: fx.Graph) -> None:
        pass

    def uuid(self) -> Any:
        return f"realify.code.{_realify_source_hash()}"


@functools.lru_cache(maxsize=None)
def _realify_source_hash() -> str:
    package = pathlib.Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _warn_out_of_process(mode: str) -> None:
    warnings.warn(f"realify: Inductor generates code out of process (TORCHINDUCTOR_FX_COMPILE_MODE={mode}); "
                  "its vectorized expm1 there is exp(x) - 1, which loses the small parts of complex "
                  "sin/cos/sinh/cosh/expm1 near 0. Unset TORCHINDUCTOR_FX_COMPILE_MODE for full accuracy.",
                  stacklevel=2)


def _realify_codegen(inner_compile: Callable) -> Callable:
    """Inductor's ``compile_fx_inner`` (which generates and compiles the code of one graph)
    with three changes that hold while it runs, for realify's graphs only (items 6-8 above):

    - vectorized ``expm1`` by ATen's accurate function (:class:`AccurateExpm1`);
    - no warning that Inductor "does not support code generation for complex operators". It
      warns once per process when it meets a complex value; the three ATen calls of the
      pairs-product lowering above are the only complex values in a realify graph, and
      deliberate, so the warning would mislead. It stays armed for every other program;
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
            if armed:
                warn_once.cache_clear()
