"""The export front end: a complex program as a real-only ``torch.export.ExportedProgram``.

Three steps:

1. ``torch.export.export`` the program as written (a function is wrapped in a module first):
   an aten graph whose parameters, buffers and constants are lifted to inputs, with symbolic
   sizes where ``dynamic_shapes`` asked for them;
2. :func:`realify.decompose` that graph with interleaved boundaries: every complex input
   (user input, parameter, buffer, constant) becomes a real ``(*shape, 2)`` tensor and every
   complex output is produced as one;
3. ``torch.export.export`` the real graph again, inside a module that holds the real state
   under the original names, so the result is an ordinary ExportedProgram: ``ep.module()``,
   ``ep.state_dict``, ``torch.onnx.export(ep)``, ``torch.export.save`` all work on it.

Which inputs and outputs were complex is recorded as a :class:`~realify.Boundary` in
``ep.graph_module.meta["realify_signature"]``, and as versioned JSON text (:func:`describe`) in
``ep.graph_module.meta["custom"]["realify.boundary"]``, which torch.export serializes: a program
saved with ``torch.export.save`` and loaded again, in any process, keeps it, and
:func:`aoti_compile_and_package` copies it into an AOTInductor package's metadata.
:class:`ComplexCallAdapter` reads either to give back a module that takes and returns complex
tensors.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch.export import Dim, ExportedProgram, ShapesCollection
from torch.export._tree_utils import reorder_kwargs
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils._pytree import (
    tree_flatten,
    tree_leaves,
    tree_unflatten,
)
from torch.utils._sympy.numbers import int_oo

from .adapter import ArgumentName
from .engine.decompose import EXPORT_FORMS, decompose
from .engine.dynamo_graph import source_line
from .engine.size_conditions import SizeConditions
from .errors import ComplexLeakError, MissingRuleError, RealifyError
from .passes.cleanup import copies_to_views
from .rules import check_contract, contract_checked_before
from .runtime.aliasing import OutputView
from .runtime.boundary import SIGNATURE_KEY, Boundary, is_complex, signature_of
from .runtime.dtypes import pairs_of
from .saved_programs import DESCRIPTION_KEY, describe

log = logging.getLogger("realify")
aten = torch.ops.aten


_EXPORT_ADVICE = (
    "an exported program cannot call back into eager PyTorch, so every complex "
    "op needs a rule. Compute this op outside the exported program (on its inputs before the "
    "call, or on its outputs after), or register a rule with realify.rules.register(...) "
    "(see realify's docs page 'Writing a rule')."
)


def export(
    program: torch.nn.Module | Callable,
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes: Any = None,
    truncate_double: bool = False,
    strict: bool = False,
) -> ExportedProgram:
    """Export ``program`` as a real-only ExportedProgram.

    Complex inputs, parameters, buffers and outputs become real ``(*shape, 2)`` tensors in the
    ``torch.view_as_real`` layout: float32 for complex64, float64 for complex128 (float32 with
    ``truncate_double=True``). Real values are untouched; only dtypes decide, so a real tensor
    whose last dim is 2 stays as it is. Parameters and buffers keep their state_dict names, so
    complex weights load as ``torch.view_as_real(p)``.

    Parameters
    ----------
    program : torch.nn.Module or callable
        The complex program. A plain function is wrapped in a module first, keeping its
        signature, so ``dynamic_shapes`` may name its arguments.
    args : sequence
        Example positional arguments, as for ``torch.export.export``: complex tensors where the
        program takes complex values (complex64 or complex128).
    kwargs : dict, optional
        Example keyword arguments.
    dynamic_shapes : optional
        The dynamic sizes, written for the complex program as for ``torch.export.export``
        (``Dim`` objects by argument name or position). The trailing dim of 2 of each real pair
        tensor is always static.
    truncate_double : bool, default False
        Carry complex128 values as float32 pairs (for runtimes without float64) rather than
        float64 ones.
    strict : bool, default False
        Passed to the first ``torch.export.export``: dynamo captures the program when True.

    Returns
    -------
    torch.export.ExportedProgram
        A real-only program: call it with interleaved tensors (``ep.module()(*real_args)``),
        or wrap it in :class:`ComplexCallAdapter` to call it with the original complex
        arguments. It carries its :class:`~realify.Boundary` (which inputs and outputs were
        complex), also as JSON that ``torch.export.save`` keeps.

    Raises
    ------
    MissingRuleError
        A complex op of the program has no rule: an exported program cannot call back into
        eager PyTorch, so it has no eager islands.
    RealifyError
        A complex input of a dtype other than complex64 or complex128 (complex32); a program
        with custom-object or effect-token inputs, or with training outputs (gradients); a
        program that writes in place to a parameter or constant (inputs and buffers only); or
        arguments that are not tensors or Python numbers.
    torch._dynamo.exc.UserError
        A constraint violation: realify's real program is right only under conditions on a
        dynamic size that the requested ranges do not ensure (export with that dim static).
    ComplexLeakError
        A complex value remained in the real program (a bug in a rule).

    See Also
    --------
    ComplexCallAdapter : call the exported program with complex tensors.
    realify.onnx.to_onnx : the same program as an ONNX model.

    Notes
    -----
    Three steps: ``torch.export.export`` the program as written (parameters, buffers and
    constants lifted to inputs); :func:`realify.decompose` that graph with interleaved
    boundaries; then ``torch.export.export`` the real graph again inside a module that holds
    the real state under the original names. The result is an ordinary ExportedProgram:
    ``ep.module()``, ``ep.state_dict``, ``torch.onnx.export(ep)`` and ``torch.export.save``
    all work on it. Calling ``ep.module()`` with a complex tensor, or a real one that is not a
    ``(..., 2)`` pair of the right dtype, raises a :class:`~realify.RealifyError` naming the
    argument.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def f(z):
    ...     return z * z.conj() + z
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> ep = realify.export(f, (z,))
    >>> pairs = torch.view_as_real(z)            # the complex64 input as float32 (re, im) pairs
    >>> out = ep.module()(pairs)
    >>> out
    tensor([[ 6.,  2.],
            [13., -1.]])
    >>> torch.view_as_complex(out)
    tensor([ 6.+2.j, 13.-1.j])

    Complex parameters become real ``(..., 2)`` state under the same names:

    >>> linear = torch.nn.Linear(2, 1, bias=False, dtype=torch.complex64)
    >>> with torch.no_grad():
    ...     _ = linear.weight.copy_(torch.tensor([[1j, 2]]))
    >>> ep = realify.export(linear, (z,))
    >>> ep.state_dict["weight"].shape, ep.state_dict["weight"].dtype
    (torch.Size([1, 2, 2]), torch.float32)
    >>> torch.allclose(realify.ComplexCallAdapter(ep)(z), linear(z))   # complex in, complex out
    True
    """
    args = tuple(args)
    for x in tree_leaves((args, kwargs)):
        if is_complex(x):
            _real_dtype(x.dtype, truncate_double)  # raises for complex32
    module = program if isinstance(program, torch.nn.Module) else _FunctionModule(program)
    complex_ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
    _check_supported(complex_ep)
    kwargs = reorder_kwargs(dict(kwargs or {}), complex_ep.call_spec.in_spec)

    gm = complex_ep.graph_module
    _drop_metadata_asserts(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    differentiable = {spec.arg.name for spec in complex_ep.graph_signature.input_specs
                      if spec.kind in (InputKind.USER_INPUT, InputKind.PARAMETER)}
    trace_inputs = [_trace_input(n.meta.get("val"), truncate_double, n.name in differentiable) for n in placeholders]
    check_contract(gm, source_line)
    try:
        # standard ops only (no pair_products): no realify::cmul_pairs, which other runtimes would not know
        with SizeConditions(trace_inputs) as conditions, contract_checked_before():
            real_gm = decompose(gm, trace_inputs, inputs="interleaved", outputs="interleaved",
                                decompositions=EXPORT_FORMS)
    except MissingRuleError as err:
        raise _for_export(err) from None
    conditions.refuse(complex_ep, _constraint_violation)

    flat_args, in_spec = tree_flatten((args, kwargs))
    real_args, real_kwargs = tree_unflatten([_interleave(x, truncate_double) for x in flat_args], in_spec)
    wiring = _Wiring(complex_ep, signature_of(real_gm).mutated_inputs)
    copies_to_views(real_gm, keep_copies=wiring.writes)
    wrapper = _RealProgram(real_gm, wiring, _RealState(complex_ep, truncate_double), _forward_signature(module))
    real_ep = _export_real(wrapper, placeholders, complex_ep, real_args, real_kwargs)
    check_real_program(real_ep)
    signature = Boundary(
        inputs=tuple(x.dtype if is_complex(x) else None for x in flat_args),
        outputs=_output_dtypes(complex_ep),
        mutated_inputs=wiring.mutated_user_inputs,
        out_spec=complex_ep.call_spec.out_spec,
        input_layout="interleaved",
        output_layout="interleaved",
        pair_dtypes={torch.complex128: torch.float32} if truncate_double else {},
        contiguous_pairs=True,
        **_eager_layouts(signature_of(real_gm), wiring),
    )
    _attach(real_ep, signature)
    log.debug("export: %d complex input(s), %d complex output(s)",
              sum(d is not None for d in signature.inputs), sum(d is not None for d in signature.outputs))
    return real_ep


def _attach(real_ep: ExportedProgram, signature: Boundary) -> None:
    real_ep.graph_module.meta[SIGNATURE_KEY] = signature
    # the same, as versioned JSON where torch.export.save keeps it: the program stays callable with complex tensors
    real_ep.graph_module.meta.setdefault("custom", {})[DESCRIPTION_KEY] = describe(signature)
    _check_inputs_of_module(real_ep)


def _check_real_call(sig: Boundary, args: tuple, kwargs: dict) -> None:
    """Check the inputs of ``ep.module()`` for a program made by :func:`export` (a forward pre-hook).

    Its complex inputs are real ``(..., 2)`` tensors, and a complex tensor passed there
    otherwise fails in the program's shape guards with ``IndexError: tuple index out of
    range``, a wrong real dtype in its real ops.
    """
    flat = tree_leaves((args, kwargs))
    if len(flat) != len(sig.inputs):
        return  # torch.export's own check names the mismatch
    for i, (x, dtype) in enumerate(zip(flat, sig.inputs)):
        name = ArgumentName(args, kwargs, i)
        if dtype is None or not isinstance(x, torch.Tensor):
            continue
        real = sig.real_dtype(dtype)
        if x.dtype.is_complex:
            raise RealifyError(
                f"{name} is a {x.dtype} tensor, but this exported program is real-only: it takes each "
                f"{dtype} input as a real (..., 2) {real} tensor. Pass torch.view_as_real({name}) (a free "
                f"view{f', then .to({real})' if real != _real_dtype(x.dtype, False) else ''}), or call "
                f"realify.ComplexCallAdapter(ep) with the complex tensors")
        if x.dtype != real or x.dim() == 0 or x.shape[-1] != 2:
            raise RealifyError(
                f"{name} is a {x.dtype} tensor of shape {tuple(x.shape)}, but the program takes the {dtype} "
                f"input there as a real (..., 2) {real} tensor (torch.view_as_real of a {dtype} tensor)")


def _check_inputs_of_module(ep: ExportedProgram) -> None:
    """Make ``ep.module()`` check its inputs (:func:`_check_real_call`).

    Each module it returns gets a forward pre-hook, run before the program's own guards.
    """
    make_module = ep.module

    @functools.wraps(make_module)
    def module(*args: Any, **kwargs: Any) -> torch.fx.GraphModule:
        gm = make_module(*args, **kwargs)
        sig = gm.meta.get(SIGNATURE_KEY) or ep.graph_module.meta.get(SIGNATURE_KEY)
        if sig is not None:
            gm.register_forward_pre_hook(lambda _, a, k: _check_real_call(sig, a, k), with_kwargs=True, prepend=True)
        return gm

    # the instance's module() shadows the class's method on purpose: every module it makes checks its inputs
    ep.module = module  # type: ignore[method-assign]


def check_real_program(ep: ExportedProgram) -> None:
    """Raise :class:`~realify.ComplexLeakError` where a complex dtype remains in ``ep``.

    The error names each node, state entry or constant that still holds one.
    """
    leaks = complex_values_in(ep)
    if leaks:
        raise ComplexLeakError("complex values remain in the exported program:\n  " + "\n  ".join(leaks[:10]))


def complex_values_in(ep: ExportedProgram) -> list[str]:
    """Return what in ``ep`` holds a complex value.

    These are the nodes (of the program's graph and the graphs nested in it) that hold a
    complex value, take a complex number or name a complex dtype, and the state entries and
    constants of a complex dtype, each described on a line.
    """
    found = []
    for module in ep.graph_module.modules():
        for node in module.graph.nodes if isinstance(module, fx.GraphModule) else ():
            arguments = tree_leaves((node.args, node.kwargs))
            if (any(is_complex(v) for v in tree_leaves(node.meta.get("val")))
                    or any(isinstance(a, complex) or (isinstance(a, torch.dtype) and a.is_complex)
                           for a in arguments)):
                found.append(f"{node.op} {node.name}: {node.format_node()}")
    for name, value in list(ep.state_dict.items()) + list(ep.constants.items()):
        if is_complex(value):
            found.append(f"state {name}: {value.dtype}")
    return found


# ---- step 1: the complex program ------------------------------------------------------------


class _FunctionModule(torch.nn.Module):
    """A plain function as the module torch.export needs.

    ``forward`` keeps its signature (dynamic_shapes may name its arguments).
    """

    def __init__(self, fn: Callable):
        super().__init__()
        try:
            inspect.signature(fn)
            self.forward = fn
            # torch.export (non-strict) records the stack trace of frames named "forward" only:
            # without this, a plain function's nodes have none, and MissingRuleError could not
            # name the user's line (the anchor set is the one torch.fx.traceback.annotate_fn
            # adds to; it affects nothing but the recorded stack traces)
            register_anchor = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
            if register_anchor is not None:
                register_anchor(fn)
        except (TypeError, ValueError):  # a builtin such as torch.matmul: no signature to keep
            self.forward = lambda *args, **kwargs: fn(*args, **kwargs)


_STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def _check_supported(ep: ExportedProgram) -> None:
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in (*_STATE_KINDS, InputKind.USER_INPUT):
            raise RealifyError(
                f"realify.export does not support {spec.kind.name} inputs ({spec.arg}) yet: export a "
                f"program without custom objects or effect tokens")
    for spec in ep.graph_signature.output_specs:
        if spec.kind not in (OutputKind.USER_OUTPUT, OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            raise RealifyError(
                f"realify.export does not support {spec.kind.name} outputs ({spec.arg}): export the "
                f"forward program (inference), not a training step")


def _drop_metadata_asserts(gm: fx.GraphModule) -> None:
    """Remove torch.export's ``_assert_tensor_metadata`` checks (inserted before ``.to(...)``).

    They assert the complex dtype the trace already saw, and the real graph has other dtypes.
    """
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten._assert_tensor_metadata.default and not node.users:
            gm.graph.erase_node(node)
    gm.recompile()


def _real_dtype(dtype: torch.dtype, truncate_double: bool) -> torch.dtype:
    if dtype == torch.complex128:
        return torch.float32 if truncate_double else torch.float64
    if dtype == torch.complex64:
        return torch.float32
    raise RealifyError(f"realify.export supports complex64 and complex128 values, got {dtype}: "
                       f"cast it to complex64 first")


def _narrow(dtype: torch.dtype, truncate_double: bool) -> torch.dtype:
    return torch.complex64 if truncate_double and dtype == torch.complex128 else dtype


def _trace_input(value: Any, truncate_double: bool, differentiable: bool) -> Any:
    """Return a placeholder's fake value as decompose traces it.

    Complex128 is narrowed if asked, and the value made contiguous, as the real program's
    interleaved inputs are (:func:`_interleave`); the real graph is traced for its inputs'
    strides (a reshape is a view only where they allow it). A ``differentiable`` input (a user
    input or a parameter) of a floating or complex dtype is traced as requiring grad whatever
    the example's flag: the program may be differentiated at any call, so what a ``no_grad``
    region computes from it must be cut from the gradient path in the real program, as plain
    torch.export keeps the region.
    """
    if not isinstance(value, torch._subclasses.FakeTensor):
        return value
    with value.fake_mode:
        if is_complex(value):
            value = value.to(_narrow(value.dtype, truncate_double)).contiguous()
        if differentiable and (value.dtype.is_floating_point or value.dtype.is_complex) and not value.requires_grad:
            value = value.detach().requires_grad_()
        return value


def _constraint_violation(conditions: str) -> Exception:
    """Return torch.export's constraint violation for conditions on dynamic sizes.

    These are the conditions realify's real program holds only under
    (:class:`~realify.engine.size_conditions.SizeConditions`).
    """
    from torch._dynamo.exc import UserError, UserErrorType

    return UserError(
        UserErrorType.CONSTRAINT_VIOLATION,
        "Constraints violated by realify's real program: it is right only where these conditions on dynamic "
        f"sizes hold, which the requested ranges do not ensure:\n{conditions}\nA rule realify has for an op of the "
        "program needs the size as a number. Export with those dims static (Dim.STATIC, or the example's size); "
        "the 'Limitations' section of realify's docs page 'Where values differ, and limits' lists the ops "
        "known to need it.")


def _for_export(err: MissingRuleError) -> MissingRuleError:
    """Return the same error, with advice that fits export (no eager islands, no strict=False)."""
    return MissingRuleError(err.op, where=err.where, detail=err.detail, advice=_EXPORT_ADVICE)


# ---- step 3: the real program ---------------------------------------------------------------


def _interleave(x: Any, truncate_double: bool) -> Any:
    if not is_complex(x):
        return x
    return pairs_of(x).to(_real_dtype(x.dtype, truncate_double)).contiguous()


class _RealState:
    """The complex program's parameters, buffers and constants as real tensors, by name.

    Complex state is copied into its own ``(..., 2)`` tensors (the exported program must not
    write through to the original module's complex buffers); real state is shared with the
    original module, as torch.export shares it.
    """

    def __init__(self, ep: ExportedProgram, truncate_double: bool):
        self.parameters: dict[str, torch.nn.Parameter] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.persistent: dict[str, bool] = {}
        self.constants: dict[str, torch.Tensor] = {}

        def real(x: torch.Tensor) -> torch.Tensor:
            return _interleave(x.detach(), truncate_double).clone() if is_complex(x) else x

        for spec in ep.graph_signature.input_specs:
            if spec.kind is InputKind.PARAMETER:
                p = ep.state_dict[spec.target]
                self.parameters[spec.target] = (torch.nn.Parameter(real(p), requires_grad=p.requires_grad)
                                                if is_complex(p) else p)
            elif spec.kind is InputKind.BUFFER:
                value = ep.state_dict[spec.target] if spec.persistent else ep.constants[spec.target]
                self.buffers[spec.target] = real(value)
                self.persistent[spec.target] = bool(spec.persistent)
            elif spec.kind is InputKind.CONSTANT_TENSOR:
                self.constants[spec.target] = real(ep.constants[spec.target])


def _owner(root: torch.nn.Module, fqn: str) -> tuple[torch.nn.Module, str]:
    """Return the submodule that holds ``fqn`` (created as an empty module where missing)."""
    *path, name = fqn.split(".")
    module = root
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    return module, name


class _Wiring:
    """Where each input of the real graph comes from, and where each output goes.

    Inputs follow the complex program's placeholders: a user input (by its flat position in
    ``(args, kwargs)``) or a named parameter/buffer/constant. Outputs: the program's outputs
    (user outputs, and mutations torch.export already made functional), then the new values
    of the inputs that decompose found written in place.
    """

    def __init__(self, ep: ExportedProgram, mutated_placeholders: Sequence[int]):
        specs = list(ep.graph_signature.input_specs)
        user = [s.arg.name for s in specs if s.kind is InputKind.USER_INPUT]
        if len(user) != ep.call_spec.in_spec.num_leaves:
            raise RealifyError(
                f"realify.export expects one graph input per leaf of (args, kwargs): the program has "
                f"{len(user)} for {ep.call_spec.in_spec.num_leaves} leaves; pass only tensors and "
                f"Python numbers as arguments")
        self.user_index = {name: i for i, name in enumerate(user)}
        # ("user", flat index) or (kind, target) per placeholder
        self.sources: list[tuple] = [("user", self.user_index[s.arg.name]) if s.kind is InputKind.USER_INPUT
                                     else (s.kind, s.target) for s in specs]
        self.outputs = list(ep.graph_signature.output_specs)
        self.out_spec = ep.call_spec.out_spec
        self.written: list[tuple] = []  # per extra output: the source it is written to
        for i in mutated_placeholders:
            source = self.sources[i]
            if source[0] not in ("user", InputKind.BUFFER):
                raise RealifyError(
                    f"the program writes in place to {source[0].name.lower()} {source[1]}; realify.export "
                    f"supports in-place writes to inputs and buffers only: compute a new tensor instead")
            self.written.append(source)
        self.writes = bool(self.written) or any(s.kind is not OutputKind.USER_OUTPUT for s in self.outputs)
        self.mutated_user_inputs = tuple(sorted(
            {self.user_index[s.target] for s in self.outputs if s.kind is OutputKind.USER_INPUT_MUTATION}
            | {src[1] for src in self.written if src[0] == "user"}))
        self.equal_sizes = _equal_sizes(ep, self.user_index)


def _equal_sizes(ep: ExportedProgram, user_index: dict[str, int]) -> list[tuple[tuple[int, int], Any]]:
    """Return the user-input dims whose size the complex program knows from other dims'.

    Each is ((input, dim), size), by flat input position, where size is the (input, dim) that
    first holds the same symbol, or a sympy expression of symbols (a derived Dim,
    ``n2 * n2 * n3``) each held by such a dim. Read by :func:`_stated_size`.
    """
    first: dict[Any, tuple[int, int]] = {}
    pairs: list[tuple[tuple[int, int], Any]] = []
    derived: list[tuple[tuple[int, int], Any]] = []
    for node in ep.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if node.name not in user_index or not isinstance(value, torch.Tensor):
            continue
        for dim, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt):
                continue
            at, expr = (user_index[node.name], dim), size.node.expr
            if not expr.is_Symbol:
                derived.append((at, expr))
            elif first.setdefault(expr, at) != at:
                pairs.append((at, first[expr]))
    pairs += [(at, (expr, first)) for at, expr in derived if expr.free_symbols <= first.keys()]
    return pairs


def _stated_size(inputs: list, size: Any) -> Any:
    """Return the size :func:`_equal_sizes` recorded, read from ``inputs``.

    That is a dim's size, or an expression of dims' sizes (sums, products, integer powers,
    floor divisions, remainders; None for any other form, which is then not stated).
    """
    if isinstance(size[0], int):
        return inputs[size[0]].size(size[1])
    expr, where = size

    def value(e: Any) -> Any:
        if e.is_Symbol:
            i, d = where[e]
            return inputs[i].size(d)
        if e.is_Integer:
            return int(e)
        args = [value(a) for a in e.args]
        if any(a is None for a in args):
            return None
        if e.is_Add:
            return functools.reduce(operator.add, args)
        if e.is_Mul:
            return functools.reduce(operator.mul, args)
        if e.is_Pow and e.args[1].is_Integer and int(e.args[1]) > 0:
            return functools.reduce(operator.mul, [args[0]] * int(e.args[1]))
        name = type(e).__name__
        return args[0] // args[1] if name == "FloorDiv" else args[0] % args[1] if name in ("Mod", "PythonMod") else None

    return value(expr)


class _RealProgram(torch.nn.Module):
    """The decomposed graph as a module.

    It holds the real state under the original names, takes the user's inputs in their
    original structure, and applies in-place writes to buffers and inputs (where the second
    torch.export records them as mutations).
    """

    def __init__(self, real_gm: fx.GraphModule, wiring: _Wiring, state: _RealState,
                 signature: inspect.Signature | None):
        super().__init__()
        self.real_gm = real_gm
        self.wiring = wiring
        for fqn, p in state.parameters.items():
            owner, name = _owner(self, fqn)
            owner.register_parameter(name, p)
        for fqn, b in state.buffers.items():
            owner, name = _owner(self, fqn)
            owner.register_buffer(name, b, persistent=state.persistent[fqn])
        self._constant_attr = {}
        for i, (target, c) in enumerate(state.constants.items()):
            self._constant_attr[target] = f"_realify_constant_{i}"
            setattr(self, self._constant_attr[target], c)
        if signature is not None:
            # the same parameter names as the complex program: dynamic_shapes and graph input
            # names (ONNX input names too) refer to them
            def forward(*args, **kwargs):
                return self.run(*args, **kwargs)

            forward.__signature__ = signature  # type: ignore[attr-defined]  # read by inspect.signature
            self.forward = forward  # type: ignore[method-assign]  # this instance's own parameter names

    def _state(self, source: tuple) -> torch.Tensor:
        kind, target = source
        if kind is InputKind.CONSTANT_TENSOR:
            return getattr(self, self._constant_attr[target])
        owner, name = _owner(self, target)
        return getattr(owner, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        user_inputs = tree_leaves((args, kwargs))
        for (i, d), size in self.wiring.equal_sizes:
            # torch.export's non-strict trace gives each input dim a symbol of its own and makes
            # dims of one Dim (or a derived Dim and its root) equal only after the trace, so a
            # reshape of one input to another's sizes meets sizes it cannot compare and records a
            # check of them (`k b != b`) that fails at size 1, where the Dims allow it: the
            # equalities stated first
            stated = _stated_size(user_inputs, size)
            if stated is not None:
                torch._check(user_inputs[i].size(d) == stated)
        flat = [user_inputs[s[1]] if s[0] == "user" else self._state(s) for s in self.wiring.sources]
        outs = list(self.real_gm(*flat))
        program_outs, written = outs[: len(self.wiring.outputs)], outs[len(self.wiring.outputs):]
        user_outputs = []
        for spec, value in zip(self.wiring.outputs, program_outs):
            if spec.kind is OutputKind.USER_OUTPUT:
                user_outputs.append(value)
            elif spec.kind is OutputKind.BUFFER_MUTATION:
                self._state((InputKind.BUFFER, spec.target)).copy_(value)
            else:  # USER_INPUT_MUTATION
                user_inputs[self.wiring.user_index[spec.target]].copy_(value)
        for source, value in zip(self.wiring.written, written):
            (user_inputs[source[1]] if source[0] == "user" else self._state(source)).copy_(value)
        return tree_unflatten(user_outputs, self.wiring.out_spec)


def _eager_layouts(signature: Boundary, wiring: _Wiring) -> dict[str, Any]:
    """Return eager's layout of each user output of the program, for :class:`ComplexCallAdapter`.

    Per user output: how to take it from its flat input where eager's is a view of a user
    input, and eager's strides (decompose's ``Boundary.output_views`` and ``output_strides``,
    which follow the graph's outputs).
    """
    views: list[OutputView | None] = []
    strides = []
    for spec, view, stride in zip(wiring.outputs, signature.output_views, signature.output_strides):
        if spec.kind is not OutputKind.USER_OUTPUT:
            continue
        # a view of another output is the graph's own copy here: an exported program's outputs share no memory
        if view is None or view.from_output or wiring.sources[view.input][0] != "user":
            views.append(None)
        else:
            views.append(dataclasses.replace(view, input=wiring.sources[view.input][1]))
        strides.append(stride)
    return {"output_views": tuple(views), "output_strides": tuple(strides)}


def _forward_signature(module: torch.nn.Module) -> inspect.Signature | None:
    try:
        return inspect.signature(module.forward)
    except (TypeError, ValueError):
        return None


def _output_dtypes(ep: ExportedProgram) -> tuple[torch.dtype | None, ...]:
    """Return the complex dtype of each user output of the complex program (None where real)."""
    dtypes = []
    for spec, node in zip(ep.graph_signature.output_specs, ep.graph.output_node().args[0]):
        if spec.kind is OutputKind.USER_OUTPUT:
            value = node.meta.get("val") if isinstance(node, fx.Node) else node
            dtypes.append(value.dtype if value is not None and is_complex(value) else None)
    return tuple(dtypes)


def _export_real(wrapper: torch.nn.Module, placeholders: list[fx.Node], ep: ExportedProgram, real_args,
                 real_kwargs) -> ExportedProgram:
    """Export the real program with the complex program's dynamic sizes.

    The sizes are named Dims with their ranges, or, where the complex program also holds
    conditions a range cannot state (a view's ``n != 25``, which torch.export keeps as a
    run-time check of its own), ``Dim.DYNAMIC`` hints with those ranges. Any condition of
    realify's own was refused before (:class:`~realify.engine.size_conditions.SizeConditions`),
    so either way the real program is dynamic where the complex one is.
    """
    from torch._dynamo.exc import UserError

    shapes = _real_dynamic_shapes(placeholders, ep, real_args, real_kwargs)
    try:
        return torch.export.export(wrapper, real_args, real_kwargs, dynamic_shapes=shapes, strict=False)
    except UserError:
        if shapes is None:
            raise
    shapes = _real_dynamic_shapes(placeholders, ep, real_args, real_kwargs, hints=True)
    return torch.export.export(wrapper, real_args, real_kwargs, dynamic_shapes=shapes, strict=False)


def _real_dynamic_shapes(placeholders: list[fx.Node], ep: ExportedProgram, real_args, real_kwargs,
                         hints: bool = False) -> Any:
    """Return the dynamic shapes of the real program.

    Each symbolic size of the complex program's user inputs becomes a Dim with the same name
    and range (``Dim.DYNAMIC`` with that range where ``hints``); the trailing 2 stays static.
    """
    user_nodes = [n for n, s in zip(placeholders, ep.graph_signature.input_specs) if s.kind is InputKind.USER_INPUT]
    if not any(isinstance(d, torch.SymInt) for n in user_nodes for d in _shape(n.meta.get("val"))):
        return None
    dims: dict[str, Any] = {}
    shapes = ShapesCollection()
    real_leaves = tree_leaves((real_args, real_kwargs))
    for node, real in zip(user_nodes, real_leaves):
        value = node.meta.get("val")
        if not isinstance(real, torch.Tensor):
            continue
        spec = [_dim_for(d, ep, dims, hints) for d in _shape(value)]
        if real.dim() == len(spec) + 1:
            spec.append(None)
        shapes[real] = tuple(spec)
    return shapes


def _shape(value: Any) -> tuple:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


def _dim_for(size: Any, ep: ExportedProgram, dims: dict[str, Any], hint: bool) -> Any:
    if not isinstance(size, torch.SymInt):
        return None
    expr = size.node.expr
    bounds = ep.range_constraints.get(expr)
    lower = (_finite(bounds.lower) if bounds is not None else None) or 0
    upper = _finite(bounds.upper) if bounds is not None else None
    if not expr.is_Symbol and hint:
        return Dim.AUTO(min=lower, max=upper)
    if not expr.is_Symbol:
        # a derived size (n * n * m): a Dim of its own, with the complex program's range for
        # it. Dim.AUTO(min=...) is not enough: the trace states the derived size's range from
        # its factors' default ranges, from 2 (the product's from 2 ** factors), and the program
        # would refuse sizes the complex one takes (tensorinv's n * n * m = 1). _RealProgram.run
        # states what it equals
        key = str(expr)
        if key not in dims:
            dims[key] = Dim(f"derived_{len(dims)}", min=lower, max=upper)
        return dims[key]
    name = str(expr)
    if name not in dims:
        # max=None: no upper bound
        dims[name] = Dim.DYNAMIC(min=lower, max=upper) if hint else Dim(name, min=lower, max=upper)
    return dims[name]


def _finite(bound: Any) -> int | None:
    return None if bound in (int_oo, -int_oo) else int(bound)

