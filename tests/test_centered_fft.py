"""Centered FFTs (realify/passes/centered_fft.py): half-size rolls around a transform become sign
modulations where the size is even, and stay rolls where it is odd. Against eager complex
PyTorch: values and gradients over programs (both shifts, one of them, a roll with a dim of
its own, one-sided transforms, a transform with a second reader), norms, size parities and
input layouts; under Inductor; through realify.export and ONNX Runtime.

The bound (docs/numerics.md, "Centered FFTs"): a transform of the modulated input is a
different FFT computation from the transform of the rolled one, equal in exact arithmetic;
each element is within 8 eps log2(N) of the largest element of eager's result (the FFT's
normwise error bound, N the transform's size)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.export import Dim

import realify

F = torch.fft
aten = torch.ops.aten
C64 = torch.complex64
DIMS = (-2, -1)
# each test compiles from scratch: the programs share code objects (centered's lambda), which
# dynamo would otherwise recompile past its limit
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def centered(transform, norm="ortho"):
    """``fftshift(transform(ifftshift(x)))`` over the last two dims, as fastMRI's fft2c writes it."""
    return lambda x: F.fftshift(transform(F.ifftshift(x, dim=DIMS), dim=DIMS, norm=norm), dim=DIMS)


PROGRAMS = {
    "fft2c-ortho": centered(F.fft2),
    "ifft2c-backward": centered(F.ifft2, "backward"),
    "fftn-forward": centered(F.fftn, "forward"),
    "fft-of-dim-0": lambda x: F.fftshift(F.fft(F.ifftshift(x, dim=0), dim=0), dim=0),
    "output-shift-only": lambda x: F.fftshift(F.fftn(x, dim=(1, 2)), dim=(1, 2)),
    "input-shift-only": lambda x: F.ifftn(F.ifftshift(x, dim=1), dim=(1, 2)),
    "roll-with-a-dim-of-its-own": lambda x: torch.roll(
        F.fft(torch.roll(x, (x.shape[-1] // 2, 1), (-1, 0)), dim=-1), -(x.shape[-1] // 2), -1),
    "rfft2-of-a-centered-signal": lambda x: F.rfft2(F.ifftshift(x.real, dim=DIMS)),
    "irfft2-centered": lambda x: F.fftshift(F.irfft2(x, s=(x.shape[-2], 2 * (x.shape[-1] - 1))), dim=DIMS),
    "spectrum-read-twice": lambda x: (lambda y: (F.fftshift(y, dim=DIMS), y.abs()))(F.fft2(F.ifftshift(x, dim=DIMS))),
}
# even sizes 0 and 2 mod 4 ((-1)^(n/2) both ways), odd sizes, and one of each
SHAPES = [(3, 8, 6), (2, 6, 10), (2, 5, 7), (2, 4, 9)]


def _bound(expected: torch.Tensor, n: int) -> float:
    eps = torch.finfo(expected.real.dtype if expected.is_complex() else expected.dtype).eps
    return 8 * eps * math.log2(max(n, 2)) * float(expected.detach().abs().max())


def _assert_within_fft_bound(actual, expected, n: int, what: str) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype and a.shape == e.shape, f"{what} {i}: {a.dtype} {a.shape} != {e.dtype} {e.shape}"
        torch.testing.assert_close(a, e, rtol=0, atol=_bound(e, n), msg=lambda m, i=i: f"{what} {i}: {m}")


def _loss(out) -> torch.Tensor:
    outs = out if isinstance(out, tuple) else (out,)
    weights = [torch.randn(o.shape, generator=torch.Generator().manual_seed(i)) for i, o in enumerate(outs)]
    return sum(((o.real if o.is_complex() else o) * w).sum() + (o.imag * w).sum() if o.is_complex()
               else (o * w).sum() for o, w in zip(outs, weights))


def _check(program, x: torch.Tensor, inner: str = "eager") -> None:
    n = x[0].numel()
    xe = x.detach().clone().requires_grad_()
    xr = x.detach().clone().requires_grad_()
    expected = program(xe)
    actual = realify.compile(program, inner=inner, fullgraph=True)(xr)
    _assert_within_fft_bound(actual, expected, n, "output")
    (ge,), (gr,) = torch.autograd.grad(_loss(expected), xe), torch.autograd.grad(_loss(actual), xr)
    _assert_within_fft_bound(gr, ge, n, "gradient")


def _real_graph(program, x: torch.Tensor) -> torch.fx.GraphModule:
    graphs = []

    def inner(gm, _):
        graphs.append(gm)
        return gm.forward

    realify.compile(program, inner=inner, fullgraph=True)(x)
    (graph,) = graphs
    return graph


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_centered_transform_is_eagers(name, shape):
    _check(PROGRAMS[name], torch.randn(shape, dtype=C64))


@pytest.mark.parametrize("layout", ["transposed", "conj", "strided", "complex128"])
def test_centered_transform_of_any_layout_is_eagers(layout):
    x = torch.randn(2, 8, 12, dtype=C64)
    x = {"transposed": x.transpose(-2, -1), "conj": x.conj(), "strided": torch.randn(2, 16, 12, dtype=C64)[:, ::2],
         "complex128": x.to(torch.complex128)}[layout]
    _check(PROGRAMS["fft2c-ortho"], x)


@pytest.mark.parametrize("shape,rolls", [((2, 8, 6), False), ((2, 5, 7), True), ((2, 4, 9), True)])
def test_even_sizes_leave_no_roll(shape, rolls):
    """An even dim's rolls become signs; an odd dim's stay rolls, over the odd dims alone (on
    the pairs, or on each part where the value is planar)."""
    graph = _real_graph(PROGRAMS["fft2c-ortho"], torch.randn(shape, dtype=C64))
    found = [n for n in graph.graph.nodes if n.target is aten.roll.default]
    assert bool(found) == rolls, graph.code
    assert all(n.args[0].meta["val"].shape[d] % 2 for n in found for d in n.args[2]), graph.code


def test_mri_operator_under_inductor():
    """A multi-coil forward operator, fft2c(S x) per coil, and its adjoint: the signs fuse into
    the coil products."""
    torch.manual_seed(0)
    coils = torch.randn(4, 16, 16, dtype=C64)

    def normal_step(x):
        y = centered(F.fft2)(coils * x)
        return (coils.conj() * centered(F.ifft2)(y)).sum(0)

    _check(normal_step, torch.randn(16, 16, dtype=C64), inner="inductor")


def test_exported_centered_transform_in_onnx_runtime():
    """The batch dim dynamic, the transformed dims static: the export holds signs, no rolls,
    and ONNX Runtime's result is eager's at two batch sizes."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    program = PROGRAMS["fft2c-ortho"]
    ep = realify.export(program, (torch.randn(3, 8, 6, dtype=C64),), dynamic_shapes=({0: Dim("b")},))
    assert not [n for n in ep.graph.nodes if n.target is aten.roll.default], ep.graph_module.code
    session = onnx_session(ep)
    for batch in (2, 5):
        x = torch.randn(batch, 8, 6, dtype=C64)
        _assert_within_fft_bound(realify.ComplexCallAdapter(ep)(x), program(x), 48, "exported program")
        # ONNX Runtime's DFT is not eager's FFT: the same normwise bound, four times wider
        (out,) = run_session(session, ep, [x])
        torch.testing.assert_close(out, program(x), rtol=0, atol=4 * _bound(program(x), 48))
