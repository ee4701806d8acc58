"""The boundary between a complex program and its real graph: which inputs and outputs are
complex, in which layout they cross, and the conversions at the edges.

Layouts (:data:`Layout`): ``"complex"`` (the program's own complex tensors; the graph splits
and merges at its edges), ``"planar"`` (a real ``(2, *shape)`` tensor: ``[0]`` real part,
``[1]`` imaginary part) and ``"interleaved"`` (a real ``(*shape, 2)`` tensor, PyTorch's own
storage order, a free view of a complex tensor via ``torch.view_as_real``).

:class:`Signature` is what a decomposed graph records about its boundary; :func:`enter` and
:func:`leave` convert inside the traced graph; :func:`split` and :func:`pairs_to_complex`
convert a caller's tensors at run time (the compile backend's runtime and
``realify.ComplexCallAdapter`` both use them); :func:`check_real` checks that complex values
appear only at the edges.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Literal, Sequence

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves

from ._dtypes import complex_of, pairs_of
from .aliasing import OutputView, contiguous_strides, needs_restride
from .errors import ComplexLeakError
from .tensor import ComplexTensor

aten = torch.ops.aten
Layout = Literal["complex", "planar", "interleaved"]


@dataclasses.dataclass
class Signature:
    """How the real graph's flat inputs/outputs map to the program's."""

    input_complex: list[bool]
    output_complex: list[bool]  # user outputs, then the new values of mutated inputs
    mutated_inputs: list[int]
    num_user_outputs: int
    out_spec: Any
    input_layout: Layout | list[Layout]  # one for all inputs, or one per input
    output_layout: Layout
    # per user output, as far as the program's graph metadata tells (see eager_layouts):
    # where eager's is a view of an input, how to take it from that input (with
    # decompose(eager_outputs=True) the caller does, and the graph returns None in its place)
    output_views: list[OutputView | None] = dataclasses.field(default_factory=list)
    # and eager's strides, in the output's own elements, where static (with
    # eager_outputs=True the graph lays the output out so)
    output_strides: list[tuple[int, ...] | None] = dataclasses.field(default_factory=list)

    def layout_of(self, i: int) -> Layout:
        return self.input_layout if isinstance(self.input_layout, str) else self.input_layout[i]


def input_layouts(inputs: Layout | Sequence[Layout], count: int) -> Layout | list[Layout]:
    if isinstance(inputs, str):
        return inputs
    layouts = list(inputs)
    if len(layouts) != count:
        raise ValueError(f"decompose: {len(layouts)} input layouts for {count} inputs")
    if "complex" in layouts and set(layouts) != {"complex"}:
        raise ValueError("decompose: the 'complex' input layout cannot be mixed with others")
    return layouts


def is_complex(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_complex


def input_aliases(outputs: list[Any], inputs: Sequence[Any]) -> list[tuple[int, bool] | None]:
    """Per output of the functionalizing trace: ``(i, whole)`` where it shares memory with
    input ``i`` (a view of it; ``whole`` where it is that input itself), else None. Each input
    has a functional storage of its own, so this names the input the program viewed even
    where the example inputs share memory."""
    storages = {StorageWeakRef(x.untyped_storage()): i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    aliases: list[tuple[int, bool] | None] = []
    for out in outputs:
        i = storages.get(StorageWeakRef(out.untyped_storage())) if isinstance(out, torch.Tensor) else None
        aliases.append(None if i is None else (i, out is inputs[i]))
    return aliases


def eager_layouts(program: Callable, aliases: list[tuple[int, bool] | None]
                   ) -> tuple[list[OutputView | None], list[tuple[int, ...] | None]]:
    """Per user output: how to take it from its input where eager's is a view of one, and
    eager's strides where they are static (for :func:`leave`), from the values ``program``'s
    graph recorded for its inputs and outputs (dynamo's ``example_value``, torch.export's
    ``val``: fake tensors with eager's strides, offsets and conj bits). The functional trace
    itself cannot tell: it turns every view into a copy."""
    views: list[OutputView | None] = [None] * len(aliases)
    strides: list[tuple[int, ...] | None] = [None] * len(aliases)
    if not isinstance(program, fx.GraphModule):
        return views, strides
    def recorded(node: Any) -> Any:
        return node.meta.get("example_value", node.meta.get("val")) if isinstance(node, fx.Node) else node
    inputs = [recorded(n) for n in program.graph.find_nodes(op="placeholder")]
    outputs = [recorded(n) for n in tree_leaves(program.graph.output_node().args)]
    if len(outputs) != len(aliases):
        return views, strides
    for k, (value, alias) in enumerate(zip(outputs, aliases)):
        if not isinstance(value, torch.Tensor):
            continue
        if alias is not None and alias[0] < len(inputs) and _same_storage(value, inputs[alias[0]]):
            views[k] = OutputView.of(value, inputs[alias[0]], *alias)
            if views[k] is not None:
                continue
        if all(isinstance(v, int) for v in (*value.shape, *value.stride())):
            strides[k] = tuple(value.stride())
    return views, strides


def _same_storage(value: torch.Tensor, base: Any) -> bool:
    """Whether the program's recorded output views its recorded input: the functional trace
    can alias where eager copies (a reshape of an expanded input is a copy in eager)."""
    if not isinstance(base, torch.Tensor):
        return False
    try:
        return StorageWeakRef(value.untyped_storage()) == StorageWeakRef(base.untyped_storage())
    except (RuntimeError, NotImplementedError):  # no storage to compare: trust the trace
        return True


def boundary_example(x: Any, layout: Layout) -> Any:
    """The real input the graph is traced for, in the layout the caller passes at run time
    (:func:`split`): planes contiguous, pairs with the strides of ``view_as_real(x)``. The
    trace decides by its inputs' strides (a reshape of a complex value is a view of each part
    only where their strides allow one), so an interleaved input made contiguous here while
    a strided view of the pairs arrives at run time (``b.mT``) would fail, or worse."""
    if not is_complex(x) or layout == "complex":
        return x
    parts = pairs_of(x)
    if layout == "planar":
        return parts.movedim(-1, 0).contiguous()
    return parts


def enter(x: Any, complex_input: bool, layout: Layout) -> Any:
    """A boundary input as the value the functional graph expects."""
    if not complex_input:
        return x
    if layout == "planar":
        return ComplexTensor(x[0], x[1])
    if layout == "interleaved":
        return ComplexTensor.from_pairs(x)
    # real/imag (not view_as_real) so that a conj- or neg-view input works at run time too
    return ComplexTensor(torch.real(x), torch.imag(x))


def leave(x: Any, layout: Layout, stride: tuple[int, ...] | None = None) -> Any:
    """A graph output in the boundary layout; with ``stride`` (eager's, in the output's own
    elements), laid out with those strides where a real or ``"interleaved"`` output has others."""
    if not isinstance(x, ComplexTensor):
        return _restrided(x, stride) if stride is not None and isinstance(x, torch.Tensor) else x
    if layout == "planar":
        return torch.stack([x.re, x.im])
    if layout == "interleaved":
        if stride is not None and needs_restride(x.shape, contiguous_strides(x.shape), stride):
            # each part written straight into its place: one kernel under Inductor, where a
            # stack and then a copy into this layout would be two passes
            out = torch.empty_strided((*x.shape, 2), (*(2 * s for s in stride), 1), dtype=x.re.dtype, device=x.device)
            out.select(-1, 0).copy_(x.re)
            out.select(-1, 1).copy_(x.im)
            return out
        return torch.stack([x.re, x.im], dim=-1)
    return torch.complex(x.re, x.im)


def _restrided(x: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """``x`` with strides ``stride``, where it has others: a copy into a buffer with those
    strides, which a compiler writes in place (Inductor keeps the strides of its graph's
    outputs)."""
    if not needs_restride(x.shape, x.stride(), stride):
        return x
    return torch.empty_strided(x.shape, stride, dtype=x.dtype, device=x.device).copy_(x)


def resolve_lazy_bits(gm: fx.GraphModule, signature: Signature) -> None:
    """Complex placeholders first pass through resolve_conj/resolve_neg (no-ops unless the
    caller passes a lazy conj/neg view, which the traced view_as_real could not read)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, is_complex in zip(placeholders, signature.input_complex):
        if not is_complex:
            continue
        users = [u for u in node.users if u.target is not aten.copy_.default]
        with gm.graph.inserting_after(node):
            resolved_conj = gm.graph.call_function(aten.resolve_conj.default, (node,))
        with gm.graph.inserting_after(resolved_conj):
            resolved = gm.graph.call_function(aten.resolve_neg.default, (resolved_conj,))
        resolved_conj.meta["val"] = resolved.meta["val"] = node.meta.get("val")
        for user in users:
            user.replace_input_with(node, resolved)
    gm.recompile()


def check_real(gm: fx.GraphModule, signature: Signature) -> None:
    """Raise if a complex value remains anywhere but at a 'complex' boundary."""
    leaks = []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if not any(is_complex(v) for v in tree_leaves(node.meta.get("val"))):
            continue
        if _is_boundary_conversion(node):
            continue
        leaks.append(f"{node.format_node()}")
    if leaks:
        raise ComplexLeakError("complex values remain in the decomposed graph:\n  " + "\n  ".join(leaks[:10]))


_SPLITS = (aten.real.default, aten.imag.default, aten.view_as_real.default, aten.resolve_conj.default,
           aten.resolve_neg.default, aten.clone.default)


def _is_boundary_conversion(node: fx.Node) -> bool:
    """Split of a complex placeholder, or merge into a complex output / written-back input."""
    if node.target in _SPLITS:
        source = node.args[0]
        while source.target in (aten.resolve_conj.default, aten.resolve_neg.default):
            source = source.args[0]
        return source.op == "placeholder"
    if node.target is aten.complex.default:
        return all(u.op == "output" or u.target is aten.copy_.default for u in node.users)
    if node.target is aten.copy_.default:
        return node.args[0].op == "placeholder"
    return False


# ---- at run time: the caller's tensors ------------------------------------------------------


def split(z: torch.Tensor, layout: Layout = "planar") -> torch.Tensor:
    """Complex (*shape) -> real (2, *shape) planar, in one copy pass (differentiable); or, for
    the "interleaved" layout, its (re, im) pairs (*shape, 2) as a view where it can be one.

    ``stack`` of the real/imag views (which also resolves lazy conj/neg bits) is one pass;
    ``view_as_real(z).movedim(-1, 0).contiguous()`` is a transposing copy, several times
    slower (docs/benchmarks.md, "Measurements behind design choices")."""
    if layout == "interleaved":
        return pairs_of(z)
    return torch.stack([z.real, z.imag])


def complex_to_pairs(z: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Complex ``(*shape)`` -> real contiguous ``(*shape, 2)`` of ``dtype``: a view when ``z``
    allows it."""
    return pairs_of(z).to(dtype).contiguous()


def pairs_to_complex(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Real ``(*shape, 2)`` interleaved -> complex ``(*shape)`` (of ``dtype`` if given): a view
    where ``x``'s strides allow one (the pairs adjacent, every other stride even), else a copy
    first. float16 pairs make complex32 (a copy: :func:`realify._dtypes.complex_of`)."""
    if x.stride(-1) != 1 or any(s % 2 for s in x.stride()[:-1]):
        x = x.contiguous()
    z = complex_of(x[..., 0], x[..., 1]) if x.dtype == torch.float16 else torch.view_as_complex(x)
    return z if dtype is None else z.to(dtype)
