"""Symbolic sizes through the compile backend: ``dynamic=True``, and dynamo's automatic
dynamic recompile when a size changes between calls (what an LLM's rotary embedding sees as
the sequence length varies). Every result is compared with eager complex PyTorch.

Symbolic traces run with the Python dispatcher, as AOTAutograd's do: without it, C++ kernels
that read concrete sizes (a complex slice's ``storage_offset()``, ``constant_pad_nd``'s pads)
raise during realify's own tracing.
"""

from __future__ import annotations

import pytest
import torch
from backend_support import RecordingInner, complex_nodes
from torch.utils._pytree import tree_leaves

import realify
from realify.bench.workloads import WORKLOADS, apply_rotary_emb, rotary_freqs

pytestmark = pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd is returning a function")


def _assert_like_eager(got, expected, rtol=1e-5, atol=1e-5):
    for g, e in zip(tree_leaves(got), tree_leaves(expected), strict=True):
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol)


@pytest.mark.parametrize("inner", ["record", "inductor"])
def test_rotary_sequence_length_changes(inner):
    """The second sequence length recompiles with a symbolic length (automatic dynamic)."""
    torch._dynamo.reset()
    rec = RecordingInner() if inner == "record" else inner
    compiled = realify.compile(apply_rotary_emb, inner=rec, fullgraph=True)
    for seq in (8, 12, 20):
        q = torch.randn(2, seq, 2, 16, requires_grad=True)
        k = torch.randn(2, seq, 2, 16)
        freqs = rotary_freqs(seq, 16)
        out = compiled(q, k, freqs)
        (grad,) = torch.autograd.grad(out[0].square().sum(), q)
        expected = apply_rotary_emb(q, k, freqs)
        (expected_grad,) = torch.autograd.grad(expected[0].square().sum(), q)
        _assert_like_eager((out, grad), (expected, expected_grad))
    if inner == "record":
        dynamo_graphs = [gm for kind, gm in rec.graphs if kind == "dynamo"]
        assert len(dynamo_graphs) == 2  # one static, one symbolic: no recompile per length
        assert not any(complex_nodes(gm) for kind, gm in rec.graphs if kind != "dynamo")


# the workloads at their test size, forward and training, with every size symbolic; the
# recording inner compiler keeps this to realify's own tracing (Inductor's symbolic code
# generation is PyTorch's), rotary above runs both
_VARIANTS = [(name, train) for name in WORKLOADS if not name.startswith("gemm-") for train in (False, True)
             if train is False or WORKLOADS[name].trainable] + [("gemm-256", False)]


@pytest.mark.parametrize("name,train", _VARIANTS, ids=[f"{n}-{'train' if t else 'fwd'}" for n, t in _VARIANTS])
def test_workload_with_dynamic_shapes(name, train):
    torch._dynamo.reset()
    fn, inputs = WORKLOADS[name].make("tiny", train, seed=0)
    # one graph each, the third-party models too, but for tensorly's opt_einsum plugin (what
    # neuraloperator turns on): its cache key joins the shapes into a string, which dynamo
    # does not trace for symbolic shapes (with static shapes it is one graph)
    fullgraph = name != "neuralop-fno"
    compiled = realify.compile(fn, inner=RecordingInner(), dynamic=True, fullgraph=fullgraph)
    leaves = [t for t in [*getattr(fn, "parameters", list)(), *tree_leaves(inputs)]
              if isinstance(t, torch.Tensor) and t.requires_grad]

    def run(f):
        with torch.set_grad_enabled(train):
            out = f(*inputs)
        return (out, torch.autograd.grad(out, leaves)) if train else out

    _assert_like_eager(run(compiled), run(fn), rtol=1e-4, atol=1e-5)
