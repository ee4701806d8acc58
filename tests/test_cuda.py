"""The compile backend on a CUDA device: every benchmark workload (forward and training step)
through realify + Inductor (Triton kernels) against eager complex PyTorch on the same GPU,
plus the layout and no-complex guarantees that CPU tests check with C++ kernels.

CI machines have no GPU, so this module is skipped there (with that reason). On a GPU
machine: ``python -m pytest tests/test_cuda.py``. ``REALIFY_TEST_DEVICE=cpu`` runs the same
checks on the CPU (for working on this file without a GPU).
"""

from __future__ import annotations

import os

import pytest
import torch
from backend_support import RecordingInner

import realify
from realify.bench.runner import MODES, Case, Mode, run_one
from realify.bench.workloads import WORKLOADS

DEVICE = os.environ.get("REALIFY_TEST_DEVICE", "cuda")

pytestmark = [
    pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                       reason="needs a CUDA device (none here; CI machines have none)"),
    pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd is returning a function"),
]


@pytest.fixture(autouse=True)
def _exact_float32():
    """TF32 off: realify's real GEMMs and convolutions would otherwise run in TF32 (10-bit
    mantissa) while eager's complex kernels run in full float32, and the comparison would
    measure the TF32 setting, not realify."""
    if DEVICE != "cuda":
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# dynamo alone, no compiler: how many graphs a workload is without realify
DYNAMO_ONLY = Mode("dynamo-eager", "torch.compile(fn, backend='eager')", "PyTorch",
                   lambda fn: torch.compile(fn, backend="eager"))

CASES = [pytest.param(Case(w, train), id=f"{name}-{'train' if train else 'fwd'}")
         for name, w in WORKLOADS.items() for train in ([False, True] if w.trainable else [False])]


@pytest.mark.parametrize("case", CASES)
def test_workload_matches_eager(case):
    """Outputs (forward) or loss and every gradient after an SGD step (training) within the
    workload's normwise tolerance of eager on the same device, in one compiled graph; a
    third-party model in as many graphs as dynamo makes of it without realify (the package's
    own breaks are not realify's)."""
    reference_row, reference = run_one(case, MODES["eager"], size="tiny", repeat=1, warmup=0, device=DEVICE)
    if reference_row.status == "skipped":
        pytest.skip(reference_row.error)  # a third-party package not installed: the message names it
    assert reference_row.status == "ok", reference_row.error
    row, _ = run_one(case, MODES["realify"], size="tiny", repeat=1, warmup=0, device=DEVICE, reference=reference)
    assert row.status == "ok", row.error or f"max normwise error {row.max_rel_err:.3g} > {row.rtol:g}"
    if case.workload.third_party:
        baseline, _ = run_one(case, DYNAMO_ONLY, size="tiny", repeat=1, warmup=0, device=DEVICE)
        assert baseline.status == "ok", baseline.error
        assert (row.graphs, row.graph_breaks) == (baseline.graphs, baseline.graph_breaks), row.notes
    else:
        assert row.graphs == 1 and not row.graph_breaks, row.notes


def _docs_chain(a, b):
    return torch.atan(torch.cos(a * b) / torch.sin(a + b))


def test_graphs_handed_to_inductor_are_real_and_on_device():
    """The forward and backward graphs hold no complex value, and every input stays on the GPU."""
    inner = RecordingInner()
    a = torch.randn(64, dtype=torch.complex64, device=DEVICE, requires_grad=True)
    b = torch.randn(64, dtype=torch.complex64, device=DEVICE)
    torch._dynamo.reset()
    out = realify.compile(_docs_chain, inner=inner, fullgraph=True)(a, b)
    out.abs().sum().backward()
    real_graphs = [gm for kind, gm in inner.graphs if kind != "dynamo"]
    assert inner.kinds() == {"dynamo", "forward", "backward"}
    assert inner.complex_nodes() == [] or all(n.startswith("dynamo:") for n in inner.complex_nodes())
    for gm in real_graphs:
        devices = {v.device.type for node in gm.graph.nodes if node.op == "placeholder"
                   for v in [node.meta.get("val")] if isinstance(v, torch.Tensor)}
        assert devices == {torch.device(DEVICE).type}, gm.graph
    expected = _docs_chain(a.detach(), b)
    torch.testing.assert_close(out.detach(), expected, rtol=2e-5, atol=1e-6)


def test_special_values_match_eager_on_device():
    """Signed zeros, infinities and NaNs through Triton's kernels: the same values as eager's
    CUDA complex kernels (NaN positions and the signs of zero included)."""
    special = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 1e-30, 1e30]
    re, im = torch.meshgrid(torch.tensor(special), torch.tensor(special), indexing="ij")
    z = torch.complex(re.flatten(), im.flatten()).to(DEVICE)

    def program(z):
        # no sum of two special values: eager's add differs from C99 there (test_numerics);
        # nor a sum with a real operand, which eager promotes to x + 0i (docs/numerics.md)
        return torch.exp(z) * z.conj(), torch.sqrt(z) / (z + (1 + 1j)), torch.atan(torch.cos(z) / torch.sin(z))

    torch._dynamo.reset()
    for got, want in zip(realify.compile(program, fullgraph=True)(z), program(z)):
        actual, expected = torch.view_as_real(got), torch.view_as_real(want)
        assert torch.equal(torch.isnan(actual), torch.isnan(expected))
        # complex-wise relative error: a part that cancels (sqrt(1e-30i) / (1 + i) has an
        # imaginary part of ~1e-46 in exact arithmetic) holds rounding error of the magnitude
        both = ~torch.isnan(expected).any(-1)
        torch.testing.assert_close(got[both], want[both], rtol=1e-5, atol=0)
        zero = (expected == 0) & (actual == 0)
        assert torch.equal(torch.signbit(actual[zero]), torch.signbit(expected[zero]))
