"""Gradients of the complex pointwise rules where compilers break: on the real and imaginary
axes (a complex tensor made from real data), at ±0 parts, on both sides of every branch cut and
on the cuts, at branch points, at inf and nan, and at ordinary points; complex64 and
complex128; through the eager ComplexTensor, ``decompose``, the compile backend (Inductor) and
``realify.export``. Each is compared with eager's gradient: equal where eager's is finite, and
non-finite exactly where eager's is.
"""

from __future__ import annotations

import math

import pytest
import torch

import realify
from realify import ComplexTensor
from realify.rules import one_argument_functions

inf, nan = math.inf, math.nan

# parts that put points on both axes, on either side of each cut (sqrt/log: x < 0; asin/acos/
# atanh: |x| > 1; acosh: x < 1; their images on the imaginary axis for asinh/atan), on the
# branch points ±1 and ±i, near the axes, and at signed zeros
PARTS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1e-3]
SPECIAL = [(inf, 0.5), (0.5, inf), (-inf, -0.0), (nan, 1.0), (1.0, nan), (inf, inf)]


def _points(parts=PARTS, special=SPECIAL) -> torch.Tensor:
    pairs = [(a, b) for a in parts for b in parts] + list(special)
    re = torch.tensor([a for a, _ in pairs], dtype=torch.float64)
    im = torch.tensor([b for _, b in pairs], dtype=torch.float64)
    return torch.complex(re, im)


def declared_functions() -> dict:
    """Every function of one complex argument the rule table declares (register(op,
    derivative=...)), as torch's function (the aten op where torch has none)."""
    return {name: getattr(torch, name, None) or function.op for name, function in one_argument_functions().items()}


# the declared functions, then the unary programs whose gradients the rules compose from others
UNARY = declared_functions()
UNARY.update({
    "square": torch.square, "pow0": lambda z: torch.pow(z, 0), "pow0.5": lambda z: torch.pow(z, 0.5),
    "pow-1": lambda z: torch.pow(z, -1), "pow2": lambda z: torch.pow(z, 2),
    "pow2.5": lambda z: torch.pow(z, 2.5), "pow(1+1j)": lambda z: torch.pow(z, 1 + 1j),
    "2**z": lambda z: torch.pow(2, z), "0**z": lambda z: torch.pow(0, z),
    "1j**z": lambda z: torch.pow(1j, z),
    "mul(2.5j)": lambda z: z * 2.5j, "div(1+2j)": lambda z: z / (1 + 2j),
    "rdiv(1+2j)": lambda z: (1 + 2j) / z, "add(1j)": lambda z: z + 1j,
})
BINARY = {
    "pow": torch.pow, "logaddexp": torch.logaddexp, "mul": torch.mul, "div": torch.div,
    "add": torch.add, "sub": torch.sub,
}
# second operands for the binary functions: zero, real and complex exponents, the cut's sides
SECOND = [0j, 1 + 0j, 2 + 0j, 0.5 + 0j, -1 + 0j, 2.5 + 0j, 1 + 1j, -0.5j, complex(-2.0, -0.0)]


def _binary_points() -> tuple[torch.Tensor, torch.Tensor]:
    z = _points([0.0, -0.0, 1.0, -1.0, 2.0, 0.5], [])
    w = torch.tensor(SECOND, dtype=torch.complex128)
    return z.repeat_interleave(len(w)), w.repeat(len(z))


def _program(functions: dict, arity: int):
    """One program applying every function to inputs of its own (arity per function), so that
    one compile covers them all."""
    names = list(functions)

    def program(*inputs):
        return tuple(functions[n](*inputs[i * arity:(i + 1) * arity]) for i, n in enumerate(names))

    return program


def _inputs(functions: dict, arity: int, dtype: torch.dtype) -> list[torch.Tensor]:
    points = (_points(),) if arity == 1 else _binary_points()
    return [p.to(dtype) for _ in functions for p in points]


def _loss(outputs, weights):
    """A real loss with distinct weights on each part of each output, so that every part of
    the output gradient differs (a sum would hide swapped parts)."""
    total = 0
    for out, (u, v) in zip(outputs, weights):
        if out.is_complex():
            total = total + (torch.view_as_real(out)[..., 0] * u).sum() + (torch.view_as_real(out)[..., 1] * v).sum()
        else:
            total = total + (out * u).sum()
    return total


def _weights(outputs):
    generator = torch.Generator().manual_seed(0)
    return [(torch.rand(o.shape, generator=generator, dtype=torch.float64) + 0.5,
             torch.rand(o.shape, generator=generator, dtype=torch.float64) + 0.5) for o in outputs]


def _gradients(run, program, inputs, weights):
    leaves = [x.clone().requires_grad_() for x in inputs]
    outputs = run(program, leaves)
    grads = torch.autograd.grad(_loss([o.to(torch.complex128) if o.is_complex() else o.double() for o in outputs],
                                      weights), leaves, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves)]


def _eager(program, leaves):
    return program(*leaves)


def _complex_tensor(program, leaves):
    outputs = program(*(ComplexTensor.from_complex(x) for x in leaves))
    return [o.to_complex() if isinstance(o, ComplexTensor) else o for o in outputs]


def _decompose(program, leaves):
    gm = realify.decompose(program, [x.detach() for x in leaves])
    return gm(*leaves)


def _compile(program, leaves):
    torch._dynamo.reset()
    return realify.compile(program)(*leaves)


def _export(program, leaves):
    module = _Module(program)
    ep = realify.export(module, tuple(x.detach() for x in leaves))
    return realify.ComplexCallAdapter(ep)(*leaves)


class _Module(torch.nn.Module):
    def __init__(self, program):
        super().__init__()
        self.program = program

    def forward(self, *inputs):
        return self.program(*inputs)


FRONT_ENDS = {"eager": _complex_tensor, "decompose": _decompose, "compile": _compile, "export": _export}

# Both gradients come from the same formula (eager's), evaluated on values that eager and
# realify compute with different kernels (glibc's against realify's planar ones): a few ulps
# apart, amplified by the formula's own cancellation (1 - w^2 near |w| = 1, z^2 + 1 near ±i:
# up to ~1e3 on this grid). eps times that margin, with the same bound on an absolute scale
# for gradients near 0.
TOLERANCE = {torch.complex64: 2e-4, torch.complex128: 1e-11}


def _assert_matches(name, ours, eager, dtype):
    # resolved: a gradient may be a lazy conjugate view (eager's of trace in complex128)
    ours_r, eager_r = (torch.view_as_real(g.to(torch.complex128).resolve_conj()) for g in (ours, eager))
    finite = torch.isfinite(eager_r)
    points = torch.view_as_real(_points().to(dtype)) if ours.numel() == _points().numel() else None
    wrong = torch.isfinite(ours_r) != finite
    if wrong.any():
        where = wrong.any(-1).nonzero().flatten()[:5].tolist()
        raise AssertionError(f"{name}: finite where eager's is not (or not where it is) at indices {where}: "
                             f"ours {ours[where].tolist()}, eager {eager[where].tolist()}"
                             + (f", z = {points[where].tolist()}" if points is not None else ""))
    tol = TOLERANCE[dtype]
    scale = eager_r[finite].abs().clamp_min(1.0)
    error = (ours_r[finite] - eager_r[finite]).abs() / scale
    if error.numel() and error.max() > tol:
        at = int(error.argmax())
        raise AssertionError(f"{name}: gradient off by {float(error.max()):.3g} (relative) > {tol}: "
                             f"ours {float(ours_r[finite][at])}, eager {float(eager_r[finite][at])}")


def _check(functions, arity, dtype, front_end):
    program = _program(functions, arity)
    inputs = _inputs(functions, arity, dtype)
    outputs = program(*inputs)
    weights = _weights(outputs)
    expected = _gradients(_eager, program, inputs, weights)
    got = _gradients(FRONT_ENDS[front_end], program, inputs, weights)
    names = [n for n in functions for _ in range(arity)]
    failures = []
    for i, (name, g, e) in enumerate(zip(names, got, expected)):
        try:
            _assert_matches(f"{name} (operand {i % arity})", g, e, dtype)
            if front_end in SPECIAL_VALUES_EXACT:
                _assert_same_special_values(f"{name} (operand {i % arity})", g, e)
        except AssertionError as err:
            failures.append(str(err))
    assert not failures, "\n".join(failures)


# the front ends whose gradients have NaN and each infinity exactly where eager's has them (the
# eager ComplexTensor differs at square's infinities, where eager's formula multiplies by a number
# it promotes to complex and realify keeps real: docs/numerics.md)
SPECIAL_VALUES_EXACT = ("decompose", "export")


def _assert_same_special_values(name, ours, eager):
    ours_r, eager_r = (torch.view_as_real(g.to(torch.complex128).resolve_conj()) for g in (ours, eager))
    for kind in (torch.isnan, torch.isposinf, torch.isneginf):
        differs = kind(ours_r) != kind(eager_r)
        if differs.any():
            where = differs.any(-1).nonzero().flatten()[:5].tolist()
            raise AssertionError(f"{name}: {kind.__name__} differs from eager's at indices {where}: "
                                 f"ours {ours[where].tolist()}, eager {eager[where].tolist()}")


# Inductor compiles the whole table (one program, forward and backward) for minutes: the default
# suite compiles the functions whose gradients were wrong on the axes and cuts, one program each
# (smaller graphs compile faster in sum, and spread over the test workers), and the slow marker
# runs the full table. The derivative formulas themselves are the same op in every front end;
# decompose and export check all of them in the default suite.
# acosh is the longest Inductor compile of the table (about 4 minutes on 2 cores): it runs
# with the slow tables (-m slow), while rsqrt and asin, whose derivative formulas share its
# rsqrt(1 -+ z^2) path, and the eager and decompose tables of acosh run in the default suite
COMPILED = ["sin", "cos", "tanh", "sqrt", "rsqrt", "asin", pytest.param("acosh", marks=pytest.mark.slow), "atanh",
            "log", "angle", "sgn", "pow2.5"]
DTYPES = [torch.complex64, torch.complex128]
CASES = [pytest.param(f, d, id=f"{f}-{str(d)[-9:].replace('complex', 'c')}",
                      marks=[pytest.mark.slow] if f == "compile" else [])
         for f in FRONT_ENDS for d in DTYPES]


@pytest.mark.parametrize("front_end,dtype", CASES)
def test_unary_gradients_match_eager_at_special_points(front_end, dtype, fresh_dynamo):
    _check(UNARY, 1, dtype, front_end)


@pytest.mark.parametrize("front_end,dtype", CASES)
def test_binary_gradients_match_eager_at_special_points(front_end, dtype, fresh_dynamo):
    _check(BINARY, 2, dtype, front_end)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_gradients_match_eager_at_special_points(name, fresh_dynamo):
    _check({name: UNARY[name]}, 1, torch.complex64, "compile")


def test_sin_gradient_on_the_real_axis_compiled(fresh_dynamo):
    # the reported case: a complex tensor made from real data sits on the real axis
    z = torch.tensor([0.5 + 0j, 0.5 + 1e-3j], dtype=torch.complex64, requires_grad=True)
    (expected,) = torch.autograd.grad(torch.view_as_real(torch.sin(z)).sum(), z)
    (got,) = torch.autograd.grad(torch.view_as_real(realify.compile(torch.sin)(z)).sum(), z)
    torch.testing.assert_close(got, expected)
    assert float(got[0].imag) == pytest.approx(math.cos(0.5), rel=1e-6)


GRADGRAD = ["exp", "log", "sqrt", "sin", "tanh", "asin", "atan", "acosh", "sigmoid", "pow2.5", "2**z", "sgn"]


@pytest.mark.parametrize("name", GRADGRAD)
def test_second_derivatives_through_the_real_graph(name):
    # on the real and imaginary axes, where the first derivative used to be wrong, and off the
    # function's cuts (finite differences across a cut mean nothing: eager fails there too)
    points = [1.5 + 0j, 0.7j, -0.3 + 0.2j, 2 + 0j] if name == "acosh" else [0.5 + 0j, 0.7j, -0.3 + 0.2j, 0.2 + 0j]
    z = torch.tensor(points, dtype=torch.complex128)
    fn = UNARY[name]
    gm = realify.decompose(fn, [z])
    leaf = z.clone().requires_grad_()
    assert torch.autograd.gradcheck(gm, (leaf,))
    assert torch.autograd.gradgradcheck(gm, (leaf,))


def test_binary_second_derivatives_through_the_real_graph():
    z = torch.tensor([0.5 + 0j, 0.7j, -0.3 + 0.2j], dtype=torch.complex128, requires_grad=True)
    w = torch.tensor([2.5 + 0j, 1 + 0.5j, 0.3 + 0j], dtype=torch.complex128, requires_grad=True)
    for fn in (torch.pow, torch.logaddexp):
        gm = realify.decompose(fn, [z.detach(), w.detach()])
        assert torch.autograd.gradgradcheck(gm, (z, w))
