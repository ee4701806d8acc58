"""Arguments given as tensors whose values a trace reads: tensor_split's split points and
number of sections, narrow's start. Each graph is traced once and run at other values,
against eager's values and gradients."""

from __future__ import annotations

import pytest
import torch

import realify

C64 = torch.complex64


def _randc(*shape):
    return torch.randn(*shape, dtype=C64, requires_grad=True)


def _values_and_gradient(fn, z, *args):
    """fn's outputs and the gradient of a fixed real function of them with respect to z."""
    out = fn(z, *args)
    parts = list(out) if isinstance(out, (tuple, list)) else [out]
    generator = torch.Generator().manual_seed(1)
    loss = sum((p * torch.randn(p.shape, dtype=C64, generator=generator).conj()).real.sum() for p in parts)
    (grad,) = torch.autograd.grad(loss, z)
    return [p.detach() for p in parts], grad


def _assert_like_eager(fn, got_fn, z, *args):
    got, got_grad = _values_and_gradient(got_fn, z, *args)
    expected, expected_grad = _values_and_gradient(fn, z, *args)
    assert [g.shape for g in got] == [e.shape for e in expected]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got_grad, expected_grad)


def _split(z, points):
    return torch.tensor_split(z, points, dim=1)


def _split_and_scale(z, points):
    return [part * (k + 1) for k, part in enumerate(torch.tensor_split(z.sin(), points, dim=1))]


# torch 2.13's Inductor lowers a slice at an unbacked start with a guard on its sign (u < 0),
# which the graph cannot answer: the points' range facts (torch._check) stay in the trace that
# made them, not in the graph the inner compiler re-traces. 2.14 decides it without a guard.
_INDUCTOR_SLICES = pytest.param("inductor", marks=pytest.mark.xfail(
    torch.__version__ < (2, 14), reason="torch 2.13's Inductor guards on the sign of a slice's unbacked start "
                                       "(GuardOnDataDependentSymNode)", strict=True))


@pytest.mark.parametrize("inner", ["eager", _INDUCTOR_SLICES])
@pytest.mark.parametrize("program", [_split, _split_and_scale])
def test_tensor_split_at_tensor_points_with_captured_scalars(program, inner):
    """With capture_scalar_outputs, dynamo captures tensor_split at a tensor's points (the
    default backend compiles it); realify's graph reads the points as unbacked numbers, and one
    compiled graph gives eager's values and gradients at other points, negative, descending
    and beyond the size included. The parts as outputs (views of the input) and as operands."""
    torch._dynamo.reset()
    before = torch._dynamo.utils.counters["realify"]["graphs"]
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = realify.compile(program, inner=inner, fullgraph=True, dynamic=False)
        for cut in ([1, 4], [0, 2], [3, 3], [-2, 4], [4, 1], [2, 9]):
            z, points = _randc(3, 6), torch.tensor(cut)
            # without gradients (an inference graph), then with them (forward and backward graphs)
            got, expected = compiled(z.detach(), points), program(z.detach(), points)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e)
            _assert_like_eager(program, compiled, z, points)
    assert torch._dynamo.utils.counters["realify"]["graphs"] > before  # realify compiled the op


def _sections(z, count):
    return [part.exp() * (k + 1) for k, part in enumerate(torch.tensor_split(z, count, dim=-1))]


def test_decompose_tensor_split_at_a_tensor_number_of_sections():
    """A number of sections given as a tensor is the number of results: decompose of a plain
    callable makes the graph for the example's number, as it fixes sizes, with eager's values
    and gradients; the graph raises when the tensor holds another number."""
    z = _randc(4, 7)
    gm = realify.decompose(_sections, [z.detach(), torch.tensor(3)])

    def run(z, count):
        return gm(z, count)

    _assert_like_eager(_sections, run, z, torch.tensor(3))
    with pytest.raises(RuntimeError, match="traced for 3 sections"):
        gm(z.detach(), torch.tensor(2))


def _narrowed(z, start):
    return torch.narrow(z.exp(), 1, start, 2) * 2


def test_decompose_narrow_at_a_tensor_start():
    """narrow's start given as a tensor, read as an unbacked number in decompose's trace of a
    plain callable: the graph traced at one start gives eager's values and gradients at every
    start eager accepts, negative ones included, and raises where eager raises."""
    z = _randc(4, 5, 3)
    gm = realify.decompose(_narrowed, [z.detach(), torch.tensor(1)])

    def run(z, start):
        return gm(z, start)

    accepted = 0
    for start in range(-6, 7):
        try:
            _narrowed(z, torch.tensor(start))
        except (IndexError, RuntimeError):
            with pytest.raises(RuntimeError, match="narrow"):
                gm(z.detach(), torch.tensor(start))
            continue
        _assert_like_eager(_narrowed, run, z, torch.tensor(start))
        accepted += 1
    assert accepted == 8  # -5 ... -2 and 0 ... 3
