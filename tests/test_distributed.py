"""realify inside torch.distributed: two gloo processes on 127.0.0.1 (tests/distributed_support.py)
train a stack of spectral layers with complex parameters, compared with eager DDP.

DDPOptimizer's graph splitting compiles one piece per gradient bucket and runs each compiled
piece on fake tensors to trace the next; each piece is a separate realify graph whose complex
values cross to the next piece with eager's strides (which Inductor's code asserts)."""

from __future__ import annotations

import numpy as np
import pytest
import torch.distributed as dist

from distributed_support import ddp_training, run_ranks

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
