"""The complex linear-algebra workloads (realify/bench/linalg_workloads.py) as users run them: a
MIMO receiver, a quantum ground state and a MUSIC estimator compile with no island under
Inductor, differentiate like eager, and run in ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from backend_support import RecordingInner

import realify
from realify.bench.workloads import WORKLOADS
from realify.onnx import to_onnx

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

NAMES = ["mimo-mmse", "ground-state", "music-doa"]


def _differentiable(fn, inputs) -> list[torch.Tensor]:
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return params + [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]


def _relative(got: torch.Tensor, expected: torch.Tensor) -> float:
    return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30)).item()


@pytest.mark.parametrize("name", NAMES)
def test_compiles_with_no_island_and_matches_eager(name):
    fn, inputs = WORKLOADS[name].make("tiny", False, seed=0)
    expected = fn(*inputs)
    rec = RecordingInner()
    realify.compile(fn, inner=rec, strict=True)(*inputs)
    assert rec.graphs and rec.complex_nodes() == []
    got = realify.compile(fn, inner="inductor", strict=True)(*inputs)
    # the factorizations are eager's LAPACK calls; the products around them realify's
    assert _relative(got, expected) <= 1e-5


@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_eager(name):
    fn, inputs = WORKLOADS[name].make("tiny", True, seed=0)
    wrt = _differentiable(fn, inputs)
    expected = torch.autograd.grad(fn(*inputs), wrt)
    got = torch.autograd.grad(realify.compile(fn, inner="inductor", strict=True)(*inputs), wrt)
    # eager's derivative formulas on eager's factors. MUSIC's eigh derivative divides by the gaps
    # between the noise eigenvalues (~0.01 of ||R|| here), which amplify the roundings in which
    # realify's products differ from eager's: 1e-4 relative
    for g, e in zip(got, expected):
        assert _relative(g, e) <= (1e-4 if name == "music-doa" else 1e-5)


def _onnx_outputs(fn, inputs) -> np.ndarray:
    model = to_onnx(fn, inputs).model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: (torch.view_as_real(x) if x.is_complex() else x).detach().numpy()
             for i, x in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)[0]


# The bounds against eager's LAPACK (complex64, unit roundoff u = 6e-8):
# - MIMO: LU solve and Cholesky in real arithmetic, both backward stable; the detected
#   symbols' error is about u times the condition number of the pilot and Gram matrices (< 1e2
#   here): 1e-5 relative
# - ground state: Jacobi's eigenvalues within 10 n u ||H|| (tests/test_jacobi.py): 1e-5 relative
# - MUSIC: the noise subspace's error is u ||R|| / gap (the gap between signal and noise
#   eigenvalues, > 0.1 ||R|| here), and the pseudo-spectrum divides by its distance to the
#   steering vectors, small near a source: 1e-3 relative at the peaks
ONNX_BOUNDS = {"mimo-mmse": 1e-5, "ground-state": 1e-5, "music-doa": 1e-3}


@pytest.mark.parametrize("name", NAMES)
def test_onnx_runtime_matches_eager(name):
    fn, inputs = WORKLOADS[name].make("tiny", False, seed=0)
    expected = fn(*inputs).detach()
    got = torch.from_numpy(_onnx_outputs(fn, inputs))
    if expected.is_complex():
        got = torch.view_as_complex(got)
    assert _relative(got, expected) <= ONNX_BOUNDS[name]
