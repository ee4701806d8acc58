"""The boundary between a complex program and its real graph.

Which inputs and outputs are complex, in which layout they cross, and the conversions at the
edges.

Layouts (:data:`Layout`): ``"complex"`` (the program's own complex tensors; the graph splits
and merges at its edges), ``"planar"`` (a real ``(2, *shape)`` tensor: ``[0]`` real part,
``[1]`` imaginary part) and ``"interleaved"`` (a real ``(*shape, 2)`` tensor, PyTorch's own
storage order, a free view of a complex tensor via ``torch.view_as_real``).

:class:`Boundary` is the one description of a real program's complex inputs and outputs
(decompose records it, export records it for the exported program's call); :func:`enter`
and :func:`leave` convert inside the traced graph; :class:`RealCall` converts a caller's
tensors at run time (the compile backend's runtime and ``realify.ComplexCallAdapter`` are
both one); :func:`check_real_graph` checks that complex values appear only at the edges.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves, tree_unflatten

from ..errors import ComplexLeakError, RealifyError
from .aliasing import OutputView, contiguous_strides, needs_restride, output_bases, overlapping_write, storages
from .complex_tensor import ComplexTensor
from .dtypes import complex_of, pairs_of, pairs_view, real_dtype

aten = torch.ops.aten
Layout = Literal["complex", "planar", "interleaved"]
# a region of a tensor as successive slices: (dim, start, end, step), dims of the complex value
Region = tuple[tuple[int, int, int, int], ...]


@dataclasses.dataclass
class Boundary:
    """Where a real program meets the complex program it stands for.

    The one description of a real program's complex inputs and outputs, shared by
    :func:`realify.decompose` (``gm.realify_signature``, per input and output of the real
    graph), the compile backend's runtime and :func:`realify.export` (per leaf of the exported
    program's flattened ``(args, kwargs)`` and result), and run by :class:`RealCall`. The
    program's outputs are the user outputs, then the new value of each input in
    ``mutated_inputs`` (which it writes in place).

    Attributes
    ----------
    inputs : tuple of torch.dtype or None
        Per flat input, the complex dtype the value has in the complex program (None where it
        is real, or not a tensor).
    outputs : tuple of torch.dtype or None
        The same per user output.
    mutated_inputs : tuple of int
        The inputs the program writes in place, whose new values follow the user outputs.
    out_spec : pytree spec or None
        The structure of the complex program's result (None: a flat tuple).
    input_layout : Layout or tuple of Layout
        How complex inputs cross (:data:`Layout`): one for every input, or one per input.
    output_layout : Layout
        How complex outputs cross.
    output_views : tuple of OutputView or None
        Per user output, how to take it from an input where eager's output is a view of one
        (None where it is not), as far as the program's graph metadata tells
        (:func:`eager_layouts`).
    output_strides : tuple of tuple of int or None
        Per user output, eager's strides where they are static.
    eager_outputs : bool
        The program lays its outputs out as eager's itself (None in place of each view, every
        other output written with eager's strides); otherwise the caller lays them out.
    pair_dtypes : dict of torch.dtype to torch.dtype
        The real dtype a complex dtype's pairs travel in, where that is not its own
        (``truncate_double`` export: complex128 as float32 pairs).
    contiguous_pairs : bool
        The program was traced for contiguous pairs (export) rather than
        ``torch.view_as_real``'s strides.
    written_regions : tuple of Region or None
        Per input in ``mutated_inputs``: where the program writes only a region of it, the
        slices (:data:`Region`) that region is, and the program returns the region's new value
        instead of the whole input's (None: the whole value).
    hidden_writes : frozenset of int
        The inputs in ``mutated_inputs`` that the program writes only where autograd does not
        see it (with grad disabled, or through a detached alias): the caller writes them with
        grad disabled too, as eager's autograd records nothing of such a write
        (realify/engine/grad_semantics.py).

    See Also
    --------
    ComplexCallAdapter : calls an exported program by its boundary.

    Examples
    --------
    The boundary :func:`realify.export` recorded for a program of a complex and a real input:

    >>> import torch
    >>> import realify
    >>> def f(z, scale):
    ...     return z * scale
    >>> ep = realify.export(f, (torch.tensor([1 + 2j]), torch.tensor(2.0)))
    >>> boundary = realify.ComplexCallAdapter(ep).signature
    >>> boundary.inputs, boundary.outputs
    ((torch.complex64, None), (torch.complex64,))
    >>> boundary.input_layout, boundary.output_layout
    ('interleaved', 'interleaved')

    One written by hand: complex128 values that cross as float32 pairs:

    >>> boundary = realify.Boundary(inputs=(torch.complex128,), outputs=(torch.complex128,),
    ...                             input_layout="interleaved", output_layout="interleaved",
    ...                             pair_dtypes={torch.complex128: torch.float32})
    >>> boundary.real_dtype(torch.complex128)
    torch.float32
    """

    inputs: tuple[torch.dtype | None, ...]
    outputs: tuple[torch.dtype | None, ...]
    mutated_inputs: tuple[int, ...] = ()
    out_spec: Any = None
    input_layout: Layout | tuple[Layout, ...] = "complex"
    output_layout: Layout = "complex"
    output_views: tuple[OutputView | None, ...] = ()
    output_strides: tuple[tuple[int, ...] | None, ...] = ()
    eager_outputs: bool = False
    pair_dtypes: dict[torch.dtype, torch.dtype] = dataclasses.field(default_factory=dict)
    contiguous_pairs: bool = False
    written_regions: tuple[Region | None, ...] = ()
    hidden_writes: frozenset[int] = frozenset()

    @property
    def input_complex(self) -> list[bool]:
        """Whether each flat input is complex in the complex program (its ``inputs`` entry is a dtype)."""
        return [d is not None for d in self.inputs]

    @property
    def num_user_outputs(self) -> int:
        """How many user outputs the program returns, before the new values of the inputs it writes."""
        return len(self.outputs)

    def layout_of(self, i: int) -> Layout:
        """Return the layout in which input ``i`` crosses.

        Parameters
        ----------
        i : int
            The flat input's position.

        Returns
        -------
        Layout
            ``input_layout`` itself where one layout holds for every input, else its ``i``-th.

        Raises
        ------
        IndexError
            ``input_layout`` is one per input and has no ``i``-th.

        Examples
        --------
        >>> import torch
        >>> import realify
        >>> boundary = realify.Boundary(inputs=(torch.complex64, torch.complex64), outputs=(),
        ...                             input_layout=("planar", "interleaved"))
        >>> boundary.layout_of(0), boundary.layout_of(1)
        ('planar', 'interleaved')
        >>> realify.Boundary(inputs=(torch.complex64,), outputs=()).layout_of(0)
        'complex'
        """
        return self.input_layout if isinstance(self.input_layout, str) else self.input_layout[i]

    def real_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """Return the dtype of the real parts that carry a complex ``dtype`` across.

        Parameters
        ----------
        dtype : torch.dtype
            A complex dtype (a real one maps to itself).

        Returns
        -------
        torch.dtype
            Its entry in ``pair_dtypes`` where it has one, else the dtype of its real part
            (float32 for complex64, float64 for complex128).

        Raises
        ------
        None
            Every dtype has an answer.

        Examples
        --------
        >>> import torch
        >>> import realify
        >>> boundary = realify.Boundary(inputs=(torch.complex128,), outputs=(),
        ...                             pair_dtypes={torch.complex128: torch.float32})
        >>> boundary.real_dtype(torch.complex128), boundary.real_dtype(torch.complex64)
        (torch.float32, torch.float32)
        >>> realify.Boundary(inputs=(), outputs=()).real_dtype(torch.complex128)
        torch.float64
        """
        return self.pair_dtypes.get(dtype) or real_dtype(dtype)


SIGNATURE_KEY = "realify_signature"


def signature_of(program: fx.GraphModule | torch.export.ExportedProgram) -> Boundary:
    """Return the :class:`Boundary` a program made by realify carries.

    That is the one :func:`realify.decompose` attached to its result (an attribute), or
    :func:`realify.export` recorded on its program (``ep.graph_module.meta``): per leaf of the
    flattened ``(args, kwargs)`` and of the flattened result, the complex dtype it had in the
    complex program (None where real), the inputs the program writes, eager's output layouts.
    """
    if isinstance(program, torch.export.ExportedProgram):
        signature = program.graph_module.meta.get(SIGNATURE_KEY)
        made_by = "an ExportedProgram made by realify.export; export it with realify.export(...)"
    else:
        signature = getattr(program, SIGNATURE_KEY, None)
        made_by = "a GraphModule made by realify.decompose"
    if not isinstance(signature, Boundary):
        raise RealifyError(f"this program has no {SIGNATURE_KEY}: it needs {made_by}")
    return signature


def input_layouts(inputs: Layout | Sequence[Layout], count: int) -> Layout | tuple[Layout, ...]:
    """Check decompose's ``inputs`` layouts for ``count`` inputs and return them as a Boundary holds them."""
    if isinstance(inputs, str):
        return inputs
    layouts = list(inputs)
    if len(layouts) != count:
        raise ValueError(f"decompose: {len(layouts)} input layouts for {count} inputs")
    if "complex" in layouts and set(layouts) != {"complex"}:
        raise ValueError("decompose: the 'complex' input layout cannot be mixed with others")
    return tuple(layouts)


def is_complex(x: Any) -> bool:
    """Whether ``x`` is a complex tensor."""
    return isinstance(x, torch.Tensor) and x.dtype.is_complex


def input_aliases(outputs: list[Any], inputs: Sequence[Any]) -> list[tuple[int, bool] | None]:
    """Return, per output of the functionalizing trace, the input it shares memory with.

    That is ``(i, whole)`` where it shares memory with input ``i`` (a view of it; ``whole``
    where it is that input itself), else None. Each input has a functional storage of its own,
    so this names the input the program viewed even where the example inputs share memory.
    """
    storages = {StorageWeakRef(x.untyped_storage()): i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    aliases: list[tuple[int, bool] | None] = []
    for out in outputs:
        i = storages.get(StorageWeakRef(out.untyped_storage())) if isinstance(out, torch.Tensor) else None
        aliases.append(None if i is None else (i, out is inputs[i]))
    return aliases


def eager_layouts(program: Callable, aliases: list[tuple[int, bool] | None]
                   ) -> tuple[list[OutputView | None], list[tuple[int, ...] | None]]:
    """Return eager's memory layout of each user output.

    Per user output: how to take it from its input where eager's is a view of one, and
    eager's strides where they are static (for :func:`leave`), from the values ``program``'s
    graph recorded for its inputs and outputs (dynamo's ``example_value``, torch.export's
    ``val``: fake tensors with eager's strides, offsets and conj bits). The functional trace
    itself cannot tell: it turns every view into a copy.
    """
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
    # outputs that view other outputs (a slice of a spectrum the program also returns): taken
    # from them at each call, after they are laid out with eager's strides (``strides[k]``
    # stays: a caller that does not take views, export's adapter, lays the copy out so)
    for k, j in output_bases(outputs, [view is not None for view in views]).items():
        views[k] = OutputView.of(outputs[k], outputs[j], j, whole=outputs[k] is outputs[j], from_output=True)
    return views, strides


def _same_storage(value: torch.Tensor, base: Any) -> bool:
    """Whether the program's recorded output views its recorded input.

    The functional trace can alias where eager copies (a reshape of an expanded input is a
    copy in eager).
    """
    if not isinstance(base, torch.Tensor):
        return False
    try:
        return StorageWeakRef(value.untyped_storage()) == StorageWeakRef(base.untyped_storage())
    except (RuntimeError, NotImplementedError):  # no storage to compare: trust the trace
        return True


def boundary_example(x: Any, layout: Layout) -> Any:
    """Return the real input the graph is traced for, in the layout the caller passes at run time.

    That layout is :func:`split`'s: planes contiguous, pairs with the strides of
    ``view_as_real(x)``. The trace decides by its inputs' strides (a reshape of a complex value
    is a view of each part only where their strides allow one), so an interleaved input made
    contiguous here while a strided view of the pairs arrives at run time (``b.mT``) would
    fail, or worse.
    """
    if not is_complex(x) or layout == "complex":
        return x
    parts = pairs_of(x)
    if layout == "planar":
        return parts.movedim(-1, 0).contiguous()
    return parts


def enter(x: Any, complex_input: bool, layout: Layout) -> Any:
    """Return a boundary input as the value the functional graph expects."""
    if not complex_input:
        return x
    if layout == "planar":
        return ComplexTensor(x[0], x[1])
    if layout == "interleaved":
        return ComplexTensor.from_pairs(x)
    # one view of the pairs, its lazy conj/neg bits resolved first: autograd gives the parts'
    # gradients back as one complex gradient, exactly (through real and imag, an infinite
    # imaginary part's gradient becomes inf * 1j, whose real part is nan)
    return ComplexTensor.from_pairs(pairs_of(x))


def leave(x: Any, layout: Layout, stride: tuple[int, ...] | None = None) -> Any:
    """Return a graph output in the boundary layout.

    With ``stride`` (eager's, in the output's own elements), it is laid out with those strides
    where a real or ``"interleaved"`` output has others.
    """
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
    if free_unbacked_symbols(x.shape):
        # a size read from data (masked_select's): torch.complex's meta needs it as a number
        return torch.view_as_complex(torch.stack([x.re, x.im], dim=-1))
    return torch.complex(x.re, x.im)


def _restrided(x: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """Return ``x`` with strides ``stride``, where it has others.

    That is a copy into a buffer with those strides, which a compiler writes in place (Inductor
    keeps the strides of its graph's outputs).
    """
    if not needs_restride(x.shape, x.stride(), stride):
        return x
    return torch.empty_strided(x.shape, stride, dtype=x.dtype, device=x.device).copy_(x)


def resolve_lazy_bits(gm: fx.GraphModule, signature: Boundary) -> None:
    """Pass complex placeholders through resolve_conj/resolve_neg first.

    These are no-ops unless the caller passes a lazy conj/neg view, which the traced
    view_as_real could not read.
    """
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


def check_real_graph(gm: fx.GraphModule, signature: Boundary) -> None:
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
    if node.target in (aten.complex.default, aten.view_as_complex.default):
        return all(u.op == "output" or u.target is aten.copy_.default for u in node.users)
    if node.target is aten.copy_.default:
        return node.args[0].op == "placeholder"
    return False


# ---- at run time: the caller's tensors ------------------------------------------------------


def split(z: torch.Tensor, layout: Layout = "planar") -> torch.Tensor:
    """Split complex (*shape) into real (2, *shape) planar, in one copy pass (differentiable).

    For the "interleaved" layout, return its (re, im) pairs (*shape, 2), as a view where it can
    be one.

    ``stack`` of the real/imag views (which also resolves lazy conj/neg bits) is one pass;
    ``view_as_real(z).movedim(-1, 0).contiguous()`` is a transposing copy, several times
    slower (docs/benchmarks.md, "Measurements behind design choices").
    """
    if layout == "interleaved":
        return pairs_of(z)
    return torch.stack([z.real, z.imag])


def pairs_to_complex(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Turn real ``(*shape, 2)`` interleaved pairs into complex ``(*shape)`` (of ``dtype`` if given).

    The result is a view where ``x``'s strides allow one (the pairs adjacent, every other stride
    and the storage offset even), else a copy first. float16 pairs make complex32 (a copy:
    :func:`realify.runtime.dtypes.complex_of`).
    """
    if x.dtype == torch.float16:
        z = complex_of(x[..., 0], x[..., 1])
    else:
        # on every compiled call: view_as_complex checks the strides itself (the pairs adjacent,
        # the other strides and the offset even), faster than reading them here
        try:
            z = torch.view_as_complex(x)
        except RuntimeError:
            z = torch.view_as_complex(x.contiguous())
    return z if dtype is None or z.dtype == dtype else z.to(dtype)  # no .to where it is one


class RealCall:
    """Calls a real program with the caller's tensors, as :class:`Boundary` describes it.

    The one place where a real program meets complex tensors at run time (the compile backend's
    compiled graphs, ``realify.ComplexCallAdapter``'s exported programs).

    Per call: complex inputs into their layout (:func:`split`, or pairs of the boundary's
    dtype), the program, its complex outputs back to complex tensors (views of the pairs where
    their strides allow), the new values of inputs it writes copied into them (unless the
    program wrote through the caller's memory itself), outputs that are views of inputs taken
    from those inputs after the writes (so they share memory as eager's do), eager's
    strides where the program did not write them, and outputs that are views of other
    outputs taken from those. What can be decided once is decided here:
    small calls (the rotary embedding) pay the rest on every call.

    ``on_shared_write(args, written, other)``: where given, each call first looks for an input
    ``other`` that shares memory with an input ``written`` the program writes in place (the real
    program reads every input before it writes any, where eager's later reads would see the
    write) and returns what this returns instead: the backend runs dynamo's captured graph
    eagerly, export raises. ``appended`` are inputs passed after the caller's at every call
    (the same tensors each time); ``autocast_off`` runs the program with autocast off.
    ``traced_sharing``: groups of inputs the program was traced with sharing memory, which its
    trace reads as they are (the caller checks that a call shares them so): no write among them
    calls ``on_shared_write``.
    """

    def __init__(self, program: Callable, boundary: Boundary, *,
                 on_shared_write: Callable[[tuple, int, int], Any] | None = None,
                 appended: Sequence[torch.Tensor] = (), autocast_off: bool = False,
                 traced_sharing: Sequence[frozenset[int]] = ()):
        self.program = program
        self.boundary = b = boundary
        self.appended = tuple(appended)
        self.autocast_off = autocast_off
        self.enters = [(i, self._enter(i, dtype)) for i, dtype in enumerate(b.inputs) if dtype is not None]
        views = b.output_views or (None,) * b.num_user_outputs
        self.input_views = [(k, view) for k, view in enumerate(views) if view is not None and not view.from_output]
        self.output_views = [(k, view) for k, view in enumerate(views) if view is not None and view.from_output]
        self.leaves = [(k, dtype) for k, dtype in enumerate(b.outputs) if dtype is not None and views[k] is None]
        strides = () if b.eager_outputs else b.output_strides
        self.restrides = [(k, stride) for k, stride in enumerate(strides) if stride is not None and views[k] is None]
        spec = b.out_spec
        self.plain_tuple = spec is None or (spec.type is tuple and all(child.is_leaf() for child in spec.children()))
        self.regions = b.written_regions or (None,) * len(b.mutated_inputs)
        self.num_user_outputs = b.num_user_outputs
        layout = b.output_layout
        self.to_complex: Callable[[torch.Tensor, torch.dtype], torch.Tensor] = (
            pairs_to_complex if layout == "interleaved" else lambda x, dtype: to_complex(x, layout, dtype))
        # most programs write no input and return no view nor restrided output: one test per call
        # skips the loops that handle those
        self.after_outputs = bool(b.mutated_inputs or self.input_views or self.restrides or self.output_views)
        self.on_shared_write = on_shared_write if b.mutated_inputs else None
        self.traced_sharing = tuple(traced_sharing)
        if self.on_shared_write is not None:
            self.written = frozenset(b.mutated_inputs)
            first = len(b.inputs) - len(self.appended)
            self.fixed = storages(self.appended, range(first, first + len(self.appended)))
            # appended tensors are the same at every call: whether they overlap one another
            self.fixed_overlap = overlapping_write([None] * first + list(self.appended), self.written)

    def _enter(self, i: int, dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
        layout, b = self.boundary.layout_of(i), self.boundary
        if layout != "interleaved":
            return (lambda z: z) if layout == "complex" else split
        pair_dtype = b.real_dtype(dtype)
        if pair_dtype == real_dtype(dtype) and not b.contiguous_pairs:
            return pairs_of if dtype == torch.complex32 else pairs_view
        return lambda z: pairs_of(z).to(pair_dtype).contiguous()

    def __call__(self, *args: Any) -> Any:
        """Run the program on the caller's flat inputs and return its user outputs, in the program's structure."""
        if self.on_shared_write is not None:
            overlap = self.fixed_overlap or overlapping_write(args, self.written, self.fixed, self.traced_sharing)
            if overlap is not None:
                return self.on_shared_write(args, *overlap)
        if self.appended:
            args = (*args, *self.appended)
        flat = list(args)
        for i, enter_layout in self.enters:
            flat[i] = enter_layout(flat[i])
        if self.autocast_off:
            with torch._C._DisableAutocast():
                outs = self.program(*flat)
        else:
            outs = self.program(*flat)
        n = self.num_user_outputs
        user = list(outs[:n])
        to_complex = self.to_complex
        for k, dtype in self.leaves:
            user[k] = to_complex(user[k], dtype)
        if self.after_outputs:
            self._after_outputs(args, outs, user)
        return tuple(user) if self.plain_tuple else tree_unflatten(user, self.boundary.out_spec)

    def _after_outputs(self, args: tuple, outs: Sequence[Any], user: list[Any]) -> None:
        """Write the inputs the program writes, then take the outputs that are views and lay out the rest."""
        b, n = self.boundary, self.num_user_outputs
        for i, new, region in zip(b.mutated_inputs, outs[n:], self.regions):
            with torch.no_grad() if i in b.hidden_writes else contextlib.nullcontext():
                _write(args[i] if region is None else region_of(args[i], region), new, b.output_layout)
        for k, view in self.input_views:  # after the writes, as eager's views see them
            computed, user[k] = user[k], view.make(args[view.input])
            if isinstance(computed, torch.Tensor) and not computed.requires_grad and user[k].requires_grad:
                # the graph cut the view's gradient (a detach traced where no input required
                # grad: an exported program's), as eager's view carries none
                user[k] = user[k].detach()
        for k, stride in self.restrides:
            if isinstance(user[k], torch.Tensor):
                user[k] = _restrided(user[k], stride)
        for k, view in self.output_views:  # from their bases, laid out as eager's by now
            user[k] = view.make(user[view.input])


def to_complex(x: torch.Tensor, layout: Layout, dtype: torch.dtype) -> torch.Tensor:
    """Return a complex output of a real program, from ``layout``, as a ``dtype`` tensor."""
    if layout == "planar":
        return complex_of(x[0], x[1]).to(dtype)
    return x if layout == "complex" else pairs_to_complex(x, dtype)


def _write(target: torch.Tensor, new: torch.Tensor, layout: Layout) -> None:
    """Write the program's new value of an input it writes in place into the caller's tensor.

    Nothing to do where the program wrote through the caller's memory itself (an exported
    program writes the pairs it was given, a view of the input where the input is contiguous).
    """
    if _same_address(new, target) and target.dtype != torch.complex32:
        same = pairs_of(target) if target.dtype.is_complex else target
        if same.dtype == new.dtype and same.shape == new.shape and same.stride() == new.stride():
            return
    target.copy_(to_complex(new, layout, target.dtype) if target.dtype.is_complex else new)


def region_of(x: torch.Tensor, region: Region) -> torch.Tensor:
    """Return the view of ``x`` that ``region`` names."""
    for dim, start, end, step in region:
        x = x[(slice(None),) * dim + (slice(start, end, step),)]
    return x


def _same_address(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` start at one address.

    False for tensors without memory (fake tensors: DDPOptimizer runs each compiled piece on
    fake inputs to trace the next).
    """
    if isinstance(a, FakeTensor) or isinstance(b, FakeTensor):
        return False
    try:
        return a.data_ptr() == b.data_ptr()
    except RuntimeError:  # another tensor without memory (a functional tensor)
        return False
