"""Real code passes through untouched: realify rewrites complex values only. Every module of
torch's module database (``torch.testing._internal.common_modules.module_db``, all real
``torch.nn`` modules), its first float32 sample on CPU in eval mode (realify/tools/real_modules.py):

- the reference: eager, plain ``torch.export``, and plain ``torch.onnx`` of that program in ONNX
  Runtime. Where any of them fails, or torch.export's program does not give eager's values, the
  entry is skipped, naming the stage and the exception: realify is asked to export what
  torch.onnx exports, not more;
- ``realify.export`` computes with the same ops as torch.export: the same ops, counted, once
  both programs are decomposed to core ATen by the same table (why that table, below); beside a
  complex value (the module's call and ``z * z`` of another input, in one program:
  ``BesideComplex``), torch.export's ops for the module plus realify's for ``z * z`` alone;
- each time realify's program gives eager's values, and ``realify.onnx.to_onnx`` of it runs in
  ONNX Runtime with eager's values (or, where ONNX Runtime's kernels miss those, torch.onnx's
  own model's).

Float32 values, with torch.testing's default float32 tolerances. An entry realify fails is a
failure (known ones: strict xfails, KNOWN below, with the reason).

Every real op of its op database goes the same way alone (``test_real_op_passes_through_untouched``):
the OpInfo entry's first float32 sample called as a module of the sample's tensors; an entry
whose torch.export program makes complex values inside (``irfftn`` of a real input) is complex
code, skipped with that reason.

An entry takes about 5 seconds alone and 5 beside a complex value (two ONNX exports each; the
transformers up to 20), the whole table about 20 minutes on two cores: it runs with ``-m slow``.
The default suite runs every STRIDE-th entry, both ways: the table lists modules by family, so
a stride samples the families (pooling, activations, losses, attention, recurrent layers,
padding) rather than one of them.
"""

from __future__ import annotations

import collections
import functools

import pytest
import torch
from torch.utils._pytree import tree_leaves

import realify
from realify.onnx import to_onnx
from realify.tools.opinfo import op_id
from realify.tools.real_modules import (
    SIDE_VALUE,
    ComplexSide,
    Reference,
    ReferenceFailure,
    beside_complex,
    core_aten_ops,
    first_op_case,
    op_differences,
    plain_reference,
    real_modules,
    real_ops,
    run_onnx,
)

# what torch says about its own modules while building and exporting them (an RNN's flat weights
# list, the oneDNN flags its cell decompositions set, KLDivLoss's coming change of reduction, the
# transformers' nested tensors): nothing of realify's
pytestmark = pytest.mark.filterwarnings("ignore:The tensor attributes self.*_flat_weights",
                                        "ignore:TF32 acceleration on top of oneDNN",
                                        "ignore:reduction. 'mean' divides the total loss",
                                        "ignore:enable_nested_tensor is True")

# every twelfth entry in the default suite: 10 of the 114 entries (pooling, activations, losses,
# attention, a recurrent layer, padding), about two minutes both ways
STRIDE = 12

# Where realify.export or realify.onnx differs from torch.export or torch.onnx on a real module:
# module name -> why. Strict xfails: an entry that starts to pass fails
# until it is removed here.
KNOWN: dict[str, str] = {}


# entries whose ONNX form comes from realify.onnx's own translations (aten._trilinear, which
# torch.onnx lacks): the default suite runs them too, as it runs the known failures
ONNX_FORMS = {"nn.Bilinear"}


def _params():
    for index, info in enumerate(real_modules()):
        for beside in (False, True):
            marks = [] if index % STRIDE == 0 or info.name in KNOWN or info.name in ONNX_FORMS else [pytest.mark.slow]
            if info.name in KNOWN:
                marks.append(pytest.mark.xfail(reason=KNOWN[info.name], strict=True))
            yield pytest.param(info, beside, id=f"{info.name}-{'beside_complex' if beside else 'alone'}", marks=marks)


@pytest.mark.parametrize(("info", "beside"), list(_params()))
def test_real_module_passes_through_untouched(info, beside):
    try:
        reference = plain_reference(info)
    except ReferenceFailure as failure:
        pytest.skip(f"plain PyTorch does not export {info.name}: {failure}")
    if reference is None:
        pytest.skip(f"the module database gives no float32 sample for {info.name}")
    if not beside:
        case = reference.case
        program = realify.export(case.module, case.args, case.kwargs)
        _assert_same_ops(program, reference, collections.Counter())
        torch.testing.assert_close(case.outputs(program.module()), reference.eager, equal_nan=True)
        _assert_onnx_values(run_onnx(to_onnx(program), case.inputs), reference)
        return
    case = beside_complex(reference.case)
    side = torch.tensor(SIDE_VALUE)
    program = realify.export(case.module, case.args, case.kwargs)
    _assert_same_ops(program, reference, _side_ops())
    *outputs, product = case.outputs(realify.ComplexCallAdapter(program))
    torch.testing.assert_close(outputs, reference.eager, equal_nan=True)
    torch.testing.assert_close(product, side * side)
    *outputs, pairs = run_onnx(to_onnx(program), [torch.view_as_real(side), *reference.case.inputs])
    _assert_onnx_values(outputs, reference)
    torch.testing.assert_close(pairs, torch.view_as_real(side * side))


# OpInfo entries with float32 samples: every OP_STRIDE-th in the default suite (the op database
# lists ops alphabetically, so a stride samples unrelated families), all of them with -m slow
OP_STRIDE = 48
# Where realify.export or realify.onnx differs from torch.export or torch.onnx on a real op
KNOWN_OPS: dict[str, str] = {
    "tensor_split": (
        "realify's trace reads the split points given as a tensor element by element with select "
        "(realify/engine/dynamo_graph.py), where torch.export's program slices and squeezes: the same elements"),
    "nn.functional.interpolate.bilinear": (
        "realify's trace writes a bilinear upsampling as core ATen's index arithmetic (the Python decomposition of "
        "upsample_bilinear2d.vec), where torch.export keeps upsample_bilinear2d, a core ATen op"),
    "nn.functional.upsample_bilinear": "as nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.trilinear": (
        "realify's trace keeps upsample_trilinear3d, where torch.export's program in core ATen is its index "
        "arithmetic: the same values, other ops"),
    "nn.functional.linear": (
        "realify's trace writes this sample's linear as mm, add, unsqueeze and squeeze, where torch.export's "
        "program is addmm and views: the same values, other ops"),
    "narrow_copy": "realify's trace writes narrow_copy as a slice, where torch.export's program keeps narrow",
    "unbind_copy": (
        "realify's trace writes unbind_copy as slices and squeezes, where torch.export's program keeps unbind"),
}


def _op_params():
    for index, op in enumerate(real_ops()):
        name = op_id(op)
        marks = [] if index % OP_STRIDE == 0 or name in KNOWN_OPS else [pytest.mark.slow]
        if name in KNOWN_OPS:
            marks.append(pytest.mark.xfail(reason=KNOWN_OPS[name], strict=True))
        yield pytest.param(op, id=name, marks=marks)


@pytest.mark.parametrize("op", list(_op_params()))
def test_real_op_passes_through_untouched(op):
    """Each real op of the op database, its first float32 sample called as a module: torch.export's
    ops in core ATen, eager's values, and ONNX Runtime's, wherever plain PyTorch exports it."""
    try:
        reference = plain_reference(op, make_case=first_op_case)
    except ReferenceFailure as failure:
        pytest.skip(f"plain PyTorch does not export {op_id(op)}: {failure}")
    if reference is None:
        pytest.skip(f"the op database gives no float32 sample for {op_id(op)}")
    if _computes_with_complex_values(reference.program):
        pytest.skip(f"{op_id(op)} of a float32 sample computes with complex values: not real code")
    if "empty" in op.name:
        pytest.skip(f"{op_id(op)} leaves its result's memory uninitialized: there are no values to compare")
    if _draws_random_numbers(op) or _writes_inputs(reference.case):
        pytest.skip(f"{op_id(op)} draws random numbers or writes its inputs: each program of the comparison would "
                    "run on other values")
    case = reference.case
    program = realify.export(case.module, case.args, case.kwargs)
    _assert_same_ops(program, reference, collections.Counter())
    torch.testing.assert_close(case.outputs(program.module()), reference.eager, equal_nan=True)
    _assert_onnx_values(run_onnx(to_onnx(program), case.inputs), reference)


def _draws_random_numbers(op) -> bool:
    """Whether the aten op of the entry's name (or its in-place form) draws random numbers."""
    packets = [getattr(torch.ops.aten, name, None) for name in (op.name, op.name + "_")]
    return any(torch.Tag.nondeterministic_seeded in getattr(packet, overload).tags
               for packet in packets if isinstance(packet, torch._ops.OpOverloadPacket)
               for overload in packet.overloads())


def _writes_inputs(case) -> bool:
    """Whether the call writes its inputs (native_batch_norm's running statistics in training,
    which its schema does not declare, so torch.export's program does not say so either)."""
    before = [x.clone() for x in case.inputs]
    case.outputs(case.module)
    return any(not torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(before, case.inputs))


def _computes_with_complex_values(program: torch.export.ExportedProgram) -> bool:
    """Whether plain torch.export's program, in core ATen, makes a complex value
    (``x.cdouble()``; ``irfftn`` of a real input, which transforms it as complex values)."""
    try:
        graph = program.run_decompositions().graph
    except Exception:  # a data-dependent program core ATen's trace refuses: torch.export's ops
        graph = program.graph
    return any(isinstance(v, torch.Tensor) and v.is_complex()
               for node in graph.nodes for v in tree_leaves(node.meta.get("val")))


@functools.cache
def _side_ops() -> collections.Counter[str]:
    """realify's ops for the complex side value alone, in core ATen."""
    return core_aten_ops(realify.export(ComplexSide(), (torch.tensor(SIDE_VALUE),)))


def _assert_same_ops(program: torch.export.ExportedProgram, reference: Reference,
                     side_ops: collections.Counter[str]) -> None:
    """realify's program computes with torch.export's ops for the module and realify's for the side value.

    Both programs are decomposed to core ATen by the same table before their ops are counted.
    realify's program is not torch.export's op for op as it stands, by design: realify traces the
    program again (make_fx under functionalization), which decomposes the composite ops
    torch.export keeps (linear becomes t and addmm, bilinear _trilinear), writes views as
    reshapes (realify/passes/cleanup.py) and leaves some in-place ops of those decompositions
    in place; and it writes LSTM, GRU and RNN layers as their cells (RECURRENT_FORMS, where
    torch.export keeps aten.lstm). Core ATen, the form torch.onnx itself decomposes to, spells
    each computation one way, and the table includes realify's recurrent forms, so what is left
    to differ is what realify computes otherwise.
    """
    expected = core_aten_ops(reference.program) + side_ops
    differences = op_differences(core_aten_ops(program), expected)
    assert not differences, (
        f"realify.export's program computes with other ops than torch.export's for the module plus realify's for "
        f"the side value, all in core ATen (op: (expected count, realify's)): {differences}")


def _assert_onnx_values(actual: list[torch.Tensor], reference: Reference) -> None:
    """Eager's values; where ONNX Runtime's kernels round otherwise than eager's, so that
    torch.onnx's own model misses them too, torch.onnx's model's values."""
    try:
        torch.testing.assert_close(actual, reference.eager, equal_nan=True)
    except AssertionError as from_eager:
        try:
            torch.testing.assert_close(actual, reference.onnx, equal_nan=True)
        except AssertionError:
            raise AssertionError(f"realify.onnx's model gives neither eager's values nor torch.onnx's model's; "
                                 f"against eager's: {from_eager}") from None
