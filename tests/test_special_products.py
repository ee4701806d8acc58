"""torch.prod and torch.cumprod with infinite, NaN and signed-zero parts, against eager
complex PyTorch.

Complex multiplication by the formula (ac - bd) + (ad + bc)i, which eager uses, is not
associative once a part is infinite or NaN, so the product's special values depend on the order
of the factors. The compile backend on a CPU multiplies in the order of eager's CPU kernel for
that CPU's vector width (realify/passes/product_order.py, ``eager_cpu_product``), and so does
``decompose`` given the width (``cpu_vector_bytes``), which these comparisons with eager CPU pass;
``decompose``'s default and exported programs use the device-neutral order
(realify/runtime/products.py), which eager's CPU kernel follows only below one vector block. Lengths
cover a run shorter than one of eager's vector blocks (16 complex64 or 8 complex128 entries on
x86, AVX-512 machines included: ATen has no AVX-512 build of prod's kernel), whole blocks, and
blocks with a remainder. Sizes stay below 32768 elements, where eager reduces on one thread.
"""

from __future__ import annotations

import math
import platform
import warnings

import pytest
import torch
from test_numerics import DTYPES, FRONT_ENDS, assert_same_values

import realify
from realify.backend import host_cpu_vector_bytes
from realify.runtime.products import neutral_product

inf, nan = math.inf, math.nan
PARTS = [inf, -inf, nan, 0.0, -0.0]
FINITE = [1.0, -1.0, 0.5, 2.0, -1.5, 0.75]
LENGTHS = [1, 2, 3, 5, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 70, 129, 700]


def _special_rows(rows: int, n: int, dtype, seed: int) -> torch.Tensor:
    """``rows`` vectors of ``n`` entries: most parts finite (so that products stay finite
    where no special part enters), a few inf, -inf, nan, 0 or -0, at a rate that varies by row
    (from none to about one part in three)."""
    gen = torch.Generator().manual_seed(seed)
    rate = torch.linspace(0, 0.35, rows).repeat_interleave(2 * n).reshape(rows, n, 2)
    special = torch.rand(rows, n, 2, generator=gen) < rate
    pick_s = torch.tensor(PARTS, dtype=torch.float64)[torch.randint(len(PARTS), (rows, n, 2), generator=gen)]
    pick_f = torch.tensor(FINITE, dtype=torch.float64)[torch.randint(len(FINITE), (rows, n, 2), generator=gen)]
    parts = torch.where(special, pick_s, pick_f)
    return torch.view_as_complex(parts.contiguous()).to(dtype)


def _compile_eager(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager island
        return realify.compile(fn, inner="eager", strict=True, dynamic=False)(*args)


def _decompose_for_this_cpu(fn, *args):
    """decompose as the compile backend runs it here: products in eager's order for this CPU."""
    gm = realify.decompose(fn, list(args), cpu_vector_bytes=host_cpu_vector_bytes())
    (out,) = gm(*args)
    return out


CPU_FRONT_ENDS = {**FRONT_ENDS, "decompose": _decompose_for_this_cpu}
ALL_FRONT_ENDS = {**CPU_FRONT_ENDS, "compile": _compile_eager}


def _check(fn, z, dtype, front_ends=ALL_FRONT_ENDS):
    expected = fn(z)
    for name, run in front_ends.items():
        torch._dynamo.reset()
        actual = run(fn, z)
        assert actual.shape == expected.shape, name
        assert_same_values(actual.reshape(-1), expected.reshape(-1), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("n", LENGTHS)
def test_prod_of_vectors_with_special_parts(n, dtype):
    """Each row reduced on its own (dim=None) through the eager ComplexTensor; eager reduces
    each row of a contiguous matrix along its last dim in the same order, which decompose and
    the compile backend check for all rows at once (one graph per length)."""
    z = _special_rows(24, n, dtype, seed=n)
    assert not torch.isfinite(z).all()
    for row in z:
        _check(lambda v: torch.prod(v), row, dtype, {"eager": FRONT_ENDS["eager"]})
    front_ends = ALL_FRONT_ENDS if n in (5, 17, 70) else CPU_FRONT_ENDS
    _check(lambda m: torch.prod(m, -1), z, dtype, front_ends)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_prod_along_a_dim_with_special_parts(dim, keepdim, dtype):
    """Along each dim of a (9, 21, 37) tensor: the last dim is a contiguous run per output;
    along an outer dim eager reduces blocks of adjacent outputs together (1 + 0i applied after
    their product) and the rest one by one."""
    z = _special_rows(9 * 21, 37, dtype, seed=3 + dim).reshape(9, 21, 37)
    assert not torch.isfinite(z).all()
    _check(lambda t: torch.prod(t, dim, keepdim=keepdim), z, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_prod_of_a_whole_tensor_with_special_parts(dtype):
    for seed, shape in enumerate([(3, 5), (4, 8), (6, 11, 2)]):
        z = _special_rows(1, math.prod(shape), dtype, seed=seed)[0]
        z[seed] = complex(inf, 1.0)  # at least one special part in the whole product
        _check(lambda t: torch.prod(t), z.reshape(shape), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_prod_of_finite_values_is_accurate(dtype):
    """Finite products of 1000 factors near the unit circle stay within the usual tolerance
    of a complex128 reference."""
    gen = torch.Generator().manual_seed(0)
    angle = torch.rand(4, 1000, generator=gen, dtype=torch.float64) * 6.28
    radius = 1 + 0.01 * torch.randn(4, 1000, generator=gen, dtype=torch.float64)
    z = torch.polar(radius, angle).to(dtype)
    reference = z.to(torch.complex128).prod(-1)
    for run in FRONT_ENDS.values():
        actual = run(lambda m: torch.prod(m, -1), z).to(torch.complex128)
        # each factor is rounded once to the dtype; the product's own error adds a few eps
        torch.testing.assert_close(actual, reference, rtol=2e-5 if dtype == torch.complex64 else 1e-12, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("dim", [0, -1])
def test_cumprod_with_special_parts(dim, dtype):
    """Up to 32 entries along ``dim`` cumprod multiplies in eager's order, ``((1 z0) z1) z2 ...``
    (longer scans run as log-depth rounds; README, "Where values differ from eager")."""
    for n in (1, 2, 5, 17, 32):
        z = _special_rows(24, n, dtype, seed=100 + n)
        z = z if dim == -1 else z.T.contiguous()
        _check(lambda t: torch.cumprod(t, dim), z, dtype, FRONT_ENDS if n != 17 else ALL_FRONT_ENDS)


def _neutral_reference(z, dim):
    """The device-neutral order (realify/runtime/products.py) run eagerly on the parts."""
    re, im = neutral_product(z.real.contiguous(), z.imag.contiguous(), dim)
    return torch.complex(re, im).squeeze(dim)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("n", [5, 17, 70])
def test_decompose_and_export_use_the_device_neutral_order(n, dtype, monkeypatch):
    """Without a target, the graph reads nothing of the machine that traces it (no rule does:
    docs/rules.md) and multiplies in the documented neutral order. Against eager CPU it agrees
    below one vector block (16 complex64 or 8 complex128 entries); from one block on, eager
    joins vector lanes and the special values may legitimately differ, so the longer runs are
    compared with the neutral order itself, exported (what ONNX Runtime and other devices run)
    as well as decomposed."""
    def no_host(*args):
        raise AssertionError("a graph without a target read the host")

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", no_host)
    monkeypatch.setattr(platform, "machine", no_host)
    z = _special_rows(24, n, dtype, seed=n)
    program = lambda m: torch.prod(m, -1)
    decomposed = FRONT_ENDS["decompose"](program, z)
    exported = realify.export(program, (z,)).module()(torch.view_as_real(z))
    exported = torch.view_as_complex(exported if isinstance(exported, torch.Tensor) else exported[0])
    expected = program(z) if n < 8 else _neutral_reference(z, -1)
    for actual in (decomposed, exported):
        assert_same_values(actual, expected, dtype)
