"""realify's stand-ins for opt_einsum's untraceable bookkeeping (realify/library_polyfills.py):
they answer as the originals do, keep opt_einsum's contractions in one graph, and leave the
cases they do not cover to the originals (a graph break, the same values)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import realify
from realify import library_polyfills

oe = pytest.importorskip("opt_einsum", reason="opt_einsum comes with the models extra (tensorly, neuraloperator)")
dispatch = pytest.importorskip("opt_einsum.backends.dispatch")
C64 = torch.complex64


def _graphs_and_breaks(fn, *args):
    explained = torch._dynamo.explain(fn)(*args)
    return explained.graph_count, explained.graph_break_count


def test_registered_when_realify_is_imported():
    assert "opt_einsum" in library_polyfills.register()


@pytest.mark.parametrize("value", [torch.zeros(2), torch.nn.Parameter(torch.zeros(2)), np.zeros(2), [1.0], 3.0])
def test_stand_ins_answer_as_the_originals(value):
    from opt_einsum.contract import infer_backend

    assert library_polyfills._infer_backend(value) == infer_backend(value)
    for func in ("tensordot", "transpose", "einsum"):
        for backend in ("torch", "numpy"):
            assert library_polyfills._import_func(func, backend) is dispatch._import_func(func, backend)
    assert library_polyfills._import_func("no_such_function", "torch", default=len) is len
    assert library_polyfills._currently_sharing() is False
    with oe.shared_intermediates():
        assert library_polyfills._currently_sharing() is True


def test_a_function_torch_lacks_gets_opt_einsums_own_error():
    with pytest.raises(AttributeError) as ours:
        library_polyfills._import_func("no_such_function", "torch")
    with pytest.raises(AttributeError) as theirs:
        dispatch._import_func("no_such_function", "torch")
    assert str(ours.value) == str(theirs.value)


# built once, as tensorly's plugin caches it: the path search itself (bisect, heaps) is not
# in the graph; three operands contract pairwise (tensordot, transpose, einsum), each step
# through opt_einsum's backend dispatch
EXPRESSION = oe.contract_expression("bixy,ioxy,oz->bzxy", (2, 3, 4, 5), (3, 6, 4, 5), (6, 2), optimize="optimal")


def _contract(a, b, c):
    return EXPRESSION(a, b, c).abs().square().sum(), oe.contract("bixy,ioxy->boxy", a, b)


def _operands(requires_grad=False):
    torch.manual_seed(0)
    a = torch.randn(2, 3, 4, 5, dtype=C64)
    b = torch.randn(3, 6, 4, 5, dtype=C64)
    c = torch.randn(6, 2, dtype=C64)
    a.real[0, 0, 0, 0] = -0.0  # a signed zero and an exact axis point among random values
    b.imag[1] = 0.0
    return [t.requires_grad_(requires_grad) for t in (a, b, c)]


def test_opt_einsum_contractions_are_one_graph_and_match_eager(fresh_dynamo):
    assert _graphs_and_breaks(_contract, *_operands()) == (1, 0)
    torch._dynamo.reset()
    leaves = _operands(requires_grad=True)
    loss, out = realify.compile(_contract, fullgraph=True)(*leaves)
    grads = torch.autograd.grad(loss + out.real.sum(), leaves)
    eager_leaves = _operands(requires_grad=True)
    eager_loss, eager_out = _contract(*eager_leaves)
    eager_grads = torch.autograd.grad(eager_loss + eager_out.real.sum(), eager_leaves)
    torch.testing.assert_close(loss, eager_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, eager_out, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_shared_intermediates_falls_back_to_the_original(fresh_dynamo):
    """Inside opt_einsum's sharing context the answer depends on the thread: the original
    runs (a graph break, as without realify), with the same values."""
    with oe.shared_intermediates():
        _graphs, breaks = _graphs_and_breaks(_contract, *_operands())
        torch._dynamo.reset()
        loss, out = realify.compile(_contract)(*_operands())
    assert breaks > 0
    eager_loss, eager_out = _contract(*_operands())
    torch.testing.assert_close(loss, eager_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, eager_out, rtol=1e-5, atol=1e-5)


def test_neuraloperator_fno_is_one_graph_as_users_build_it(fresh_dynamo):
    models = pytest.importorskip("neuralop.models", reason="neuraloperator comes with the models extra")
    tensorly_plugins = pytest.importorskip("tensorly.plugins")
    tensorly_plugins.use_opt_einsum("optimal")  # what importing neuraloperator sets
    torch.manual_seed(0)
    fno = models.FNO(n_modes=(4, 4), hidden_channels=4, n_layers=2, in_channels=1, out_channels=1)
    x = torch.randn(2, 1, 8, 8)
    assert _graphs_and_breaks(fno, x) == (1, 0)
    torch._dynamo.reset()
    compiled = realify.compile(fno, fullgraph=True)
    got = compiled(x)
    grads = torch.autograd.grad(got.square().sum(), list(fno.parameters()))
    want = fno(x)
    eager_grads = torch.autograd.grad(want.square().sum(), list(fno.parameters()))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-6)


def _pairings(a, w):
    # one contraction per hazard: special values in a, the same tensor twice (one of them
    # conjugated: shared memory), a transposed (non-contiguous) operand
    return (oe.contract("bixy,bjxy->bijy", a, a.conj()), oe.contract("bixy,io->boxy", a, w.t()),
            oe.contract("bixy,bixy->bxy", a, a))


def test_special_values_shared_and_strided_operands_match_eager(fresh_dynamo):
    """Where eager's output is inf or nan, realify's is too, and the finite outputs agree: the
    kind of a non-finite GEMM output may differ (Gauss's 3 products, README "Where values
    differ from eager"), whether it is finite may not."""
    a, _, _ = _operands()
    a[0, 1, 2, 3] = complex(float("inf"), 1.0)
    a[1, 2, 0, 0] = complex(0.0, float("nan"))
    w = torch.randn(6, 3, dtype=C64)
    got = realify.compile(_pairings, fullgraph=True)(a, w)
    want = _pairings(a, w)
    for g, e in zip(got, want):
        finite = torch.isfinite(e)
        assert finite.any() and not finite.all()
        torch.testing.assert_close(torch.isfinite(g), finite)
        torch.testing.assert_close(g[finite], e[finite], rtol=1e-5, atol=1e-5)
