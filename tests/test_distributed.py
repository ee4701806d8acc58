"""realify inside torch.distributed: two gloo processes on 127.0.0.1 (tests/distributed_support.py)
train a stack of spectral layers with complex parameters, compared with eager DDP and eager
FSDP2, and run complex programs over DTensors, compared with eager DTensor programs.

DDPOptimizer's graph splitting compiles one piece per gradient bucket and runs each compiled
piece on fake tensors to trace the next; each piece is a separate realify graph whose complex
values cross to the next piece with eager's strides (which Inductor's code asserts)."""

from __future__ import annotations

import numpy as np
import pytest
import torch.distributed as dist
from distributed_support import (
    DIFFERS_FROM_EAGER,
    DTENSOR_PROGRAMS,
    ddp_training,
    dtensor_programs,
    fsdp_training,
    plain_programs,
    run_ranks,
)

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="this torch build has no gloo backend")


@pytest.fixture(scope="module")
def eager_ddp():
    return run_ranks(ddp_training, None, False)


def _same_training(got, expected):
    # same data, same initial parameters, same SGD: the ranks' losses and the trained
    # parameters (complex and real) agree to float32 rounding of the reordered sums
    np.testing.assert_allclose(got["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    for g, e in zip(got["parameters"], expected["parameters"]):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("split", [False, True], ids=["one-graph", "split-by-bucket"])
def test_ddp_trains_like_eager_ddp(eager_ddp, split):
    got = run_ranks(ddp_training, "eager", split)
    _same_training(got, eager_ddp)
    if split:
        assert got["graphs"] > 1, "DDPOptimizer made one piece: the buckets are too large to split the graph"


@pytest.mark.slow
def test_ddp_with_inductor_and_graph_splitting_trains_like_eager_ddp(eager_ddp):
    # Inductor's code asserts each piece's input strides: complex outputs with eager's strides
    got = run_ranks(ddp_training, "inductor", True, timeout=1500)
    _same_training(got, eager_ddp)
    assert got["graphs"] > 1


@pytest.fixture(scope="module")
def eager_fsdp():
    return run_ranks(fsdp_training, None, "per-dtype-units")


def _same_fsdp_training(got, expected):
    np.testing.assert_allclose(got["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    assert got["parameters"].keys() == expected["parameters"].keys()
    for name, e in expected["parameters"].items():
        np.testing.assert_allclose(got["parameters"][name], e, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("recipe", ["per-dtype-units", "real-pairs"])
def test_fsdp2_trains_like_eager_fsdp2(eager_fsdp, recipe):
    """FSDP2 over complex parameters, one unit per spectral layer, compiled by realify: the same
    losses and trained parameters as eager FSDP2. With complex_parameters_as_real (every
    parameter float32: ``fully_shard`` takes the whole mixed layer as one unit), training is
    the same as with complex parameters, compiled or eager."""
    got = run_ranks(fsdp_training, "eager", recipe)
    _same_fsdp_training(got, eager_fsdp)
    assert got["dtypes"] == (["torch.float32"] if recipe == "real-pairs" else ["torch.complex64", "torch.float32"])
    if recipe == "real-pairs":
        _same_fsdp_training(run_ranks(fsdp_training, None, recipe), eager_fsdp)


@pytest.mark.slow
def test_fsdp2_with_inductor_trains_like_eager_fsdp2(eager_fsdp):
    _same_fsdp_training(run_ranks(fsdp_training, "inductor", "real-pairs", timeout=1500), eager_fsdp)


@pytest.fixture(scope="module")
def eager_dtensor():
    """What each DTensor program must give: eager DTensors' results, or realify's on plain
    tensors for the programs where realify differs from eager on purpose."""
    return run_ranks(dtensor_programs, None) | plain_programs(DIFFERS_FROM_EAGER)


def _same_dtensor_results(got, expected):
    assert got.keys() == expected.keys() == DTENSOR_PROGRAMS.keys()
    for name, e in expected.items():
        g = got[name]
        # realify compiled the forward and the backward graph, the DTensor's dispatch their shards
        assert g["graphs"] >= 2, (name, g["graphs"])
        np.testing.assert_allclose(g["out"], e["out"], rtol=1e-5, atol=1e-5, err_msg=name)
        for got_grad, expected_grad in zip(g["grads"], e["grads"]):
            assert (got_grad is None) == (expected_grad is None), name
            if expected_grad is not None:
                np.testing.assert_allclose(got_grad, expected_grad, rtol=1e-5, atol=1e-5, err_msg=name)


def test_complex_dtensor_programs_match_eager(eager_dtensor):
    """Sharded and replicated complex DTensors through the backend, forward and backward:
    AOTAutograd runs the DTensor's dispatch (sharding, collectives) on the complex program and
    realify compiles the plain graphs of local shards it yields (backend.py). Inputs include
    inf, nan and both sides of the log/sqrt branch cut (against realify on plain tensors: the
    program adds infinite values, which realify adds per part and eager through a complex
    product) and a non-contiguous sharded input."""
    _same_dtensor_results(run_ranks(dtensor_programs, "eager"), eager_dtensor)


@pytest.mark.slow
def test_complex_dtensor_programs_through_inductor_match_eager(eager_dtensor):
    _same_dtensor_results(run_ranks(dtensor_programs, "inductor", timeout=1500), eager_dtensor)
