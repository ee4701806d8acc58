"""Eager islands under Inductor: every OpInfo op that runs as an island (a complex op without a
planar rule, called as ``realify::eager_island`` inside the real graph) compiles with the
default inner compiler, and its values and gradients match eager complex PyTorch.

The OpInfo table tests run the compile front ends in strict mode (an island is a
MissingRuleError there), so this file is where islands meet Inductor.
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
from known_failures import NO_RULE_YET
from torch.utils._pytree import tree_flatten

import realify
from realify.tools.opinfo import assert_matches, complex_ops, flatten_sample, no_test_case_lookup, op_id

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

# The OpInfo entries whose complex64 samples trace into at least one eager island
# (realify.decompose with islands allowed, every sample the table tests use): the entries of
# tests/known_failures.py's NO_RULE_YET, which have no rule yet.
# test_each_listed_op_runs_as_an_island checks that each still is; an op that starts running
# as an island fails the strict OpInfo tables until tests/known_failures.py names it, and
# belongs in that category then.
ISLAND_OPS = tuple(sorted(NO_RULE_YET.ops))


def _listed_ops() -> dict:
    """The listed ops this torch's OpInfo has."""
    by_id = {op_id(op): op for op in complex_ops()}
    return {name: by_id[name] for name in ISLAND_OPS if name in by_id}


def _ops():
    return [pytest.param(op, id=name) for name, op in _listed_ops().items()]


def _first_sample(op, dtype=torch.complex64):
    """The first sample eager accepts, its tensors made differentiable where OpInfo says so."""
    torch.manual_seed(0)
    with no_test_case_lookup():
        for sample in op.sample_inputs("cpu", dtype, requires_grad=op.supports_autograd):
            try:
                op(sample.input, *sample.args, **sample.kwargs)
            except Exception:
                continue  # eager itself rejects this sample: nothing to compare with
            return sample
    pytest.skip(f"eager PyTorch rejects every {dtype} sample of {op_id(op)}")


def _fresh(tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _differentiable(out, sample):
    leaves, _ = tree_flatten(sample.output_process_fn_grad(out))
    return [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]


def _gradients(out, inputs, sample, cotangents=None):
    outs = _differentiable(out, sample)
    if cotangents is None:
        gen = torch.Generator().manual_seed(1)
        cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in outs]
    wrt = [t for t in inputs if t.requires_grad]
    grads = torch.autograd.grad(outs, wrt, cotangents, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads)], cotangents


@pytest.mark.parametrize("op", _ops())
def test_island_under_inductor_matches_eager(op, caplog):
    name = op_id(op)
    sample = _first_sample(op)
    tensors, rebuild = flatten_sample(sample)

    def program(*ts):
        inp, args, kwargs = rebuild(list(ts))
        return op.gradcheck_wrapper(op, inp, *args, **kwargs)

    eager_inputs, compiled_inputs = _fresh(tensors), _fresh(tensors)
    expected = program(*eager_inputs)
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="realify"):
        warnings.simplefilter("ignore")  # the island warning, once per op and process
        actual = realify.compile(program, inner="inductor", strict=False, dynamic=False)(*compiled_inputs)
    assert any("eager island" in r.getMessage() for r in caplog.records), f"{name} compiled without an island"

    # the same tolerances as the OpInfo table (realify.tools.opinfo._tolerance)
    assert_matches(actual, expected)
    assert _differentiable(expected, sample)
    expected_grads, cotangents = _gradients(expected, eager_inputs, sample)
    actual_grads, _ = _gradients(actual, compiled_inputs, sample, cotangents)
    assert_matches(actual_grads, expected_grads)


def test_each_listed_op_runs_as_an_island():
    """Decompose (islands allowed) each listed op's first sample: an op that gained a rule
    leaves this list, and the table tests then cover it."""
    from realify.engine.islands import island_call, islands_in
    from realify.tools.opinfo import sample_program

    without = []
    for name, op in _listed_ops().items():
        tensors, program = sample_program(op, _first_sample(op))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gm = realify.decompose(program, [t.detach() for t in tensors], on_missing=island_call)
        if not islands_in(gm):
            without.append(name)
    assert without == [], f"no longer islands: {without}"


def test_island_first_call_under_a_dispatch_mode():
    """An island's kernel keeps eager's lazy conjugation when it runs under a
    TorchDispatchMode, as AOTAutograd runs a compiled graph's first call: the backward
    island's ``torch.func.vjp`` runs ATen's complex derivative of logcumsumexp, which reads
    lazily conjugated views (with the Conjugate key dropped, this gradient is off by 3.8)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(z):
        return torch.logcumsumexp(z, dim=1)

    torch.manual_seed(0)
    z = torch.randn(2, 4, 4, dtype=torch.complex64)
    cotangent = torch.randn(2, 4, 4, dtype=torch.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the island warning, once per op and process
        gm = realify.decompose(f, [z], on_missing=realify.engine.islands.island_call)
    assert realify.engine.islands.islands_in(gm) == ["aten.logcumsumexp.default"]
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
        return torch.logcumsumexp(z.mT * 1j, dim=-1).abs().sum()

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
        return torch.logcumsumexp(z, dim=0) * 2

    line = inspect.getsourcelines(f)[1] + 1
    z = torch.randn(3, 3, dtype=torch.complex64)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="realify"):
        warnings.simplefilter("always")
        torch.testing.assert_close(realify.compile(f, inner="eager")(z), f(z))
    shown = [w for w in caught if "eager island" in str(w.message)]
    assert [(w.filename, w.lineno) for w in shown] == [(__file__, line)], [str(w.message) for w in caught]
    logged = [r.getMessage() for r in caplog.records if "eager island" in r.getMessage()]
    assert logged and not any(m.startswith("realify:") for m in logged), logged
