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
from realify.bench.workloads import WORKLOADS, WorkloadUnavailable, apply_rotary_emb, rotary_freqs

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


# the workloads at their test size, training (forward only where not trainable), with every size symbolic; the
# recording inner compiler keeps this to realify's own tracing (Inductor's symbolic code
# generation is PyTorch's), rotary above runs both
# A trainable workload runs its training step only: its forward values are checked there too
# (the forward-only compile is the same capture without the backward, and the suite's time is
# CI's)
_VARIANTS = [(name, WORKLOADS[name].trainable) for name in WORKLOADS if not name.startswith("gemm-")] + [
    ("gemm-256", False)]


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


# ---- sizes that turn symbolic: the programs users met --------------------------------------


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _custom_function(z):
    return _Double.apply(z) * 1j


def _phase_table(x):
    # a complex tensor sized only by a symbolic size (rotary tables, state vectors)
    return torch.exp(1j * torch.arange(x.shape[1]))


def _precompute_freqs_cis(x, theta):
    # Llama's rotary table: a Python float made symbolic, a slice bounded by a symbolic size
    dim, end = 2 * x.shape[-1], x.shape[-2]
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    angles = torch.outer(torch.arange(end, device=freqs.device), freqs).float()
    return x * torch.polar(torch.ones_like(angles), angles)


def _hook_reading_a_size(z):
    # a hook whose closure holds a size: a symbolic one at the second shape
    y = z * 2
    n = z.shape[-1]
    y.register_hook(lambda grad: grad * n)
    return y.exp()


_PROGRAMS = {
    "custom-function": (_custom_function,
                        lambda n: (torch.randn(2, n, dtype=torch.complex64, requires_grad=True),)),
    "hook-reads-size": (_hook_reading_a_size,
                        lambda n: (torch.randn(2, n, dtype=torch.complex64, requires_grad=True),)),
    "phase-table": (_phase_table, lambda n: (torch.randn(n, n + 1),)),
    "llama-freqs": (_precompute_freqs_cis, lambda n: (torch.randn(2, n, 8, dtype=torch.complex64, requires_grad=True),
                                                     10000.0 + n)),
}


def _graphs_kept(fn) -> int:
    """The graphs dynamo keeps for ``fn`` (one per guard set: a recompile adds one; a restart of
    the same compile, as for a Python float specialized while compiling, does not)."""
    code = (fn.forward if isinstance(fn, torch.nn.Module) else fn).__code__
    return len(torch._dynamo.eval_frame._debug_get_cache_entry_list(code))


def _aot_eager(gm, example_inputs):
    return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)


def _realify_recording(gm, example_inputs):
    return realify.realify_backend(gm, example_inputs, inner=RecordingInner(), strict=True)


def _check_calls(fn, calls, dynamic, rtol=1e-5, atol=1e-5) -> dict[str, int]:
    """``fn`` compiled by AOTAutograd's eager backend (the default backend's capture and
    autograd, without Inductor's code generation) and by realify, each called with every
    argument tuple of ``calls``: eager's values, and the gradients of every input and parameter
    that requires them; the graphs each kept."""
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    counts = {}
    for name, backend in (("aot_eager", _aot_eager), ("realify", _realify_recording)):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
        for args in calls:
            out, expected = compiled(*args), fn(*args)
            _assert_like_eager(out, expected, rtol=rtol, atol=atol)
            leaves = params + [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            if leaves:
                def loss(y):
                    return (torch.view_as_real(y) if y.is_complex() else y).square().sum()
                _assert_like_eager(torch.autograd.grad(loss(out), leaves),
                                   torch.autograd.grad(loss(expected), leaves), rtol=rtol, atol=10 * atol)
        counts[name] = _graphs_kept(fn)
    torch._dynamo.reset()
    return counts


@pytest.mark.parametrize("dynamic", [None, True], ids=["automatic", "dynamic"])
@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_program_at_three_sizes(name, dynamic):
    """Each compiles at three sizes in a row with eager's values and gradients, keeping no more
    graphs than the default backend's capture does."""
    fn, make = _PROGRAMS[name]
    counts = _check_calls(fn, [make(n) for n in (16, 24, 40)], dynamic)
    assert counts["realify"] <= counts["aot_eager"], counts


def _rotary_attention(q, k, v, freqs):
    q, k = apply_rotary_emb(q, k, freqs)
    return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))


class _SpectralConv(torch.nn.Module):
    def __init__(self, channels=4, modes=5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(channels, channels, modes, dtype=torch.cfloat) / channels)

    def forward(self, x):
        spectrum = torch.fft.rfft(x)[..., : self.weight.shape[-1]]
        return torch.fft.irfft(torch.einsum("bim,iom->bom", spectrum, self.weight), n=x.shape[-1])


_LAYERS = {
    "linear": (lambda: torch.nn.Linear(8, 6, dtype=torch.complex64),
               lambda b: (torch.randn(b, 5, 8, dtype=torch.complex64),)),
    "conv1d": (lambda: torch.nn.Conv1d(3, 4, 3, dtype=torch.complex64),
               lambda b: (torch.randn(b, 3, 12, dtype=torch.complex64),)),
    "conv2d": (lambda: torch.nn.Conv2d(2, 3, 3, padding=1, dtype=torch.complex64),
               lambda b: (torch.randn(b, 2, 6, 6, dtype=torch.complex64),)),
    "rotary-attention": (lambda: _rotary_attention,
                         lambda b: (torch.randn(b, 6, 2, 16), torch.randn(b, 6, 2, 16), torch.randn(b, 6, 2, 16),
                                    rotary_freqs(6, 16))),
    "spectral-conv": (_SpectralConv, lambda b: (torch.randn(b, 4, 32),)),
}


@pytest.mark.parametrize("dynamic", [None, True], ids=["automatic", "dynamic"])
@pytest.mark.parametrize("name", list(_LAYERS))
def test_layer_over_four_batch_sizes(name, dynamic):
    """Training over four batch sizes: eager's values and gradients, and no more graphs kept
    than with the default backend's capture."""
    make_layer, make_inputs = _LAYERS[name]
    torch.manual_seed(0)
    counts = _check_calls(make_layer(), [make_inputs(b) for b in (2, 3, 5, 8)], dynamic, rtol=1e-4)
    assert counts["realify"] <= counts["aot_eager"], counts


# the bench's third-party models, and the workloads whose complex tensors are sized by the
# batch or sequence (rotary tables, state vectors, state-space kernels), training over the
# batch sizes a data loader delivers, a last, smaller batch among them (every workload runs
# with dynamic=True in test_workload_with_dynamic_shapes above)
_BATCHED = [name for name, w in WORKLOADS.items()
            if w.trainable and "batch" in w.sizes["tiny"] and (w.third_party or name in ("rotary", "quantum", "s4d"))]


@pytest.mark.parametrize("name", _BATCHED)
def test_workload_trains_over_batch_sizes(name):
    """Eager's losses and gradients at every batch, and no more graphs kept than with the
    default backend's capture (AOTAutograd's eager backend)."""
    _train_over(name, "batch", lambda first: (first + 1, first + 3, first))


# the size each workload's users vary besides the batch: a resolution (a neural operator trains
# and runs at several grids with one set of weights), a signal or sequence length
_LENGTHS = {"neuralop-fno": "grid", "neuralop-fno-torch-einsum": "grid", "auraloss-mrstft": "samples",
            "rotary": "seq", "s4d": "L"}


@pytest.mark.parametrize("name", list(_LENGTHS))
def test_workload_trains_over_lengths(name):
    """The model built once, trained at three resolutions or lengths in a row (the second
    recompiles with that size symbolic, the third reuses it): eager's losses and gradients, and
    no more graphs kept than with the default backend's capture."""
    _train_over(name, _LENGTHS[name], lambda first: (first, first + first // 2, first + first // 4))


def _train_over(name: str, key: str, sizes) -> None:
    """The workload built once at its tiny sizes, trained at ``sizes(tiny[key])`` of ``key`` in
    a row: eager's losses and gradients, and no more graphs than the default backend's."""
    workload = WORKLOADS[name]
    tiny = workload.sizes["tiny"]
    try:
        torch.manual_seed(0)
        fn, _ = workload.builder(train=True, **tiny)
    except WorkloadUnavailable as missing:
        pytest.skip(str(missing))

    def inputs(size):
        torch.manual_seed(size)
        return workload.builder(train=True, **{**tiny, key: size})[1]

    counts = _check_calls(fn, [inputs(size) for size in sizes(tiny[key])], None, rtol=max(workload.rtol, 1e-4))
    assert counts["realify"] <= counts["aot_eager"], counts
