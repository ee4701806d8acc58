"""Memory shared between a program's inputs and outputs, at the boundary of a real graph.

A real graph reads every input when it starts and hands the new values of the inputs it writes
back as outputs, which the caller copies in after it ran. Two things about eager's memory are
not in such a graph, and this module is what the callers (the compile backend's runtime, the
export adapter) use for them:

- inputs that share memory, one of them written in place: eager's later reads of the other
  see the write, the graph's do not. :func:`overlapping_write` finds such a pair at call time;
- outputs that are views of inputs, or of other outputs: eager returns a view (a later write
  to one shows in the other), the graph a new tensor. :class:`OutputView` records the view's
  geometry relative to its input (or output) once, at trace time, and :meth:`OutputView.make`
  takes it again at each call; :func:`output_bases` finds the outputs another output views.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch._subclasses.fake_tensor import FakeTensor
from torch.export.graph_signature import InputKind, TensorArgument
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef

from .dtypes import COMPLEX_TO_REAL


def overlapping_write(values: Sequence[Any], written: Collection[int], fixed: dict[int, list] | None = None,
                      together: Collection[frozenset[int]] = ()) -> tuple[int, int] | None:
    """A pair ``(w, j)`` of positions such that tensor ``w``, which the program writes in
    place, shares memory with tensor ``j``; None where there is none. ``values`` are the
    tensors passed at this call (at positions 0, 1, ...), ``fixed`` those that are the same
    tensors at every call (graph attributes: :func:`storages`, taken once).

    Tensors on different storages never share memory, so the common case costs one storage
    look-up per tensor; only tensors on one storage compare byte ranges. The ranges are spans
    (first to last byte), so two strided views that interleave without sharing an element
    (``z[::2]``, ``z[1::2]``) count as sharing: the caller's correct path then runs where it
    was not needed, never the other way round. ``together``: groups of positions whose
    tensors the program was traced sharing memory (it is right for them); pairs within one
    group are not reported."""
    seen = set()
    for x in values:
        if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):  # a fake tensor has no memory
            try:
                key = x.untyped_storage().data_ptr()
            except (RuntimeError, NotImplementedError):  # a wrapper subclass has no storage of its own
                continue
            if key in seen or (fixed and key in fixed):
                return _shared_write(values, written, fixed, together)
            seen.add(key)
    return None


def _shared_write(values: Sequence[Any], written: Collection[int], fixed: dict[int, list] | None,
                  together: Collection[frozenset[int]]) -> tuple[int, int] | None:
    """:func:`overlapping_write` where some tensors share a storage: their byte spans decide."""
    groups = storages(values, range(len(values)))
    for key, group in groups.items():
        if fixed and key in fixed:
            group = group + fixed[key]
        for w, a in group:
            if w in written:
                for j, b in group:
                    if j != w and _spans_meet(a, b) and not any(w in g and j in g for g in together):
                        return w, j
    return None


def storages(values: Sequence[Any], positions: Sequence[int]) -> dict[int, list]:
    """The tensors of ``values`` grouped by storage, each as ``(position, tensor)``, for
    :func:`overlapping_write`'s ``fixed``; ``positions[k]`` is the position of ``values[k]``."""
    groups: dict[int, list] = {}
    for position, x in zip(positions, values):
        key = _storage_key(x) if isinstance(x, torch.Tensor) else None
        if key is not None:
            groups.setdefault(key, []).append((position, x))
    return groups


def _storage_key(x: torch.Tensor) -> int | None:
    try:
        ptr = x.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a wrapper subclass has no storage of its own
        return None
    return ptr or None  # an empty storage holds nothing to share


def _spans_meet(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    a_start, a_end = _span(a)
    b_start, b_end = _span(b)
    return a_start < b_end and b_start < a_end


def _span(x: torch.Tensor) -> tuple[int, int]:
    """The bytes from ``x``'s first element to its last, as ``[start, end)``; conj/neg views
    and real views of complex tensors (``view_as_real``) measure their own elements."""
    if x.numel() == 0:
        return 0, 0
    return _bytes_from(x.data_ptr(), x)


def _bytes_from(start: int, x: torch.Tensor) -> tuple[int, int]:
    """``[start, end)``: the bytes of ``x``'s elements, its first element at byte ``start``."""
    last = sum((size - 1) * stride for size, stride in zip(x.shape, x.stride()))
    return start, start + (last + 1) * x.element_size()


@dataclasses.dataclass(frozen=True)
class OutputView:
    """An output that is a view of input ``input``, taken again from that input at each call;
    with ``from_output``, a view of user output ``input`` (taken from it once it is laid out
    with eager's strides: :func:`output_bases`).

    ``dtype``, ``size`` and ``stride`` are the view's, ``offset`` its storage offset (in its
    own elements) past the input's, ``conj`` whether its conjugate bit differs from the input's.
    ``whole``: the output is the input itself (the same tensor object, as in eager). A view of
    a complex input may be real (``view_as_real(z)``) and one of a real input complex.
    ``detached``: eager's view carries no gradient where its base does (``z.detach()``, a view
    taken under ``no_grad``)."""

    input: int
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    conj: bool = False
    whole: bool = False
    from_output: bool = False
    detached: bool = False

    @staticmethod
    def of(output: torch.Tensor, base: torch.Tensor, input: int, whole: bool = False,
           from_output: bool = False) -> OutputView | None:
        """How to take ``output`` from ``base`` (fake values with eager's geometry: the
        program's own metadata), or None where it cannot be taken again at each call: sizes or
        offsets that are symbolic, a dtype the input cannot be viewed as, a different neg bit."""
        geometry = (*output.shape, *output.stride(), output.storage_offset(), base.storage_offset())
        if not all(isinstance(v, int) for v in geometry) or output.is_neg() != base.is_neg():
            return None
        try:
            as_dtype = _as_dtype(base, output.dtype)
        except RuntimeError:
            return None
        if as_dtype is None:
            return None
        return OutputView(input, output.dtype, tuple(output.shape), tuple(output.stride()),
                          output.storage_offset() - as_dtype.storage_offset(), output.is_conj() != base.is_conj(),
                          whole=whole and output.dtype == base.dtype and output.is_conj() == base.is_conj(),
                          from_output=from_output, detached=base.requires_grad and not output.requires_grad)

    def make(self, base: torch.Tensor) -> torch.Tensor:
        if self.whole:
            return base
        source = _as_dtype(base, self.dtype)
        view = source.as_strided(self.size, self.stride, source.storage_offset() + self.offset)
        view = view.conj() if self.conj else view
        return view.detach() if self.detached else view


def output_bases(outputs: Sequence[Any], taken: Sequence[bool]) -> dict[int, int]:
    """Outputs that eager returns as views of another output: ``{k: j}`` where output ``k``
    views output ``j`` (fake values with eager's geometry; ``taken[k]``: output ``k`` is
    already taken from an input, and is no base or view here).

    ``j`` must be laid out densely (every element of its span its own, as a fresh tensor's)
    with static geometry, and ``k``'s span must lie in ``j``'s: then every element ``k`` reads
    is an element of ``j``, at the same place relative to ``j``'s start in the graph's output
    laid out with eager's strides, and ``k`` taken from it shares memory exactly as eager's
    does. Outputs that view an intermediate the program does not return, or a strided base,
    stay copies."""
    groups: dict[Any, list[int]] = {}
    for k, value in enumerate(outputs):
        if isinstance(value, torch.Tensor) and not taken[k] and _static(value) and value.numel():
            try:
                key = StorageWeakRef(value.untyped_storage())
            except (RuntimeError, NotImplementedError):
                continue
            groups.setdefault(key, []).append(k)
    bases: dict[int, int] = {}
    for group in groups.values():
        dense = [j for j in group if is_non_overlapping_and_dense_or_false(outputs[j])]
        if len(group) < 2 or not dense:
            continue
        # of equal size, the output that carries a gradient is the base: `(z.detach(), z)`
        # taken the other way round would give z the detached one's (none)
        j = max(dense, key=lambda i: (outputs[i].numel(), outputs[i].requires_grad))
        start, end = _storage_span(outputs[j])
        for k in group:
            k_start, k_end = _storage_span(outputs[k])
            # a view that carries a gradient its base does not stays a copy
            carried = not outputs[k].requires_grad or outputs[j].requires_grad
            if k != j and start <= k_start and k_end <= end and carried:
                bases[k] = j
    return bases


def _static(x: torch.Tensor) -> bool:
    return all(isinstance(v, int) for v in (*x.shape, *x.stride(), x.storage_offset()))


def _storage_span(x: torch.Tensor) -> tuple[int, int]:
    """The bytes of its storage from ``x``'s first element to its last, as ``[start, end)``
    (from its geometry alone: fake tensors have no addresses)."""
    return _bytes_from(x.storage_offset() * x.element_size(), x)


def _as_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """A view of ``x``'s memory with elements of ``dtype`` (any shape: :meth:`OutputView.make`
    sets its own), or None."""
    if x.dtype == dtype:
        return x
    if COMPLEX_TO_REAL.get(x.dtype) == dtype and not x.is_conj():
        return torch.view_as_real(x)
    if COMPLEX_TO_REAL.get(dtype) == x.dtype and x.dim() and x.shape[-1] == 2:
        return torch.view_as_complex(x)
    return None


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def needs_restride(shape: Sequence[int], ours: Sequence[int], theirs: Sequence[int]) -> bool:
    """Whether a value of ``shape`` laid out with strides ``ours`` is to be written again with
    eager's ``theirs``: they differ (in a dim of size other than 1, where a stride means
    nothing), and ``theirs`` are a layout one can write to. Strides under which elements
    overlap (an expanded output, stride 0) are not: such an output keeps the layout it was
    computed in."""
    if all(mine == stride for size, mine, stride in zip(shape, ours, theirs) if size != 1):
        return False
    reach = 1  # elements spanned by the dims of smaller stride
    dims = [(size, stride) for size, stride in zip(shape, theirs) if size != 1]
    for size, stride in sorted(dims, key=lambda d: d[1]):
        if size == 0:
            return True
        if stride < reach:
            return False
        reach += (size - 1) * stride
    return True


def sharing_at_export(program: torch.export.ExportedProgram) -> list[list[int]]:
    """The inputs ``program`` was exported with as one tensor: groups of flat user input
    positions whose example tensors were one (a tensor passed twice), of which the trace reads
    only one placeholder.

    torch.export's trace reads the others through that one, so the program is right only for
    calls that pass one tensor there again. (Inputs that merely share memory, such as a tensor
    and its ``view_as_real``, are traced as separate tensors: a call with separate ones is
    right, and one that shares memory with a written input is refused at the call.)
    """
    nodes = {node.name: node for node in program.graph.find_nodes(op="placeholder")}
    specs = [spec for spec in program.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]
    groups: list[list[tuple[int, torch.fx.Node]]] = []
    for position, spec in enumerate(specs):
        node = nodes[spec.arg.name] if isinstance(spec.arg, TensorArgument) else None
        value = node.meta.get("val") if node is not None else None
        if not isinstance(value, torch.Tensor) or statically_known_true(value.numel() == 0):
            continue
        group = next((g for g in groups if one_tensor(g[0][1].meta["val"], value)), None)
        if group is None:
            groups.append([(position, node)])
        else:
            group.append((position, node))
    return [[position for position, _ in group] for group in groups
            if len(group) > 1 and sum(bool(node.users) for _, node in group) <= 1]


def one_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` are one tensor: one storage, offset, shape, strides, dtype and
    conjugate bit (an exported program's example values may have symbolic sizes: equal only
    where known to be)."""
    return (a.untyped_storage()._cdata == b.untyped_storage()._cdata and a.dtype == b.dtype
            and a.is_conj() == b.is_conj()
            and _known_equal((a.storage_offset(), *a.shape, *a.stride()), (b.storage_offset(), *b.shape, *b.stride())))


def _known_equal(x: Sequence[Any], y: Sequence[Any]) -> bool:
    return len(x) == len(y) and all(statically_known_true(p == q) for p, q in zip(x, y))
