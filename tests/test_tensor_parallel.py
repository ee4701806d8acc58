"""Parallel training as large models run it, on complex values, in two gloo processes
(tests/parallel_support.py): tensor parallelism (a column- then row-parallel MLP, a complex
attention block, their sequence-parallel form), every functional collective and DTensor
redistribution of complex values, random complex programs over sharded, replicated and partial
DTensors, DDPOptimizer pieces of every kind under Inductor, and per-block compilation with
FSDP2 and activation checkpointing. Each against eager (and tensor parallelism against the
single-process model too).

Tolerances: float32 rounding of sums reordered across ranks and of realify's real GEMMs
(complex64 values of order 1 to 100, sums of at most 64 products): ``rtol=1e-5, atol=1e-5``
for values and gradients, as tests/test_distributed.py; a lost reduction or a wrong gradient is
off by O(1).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch.distributed as dist
from distributed_support import run_ranks
from parallel_support import (
    COLLECTIVES,
    TP_MODELS,
    collectives,
    ddp_pieces,
    dtensor_random_programs,
    fsdp_over_tp,
    per_block_fsdp,
    random_dtensor_program,
    single_process_tp_reference,
    tensor_parallel,
)

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="this torch build has no gloo backend")

TOL = dict(rtol=1e-5, atol=1e-5)


def _close(got, expected, what: str) -> None:
    if isinstance(expected, dict):
        assert got.keys() == expected.keys(), what
        for key in expected:
            _close(got[key], expected[key], f"{what}/{key}")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), what
        for i, (g, e) in enumerate(zip(got, expected)):
            _close(g, e, f"{what}[{i}]")
    elif expected is None:
        assert got is None, f"{what}: a gradient where eager has none"
    elif isinstance(expected, np.ndarray):
        np.testing.assert_allclose(got, expected, err_msg=what, **TOL)


@pytest.mark.parametrize("name", TP_MODELS)
def test_tensor_parallel_complex_layers_under_inductor(name):
    """The issue's programs (a Megatron MLP, a complex attention block) and the MLP's
    sequence-parallel form: output, input gradient and every parameter gradient against the
    single-process model and against eager tensor parallelism."""
    got = run_ranks(tensor_parallel, name, "inductor", timeout=1200)
    eager = run_ranks(tensor_parallel, name, None)
    single = single_process_tp_reference(name)
    assert got["graphs"] >= 2, got["graphs"]  # realify compiled the forward and backward graphs
    _close({k: got[k] for k in single}, single, f"{name} against one process")
    _close({k: got[k] for k in single}, {k: eager[k] for k in single}, f"{name} against eager TP")


@pytest.fixture(scope="module")
def eager_collectives():
    return run_ranks(collectives, None)


def test_collectives_and_redistributions_of_complex_values(eager_collectives):
    got = run_ranks(collectives, "eager")
    assert set(got) == set(COLLECTIVES)
    _close(got, eager_collectives, "collective")


SEEDS = list(range(16))


def test_random_programs_over_sharded_replicated_and_partial_dtensors():
    """The differential test the partial sums were missing from: random complex programs over
    DTensors of every placement (Partial too), realify against eager DTensor."""
    got = run_ranks(dtensor_random_programs, SEEDS, "eager", timeout=900)
    expected = run_ranks(dtensor_random_programs, SEEDS, None)
    for seed in SEEDS:
        lines, placements = random_dtensor_program(seed)
        _close(got[seed], expected[seed], f"seed {seed}, placements {placements}:\n" + "\n".join(lines))


def test_ddp_pieces_of_every_kind_under_inductor():
    """DDPOptimizer splits the model at each bucket: pieces with no complex value, outputs that
    view other outputs, a fresh complex tensor the next piece writes, a complex value that only
    passes through, a piece that ends at a graph break, a buffer written in place. Losses,
    trained parameters and buffers as eager DDP's."""
    expected = run_ranks(ddp_pieces, None)
    got = run_ranks(ddp_pieces, "inductor", timeout=1500)
    assert got["graphs"] > 3, got["graphs"]
    np.testing.assert_allclose(got["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    _close(got["parameters"], expected["parameters"], "parameter")
    _close(got["buffers"], expected["buffers"], "buffer")


def test_per_block_compile_with_fsdp2_and_activation_checkpointing():
    expected = run_ranks(per_block_fsdp, None)
    got = run_ranks(per_block_fsdp, "eager")
    assert got["graphs"] >= 1, got["graphs"]  # the blocks share one compiled graph (their parameters are inputs)
    np.testing.assert_allclose(got["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    _close(got["parameters"], expected["parameters"], "parameter")


def test_fsdp2_over_tensor_parallelism():
    expected = run_ranks(fsdp_over_tp, None)
    got = run_ranks(fsdp_over_tp, "eager")
    assert got["graphs"] >= 2, got["graphs"]
    np.testing.assert_allclose(got["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    _close(got["parameters"], expected["parameters"], "parameter")
