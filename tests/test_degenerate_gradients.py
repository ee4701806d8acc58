"""Gradients of every reduction with a complex rule at the points eager's backward special-cases:
rows of zero variance (constant, all zero, an expanded or broadcast input), zero vectors for the
norms, zeros (one, two) and infinities among a product's factors. Each front end's gradient is
compared with eager's: finite where eager's is, within the tolerance, and NaN, +inf and -inf in
exactly the parts where eager's gradient has them; docs/numerics.md lists the special-cased points.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_gradients import FRONT_ENDS, _assert_matches, _assert_same_special_values, _eager, _gradients, _weights
from torch.utils._pytree import tree_leaves

import realify

inf = math.inf

# rows of a (5, 4) matrix: each a point some backward special-cases, and one ordinary row
ROWS = [
    [1 + 2j, 1 + 2j, 1 + 2j, 1 + 2j],      # constant: zero variance
    [0j, 0j, 0j, 0j],                      # zero vector
    [0j, 1 - 1j, 2 + 0.5j, -1j],           # one zero factor
    [0j, 1 - 1j, 0j, -1j],                 # two zero factors
    [0.3 - 1j, -2 + 0.5j, 1.5j, 0.7 + 0.2j],  # ordinary
]

NORM_ORDS = [2, 1, inf, -inf, 0, 3, 0.5]
# 4 = the row's length: a zero denominator; 5 past it: a negative one; 2.5 a fractional one
CORRECTIONS = [0, 1, 2.5, 4, 5]
DIST_ORDS = [2, 1, inf, 0.5]


def _reductions() -> dict:
    functions = {
        "sum": lambda z: z.sum(-1),
        "mean": lambda z: z.mean(-1),
        "prod": lambda z: z.prod(-1),
        "prod-all": lambda z: z[2:3].prod(),
        "cumsum": lambda z: z.cumsum(-1),
        "cumprod": lambda z: z.cumprod(-1),
        "abs": lambda z: z.abs(),
        "sgn": lambda z: z.sgn(),
        "norm": lambda z: torch.norm(z, dim=-1),
        "logsumexp": lambda z: torch.logsumexp(z, -1),
        "logcumsumexp": lambda z: torch.logcumsumexp(z, -1),
        "trace": lambda z: torch.trace(z[:4]),
    }
    for c in CORRECTIONS:
        functions[f"var-c{c}"] = lambda z, c=c: z.var(-1, correction=c)
        functions[f"std-c{c}"] = lambda z, c=c: z.std(-1, correction=c)
        functions[f"var_mean-c{c}"] = lambda z, c=c: torch.var_mean(z, -1, correction=c)
        functions[f"std_mean-c{c}"] = lambda z, c=c: torch.std_mean(z, -1, correction=c)
    for p in NORM_ORDS:
        functions[f"vector_norm-{p}"] = lambda z, p=p: torch.linalg.vector_norm(z, p, dim=-1)
    for p in DIST_ORDS:  # each row's distance from its first element: 0 for a constant or zero row
        functions[f"dist-{p}"] = lambda z, p=p: torch.stack([torch.dist(row, row[:1], p) for row in z])
    return functions


REDUCTIONS = _reductions()
# the input as given, its first column expanded over the row (an expanded input: every row of
# zero variance, one storage element per row) and broadcast against a zero row
INPUTS = {
    "rows": lambda z: z,
    "expanded": lambda z: z[:, :1].expand(-1, 4),
    "broadcast": lambda z: z[:, :1] + torch.zeros(4, dtype=z.dtype),
}


def _program(layout: str):
    names = list(REDUCTIONS)

    def program(*inputs):  # var_mean and std_mean: both results
        return tuple(tree_leaves([REDUCTIONS[n](INPUTS[layout](z)) for n, z in zip(names, inputs)]))

    return program


def _compile_eager_inner(program, leaves):
    torch._dynamo.reset()
    return realify.compile(program, inner="eager")(*leaves)


FRONT_ENDS = {**FRONT_ENDS, "compile-eager": _compile_eager_inner}
# every front end at every point, in complex64 and complex128 for the eager front end and
# decompose (the traced front ends run decompose's real graph); Inductor (a compile of the whole
# table forward and backward, about a minute) on the rows as given in complex64, with the slow
# tables (-m slow)
_IDS = {torch.complex64: "c64", torch.complex128: "c128"}
CASES = [*(pytest.param(f, d, layout, id=f"{f}-{_IDS[d]}-{layout}")
           for f in ("eager", "decompose", "export", "compile-eager")
           for d in ((torch.complex64, torch.complex128) if f in ("eager", "decompose") else (torch.complex64,))
           for layout in INPUTS),
         pytest.param("compile", torch.complex64, "rows", id="inductor-c64-rows", marks=pytest.mark.slow)]


@pytest.mark.parametrize("front_end,dtype,layout", CASES)
def test_reduction_gradients_at_degenerate_points(front_end, dtype, layout, fresh_dynamo):
    program = _program(layout)
    point = torch.tensor(ROWS, dtype=dtype)
    inputs = [point.clone() for _ in REDUCTIONS]
    outputs = program(*inputs)
    weights = _weights(outputs)
    expected = _gradients(_eager, program, inputs, weights)
    got = _gradients(FRONT_ENDS[front_end], program, inputs, weights)
    failures = []
    for name, g, e in zip(REDUCTIONS, got, expected):
        try:
            _assert_matches(name, g.reshape(-1), e.reshape(-1), dtype)
            _assert_same_special_values(name, g.reshape(-1), e.reshape(-1))
        except AssertionError as err:
            failures.append(str(err))
    assert not failures, "\n".join(failures)


# cumprod's rows: a zero followed by an infinite part (the first zero's gradient is NaN in eager,
# every later one exactly 0), a zero after an infinite part, two zeros, a zero last
CUMPROD_ROWS = [
    [0j, 1 - 1j, complex(inf, 0), -1j],
    [1 + 1j, 0j, 2 + 0j, complex(inf, 1)],
    [complex(inf, 0), 1 - 1j, 0j, 3 + 0j],
    [0j, 0j, 1 + 0j, 2j],
    [1 + 0j, 2j, 0.5 - 1j, 0j],
]


@pytest.mark.parametrize("front_end,dtype,layout", [c for c in CASES if c.values[2] == "rows"])
def test_cumprod_gradient_after_a_zero_is_eagers(front_end, dtype, layout, fresh_dynamo):
    def program(z):
        return (z.cumprod(-1), z[:, 1:].cumprod(0))

    point = torch.tensor(CUMPROD_ROWS, dtype=dtype)
    outputs = program(point)
    weights = _weights(outputs)
    expected = _gradients(_eager, program, [point], weights)
    got = _gradients(FRONT_ENDS[front_end], program, [point], weights)
    _assert_matches("cumprod", got[0].reshape(-1), expected[0].reshape(-1), dtype)
    _assert_same_special_values("cumprod", got[0].reshape(-1), expected[0].reshape(-1))


# every pairing of parts that are infinite, NaN, zero of either sign, huge (|z| overflows) and
# subnormal (|z| underflows)
_PARTS = (inf, -inf, 1.0, 0.0, -0.0, math.nan, 1e38, 1e-40)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("front_end", ["eager", "decompose", "export", "compile-eager"])
def test_sgn_of_special_values_is_eagers(front_end, dtype, fresh_dynamo):
    z = torch.tensor([complex(a, b) for a in _PARTS for b in _PARTS], dtype=dtype)
    expected = torch.view_as_real(torch.sgn(z))
    actual = torch.view_as_real(FRONT_ENDS[front_end](lambda z: (torch.sgn(z),), [z])[0].detach())
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=0, atol=0)


# a / b at infinite divisors (each kind: real, imaginary, both parts, one part), a zero divisor,
# and finite ones, against numerators of the same kinds: eager's gradient is g / conj(b) for a
# and -g conj(a / b / b) for b (0 at an infinite divisor, inf or NaN at a zero one)
_DIVISION_VALUES = [complex(inf, 0), complex(-inf, 0), complex(0, inf), complex(inf, inf), complex(inf, 1),
                    complex(1, -inf), 1 + 2j, 0j, complex(0.0, -0.0)]
_DIVISION_PAIRS = [(a, b) for a in _DIVISION_VALUES for b in _DIVISION_VALUES]


@pytest.mark.parametrize("front_end,dtype,layout", [c for c in CASES if c.values[2] == "rows"])
def test_division_gradients_at_infinite_and_zero_divisors_are_eagers(front_end, dtype, layout, fresh_dynamo):
    def program(a, b):
        return (a / b,)

    a = torch.tensor([p[0] for p in _DIVISION_PAIRS], dtype=dtype)
    b = torch.tensor([p[1] for p in _DIVISION_PAIRS], dtype=dtype)
    weights = _weights(program(a, b))
    expected = _gradients(_eager, program, [a, b], weights)
    got = _gradients(FRONT_ENDS[front_end], program, [a, b], weights)
    for name, g, e in zip(("numerator", "divisor"), got, expected):
        _assert_matches(f"division, {name}", g, e, dtype)
        # eager's formula (realify/rules/arithmetic.py), so NaN and each infinity in eager's parts
        _assert_same_special_values(f"division, {name}", g, e)
