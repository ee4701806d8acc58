"""Eager islands: a complex op without a planar rule, called as ``realify::eager_island``
inside the real graph, compiles with the default inner compiler (Inductor) and the eager one,
and its values and gradients match eager complex PyTorch.

Every complex op of OpInfo has a rule (the OpInfo table tests run the compile front ends in
strict mode, where an island is a MissingRuleError), so the island here is a user's own custom
op (tests/no_rule_ops.py), which stays an island whatever rules realify gains: its gradients,
its first call under a dispatch mode, its backward's strides, its warning.
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
from no_rule_ops import PHASE_TWIST, phase_twist

import realify

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

def _axis_points() -> torch.Tensor:
    """Complex values made from real data: the real axis with +0 and -0 imaginary parts, and
    the imaginary axis with signed zero real parts, 0 itself among them."""
    x = torch.tensor([-3.0, -1.0, -0.0, 0.0, 0.5, 2.0])
    zero = torch.zeros_like(x).copysign(torch.tensor([1.0, -1.0]).repeat(3))
    return torch.stack([torch.complex(x, zero), torch.complex(zero, x)])


@pytest.mark.parametrize("front_end", ["torch.compile inductor", "realify.compile eager"])
def test_custom_op_island_gradients_match_eager(front_end):
    """A user's own complex custom op (their kernel wrapped with torch.library, which realify
    cannot know) runs as an island, and its backward island runs the op's registered autograd
    formula: values and gradients are eager's, for a transposed (non-contiguous) input and at
    points on the axes, where the parts' zeros are signed. (Such an island's backward once
    failed: torch.func.vjp refuses the autograd.Function that torch.library builds.)"""
    def f(a, w):
        return phase_twist(a) * 1j, phase_twist(w)

    torch.manual_seed(0)
    base = torch.randn(4, 3, dtype=torch.complex64)
    cotangents = [torch.randn(3, 4, dtype=torch.complex64), torch.randn(2, 6, dtype=torch.complex64)]
    eager_leaves = [base.clone().requires_grad_(), _axis_points().requires_grad_()]
    compiled_leaves = [t.detach().clone().requires_grad_() for t in eager_leaves]
    assert not compiled_leaves[0].mT.is_contiguous()
    if front_end == "torch.compile inductor":
        compiled = torch.compile(f, backend="realify")
    else:
        compiled = realify.compile(f, inner="eager")

    expected = f(eager_leaves[0].mT, eager_leaves[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the island warning, once per op and process
        actual = compiled(compiled_leaves[0].mT, compiled_leaves[1])
    torch.testing.assert_close(actual, expected)
    # the island returns what eager's kernel returned: on the axes, each part's sign of zero too
    signs = [torch.view_as_real(out.detach()).signbit() for out in (actual[1], expected[1])]
    assert torch.equal(*signs)
    torch.autograd.backward(expected, cotangents)
    torch.autograd.backward(actual, cotangents)
    for compiled_leaf, eager_leaf in zip(compiled_leaves, eager_leaves):
        torch.testing.assert_close(compiled_leaf.grad, eager_leaf.grad)


def test_island_first_call_under_a_dispatch_mode():
    """An island's kernel keeps eager's lazy conjugation when it runs under a
    TorchDispatchMode, as AOTAutograd runs a compiled graph's first call: the backward
    island differentiates the op under autograd, and the product's derivative in its formula
    multiplies by a lazily conjugated view (with the Conjugate key dropped, this gradient is off
    by 4.5)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(z):
        return phase_twist(z)

    torch.manual_seed(0)
    z = torch.randn(2, 4, 4, dtype=torch.complex64)
    cotangent = torch.randn(2, 4, 4, dtype=torch.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the island warning, once per op and process
        gm = realify.decompose(f, [z], on_missing=realify.engine.islands.island_call)
    assert realify.engine.islands.islands_in(gm) == [PHASE_TWIST]
    compiled_z, eager_z = z.clone().requires_grad_(), z.clone().requires_grad_()
    with PassThrough():
        (out,) = gm(compiled_z)
        (grad,) = torch.autograd.grad(out, compiled_z, cotangent)
    expected = f(eager_z)
    (expected_grad,) = torch.autograd.grad(expected, eager_z, cotangent)
    torch.testing.assert_close(out, expected, rtol=1.3e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1.3e-5, atol=1e-5)


def test_island_backward_strides_match_its_fake():
    """The backward island's outputs are laid out as its fake implementation says (Inductor
    asserts it): gradients of a transposed complex input through Inductor."""
    def f(z):
        return phase_twist(z.mT * 1j).abs().sum()

    z = torch.randn(3, 3, dtype=torch.complex64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = realify.compile(f, inner="inductor")(z)
    (g,) = torch.autograd.grad(out, z)
    (expected,) = torch.autograd.grad(f(z), z)
    torch.testing.assert_close(out, f(z), rtol=1.3e-5, atol=1e-5)
    torch.testing.assert_close(g, expected, rtol=1.3e-5, atol=1e-5)


def test_island_warning_and_log_point_at_the_users_line(monkeypatch, caplog):
    """The island warning is shown at the line of the user's program that calls the op (not
    inside realify), and the backend's log line carries no second "realify:" prefix."""
    import inspect

    monkeypatch.setattr(realify.engine.islands, "_WARNED", set())  # warned once per op per process

    def f(z):
        return phase_twist(z) * 2

    line = inspect.getsourcelines(f)[1] + 1
    z = torch.randn(3, 3, dtype=torch.complex64)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="realify"):
        warnings.simplefilter("always")
        torch.testing.assert_close(realify.compile(f, inner="eager")(z), f(z))
    shown = [w for w in caught if "eager island" in str(w.message)]
    assert [(w.filename, w.lineno) for w in shown] == [(__file__, line)], [str(w.message) for w in caught]
    logged = [r.getMessage() for r in caplog.records if "eager island" in r.getMessage()]
    assert logged and not any(m.startswith("realify:") for m in logged), logged
