"""Pooling, resampling and normalization on complex tensors (realify/rules/pooling.py), through
(a) the eager ComplexTensor front end and (b) realify.decompose, plus the compile backend.

Eager PyTorch has no complex kernel for average pooling or interpolation (it raises
NotImplementedError), so the reference is what such a kernel computes for these real-linear
ops: the op applied to the real and to the imaginary part. Where eager does define the complex
result (``adaptive_avg_pool2d(z, 1)`` is a mean) the reference is eager itself. Max pooling
and batch/group normalization have no complex definition: realify raises, as eager does.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from backend_support import RecordingInner
from torch.utils._pytree import tree_unflatten

import realify
from realify import ComplexTensor
from realify.rules.pooling import UndefinedForComplexError
from realify.tensor import unwrap_complex, wrap_complex

aten = torch.ops.aten
COMPLEX_DTYPES = [torch.complex64, torch.complex128]

# name -> (fn, input shape); inputs are (N, C, *spatial) unless the name says unbatched
LINEAR = {
    "avg_pool1d": (lambda z: F.avg_pool1d(z, 3, 2, 1), (2, 3, 9)),
    "avg_pool1d_ceil_exclude_pad": (lambda z: F.avg_pool1d(z, 2, 2, 1, ceil_mode=True, count_include_pad=False),
                                    (2, 3, 8)),
    "avg_pool2d": (lambda z: F.avg_pool2d(z, 3, 2, 1), (2, 3, 7, 6)),
    "avg_pool2d_divisor_ceil": (lambda z: F.avg_pool2d(z, (2, 3), divisor_override=2, ceil_mode=True), (2, 3, 7, 8)),
    "avg_pool2d_unbatched": (lambda z: F.avg_pool2d(z, 2), (3, 6, 6)),
    "avg_pool3d": (lambda z: F.avg_pool3d(z, 2, stride=(1, 2, 2), padding=1), (1, 2, 4, 5, 6)),
    "adaptive_avg_pool1d": (lambda z: F.adaptive_avg_pool1d(z, 4), (2, 3, 9)),
    "adaptive_avg_pool2d": (lambda z: F.adaptive_avg_pool2d(z, (4, 3)), (2, 3, 7, 8)),
    "adaptive_avg_pool3d": (lambda z: F.adaptive_avg_pool3d(z, (2, 3, 4)), (1, 2, 4, 5, 6)),
    "nearest1d": (lambda z: F.interpolate(z, scale_factor=2, mode="nearest"), (2, 3, 5)),
    "nearest2d_size": (lambda z: F.interpolate(z, size=(5, 11), mode="nearest"), (2, 3, 4, 6)),
    "nearest3d": (lambda z: F.interpolate(z, scale_factor=(1, 2, 3), mode="nearest"), (1, 2, 3, 3, 2)),
    "nearest_exact2d": (lambda z: F.interpolate(z, size=(7, 3), mode="nearest-exact"), (2, 3, 4, 6)),
    "linear": (lambda z: F.interpolate(z, size=13, mode="linear"), (2, 3, 5)),
    "linear_align_corners": (lambda z: F.interpolate(z, scale_factor=2.5, mode="linear", align_corners=True),
                             (2, 3, 5)),
    "bilinear": (lambda z: F.interpolate(z, size=(5, 11), mode="bilinear"), (2, 3, 4, 6)),
    "bilinear_antialias": (lambda z: F.interpolate(z, size=(3, 2), mode="bilinear", antialias=True), (2, 3, 8, 7)),
    "bicubic": (lambda z: F.interpolate(z, scale_factor=1.7, mode="bicubic", align_corners=True), (2, 3, 4, 5)),
    "bicubic_antialias": (lambda z: F.interpolate(z, size=(3, 4), mode="bicubic", antialias=True), (2, 3, 8, 7)),
    "trilinear": (lambda z: F.interpolate(z, size=(5, 3, 7), mode="trilinear"), (1, 2, 3, 4, 5)),
    "area": (lambda z: F.interpolate(z, size=(3, 4), mode="area"), (2, 3, 7, 8)),
    "upsample_recompute_scale": (lambda z: F.interpolate(z, scale_factor=1.5, mode="bilinear",
                                                        recompute_scale_factor=True), (2, 3, 4, 6)),
    "global_avg_pool": (lambda z: F.adaptive_avg_pool2d(z, 1), (2, 3, 4, 5)),  # eager: a mean
}
EAGER_DEFINED = {"global_avg_pool"}


def rand(shape, dtype, seed=0):
    torch.manual_seed(seed + sum(shape))
    return torch.randn(shape, dtype=dtype)


def partwise(fn, z):
    """fn(re) + fn(im) i: what a complex kernel of a real-linear op computes."""
    return torch.complex(fn(z.real), fn(z.imag))


def reference(name, z):
    fn = LINEAR[name][0]
    return fn(z) if name in EAGER_DEFINED else partwise(fn, z)


def run_eager(fn, z):
    return unwrap_complex(fn(wrap_complex(z)))


def run_decompose(fn, z):
    gm = realify.decompose(fn, [z])  # raises ComplexLeakError if a complex value is left inside
    return tree_unflatten(gm(z), gm.realify_signature.out_spec)


FRONT_ENDS = {"eager": run_eager, "decompose": run_decompose}


def tolerance(dtype):
    return dict(rtol=1e-9, atol=1e-9) if dtype == torch.complex128 else dict(rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES, ids=str)
@pytest.mark.parametrize("name", list(LINEAR))
@pytest.mark.parametrize("front_end", list(FRONT_ENDS))
def test_linear_pooling_values(front_end, name, dtype):
    fn, shape = LINEAR[name]
    z = rand(shape, dtype)
    out = FRONT_ENDS[front_end](fn, z)
    expected = reference(name, z)
    assert not isinstance(out, ComplexTensor)
    assert out.dtype == dtype and out.shape == expected.shape
    torch.testing.assert_close(out, expected, **tolerance(dtype))


@pytest.mark.parametrize("name", sorted(set(LINEAR) - EAGER_DEFINED))
def test_eager_has_no_complex_kernel(name):
    # why the reference is partwise: if this starts failing, eager gained a complex kernel and
    # becomes the reference (move the name to EAGER_DEFINED)
    fn, shape = LINEAR[name]
    with pytest.raises(NotImplementedError):
        fn(rand(shape, torch.complex64))


@pytest.mark.parametrize("name", ["avg_pool2d", "adaptive_avg_pool2d", "bilinear", "bicubic_antialias",
                                  "nearest3d", "trilinear"])
def test_decomposed_graph_runs_the_real_op_on_each_part(name):
    # one real kernel per part, not a gather/weights decomposition
    fn, shape = LINEAR[name]
    gm = realify.decompose(fn, [rand(shape, torch.complex64)])
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    pooled = [n for n in calls if "pool" in str(n.target) or "upsample" in str(n.target)]
    assert len(pooled) == 2, gm.code
    assert all(n.meta["val"].dtype == torch.float32 for n in pooled)
    assert not any(n.target in (aten.index.Tensor, aten._unsafe_index.Tensor) for n in calls), gm.code


# ---- gradients ------------------------------------------------------------------------------


def _loss(out, weight):
    # a real loss that sees both parts of every output element
    return (out.real * weight.real + out.imag * weight.imag).sum()


def _reference_grad(name, z, weight):
    re, im = z.real.clone().requires_grad_(), z.imag.clone().requires_grad_()
    _loss(reference(name, torch.complex(re, im)), weight).backward()
    return torch.complex(re.grad, im.grad)


@pytest.mark.parametrize("name", list(LINEAR))
def test_decomposed_graph_gradients(name):
    # the real graph (a planar (2, *shape) input), differentiated by autograd
    dtype = torch.complex128
    fn, shape = LINEAR[name]
    z = rand(shape, dtype)
    weight = rand(tuple(reference(name, z).shape), dtype, seed=1)
    gm = realify.decompose(fn, [z], inputs="planar")
    planar = torch.stack([z.real, z.imag]).requires_grad_()
    _loss(tree_unflatten(gm(planar), gm.realify_signature.out_spec), weight).backward()
    torch.testing.assert_close(torch.complex(planar.grad[0], planar.grad[1]), _reference_grad(name, z, weight),
                               **tolerance(dtype))


@pytest.mark.parametrize("name", ["avg_pool2d", "bilinear"])
def test_autograd_refuses_complex_pooling_before_realify(name):
    # PyTorch's autograd (VariableType) rejects these ops on complex values that require grad,
    # before __torch_dispatch__ or a compile backend sees them: no rule can change it. If this
    # starts failing, PyTorch allows it: test the ComplexTensor and compile gradients instead.
    fn, shape = LINEAR[name]
    z = rand(shape, torch.complex64)
    re, im = z.real.clone().requires_grad_(), z.imag.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        fn(ComplexTensor(re, im))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="does not support automatic differentiation"):
        realify.compile(fn, inner="eager", fullgraph=True)(z.clone().requires_grad_())


# ---- undefined for complex: max pooling, batch/group norm ---------------------------------------

UNDEFINED = {
    "max_pool1d": (lambda z: F.max_pool1d(z, 2), (2, 3, 8), "no order"),
    "max_pool2d": (lambda z: F.max_pool2d(z, 2), (2, 3, 6, 6), "no order"),
    "max_pool2d_indices": (lambda z: F.max_pool2d(z, 3, 1, return_indices=True), (2, 3, 6, 6), "no order"),
    "max_pool3d": (lambda z: F.max_pool3d(z, 2), (1, 2, 4, 4, 4), "no order"),
    "adaptive_max_pool2d": (lambda z: F.adaptive_max_pool2d(z, 3), (2, 3, 6, 6), "no order"),
    "adaptive_max_pool3d": (lambda z: F.adaptive_max_pool3d(z, 2), (1, 2, 4, 4, 4), "no order"),
    "fractional_max_pool2d": (lambda z: F.fractional_max_pool2d(z, 2, output_size=3), (2, 3, 6, 6), "no order"),
    "batch_norm": (lambda z: F.batch_norm(z, None, None, training=True), (2, 3, 4), "normalization"),
    "batch_norm_eval": (lambda z: F.batch_norm(z, torch.zeros(3), torch.ones(3)), (2, 3, 4), "normalization"),
    "instance_norm": (lambda z: F.instance_norm(z), (2, 3, 4), "normalization"),
    "group_norm": (lambda z: F.group_norm(z, 3), (2, 3, 4), "normalization"),
}


@pytest.mark.parametrize("name", list(UNDEFINED))
@pytest.mark.parametrize("front_end", list(FRONT_ENDS))
def test_undefined_ops_raise_a_clear_error(front_end, name):
    fn, shape, what = UNDEFINED[name]
    z = rand(shape, torch.complex64)
    with pytest.raises(NotImplementedError):  # eager rejects complex as well
        fn(z)
    with pytest.raises(UndefinedForComplexError, match=f"not defined for complex tensors: .*{what}") as info:
        FRONT_ENDS[front_end](fn, z)
    assert isinstance(info.value, NotImplementedError)  # same kind of error as eager's
    assert "aten." in str(info.value)  # names the op


def test_max_pool_of_magnitude_is_the_suggested_alternative():
    # the error's advice works: pool |z| and gather z at the indices, through every front end
    def max_magnitude_pool(z):
        _, idx = F.max_pool2d(z.abs(), 2, return_indices=True)
        return z.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)

    z = rand((2, 3, 6, 6), torch.complex64)
    expected = max_magnitude_pool(z)
    for run in FRONT_ENDS.values():
        torch.testing.assert_close(run(max_magnitude_pool, z), expected)


# ---- compile backend --------------------------------------------------------------------------


class Resampler(torch.nn.Module):
    """Complex features: bilinear upsampling, a complex 1x1 convolution, average pooling,
    adaptive average pooling and area interpolation."""

    def __init__(self, pool=F.avg_pool2d, adaptive=F.adaptive_avg_pool2d, interpolate=F.interpolate):
        super().__init__()
        self.mix = torch.nn.Conv2d(3, 3, 1, dtype=torch.complex64)
        self.pool, self.adaptive, self.interpolate = pool, adaptive, interpolate

    def forward(self, z):
        up = self.interpolate(z, scale_factor=2, mode="bilinear")
        pooled = self.pool(self.mix(up), 3, stride=2, padding=1)
        return self.adaptive(pooled, (2, 3)) + self.interpolate(z, size=(2, 3), mode="area")


def _per_part(fn):
    return lambda z, *args, **kwargs: partwise(lambda p: fn(p, *args, **kwargs), z)


@pytest.mark.parametrize("inner", ["record", "inductor"])
@torch.no_grad()  # autograd refuses complex pooling (see above): inference
def test_compile_pooling_model(inner):
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = Resampler()
    reference_model = Resampler(_per_part(F.avg_pool2d), _per_part(F.adaptive_avg_pool2d), _per_part(F.interpolate))
    reference_model.load_state_dict(model.state_dict())
    z = rand((2, 3, 5, 6), torch.complex64)
    rec = RecordingInner() if inner == "record" else inner
    out = realify.compile(model, inner=rec, fullgraph=True)(z)
    torch.testing.assert_close(out, reference_model(z), rtol=1e-5, atol=1e-5)
    if inner == "record":
        assert rec.complex_nodes() == []
        # the real graph realify hands over (aot_autograd may decompose upsampling further)
        real_graph = next(gm for kind, gm in rec.graphs if kind == "dynamo")
        targets = {n.target for n in real_graph.graph.nodes}
        assert {aten.upsample_bilinear2d.default, aten.avg_pool2d.default, aten._adaptive_avg_pool2d.default} <= targets
