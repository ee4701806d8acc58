"""Sizes that turn symbolic, for every complex OpInfo entry (realify/tools/symbolic_sizes.py):

- ``shapes``: the compile backend with default settings at four input shapes in a row (the
  sample's, then every size grown by 1, 3 and 5): dynamo recompiles the second with symbolic
  sizes (automatic dynamic shapes) and must reuse that graph for the others. Values and
  gradients are eager's at each shape, and realify compiles no more graphs than dynamo's own
  eager backend does for the same calls, or than ``aot_eager`` where that compiles more (the
  default backend's trace guards on some sizes itself, as on a split's last chunk); more would
  mean a rule fixed a symbolic size to a number: a guard, a recompile per size, and past
  dynamo's recompile limit an eager run;
- ``dynamic``: the same under ``dynamic=True`` (symbolic from the first call), four shapes;
- ``export``: ``realify.export`` with every input dim ``Dim.AUTO``; every dim plain
  torch.export keeps dynamic stays dynamic, and the program gives eager's values at other
  sizes (grown by 1 and 3, shrunk by 1 where the range allows, and 1 where plain
  torch.export's program gives eager's result there). Then with ``Dim.DYNAMIC`` on those dims,
  and with every dim from 1 up, checked the same way;
- ``onnx``: the same exports, each also run in ONNX Runtime at those sizes (an ONNX export
  takes seconds).

A program realify cannot keep dynamic is refused at export with torch.export's constraint
violation (realify.onnx: NoOnnxFormError), naming the dim: an outcome the suite expects by name
(tests/known_failures.py REFUSED says why for each), never a wrong value.

The first complex64 sample of each entry with a size of 2 or more to vary (an entry's first
sample is often 0-d: ``add``'s, ``sum``'s), else its first. Known failures (tests/known_failures.py, SIZES) are
strict xfails.
"""

from __future__ import annotations

import os

import pytest
import torch
from known_failures import NO_GRAPH, REFUSED, SIZES, SIZES_NO_GRAPH

from realify.tools.opinfo import GEMM_OPS, complex_ops, op_id, sample_program, samples
from realify.tools.symbolic_sizes import run_compile_shapes, run_export_dynamic

pytestmark = pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd is returning a function",
                                        "ignore:Using None as a dynamic shape dimension")

MODES = ("shapes", "dynamic", "export", "onnx")
# What each run covers. Every entry in every mode is the slow table (``-m slow``, about an hour
# on two cores: beyond CI's time beside the rest of the suite). The default suite runs every
# sixth entry for ``shapes`` and ``export`` (from different offsets: one entry in three runs in
# some mode), every twelfth under ``dynamic=True`` (the same symbolic tracing as ``shapes``'
# second call, from the first call on) and every sixteenth in ONNX Runtime. The compatibility
# run (tests/conftest.py) runs every sixteenth entry of each mode but ``onnx``, tracing being
# what differs between releases.
COMPAT = bool(os.environ.get("REALIFY_COMPAT_RUN"))
STRIDES = ({"shapes": 16, "dynamic": 16, "export": 16} if COMPAT
           else {"shapes": 6, "dynamic": 12, "export": 6, "onnx": 16})
OFFSETS = {"shapes": 1, "dynamic": 0, "export": 0, "onnx": 3}
STEPS = (0, 1, 3, 5)


def _params():
    for mode in MODES:
        if mode not in STRIDES:
            continue
        for index, op in enumerate(complex_ops()):
            default = index % STRIDES[mode] == OFFSETS[mode] % STRIDES[mode]
            if COMPAT and not default:
                continue
            name = op_id(op)
            marks = [] if default else [pytest.mark.slow]
            reason = SIZES[mode].get(name) or (SIZES["export"].get(name) if mode == "onnx" else None)
            if reason:
                marks.append(pytest.mark.xfail(reason=reason, strict=True))
            yield pytest.param(mode, op, id=f"{mode}-{name}", marks=marks)


def _with_sizes_to_vary(op, cases):
    for case in cases:
        tensors, _ = sample_program(op, case)
        if any(n >= 2 for t in tensors for n in t.shape):
            return case
    return cases[0]


@pytest.mark.parametrize("mode,op", list(_params()))
def test_op_at_symbolic_sizes(mode, op):
    name = op_id(op)
    cases = samples(op, torch.complex64)
    if not cases:
        pytest.skip(f"OpInfo gives no complex64 samples for {name} on CPU")
    cases = [_with_sizes_to_vary(op, cases)]
    if mode in ("export", "onnx"):
        onnx = mode == "onnx"
        run = run_export_dynamic(op, cases[0], onnx_runtime=onnx, gemm=name in GEMM_OPS)
        if run is None:
            pytest.skip(f"plain torch.export keeps no dim of {name}'s sample dynamic, or fails on it")
        for stage, refusal in (("export", run.refused), ("onnx", run.onnx_refused)):
            expected = REFUSED[stage].get(name)
            if refusal and not expected:
                pytest.fail(f"{name} was refused by realify.{stage}, which tests/known_failures.py REFUSED does "
                            f"not expect: {refusal}")
            if expected and not refusal and (stage == "export" or onnx):
                pytest.fail(f"tests/known_failures.py REFUSED[{stage!r}] lists {name}, but its dynamic export ran: "
                            f"remove it there")
        if not run.checked and not run.refused:
            pytest.skip(f"eager, or plain torch.export's own program, rejects {name}'s sample at every other size "
                        f"({run.dynamic_dims} dynamic dims exported)")
        return
    if name in NO_GRAPH or name in SIZES_NO_GRAPH:
        pytest.skip(f"dynamo hands no graph to the backend for {name}: "
                    f"{NO_GRAPH.get(name) or SIZES_NO_GRAPH[name]}")
    run = run_compile_shapes(op, cases[0], steps=STEPS, dynamic=True if mode == "dynamic" else None,
                             gemm=name in GEMM_OPS)
    assert run.graphs <= run.baseline_graphs, (
        f"realify compiled {run.graphs} graphs for {len(STEPS)} shapes where the default backend's trace compiles "
        f"{run.baseline_graphs}: a rule fixed a symbolic size to a number")
    if not run.checked:
        pytest.skip(f"eager rejects {name}'s sample at every shape")
