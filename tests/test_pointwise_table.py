"""A function of one complex argument is declared once, ``register(op, derivative=...)`` on its
planar kernel, and every list of such functions derives from the rule table: the eager front
end's (realify/tensor.py, differentiated by the formula), tests/test_numerics.py's special
values and tests/test_gradients.py's gradients.

No complex function of one argument that eager differentiates is without a rule today (the ones
without a rule of their own, such as ``negative`` and the ``arc*`` aliases, reach one through
PyTorch's decompositions), so a throwaway declaration shows the lists pick one up: ``negative``
with its own kernel and eager's derivative, checked against eager by the two suites' checks."""

from __future__ import annotations

import pytest
import test_gradients as gradients
import test_numerics as numerics
import torch

from realify import ComplexTensor
from realify.rules import lookup, one_argument_functions, register
from realify.rules._registry import _TABLE

NEGATIVE = torch.ops.aten.negative.default


@pytest.fixture
def negative_declared():
    """aten.negative declared with a kernel and derivative of its own for the test (each call
    recorded under its name), then removed again (table entry and formula name) so that no other
    test sees it."""
    calls = {"kernel": 0, "derivative": 0}

    def negate(x, y):
        # -(x + iy) = -x - iy
        calls["kernel"] += 1
        return -x, -y

    def derivative(g, z, w):
        # eager's formula: -g
        calls["derivative"] += 1
        return -g

    register(NEGATIVE, derivative=derivative)(negate)
    yield calls
    _TABLE.pop(NEGATIVE).formula.release()
    one_argument_functions.cache_clear()


def test_every_declared_function_is_in_the_derived_lists():
    declared = set(one_argument_functions())
    assert declared == set(numerics.UNARY)
    assert declared <= set(gradients.UNARY)
    assert {"exp", "sinc", "abs", "angle", "reciprocal", "sgn"} <= declared


def test_a_new_declaration_reaches_the_lists_and_its_derivative_is_used(negative_declared):
    function = one_argument_functions()["negative"]
    assert function.op is NEGATIVE and function.eager_by_formula
    assert function.formula.name == "negative"
    assert "negative" in numerics.declared_functions()
    assert gradients.declared_functions()["negative"] is torch.negative

    # values on the special-value table, through the eager ComplexTensor, against eager (the
    # signs of zeros aside: eager's complex negation gives -0 on its scalar path and +0 on its
    # vectorized one, torch.neg(torch.zeros(20, dtype=torch.complex64)))
    for dtype in numerics.DTYPES:
        z = numerics.special_values(dtype)
        actual = numerics.run_eager(numerics.public_function("negative"), z)
        numerics.assert_same_values(actual, torch.negative(z), dtype, signs=False)

    # the eager front end differentiates it by its formula: the gradient comes from the declared
    # derivative, and equals eager's at the special points
    gradients._check({"negative": torch.negative}, 1, torch.complex128, "eager")
    assert negative_declared["derivative"], "the eager front end did not use the declared derivative"

    # the declaration is the rule of its op (which PyTorch decomposes into neg before any rule
    # is looked up, above autograd: called here as the table's rule)
    kernel_calls = negative_declared["kernel"]
    z = ComplexTensor.from_complex(torch.tensor([1 + 2j, -0.0 + 0j], dtype=torch.complex64))
    assert torch.equal(lookup(NEGATIVE)(z).to_complex(), torch.negative(z.to_complex()))
    assert negative_declared["kernel"] > kernel_calls

