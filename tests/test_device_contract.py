"""Eager's device contract (issue: what eager refuses, realify refuses): the dtype-mix matrix's
constructs (the products, the writes of one tensor into another, in-place arithmetic) and every
complex OpInfo entry with two or more tensor operands, their operands placed on an accelerator
and the CPU (every one on the accelerator, each alone there, each a 0-d CPU tensor beside the
others there; realify/tools/device_mix.py), traced by eager's fake tensors and exported by
``realify.export``: outputs of eager's dtypes, shapes and devices, or an exception of eager's type.

The accelerator is a fake one, so this runs without one: fake tensors carry eager's device rules
(one device per op, 0-d CPU tensors taken as scalars, ``copy_`` across devices), and
``realify.export`` traces fake tensors exactly as it traces the fake stand-ins of real inputs.
Where realify does what plain ``torch.export`` does with the same fake tensors, the difference is
torch's trace's (``shared``); where realify raises what eager raises on the CPU with real values,
a check fake tensors do not make (``eager's refusal``). The eager ``ComplexTensor`` and the
compile backend take real tensors, which need the accelerator itself (tests/test_cuda.py).
"""

from __future__ import annotations

import pytest
import torch

from realify.tools import device_mix, dtype_mix
from realify.tools.opinfo import op_id

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),
    # a CPU-only build of torch refuses to make even a fake tensor's accelerator device
    pytest.mark.skipif(not torch.backends.cuda.is_built(),
                       reason="this torch build has no CUDA support: even fake CUDA tensors are refused"),
]

# Differences from eager's fake tensors that stay, each with its reason: a case's name -> the
# placements (as str() gives them) where realify.export differs
KNOWN = {
    # linear of a 3-d input with a bias is one addmm (realify/engine/dynamo_graph.py, as ATen's
    # kernel computes it); fake tensors take a 0-d CPU bias beside accelerator matrices as a
    # scalar, but realify's addmm adds it to the product as a tensor broadcast to the product's
    # shape, which the trace refuses on two devices. Eager's accelerator addmm checks its three
    # operands for one device itself (under torch 2.14, realify.export does what fake tensors do there)
    **({"linear-bias": ("(cuda, cuda, 0-d cpu)",)} if torch.__version__ >= "2.15" else {}),
    # a 0-d CPU tensor written with an accelerator's 0-d value: realify's result stays on the
    # destination's device, as eager's kernel (a clone of the destination, then copy_) keeps it;
    # fake tensors put the result on the accelerator by their rule for 0-d CPU operands
    "as_strided_scatter": ("(0-d cpu, cuda)",),
}


def _check_every_placement(case: dtype_mix.Case) -> None:
    differences, known = [], KNOWN.get(case.name, ())
    for placement in device_mix.placements(case):
        verdict, what = device_mix.check(case, placement)
        if verdict == "differs" and str(placement) not in known:
            differences.append(what)
        elif verdict != "differs" and str(placement) in known:
            differences.append(f"{case} at {placement} is eager's now ({verdict}): remove it from KNOWN")
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("name", list(dtype_mix.CONSTRUCTS))
def test_constructs_on_two_devices(name, fresh_dynamo):
    _check_every_placement(dtype_mix.construct_case(name))


@pytest.mark.parametrize("op", [pytest.param(op, id=op_id(op)) for op in dtype_mix.opinfo_entries()])
def test_opinfo_entries_on_two_devices(op, fresh_dynamo):
    _check_every_placement(dtype_mix.opinfo_case(op))


def test_a_copy_across_devices_lands_on_the_destinations(fresh_dynamo):
    # the hole the matrix found: realify's functional copy kept the source's device
    case = dtype_mix.construct_case("copy_")
    for placement in (device_mix.Placement((True, False)), device_mix.Placement((False, True))):
        assert device_mix.check(case, placement) == ("same", None)
