"""Real modules of torch's module database (``torch.testing._internal.common_modules.module_db``)
and real ops of its op database (each OpInfo entry called as a module of its sample's tensors)
through ``realify.export`` and ``realify.onnx`` beside plain ``torch.export`` and ``torch.onnx``:
the runners of tests/test_real_modules.py. Needs the test extras (``torch.testing._internal``
imports ``expecttest``; the models run in ONNX Runtime).

Each entry runs its first float32 sample on CPU, in eval mode. :func:`plain_reference` is what
PyTorch alone does with it (eager, torch.export, torch.onnx in ONNX Runtime) and raises
:class:`ReferenceFailure` where any of those fails: realify is asked to do what they do, not more.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import operator
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.utils._pytree import tree_leaves

from realify.engine.decompose import RECURRENT_FORMS
from realify.passes.cleanup import view_variant


@functools.cache
def real_modules() -> list:
    """Every ModuleInfo of torch's module database (all ``torch.nn`` modules, run here in float32)."""
    from torch.testing._internal.common_modules import module_db

    return list(module_db)


@dataclasses.dataclass
class ModuleCase:
    """A module built and called as its ModuleInfo's first sample says."""

    module: torch.nn.Module
    args: tuple
    kwargs: dict

    def outputs(self, program: torch.nn.Module) -> list[torch.Tensor]:
        """The tensors ``program`` returns for this call, flattened (as ONNX lists its outputs)."""
        with torch.no_grad():
            return tensors_of(program(*self.args, **self.kwargs))

    @property
    def inputs(self) -> list[torch.Tensor]:
        """The call's tensors, flattened: the ONNX model's inputs (numbers are constants there)."""
        return tensors_of((self.args, self.kwargs))


# the complex value a real module runs beside (exact values, a signed zero among them)
SIDE_VALUE = (1 + 2j, -0.0 + 3j, 0.5 - 1j)


class ComplexSide(torch.nn.Module):
    """The complex computation a real module runs beside: ``z * z``."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z * z


class BesideComplex(torch.nn.Module):
    """A real module called as it is, beside :class:`ComplexSide` of another input.

    The program mixes a real layer with complex values, as models do; realify's trace runs over
    both.
    """

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module
        self.side = ComplexSide()

    def forward(self, z: torch.Tensor, *args: Any, **kwargs: Any) -> tuple:
        return self.module(*args, **kwargs), self.side(z)


def beside_complex(case: ModuleCase) -> ModuleCase:
    """The same call, of :class:`BesideComplex` with the complex side value as its first input."""
    return ModuleCase(BesideComplex(case.module), (torch.tensor(SIDE_VALUE), *case.args), case.kwargs)


def tensors_of(tree: Any) -> list[torch.Tensor]:
    return [x for x in tree_leaves(tree) if isinstance(x, torch.Tensor)]


def first_case(info) -> ModuleCase | None:
    """The entry's first float32 sample on CPU (None where it has none). Seeded: the module's
    weights and the inputs are the same in every run."""
    torch.manual_seed(0)
    samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=False, training=False)
    if not samples:
        return None
    sample = samples[0]
    module = info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs).eval()
    return ModuleCase(module, tuple(sample.forward_input.args), dict(sample.forward_input.kwargs))


class ReferenceFailure(Exception):
    """Eager PyTorch, plain torch.export, torch.onnx or ONNX Runtime fails on the module."""

    def __init__(self, stage: str, error: BaseException):
        cause = _first_cause(error)
        what = f"{type(error).__name__}: {_first_line(error)}"
        if cause is not error:
            what = f"{type(error).__name__}, from {type(cause).__name__}: {_first_line(cause)}"
        super().__init__(f"{stage} fails on the module: {what}")
        self.stage = stage


def _first_cause(error: BaseException) -> BaseException:
    # torch.onnx's ConversionError says only which step failed; the exception it was raised
    # from names the op it has no translation for
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:200]


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    try:
        yield
    except Exception as error:
        raise ReferenceFailure(name, error) from error


@dataclasses.dataclass
class Reference:
    """What PyTorch alone does with the module's sample."""

    case: ModuleCase
    eager: list[torch.Tensor]
    program: ExportedProgram      # plain torch.export's
    onnx: list[torch.Tensor]      # plain torch.onnx's model, in ONNX Runtime


def real_ops() -> list:
    """Every OpInfo entry of torch's op database with float32 samples on CPU (run here in float32)."""
    from realify.tools.opinfo import op_db

    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


class OpCall(torch.nn.Module):
    """An OpInfo entry called as a sample says, as a module of the sample's tensors."""

    def __init__(self, program: Callable):
        super().__init__()
        self.program = program

    def forward(self, *tensors: torch.Tensor) -> Any:
        return self.program(*tensors)


def first_op_case(op) -> ModuleCase | None:
    """The entry's first float32 sample on CPU as a module call (None where it has none)."""
    from realify.tools.opinfo import sample_program, samples

    found = samples(op, torch.float32)
    if not found:
        return None
    tensors, program = sample_program(op, found[0])
    return ModuleCase(OpCall(program), tuple(tensors), {})


def plain_reference(info, make_case: Callable[[Any], ModuleCase | None] = first_case) -> Reference | None:
    """Eager's outputs, plain torch.export's program and plain torch.onnx's outputs for the
    entry's first sample (``make_case``: a ModuleInfo's by default, :func:`first_op_case` for an
    OpInfo; None where it has no sample). Raises :class:`ReferenceFailure` naming the first
    stage that fails, or where plain torch.export's program does not give eager's values (a
    module that draws random numbers)."""
    with stage("eager"):
        case = make_case(info)
        if case is None:
            return None
        # before any export: a lazy module (LazyConv2d) makes its parameters on its first call
        eager = case.outputs(case.module)
    with stage("torch.export"):
        program = torch.export.export(case.module, case.args, case.kwargs)
    with stage("torch.export's program"):
        torch.testing.assert_close(case.outputs(program.module()), eager, equal_nan=True)
    with stage("torch.onnx"):
        # the ExportedProgram, as realify.onnx hands its own to torch.onnx, with torch.onnx's defaults
        model = torch.onnx.export(program, (), dynamo=True, verbose=False)
        assert model is not None  # the dynamo exporter always returns its program
    with stage("ONNX Runtime"):
        onnx = run_onnx(model, case.inputs)
    return Reference(case, eager, program, onnx)


def run_onnx(model: torch.onnx.ONNXProgram, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The model's outputs in ONNX Runtime (CPU), fed ``inputs`` in the order of its inputs."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # no type information

    session = ort.InferenceSession(model.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise AssertionError(f"the ONNX model takes inputs {names}; the call has {len(inputs)} tensors")
    outputs = session.run(None, {name: x.detach().numpy() for name, x in zip(names, inputs)})
    return [torch.from_numpy(out) for out in outputs]


def core_aten_ops(program: ExportedProgram) -> collections.Counter[str]:
    """The ops ``program`` computes with, counted, once decomposed to core ATen with
    realify.export's recurrent forms (tests/test_real_modules.py says why this is the measure).

    Not counted: ``operator.getitem`` (picking an output of a multi-output op, which dead-code
    elimination drops or keeps), ``aten.clone`` and ``aten.copy`` (copies: functionalization,
    which realify's trace runs, replays a view's ``.contiguous()`` on each of its uses, where
    torch.export copies once before them; the values are the same), ``aten.alias`` (a view of
    the whole tensor) and ``aten._assert_tensor_metadata`` (a check of
    a ``.to()`` call's input, not a computation: realify.export drops those, which assert the
    complex program's dtypes). A view's copy (``as_strided_copy``, which realify's graph keeps
    where it reads storage) counts as the view."""
    table = torch.export.default_decompositions()
    for op, form in RECURRENT_FORMS.items():
        table[op] = form  # the documented way to change an entry of this table
    for op in _UPSAMPLE_LISTS:
        table.pop(op, None)
    graph = program.run_decompositions(table).graph
    uncounted = (operator.getitem, torch.ops.aten.clone.default, torch.ops.aten.copy.default,
                 torch.ops.aten.alias.default, torch.ops.aten._assert_tensor_metadata.default)
    return collections.Counter(str(_UPSAMPLE_LISTS.get(node.target) or view_variant(node.target) or node.target)
                               for node in graph.nodes if node.op == "call_function" and node.target not in uncounted)


# A nearest upsampling's ``.vec`` overload (output size or scales as lists) traces to its
# ``.default`` overload, one op that core ATen keeps; core ATen writes ``.vec`` itself in index
# arithmetic. Counted as that one op either way. (The interpolating ones trace to core ATen's
# own arithmetic.)
_UPSAMPLE_LISTS = {getattr(torch.ops.aten, name).vec: getattr(torch.ops.aten, name).default
                   for name in ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
                                "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d")
                   if hasattr(torch.ops.aten, name) and "vec" in getattr(torch.ops.aten, name).overloads()}


def op_differences(realify_ops: collections.Counter, plain_ops: collections.Counter) -> dict[str, tuple[int, int]]:
    """``op: (count in plain torch.export's program, count in realify's)`` where they differ."""
    return {op: (plain_ops[op], realify_ops[op]) for op in sorted(plain_ops | realify_ops)
            if plain_ops[op] != realify_ops[op]}
