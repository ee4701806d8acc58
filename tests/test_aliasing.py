"""Memory shared at the boundary, as eager shares it.

- Inputs that overlap in memory, one of them written in place (through conj views,
  view_as_real, overlapping slices, strides): eager's results, under the compile backend (a
  call like that runs dynamo's graph eagerly) and a clear error from the export adapter.
- Outputs with eager's strides (a transpose, a slice of an rfft2 output), outputs that are
  views of inputs returned as views of those inputs, and outputs that are views of other
  outputs returned as views of those.

Each case compares output values, strides and memory sharing, and the inputs after the call,
with eager.
"""

import logging

import pytest
import torch

import realify
from realify import RealifyError
from realify.runtime import aliasing

INNERS = ["eager", "inductor"]


def _z():
    return torch.tensor([1 + 1j, 2 - 1j, 3 + 0.5j])


def _z6():
    return torch.tensor([1 + 1j, 2 - 1j, 3 + 0.5j, 4 + 2j, 5 - 3j, 6 + 1j])


def scale_first(a, b):
    a.mul_(2)
    return b + 0


def rotate_complex(z, r):
    z.mul_(2j)
    return r * 1


def add_shifted(a, b):
    a.add_(b * 1j)
    return b.clone()


# (name, program, base tensor, arguments made from the base): the arguments overlap in memory
OVERLAPPING = [
    ("conj view", scale_first, _z, lambda z: (z, z.conj())),
    ("view_as_real", rotate_complex, _z, lambda z: (z, torch.view_as_real(z))),
    ("overlapping slices", add_shifted, _z, lambda z: (z[:-1], z[1:])),
    ("strided views", scale_first, _z6, lambda z: (z[::2], z[::3])),
]


def _same(actual, expected):
    """Equal values, dtypes and conj bits (a conj view compares as its values). Values to 1e-6
    of the largest magnitude: an FFT of a band of bins may run as a GEMM, which sums the same
    terms in another order (docs/numerics.md, "FFTs"); every other op here gives eager's bits."""
    assert actual.dtype == expected.dtype
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    torch.testing.assert_close(actual.resolve_conj(), expected.resolve_conj(), rtol=0, atol=1e-6 * scale)


@pytest.mark.parametrize("inner", INNERS)
@pytest.mark.parametrize("name,program,base,arguments", OVERLAPPING, ids=[c[0] for c in OVERLAPPING])
def test_overlapping_inputs_compile(fresh_dynamo, caplog, inner, name, program, base, arguments):
    compiled = realify.compile(program, inner=inner)
    with caplog.at_level(logging.WARNING, logger="realify"):
        # inputs that share no memory: the compiled graph, no warning
        separate = [x.clone() for x in arguments(base())]
        expected_inputs = [x.clone() for x in separate]
        _same(compiled(*separate), program(*expected_inputs))
        for actual_input, expected_input in zip(separate, expected_inputs):
            _same(actual_input, expected_input)
        assert not [r for r in caplog.records if "shares memory" in r.getMessage()]
        expected_base = base()
        expected = program(*arguments(expected_base))
        actual_base = base()
        actual = compiled(*arguments(actual_base))
        again_base = base()
        again = compiled(*arguments(again_base))
    _same(actual, expected)
    _same(actual_base, expected_base)
    _same(again, expected)
    _same(again_base, expected_base)
    warnings = [r for r in caplog.records if "shares memory" in r.getMessage()]
    assert len(warnings) == 1, "one warning per compiled graph, naming the inputs"
    assert "L[" in warnings[0].getMessage()


def test_overlapping_inputs_gradients(fresh_dynamo):
    """A non-leaf that requires grad may be written in place in eager: the call that runs
    eagerly has eager's gradients."""
    def program(a, b):
        a.mul_(2)
        return (b * b).abs().sum()

    def grad_of(run):
        w = _z().requires_grad_()
        a = w * 1
        run(a, a.conj()).backward()
        return w.grad

    expected = grad_of(program)
    torch.testing.assert_close(grad_of(realify.compile(program, inner="eager")), expected)
    torch._dynamo.reset()
    torch.testing.assert_close(grad_of(realify.compile(program)), expected)


def test_no_overlap_check_without_writes(fresh_dynamo, monkeypatch):
    """A graph that writes to no input never looks for overlapping inputs (no per-call cost)."""
    def fail(*args, **kwargs):
        raise AssertionError("overlap looked for in a graph without writes")

    monkeypatch.setattr(realify.runtime.boundary, "overlapping_write", fail)
    z = _z()
    compiled = realify.compile(lambda a, b: a * b + 1, inner="eager")
    _same(compiled(z, z.conj()), z * z.conj() + 1)


@pytest.mark.parametrize("name,program,base,arguments", OVERLAPPING, ids=[c[0] for c in OVERLAPPING])
def test_overlapping_inputs_export_adapter(name, program, base, arguments):
    """An exported program has no eager program to fall back on: overlapping inputs raise,
    naming both; separate ones give eager's result."""
    example = tuple(x.resolve_conj().clone() for x in arguments(base()))
    adapter = realify.ComplexCallAdapter(realify.export(program, example))
    with pytest.raises(RealifyError, match=r"args\[1\] shares memory with args\[0\], which the exported program "
                                           r"writes in place.*clone"):
        adapter(*arguments(base()))
    separate = [x.clone() for x in arguments(base())]
    expected_inputs = [x.clone() for x in separate]
    _same(adapter(*separate), program(*expected_inputs))
    for actual_input, expected_input in zip(separate, expected_inputs):
        _same(actual_input, expected_input)


@pytest.mark.parametrize("name,program,base,arguments", OVERLAPPING, ids=[c[0] for c in OVERLAPPING])
def test_inputs_sharing_memory_at_export_are_traced_apart(name, program, base, arguments):
    """Exported with inputs that share memory: torch.export traces them as separate tensors, so
    separate tensors give eager's results, in the adapter and in ONNX Runtime (whose inputs
    are separate arrays; realify.onnx retraces with example values apart), and a call that
    shares them with a write is refused."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    ep = realify.export(program, arguments(base()))
    adapter = realify.ComplexCallAdapter(ep)
    with pytest.raises(RealifyError, match=r"shares memory with .* writes in place"):
        adapter(*arguments(base()))
    separate = [x.clone() for x in arguments(base())]
    expected_inputs = [x.clone() for x in separate]
    expected = program(*[x.clone() for x in separate])
    _same(adapter(*separate), program(*expected_inputs))
    (have, *_) = run_session(onnx_session(ep), ep, [x.clone() for x in arguments(base())])
    _same(have, expected)


def _write_with(a, b):
    a.mul_(b)
    return a + b


def _read_both(a, b):
    return a + 2 * b


@pytest.mark.parametrize("program", [_write_with, _read_both], ids=["writes", "reads"])
def test_one_tensor_passed_twice_at_export(program):
    """Exported with one tensor passed twice, torch.export's trace reads both through one
    placeholder: the same tensor again gives eager's results and writes; two tensors are
    refused, naming both (the trace would read one in place of the other, silently), and so
    are an ONNX model (its inputs are separate arrays) and an AOTInductor package (it could not
    check its calls)."""
    import realify.onnx
    from realify.errors import NoOnnxFormError

    z = _z()
    adapter = realify.ComplexCallAdapter(realify.export(program, (z.clone(),) * 2))
    got_z, expected_z = z.clone(), z.clone()
    _same(adapter(got_z, got_z), program(expected_z, expected_z))
    _same(got_z, expected_z)
    with pytest.raises(RealifyError, match=r"args\[0\] and args\[1\] were one tensor when the program was exported"):
        adapter(z.clone(), z.clone())
    ep = realify.export(program, (z.clone(),) * 2)
    with pytest.raises(NoOnnxFormError, match="user inputs 0 and 1, which were one tensor at export"):
        realify.onnx.to_onnx(ep)
    with pytest.raises(RealifyError, match="one tensor as user inputs 0 and 1"):
        realify.aoti_compile_and_package(ep)


def test_overlapping_write_spans():
    z = _z6()
    assert aliasing.overlapping_write([z, z.conj()], {0}) == (0, 1)
    assert aliasing.overlapping_write([z, torch.view_as_real(z)], {1}) == (1, 0)
    assert aliasing.overlapping_write([z[:3], z[3:]], {0}) is None
    assert aliasing.overlapping_write([torch.view_as_real(z)[:3], torch.view_as_real(z)[3:]], {0, 1}) is None
    assert aliasing.overlapping_write([z[:4], z[3:]], {0}) == (0, 1)
    assert aliasing.overlapping_write([z, z.conj()], set()) is None  # nothing written
    assert aliasing.overlapping_write([z, z.clone(), 3], {0, 1}) is None
    assert aliasing.overlapping_write([z[:0], z], {0}) is None  # empty: nothing shared


# ---- outputs ---------------------------------------------------------------------------------


def transposed(z):
    return z.t()


def sliced(z):
    return z[1:]


def conjugated(z):
    return z.conj()


def computed_transposed(z):
    return (z * 2).t()


def written_then_sliced(z):
    z.mul_(2)
    return z[1:]


def written_whole(z):
    z.mul_(2)
    return z


def mixed(z):
    return z.t(), z * 2, (z * 2).t(), torch.view_as_real(z), torch.view_as_real(z)[1:], z.exp()[:, 1:], (z * 2).real


def rfft2_sliced(x):
    xf = torch.fft.rfft2(x)
    return xf[:, :, :4, :4]


def _square():
    return torch.randn(3, 4, dtype=torch.complex64)


OUTPUTS = [
    ("transpose of input", transposed, _square),
    ("slice of input", sliced, _square),
    ("conj of input", conjugated, _square),
    ("transposed result", computed_transposed, _square),
    ("slice of written input", written_then_sliced, _square),
    ("written input itself", written_whole, _square),
    ("mixed", mixed, _square),
    ("slice of rfft2 output", rfft2_sliced, lambda: torch.randn(4, 8, 16, 16)),
]


def _check_outputs(actual, expected, actual_input, expected_input):
    """Values, strides, memory shared with the input and identity, as eager's; then a write to
    the input shows in exactly the outputs where it shows in eager's."""
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected)
    _same(actual_input, expected_input)
    for a, e in zip(actual, expected):
        _same(a, e)
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        assert a.is_conj() == e.is_conj() or not e._is_view()
        shares = e.untyped_storage().data_ptr() == expected_input.untyped_storage().data_ptr()
        assert (a.untyped_storage().data_ptr() == actual_input.untyped_storage().data_ptr()) == shares
        assert (a is actual_input) == (e is expected_input)
    for x in (actual_input, expected_input):
        x.add_(10)
    for a, e in zip(actual, expected):
        _same(a, e)


@pytest.mark.parametrize("inner", INNERS)
@pytest.mark.parametrize("name,program,make", OUTPUTS, ids=[c[0] for c in OUTPUTS])
def test_output_layouts_compile(fresh_dynamo, inner, name, program, make):
    expected_input = make()
    actual_input = expected_input.clone()
    expected = program(expected_input)
    actual = realify.compile(program, inner=inner)(actual_input)
    _check_outputs(actual, expected, actual_input, expected_input)


@pytest.mark.parametrize("name,program,make", OUTPUTS, ids=[c[0] for c in OUTPUTS])
def test_output_layouts_export_adapter(name, program, make):
    expected_input = make()
    actual_input = expected_input.clone()
    adapter = realify.ComplexCallAdapter(realify.export(program, (expected_input.clone(),)))
    expected = program(expected_input)
    actual = adapter(actual_input)
    _check_outputs(actual, expected, actual_input, expected_input)


def test_output_layouts_gradients(fresh_dynamo):
    """Outputs taken from inputs and outputs written with eager's strides carry eager's
    gradients (Inductor: the training graph)."""
    def program(z, x):
        return z.t(), torch.fft.rfft2(x)[:, :4], (z * 2).t()

    def grads(run):
        z = torch.randn(3, 4, dtype=torch.complex64, requires_grad=True)
        x = torch.randn(2, 6, 8, requires_grad=True)
        with torch.no_grad():
            z.copy_(torch.linspace(-1, 1, 12).reshape(3, 4) * (1 + 2j))
            x.copy_(torch.linspace(-1, 1, 96).reshape(2, 6, 8))
        outs = run(z * 1, x)
        sum(((o * (1 + 1j)).abs() ** 2).sum() for o in outs).backward()
        return [o.stride() for o in outs], z.grad, x.grad

    expected = grads(program)
    for inner in INNERS:
        torch._dynamo.reset()
        strides, z_grad, x_grad = grads(realify.compile(program, inner=inner))
        assert strides == expected[0]
        torch.testing.assert_close(z_grad, expected[1])
        torch.testing.assert_close(x_grad, expected[2])


def spectrum_and_modes(x):
    y = torch.fft.fftshift(torch.fft.rfft2(x), dim=[-2])
    return y, y[:, 2:4, :3]


def result_and_transpose(z):
    y = z * 2
    return y.mT, y, y.conj()


def result_and_its_pairs(z):
    y = z.exp()
    return y, torch.view_as_real(y)[..., 1], y[1:]


def result_twice(z):
    y = z * 2
    return y, y


# (name, program, input, which output to write after the call): outputs that view another
# output (neuraloperator's spectral convolution returns a spectrum and its modes across a
# graph break)
OUTPUT_VIEWS = [
    ("modes of a spectrum", spectrum_and_modes, lambda: torch.randn(2, 8, 8), 0),
    ("transpose and conj of a result", result_and_transpose, _square, 1),
    ("pairs of a result", result_and_its_pairs, _square, 0),
    ("a result twice", result_twice, _square, 1),
]


@pytest.mark.parametrize("inner", INNERS)
@pytest.mark.parametrize("name,program,make,written", OUTPUT_VIEWS, ids=[c[0] for c in OUTPUT_VIEWS])
def test_outputs_that_view_other_outputs(fresh_dynamo, inner, name, program, make, written):
    """Outputs that eager returns as views of another output are views of it: values and
    strides as eager's, and a write to the viewed output shows in every view, as in eager
    (a copy would go stale)."""
    x = make()
    expected = program(x.clone())
    actual = realify.compile(program, inner=inner)(x.clone())
    for a, e in zip(actual, expected):
        _same(a, e)
        assert a.stride() == e.stride()
        assert a.is_conj() == e.is_conj()
    assert [a is actual[written] for a in actual] == [e is expected[written] for e in expected]
    for outs in (actual, expected):
        outs[written].mul_(-3).add_(1)
    for a, e in zip(actual, expected):
        _same(a, e)


def test_outputs_that_view_other_outputs_gradients(fresh_dynamo):
    """Gradients through an output and a view of it, against eager's (Inductor: the training
    graph, whose view is taken outside it)."""
    def grads(run):
        x = torch.linspace(-1, 1, 128).reshape(2, 8, 8).requires_grad_()
        outs = run(x)
        sum(((o * (1 + 2j + k)).abs() ** 2).sum() for k, o in enumerate(outs)).backward()
        return x.grad

    expected = grads(spectrum_and_modes)
    for inner in INNERS:
        torch._dynamo.reset()
        torch.testing.assert_close(grads(realify.compile(spectrum_and_modes, inner=inner)), expected)


@pytest.mark.parametrize("name,program,make,written", OUTPUT_VIEWS, ids=[c[0] for c in OUTPUT_VIEWS])
def test_outputs_that_view_other_outputs_export_adapter(name, program, make, written):
    """An exported program's outputs share no memory: each is its own tensor, with eager's
    values and strides."""
    x = make()
    expected = program(x.clone())
    actual = realify.ComplexCallAdapter(realify.export(program, (x.clone(),)))(x.clone())
    for a, e in zip(actual, expected):
        _same(a, e)
        assert a.stride() == e.stride()


def test_output_strides_contiguous_graph_unchanged(fresh_dynamo):
    """A contiguous output is stacked as before: no buffer with other strides in the graph."""
    graphs = []

    def inner(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    realify.compile(lambda z: (z * 2).exp(), inner=inner)(_square())
    (graph,) = graphs
    targets = {n.target for n in graph.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.stack.default in targets
    assert torch.ops.aten.empty_strided.default not in targets


def test_compiled_graph_runs_on_fake_inputs_that_it_writes():
    # DDPOptimizer runs each compiled piece on fake tensors to trace the next piece: the
    # runtime's write-back and overlap check must not read the memory fake tensors lack
    import warnings

    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    def program(z, x):
        z.mul_(2)
        x.add_(1)
        return z + 1, x * 2

    z, x = _z(), torch.randn(4, 4)
    call = realify.realify_backend(torch.fx.symbolic_trace(program), [z, x], inner="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns where a fake tensor's data pointer is read
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            out = call(mode.from_tensor(z), mode.from_tensor(x))
    assert all(isinstance(o, FakeTensor) for o in out)
    assert [(o.shape, o.dtype) for o in out] == [(z.shape, z.dtype), (x.shape, x.dtype)]
    expected_z, expected_x = z * 2, x + 1
    out = call(z, x)
    _same(z, expected_z)
    _same(x, expected_x)
    _same(out[0], expected_z + 1)


@pytest.mark.parametrize("shape", [(), (3,)], ids=["0-d", "vector"])
@pytest.mark.parametrize("detached_first", [True, False], ids=["detached-first", "detached-second"])
def test_an_output_and_its_detached_view_keep_eagers_gradient_and_memory(fresh_dynamo, shape, detached_first):
    """``(z.detach(), z)``: two outputs of one storage and one size, of which only one carries a
    gradient. The other is taken from the one that carries it (the fuzzer's long run found the
    0-d case built the other way round, with no gradient left on ``z``)."""
    def program(a):
        z = torch.exp(a)
        return (z.detach(), z) if detached_first else (z, z.detach())

    a = torch.zeros(shape, dtype=torch.complex64, requires_grad=True)
    expected, got = program(a), realify.compile(program, inner="eager", fullgraph=True)(a)
    assert [x.requires_grad for x in got] == [x.requires_grad for x in expected]
    assert got[0].data_ptr() == got[1].data_ptr()  # one storage, as eager's
    carrier = 1 if detached_first else 0
    (grad_expected,) = torch.autograd.grad(expected[carrier].real.sum(), a)
    (grad_got,) = torch.autograd.grad(got[carrier].real.sum(), a)
    torch.testing.assert_close(grad_got, grad_expected)
