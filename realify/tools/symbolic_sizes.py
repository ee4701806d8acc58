"""OpInfo runners at sizes that turn symbolic: the compile backend at input shapes in a row
(dynamo's automatic dynamic shapes recompile the second with symbolic sizes, the later ones must
reuse that graph), under ``dynamic=True``, and ``realify.export`` with every input dim dynamic,
the program then called at other sizes. Each compares values (and, for the compile backend,
gradients) with eager complex PyTorch at every size, and counts the graphs realify compiles
against those the same calls give dynamo's own ``eager`` backend (what realify adds: guards its
rules put on sizes) or, where that is fewer, ``aot_eager`` (the trace the default backend runs,
whose own guards on sizes Inductor shares).

A sample is resized by mapping each of its sizes (>= 2) to another value, the same map for every
tensor, so sizes that must agree (a product's inner dims, broadcast partners) still do; sizes 1
stay 1 (broadcasting). Floating and complex tensors get fresh normal values; integer and boolean
tensors (indices, masks) are tiled from the original, so indices stay in range. Non-tensor
arguments are left alone: where they tie the call to the old sizes (``view(x, (2, 6))``), eager
rejects the resized call and that size is not checked.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_leaves
from torch.utils._sympy.numbers import int_oo

from .opinfo import NONDETERMINISTIC, _direct_callable, assert_matches, op_id, sample_program


def resized(tensors: Sequence[torch.Tensor], sizes: dict[int, int], seed: int) -> list[torch.Tensor]:
    """``tensors`` with each size ``s`` found in ``sizes`` replaced by ``sizes[s]``."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for t in tensors:
        shape = [sizes.get(s, s) for s in t.shape]
        if t.is_floating_point() or t.is_complex():
            new = torch.randn(shape, dtype=t.dtype, generator=gen)
        else:
            new = t
            for dim, size in enumerate(shape):
                if size != t.shape[dim] and t.shape[dim] > 0:
                    new = new.index_select(dim, torch.arange(size) % t.shape[dim])
            new = new.clone()
        out.append(new.requires_grad_(t.requires_grad))
    return out


def growth(tensors: Sequence[torch.Tensor], step: int) -> dict[int, int]:
    """Every size of at least 2 grown by ``step``."""
    return {s: s + step for t in tensors for s in t.shape if s >= 2}


@dataclasses.dataclass
class ShapeRun:
    """What one program did at a sequence of input shapes."""
    checked: int            # shapes whose values (and gradients) were compared with eager
    rejected: int           # shapes eager itself rejects (nothing to compare)
    graphs: int             # graphs realify's backend compiled
    baseline_graphs: int    # graphs dynamo's eager backend compiled for the same calls, or where
                            # fewer than realify's, aot_eager (the default backend's trace)


def _weights(out: Any, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad and (o.is_floating_point() or o.is_complex())]


def _loss(out: Any, weights: list[torch.Tensor]) -> torch.Tensor | None:
    outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad
            and (o.is_floating_point() or o.is_complex())]
    if not outs:
        return None
    # real part of <w, out>: a gradient of every part of every output
    return sum(torch.view_as_real(w * o if o.is_complex() else (w * o).to(w.dtype)).sum() if w.is_complex()
               else (w * o).sum() for w, o in zip(weights, outs))


def _values_and_grads(program: Callable, tensors: list[torch.Tensor], seed: int) -> tuple[Any, Any]:
    """The program's outputs and the gradients of a random real projection of them (zeros for
    an input nothing differentiable reads, as for an output that does not require grad)."""
    out = program(*tensors)
    leaves = [t for t in tensors if t.requires_grad]
    loss = _loss(out, _weights(out, seed)) if leaves else None
    if loss is None or not loss.requires_grad:
        return out, [torch.zeros_like(t) for t in leaves]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return out, [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, leaves)]


def _eager(program: Callable, tensors: list[torch.Tensor], seed: int) -> tuple[Any, Any] | None:
    """Eager's outputs and gradients (None for gradients eager refuses, as for eigenvectors,
    whose phase makes most losses ill-defined), or None where eager rejects the call."""
    try:
        return _values_and_grads(program, tensors, seed)
    except Exception:
        pass
    try:
        with torch.no_grad():
            return program(*tensors), None
    except Exception:
        return None


def _differentiable(op, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    grad_ok = op.supports_autograd and op_id(op) not in NONDETERMINISTIC
    return [t.detach().requires_grad_(grad_ok and (t.is_floating_point() or t.is_complex())) for t in tensors]


def run_compile_shapes(op, sample, steps: Sequence[int] = (0, 1, 3), dynamic: bool | None = None,
                       inner: Any = "eager", gemm: bool = False) -> ShapeRun:
    """The sample's program compiled once with realify's backend (strict) and called at the
    sample's shapes grown by each of ``steps``; values and gradients checked against eager at
    each. Raises what the first mismatch or failure raises."""
    import realify

    tensors, program = sample_program(op, sample, _direct_callable(op) if op_id(op) in NONDETERMINISTIC else op)
    tensors = _differentiable(op, tensors)
    shapes = [resized(tensors, growth(tensors, step), seed=step) if step else tensors for step in steps]
    shapes = [_differentiable(op, ts) for ts in shapes]
    graphs: list[Any] = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return realify.realify_backend(gm, example_inputs, inner=inner, strict=True)

    checked = rejected = 0
    expected_all = [_eager(program, ts, seed=i) for i, ts in enumerate(shapes)]
    baseline = _count_graphs(program, shapes, expected_all, dynamic, "eager")
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            compiled = torch.compile(program, backend=backend, dynamic=dynamic)
            for i, (ts, expected) in enumerate(zip(shapes, expected_all)):
                if expected is None:
                    rejected += 1
                    continue
                if expected[1] is None:
                    with torch.no_grad():
                        actual = compiled(*ts), None
                else:
                    actual = _values_and_grads(compiled, ts, seed=i)
                dtype = sample.input.dtype if isinstance(sample.input, torch.Tensor) else torch.complex64
                assert_matches(actual[0], expected[0], metadata_only=op_id(op) in NONDETERMINISTIC, dtype=dtype,
                               gemm=gemm)
                if expected[1] is not None and op_id(op) not in NONDETERMINISTIC:
                    assert_matches(actual[1], expected[1], gemm=gemm, dtype=dtype)
                checked += 1
    finally:
        torch._dynamo.reset()
    if len(graphs) > baseline:
        # the default backend's own trace (make_fx over dynamo's graph, as AOTAutograd runs for
        # Inductor) may guard on sizes too, e.g. on a split's last chunk being contiguous
        baseline = _count_graphs(program, shapes, expected_all, dynamic, "aot_eager")
    return ShapeRun(checked, rejected, len(graphs), baseline)


def _count_graphs(program: Callable, shapes: list, expected_all: list, dynamic: bool | None, inner: str) -> int:
    """Graphs the ``inner`` dynamo backend compiles for the same calls: ``eager`` has dynamo's
    own guards on sizes only, ``aot_eager`` adds those of the trace the default backend
    (Inductor) runs, without Inductor's compile time."""
    count = 0
    compile_graph = torch._dynamo.lookup_backend(inner)

    def backend(gm, example_inputs):
        nonlocal count
        count += 1
        return compile_graph(gm, example_inputs)

    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            compiled = torch.compile(program, backend=backend, dynamic=dynamic)
            for ts, expected in zip(shapes, expected_all):
                if expected is not None:
                    with torch.set_grad_enabled(expected[1] is not None):
                        compiled(*ts)
    finally:
        torch._dynamo.reset()
    return count


@dataclasses.dataclass
class ExportRun:
    """What one program did through ``realify.export`` with every input dim dynamic."""
    dynamic_dims: int          # input dims plain torch.export keeps dynamic
    checked: int               # other sizes whose values were compared with eager
    rejected: int              # sizes eager, or plain torch.export's own program, rejects
    refused: str | None = None       # realify.export's constraint violation, where it refused
    onnx_refused: str | None = None  # realify.onnx's named error, where it refused


def auto_shapes(tensors: Sequence[torch.Tensor]) -> tuple:
    from torch.export import Dim
    return tuple(dict.fromkeys(range(t.dim()), Dim.AUTO) for t in tensors)


def from_one_shapes(tensors: Sequence[torch.Tensor]) -> tuple:
    """Every dim of size 2 or more dynamic from 1 up (a plain ``Dim.AUTO`` range starts at 2):
    one ``Dim`` per distinct size, so that dims the example has equal stay equal, as a program
    that broadcasts or multiplies them needs."""
    from torch.export import Dim
    dims = {n: Dim(f"n{n}", min=1) for t in tensors for n in t.shape if n >= 2}
    return tuple({d: dims[n] if n >= 2 else Dim.STATIC for d, n in enumerate(t.shape)} for t in tensors)


def _dynamic_symbols(ep) -> dict[Any, tuple[int, int | None]]:
    """Each symbol of the program's user inputs and its range."""
    from torch.export.graph_signature import InputKind
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    symbols = {}
    for node, spec in zip(placeholders, ep.graph_signature.input_specs):
        val = node.meta.get("val")
        if spec.kind is not InputKind.USER_INPUT or not isinstance(val, torch.Tensor):
            continue
        for size in val.shape:
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                bounds = ep.range_constraints.get(size.node.expr)
                lower = int(bounds.lower) if bounds is not None else 0
                upper = bounds.upper if bounds is not None and bounds.upper != int_oo else None
                symbols[size.node.expr] = (lower, None if upper is None else int(upper))
    return symbols


def dynamic_input_dims(ep) -> list[list[bool]]:
    """For each user input tensor of ``ep``, which of its dims are symbolic."""
    from torch.export.graph_signature import InputKind
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    return [[isinstance(s, torch.SymInt) for s in n.meta["val"].shape]
            for n, spec in zip(placeholders, ep.graph_signature.input_specs)
            if spec.kind is InputKind.USER_INPUT and isinstance(n.meta.get("val"), torch.Tensor)]


def export_sizes(ep, tensors: Sequence[torch.Tensor], steps: Sequence[int] = (1, 3),
                 shrink: bool = False) -> list[dict[int, int]]:
    """Size maps for calling ``ep`` at other sizes: each dynamic size grown by each of ``steps``,
    with ``shrink`` one less where that is 2 or more and the program's ranges allow it, and
    shrunk to 1 where they allow that, as far as the maps touch only dynamic dims.

    ``Dim.AUTO`` and ``Dim.DYNAMIC`` ranges start at 2 (the trace may rely on a size not being
    1; plain torch.export's program runs at 1 anyway, with a wrong shape where it squeezed);
    a range includes 1 where the export asked for it (``Dim(name, min=1)``)."""
    dims = dynamic_input_dims(ep)
    dynamic_sizes = {t.shape[d] for t, flags in zip(tensors, dims) for d, f in enumerate(flags) if f}
    static_sizes = {t.shape[d] for t, flags in zip(tensors, dims) for d, f in enumerate(flags) if not f}
    movable = sorted(s for s in dynamic_sizes if s not in static_sizes and s >= 2)
    if not movable:
        return []
    lowest = min((low for low, _ in _dynamic_symbols(ep).values()), default=2)
    maps = [{s: s + step for s in movable} for step in steps]
    smaller = {s: s - 1 for s in movable if s - 1 >= max(lowest, 2)}
    if shrink and smaller:
        maps.append(smaller)
    if lowest <= 1:
        maps.append(dict.fromkeys(movable, 1))
    return maps


def plain_takes(plain_program: Callable, inputs: Sequence[Any], expected: Any, values: bool = True) -> bool:
    """Whether plain torch.export's program takes ``inputs`` and gives ``expected`` (eager's
    result): its run-time checks may reject a size, or its trace rely on what held at the
    example (a size's relation to another, a branch taken); realify's program, traced from the
    same graph, is not asked to take such inputs. The comparison looks for a different
    computation, not rounding: the same shapes and dtypes, and values within 1e-3 of eager's
    largest (the same kernels on the same data agree to a few ulps; a different computation
    differs by O(1) somewhere); shapes and dtypes alone where ``values`` is False (a random
    op)."""
    try:
        got = plain_program(*inputs)
    except Exception:
        return False
    got, want = tree_leaves(got), tree_leaves(expected)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if not isinstance(w, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            return False
        if not values or not w.numel():
            continue
        if w.dtype.is_floating_point or w.dtype.is_complex:
            finite = torch.isfinite(w)
            scale = w[finite].abs().max().item() if finite.any() else 0.0
            if not torch.allclose(g, w, rtol=1e-3, atol=1e-3 * max(scale, 1e-30), equal_nan=True):
                return False
        elif not torch.equal(g, w):
            return False
    return True


def run_export_dynamic(op, sample, onnx_runtime: bool = False, gemm: bool = False) -> ExportRun | None:
    """The sample's program through ``realify.export`` with every input dim ``Dim.AUTO``, then
    called at other sizes (:func:`export_sizes`: larger, smaller, 1 where the ranges allow)
    through ``ComplexCallAdapter``, and in ONNX Runtime where asked; every dim plain
    ``torch.export`` keeps dynamic must stay dynamic. Then the same with ``Dim.DYNAMIC`` on
    those dims (:func:`dynamic_shapes_of`), and with every dim from 1 up
    (:func:`from_one_shapes`), where plain torch.export takes that, called at size 1 as well.
    A refusal (torch.export's constraint violation from
    realify.export, a named error from realify.onnx) is an outcome, reported in the result. None
    where plain ``torch.export`` itself fails or keeps no dim dynamic with ``Dim.AUTO``."""
    tensors, program = sample_program(op, sample)
    auto = auto_shapes(tensors)
    plain = _plain_export(program, tensors, auto)
    if plain is None:
        return None
    run = ExportRun(sum(map(sum, dynamic_input_dims(plain))), 0, 0)
    check = functools.partial(_check_export, run, op, sample, tensors, program, onnx_runtime=onnx_runtime, gemm=gemm)
    check(plain, auto)
    # Dim.DYNAMIC on the dims plain torch.export kept dynamic: a dim realify's program would
    # fix must now raise torch.export's constraint violation, not specialize
    demanded = dynamic_shapes_of(plain)
    if run.refused is None and (plain := _plain_export(program, tensors, demanded)) is not None:
        check(plain, demanded)
    from_one = from_one_shapes(tensors)
    if run.refused is None and (plain := _plain_export(program, tensors, from_one)) is not None \
            and min((low for low, _ in _dynamic_symbols(plain).values()), default=2) <= 1:
        check(plain, from_one)
    return run


def dynamic_shapes_of(ep) -> tuple:
    """``dynamic_shapes`` asking, with ``Dim.DYNAMIC``, for every user input dim ``ep`` keeps
    dynamic, and fixing the others."""
    from torch.export import Dim
    return tuple({d: Dim.DYNAMIC if flag else Dim.STATIC for d, flag in enumerate(flags)}
                 for flags in dynamic_input_dims(ep))


def _plain_export(program: Callable, tensors: list, shapes: tuple):
    """Plain torch.export's program of ``program`` with ``shapes``; None where it fails or keeps
    no dim dynamic."""
    try:
        plain = torch.export.export(_Program(program), tuple(tensors), dynamic_shapes=(shapes,))
    except Exception:
        return None
    return plain if any(any(flags) for flags in dynamic_input_dims(plain)) else None


def _check_export(run: ExportRun, op, sample, tensors: list, program: Callable, plain, shapes: tuple,
                  onnx_runtime: bool, gemm: bool) -> None:
    """realify.export of ``program`` with ``shapes`` (which gave plain torch.export's ``plain``),
    checked at the sizes of :func:`export_sizes` into ``run``."""
    from torch._dynamo.exc import UserError

    import realify

    try:
        ep = realify.export(_Program(program), tuple(tensors), dynamic_shapes=(shapes,))
    except UserError as refusal:
        run.refused = str(refusal)
        return
    # the real program's inputs carry a trailing static 2 for complex inputs
    for i, (want, have) in enumerate(zip(dynamic_input_dims(plain), dynamic_input_dims(ep))):
        assert have[: len(want)] == want, (
            f"input {i}: dims {want} are dynamic in plain torch.export, realify.export keeps {have[: len(want)]}")
    adapter = realify.ComplexCallAdapter(ep)
    session = None
    if onnx_runtime:
        try:
            session = onnx_session(ep)
        except NotImplementedError as refusal:  # NoOnnxFormError, or a form that needs static sizes
            run.onnx_refused = run.onnx_refused or str(refusal)
    metadata_only = op_id(op) in NONDETERMINISTIC
    for k, sizes in enumerate(export_sizes(plain, tensors, shrink=True)):
        ts = resized(tensors, sizes, seed=10 + k)
        try:
            expected = program(*ts)
        except Exception:
            run.rejected += 1
            continue
        if not plain_takes(plain.module(), ts, expected, values=not metadata_only):
            run.rejected += 1
            continue
        dtype = sample.input.dtype if isinstance(sample.input, torch.Tensor) else torch.complex64
        assert_matches(adapter(*ts), expected, dtype=dtype, gemm=gemm, metadata_only=metadata_only)
        if session is not None:
            assert_matches(run_session(session, ep, ts), expected, dtype=dtype, gemm=gemm, metadata_only=metadata_only)
        run.checked += 1


class _Program(torch.nn.Module):
    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *tensors):
        return self.fn(*tensors)


def onnx_session(ep):
    from realify._optional import import_optional
    from realify.onnx import to_onnx

    onnxruntime = import_optional("onnxruntime", "export", "the symbolic-size table's ONNX Runtime check")

    return onnxruntime.InferenceSession(to_onnx(ep).model_proto.SerializeToString())


def run_session(session, ep, tensors: Sequence[torch.Tensor]) -> Any:
    sig = ep.graph_module.meta["realify_signature"]
    feeds = {}
    inputs = session.get_inputs()
    for meta, t in zip(inputs, tensors):
        feeds[meta.name] = (torch.view_as_real(t.resolve_conj()) if t.is_complex() else t).contiguous().numpy()
    outs = [torch.from_numpy(o) for o in session.run(None, feeds)]
    # a copy with the strides its shape gives: numpy's empty arrays have strides 0, which
    # contiguous() keeps (an empty tensor is contiguous) and view_as_complex refuses
    outs = [torch.view_as_complex(o.clone(memory_format=torch.contiguous_format)) if dtype is not None else o
            for o, dtype in zip(outs, sig.outputs)]
    return outs
