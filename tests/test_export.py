"""realify.export: real-only ExportedPrograms, the complex-call adapter, and ONNX Runtime.

Each case is exported, checked to hold no complex dtype anywhere (graph values, placeholders,
state, constants; ONNX tensor types), then run three ways against eager complex PyTorch:
``ep.module()`` on interleaved inputs, the adapter on complex inputs, and ONNX Runtime.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn as nn
from no_rule_ops import PHASE_TWIST, phase_twist
from torch._higher_order_ops import while_loop
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch.export import Dim
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map

import realify
from realify.bench.workloads import FNOBlock, apply_rotary_emb, docs_chain, linear_recurrence_step, rotary_freqs
from realify.onnx import onnx_translation_table, to_onnx

C64, C128 = torch.complex64, torch.complex128

# complex64: a few float32 ulps over short chains of real ops, as in the OpInfo tests;
# complex128: the same bound in float64.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def randc(*shape, dtype=C64):
    return torch.randn(*shape, dtype=dtype)


# ---- the cases -------------------------------------------------------------------------------


class ComplexConvLinear(nn.Module):
    """Complex Conv2d and Linear with complex parameters, a real parameter, a complex buffer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1, dtype=C64)
        self.fc = nn.Linear(3 * 5 * 5, 4, dtype=C64)
        self.gain = nn.Parameter(torch.tensor([0.5, 2.0]))  # real, last dim 2: must stay as it is
        self.register_buffer("phase", torch.polar(torch.ones(4), torch.arange(4.0)))

    def forward(self, x):
        z = self.conv(x).flatten(1)
        return self.fc(z) * self.phase * self.gain[0] + self.gain[1]


def fft_all_norms(x):
    return {norm: (torch.fft.fft(x, norm=norm), torch.fft.ifft(x, norm=norm), torch.fft.fft2(x, norm=norm))
            for norm in ("backward", "ortho", "forward")}


def rfft_odd(x):
    # odd length 7: no Nyquist bin; irfft with n=7 needs the full Hermitian completion
    spectrum = torch.fft.rfft(x)
    return spectrum, torch.fft.irfft(spectrum * (1 + 0.5j), n=7), torch.fft.irfft(spectrum, n=7, norm="ortho")


def rfft_norms(x):
    return [(torch.fft.rfft(x, norm=n), torch.fft.irfft(torch.fft.rfft(x), n=x.shape[-1], norm=n),
             torch.fft.irfft2(torch.fft.rfft2(x, norm=n), s=x.shape[-2:], norm=n))
            for n in ("backward", "ortho", "forward")]


def mixed(z, x, scale):
    """Real and complex inputs; real and complex outputs."""
    w = z * x + scale
    return w.abs(), w, x * 2.0, w.real


def nested(inputs):
    z, pair = inputs["z"], inputs["pair"]
    return {"sum": z + pair[0], "parts": [pair[1].exp(), (z * pair[0]).angle()], "real": z.abs().sum()}


def rotary(q, k, freqs):
    return apply_rotary_emb(q, k, freqs)


def both_branches(z):
    """torch.cond with opposite predicates: one call takes each branch, whatever z is."""
    def branches(pred):
        return torch.cond(pred, lambda z: z * 2j, lambda z: z.conj().exp(), (z,))
    return branches(z.real.sum() > 0) + branches(z.real.sum() <= 0)


def powers(z, w):
    return while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * (1 + 1j) + w), (torch.tensor(0), z))[1]


def scan_recurrence(z, w):
    return scan(lambda c, x: (c * x + w, ((c * x + w).abs(), c * x)), z[0], z[1:])


def parallel_recurrence(a, b):
    """h_t = a_t h_(t-1) + b_t as associative_scan's log-depth combine of (a, b) pairs."""
    return associative_scan(linear_recurrence_step, (a, b), dim=0, combine_mode="generic")[1]


def mapped(z, w):
    return hop_map(lambda x, w: (x * w).exp(), z, w)


@dataclasses.dataclass
class Case:
    program: Callable
    args: Callable[[], tuple]
    kwargs: dict = dataclasses.field(default_factory=dict)
    onnx: bool = False
    tol: dict | None = None  # per real dtype, when the default bound does not hold


CASES = {
    "docs_chain": Case(docs_chain, lambda: (randc(64), randc(64)), onnx=True),
    "rotary": Case(rotary, lambda: (torch.randn(2, 8, 3, 16), torch.randn(2, 8, 3, 16), rotary_freqs(8, 16)),
                   onnx=True),
    "conv_linear": Case(ComplexConvLinear(), lambda: (randc(2, 2, 5, 5),), onnx=True),
    # the spectral mix is a complex einsum over the low modes: 3 real GEMMs (Gauss), whose error
    # bound is up to 3x the 4-GEMM form's (docs/numerics.md), hence 3x the complex64 bound
    "fno_block": Case(FNOBlock(4, 3).eval(), lambda: (torch.randn(2, 4, 12, 12),), onnx=True,
                      tol={torch.float32: dict(rtol=3e-5, atol=3e-5)}),
    "fft_norms": Case(fft_all_norms, lambda: (randc(4, 6),), onnx=True),
    "rfft_odd": Case(rfft_odd, lambda: (torch.randn(3, 7),), onnx=True),
    "rfft_norms": Case(rfft_norms, lambda: (torch.randn(4, 6),), onnx=True),
    "complex128": Case(docs_chain, lambda: (randc(32, dtype=C128), randc(32, dtype=C128))),
    "fft_complex128": Case(fft_all_norms, lambda: (randc(4, 6, dtype=C128),)),
    "mixed_real_complex": Case(mixed, lambda: (randc(3, 4), torch.randn(3, 4), torch.randn(4, 2)[:, 0]), onnx=True),
    "nested_io": Case(nested, lambda: ({"z": randc(5), "pair": (randc(5), randc(5))},), onnx=True),
    # control flow: ONNX If, Loop and Scan
    "cond": Case(both_branches, lambda: (randc(6),), onnx=True),
    "while_loop": Case(powers, lambda: (randc(4), randc(4)), onnx=True),
    "scan": Case(scan_recurrence, lambda: (randc(7, 3), randc(3)), onnx=True),
    "associative_scan": Case(parallel_recurrence, lambda: (0.5 * randc(11, 3), randc(11, 3)), onnx=True),
    # not to ONNX: torch.onnx has no translation of map (a real map fails there too)
    "map": Case(mapped, lambda: (randc(5, 3), randc(3))),
}


# ---- helpers ---------------------------------------------------------------------------------


def interleave(x: Any, dtype: torch.dtype | None = None) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype.is_complex:
        real = torch.view_as_real(x)
        return real.to(dtype) if dtype is not None else real
    return x


def assert_no_complex(ep: torch.export.ExportedProgram) -> None:
    """Every node's value, every placeholder and output, all state and constants are real."""
    for node in ep.graph.nodes:
        for value in tree_leaves(node.meta.get("val")):
            complex_value = isinstance(value, torch.Tensor) and value.dtype.is_complex
            assert not complex_value, f"{node.op} {node.name}: {value.dtype}"
        for arg in tree_leaves((node.args, node.kwargs)):
            assert not isinstance(arg, complex), f"{node.name} has a complex scalar argument"
            assert not (isinstance(arg, torch.dtype) and arg.is_complex), f"{node.name} has a complex dtype argument"
    for name, value in list(ep.state_dict.items()) + list(ep.constants.items()):
        assert not value.dtype.is_complex, f"{name}: {value.dtype}"
    for value in tree_leaves(ep.example_inputs):
        assert not (isinstance(value, torch.Tensor) and value.dtype.is_complex)


def assert_close(actual: Any, expected: Any, tol: dict | None = None) -> None:
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    assert a_spec == e_spec, f"output structure {a_spec}, expected {e_spec}"
    for a, e in zip(a_leaves, e_leaves):
        assert a.dtype == e.dtype and a.shape == e.shape, \
            f"{a.dtype}{tuple(a.shape)}, expected {e.dtype}{tuple(e.shape)}"
        real = torch.view_as_real(e).dtype if e.dtype.is_complex else e.dtype
        bound = (tol or {}).get(real, TOL.get(real, TOL[torch.float32]))
        torch.testing.assert_close(a.detach(), e, **bound)


def onnx_session(ep) -> tuple[onnx.ModelProto, ort.InferenceSession]:
    model = to_onnx(ep).model_proto
    return model, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


COMPLEX_ELEM_TYPES = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}


def assert_onnx_real(model: onnx.ModelProto) -> None:
    graphs = [model.graph]
    for graph in graphs:
        for value in list(graph.input) + list(graph.output) + list(graph.value_info):
            assert value.type.tensor_type.elem_type not in COMPLEX_ELEM_TYPES, f"ONNX value {value.name} is complex"
        for init in graph.initializer:
            assert init.data_type not in COMPLEX_ELEM_TYPES, f"ONNX initializer {init.name} is complex"
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    graphs.append(attr.g)
                if node.op_type == "Cast" and attr.name == "to":
                    assert attr.i not in COMPLEX_ELEM_TYPES, f"ONNX node {node.name} casts to complex"
    for function in model.functions:
        for value in function.value_info:
            assert value.type.tensor_type.elem_type not in COMPLEX_ELEM_TYPES


def run_onnx(session: ort.InferenceSession, real_inputs: list[Any]) -> list[np.ndarray]:
    tensors = [x for x in real_inputs if isinstance(x, torch.Tensor)]
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(tensors), f"ONNX inputs {names} for {len(tensors)} tensors"
    return session.run(None, {n: t.detach().numpy() for n, t in zip(names, tensors)})


# ---- the table -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_export_matches_eager(name):
    case = CASES[name]
    torch.manual_seed(0)
    args = case.args()
    expected = case.program(*args, **case.kwargs)
    ep = realify.export(case.program, args, case.kwargs)
    assert_no_complex(ep)

    real_args, real_kwargs = tree_map(interleave, (args, case.kwargs))
    assert_close(ep.module()(*real_args, **real_kwargs), tree_map(interleave, expected), case.tol)
    assert_close(realify.ComplexCallAdapter(ep)(*args, **case.kwargs), expected, case.tol)

    if case.onnx:
        model, session = onnx_session(ep)
        assert_onnx_real(model)
        outputs = run_onnx(session, tree_leaves((real_args, real_kwargs)))
        flat_expected = list(tree_leaves(tree_map(interleave, expected)))
        assert len(outputs) == len(flat_expected)
        # ONNX Runtime's own kernels (its DFT, GEMM, transcendental functions) round differently
        # from PyTorch's: the same bounds, on the same float32 values
        assert_close([torch.from_numpy(o) for o in outputs], flat_expected, case.tol)


def test_complex_parameters_become_real_pairs():
    model = ComplexConvLinear()
    ep = realify.export(model, (randc(2, 2, 5, 5),))
    assert set(ep.state_dict) == set(model.state_dict())
    for name, value in model.state_dict().items():
        exported = ep.state_dict[name]
        if value.dtype.is_complex:
            assert exported.dtype == torch.float32 and exported.shape == (*value.shape, 2), name
            torch.testing.assert_close(exported, torch.view_as_real(value), rtol=0, atol=0)
        else:  # real parameters, including one whose last dim is 2, are left alone
            assert exported.dtype == value.dtype and exported.shape == value.shape, name
    assert {s.target for s in ep.graph_signature.input_specs if s.kind.name == "PARAMETER"} == {
        "conv.weight", "conv.bias", "fc.weight", "fc.bias", "gain"}


def test_loading_complex_weights_as_real_pairs():
    torch.manual_seed(0)
    model, trained = ComplexConvLinear(), ComplexConvLinear()
    x = randc(2, 2, 5, 5)
    ep = realify.export(model, (x,))
    state = {k: torch.view_as_real(v) if v.dtype.is_complex else v for k, v in trained.state_dict().items()}
    module = ep.module()
    module.load_state_dict(state)
    assert_close(module(torch.view_as_real(x)), torch.view_as_real(trained(x)))


def test_real_tensor_with_trailing_two_is_not_complex():
    def f(x, z):
        return x * 3.0, z * x[..., :1].squeeze(-1)

    x, z = torch.randn(4, 2), randc(4)
    ep = realify.export(f, (x, z))
    placeholders = [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder"]
    assert [tuple(p.shape) for p in placeholders] == [(4, 2), (4, 2)]
    signature = realify.ComplexCallAdapter(ep).signature
    assert signature.inputs == (None, C64) and signature.outputs == (None, C64)
    assert_close(ep.module()(x, torch.view_as_real(z)), (x * 3.0, torch.view_as_real(f(x, z)[1])))


def test_truncate_double():
    torch.manual_seed(0)
    a, b = randc(32, dtype=C128), randc(32, dtype=C128)
    ep = realify.export(docs_chain, (a, b), truncate_double=True)
    assert_no_complex(ep)
    dtypes = {n.meta["val"].dtype for n in ep.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)}
    assert torch.float64 not in dtypes
    expected = docs_chain(a, b)
    actual = ep.module()(torch.view_as_real(a).float(), torch.view_as_real(b).float())
    # single precision against the double-precision reference: the complex64 bound
    torch.testing.assert_close(actual.double(), torch.view_as_real(expected), **TOL[torch.float32])
    out = realify.ComplexCallAdapter(ep)(a, b)
    assert out.dtype == C128  # the adapter returns the program's own dtype
    torch.testing.assert_close(out, expected, **TOL[torch.float32])


def test_dynamic_batch_dim():
    torch.manual_seed(0)
    model = ComplexConvLinear()
    batch = Dim("batch", max=64)
    ep = realify.export(model, (randc(2, 2, 5, 5),), dynamic_shapes=({0: batch},))
    assert_no_complex(ep)
    shape = next(n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder" and n.name == "x")
    assert isinstance(shape[0], torch.SymInt) and shape[1:] == (2, 5, 5, 2)  # trailing 2 static
    adapter = realify.ComplexCallAdapter(ep)
    for b in (1, 3, 7):
        x = randc(b, 2, 5, 5)
        assert_close(ep.module()(torch.view_as_real(x)), torch.view_as_real(model(x)))
        assert_close(adapter(x), model(x))
    model_onnx, session = onnx_session(ep)
    assert_onnx_real(model_onnx)
    x = randc(5, 2, 5, 5)
    (out,) = run_onnx(session, [torch.view_as_real(x)])
    assert_close(torch.from_numpy(out), torch.view_as_real(model(x)))


def test_onnx_model_keeps_dim_names_and_names_its_outputs():
    """to_onnx of a program with Dim("seq"): the ONNX inputs and outputs call that dim ``seq``
    (not the exported program's symbol), inputs keep the argument names, outputs are named
    output_0, output_1; ONNX Runtime runs the file by those names at another length."""
    def program(signal, gain):
        spectrum = torch.fft.fft(signal) * gain
        return spectrum, spectrum.abs()

    torch.manual_seed(0)
    seq = Dim("seq", min=2, max=512)
    onnx_program = to_onnx(program, (randc(3, 16), randc(16)), dynamic_shapes=({1: seq}, {0: seq}))
    graph = onnx_program.model_proto.graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(graph.input) + list(graph.output)}
    assert dims == {"signal": [3, "seq", 2], "gain": ["seq", 2], "output_0": [3, "seq", 2], "output_1": [3, "seq"]}
    session = ort.InferenceSession(onnx_program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    signal, gain = randc(3, 32), randc(32)  # a power of two: ORT runs the DFT as an FFT (accurate)
    spectrum, magnitude = session.run(["output_0", "output_1"], {"signal": torch.view_as_real(signal).numpy(),
                                                                "gain": torch.view_as_real(gain).numpy()})
    expected_spectrum, expected_magnitude = program(signal, gain)
    assert_close(torch.from_numpy(spectrum), torch.view_as_real(expected_spectrum))
    assert_close(torch.from_numpy(magnitude), expected_magnitude)


@pytest.mark.parametrize("input_sizes, dim, size, step", [
    ([2, 30], 1, 6, 2),  # istft's case: windows overlapping by size - step
    ([5, 37, 3], 1, 7, 3),  # size not a multiple of step, the windowed dim in the middle
    ([40], 0, 8, 8),  # no overlap
    ([2, 31], -1, 4, 5),  # gaps between windows, samples past the last window
])
def test_overlap_add_onnx_translation(input_sizes, dim, size, step):
    """aten.unfold_backward (istft's overlap-add) through ONNX Runtime, against PyTorch."""
    frames_count = (input_sizes[dim] - size) // step + 1
    shape = list(input_sizes)
    shape[dim] = frames_count
    frames = torch.randn(*shape, size)

    def overlap_add(frames):
        return torch.ops.aten.unfold_backward(frames, input_sizes, dim, size, step)

    model = to_onnx(overlap_add, (frames,)).model_proto
    assert "ScatterND" not in {node.op_type for node in model.graph.node}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {session.get_inputs()[0].name: frames.numpy()})
    assert_close(torch.from_numpy(out), overlap_add(frames))


def test_stft_mask_istft_model_runs_in_onnx_runtime():
    """An STFT denoiser (STFT, a complex mask, iSTFT with its window envelope) exported to ONNX
    runs in ONNX Runtime and matches eager (the overlap-add: unfold_backward's translation)."""
    window = torch.hann_window(64)

    def denoise(signal):
        spectrum = torch.stft(signal, 64, hop_length=16, window=window, return_complex=True)
        # (not a function of angle(): ONNX Runtime's DFT gives the Nyquist bin of a real signal
        # an imaginary part of rounding size, -1e-6, where pocketfft's is exactly 0, and angle()
        # of a negative real part flips from pi to -pi there)
        mask = torch.sigmoid(spectrum.abs() - 0.5) * (1 + 0.2j)
        return torch.istft(spectrum * mask, 64, hop_length=16, window=window, length=signal.shape[-1])

    torch.manual_seed(0)
    signal = torch.randn(2, 1024)
    model = to_onnx(denoise, (signal,)).model_proto
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"signal": signal.numpy()})
    assert_close(torch.from_numpy(out), denoise(signal))


def test_dynamic_fft_length():
    """ONNX normalization reads the signal length at run time: a dynamic FFT dim still scales right."""
    torch.manual_seed(0)
    n = Dim("n", min=2, max=256)
    ep = realify.export(fft_all_norms, (randc(4, 6),), dynamic_shapes=({1: n},))
    _, session = onnx_session(ep)
    for length in (5, 8):
        x = randc(4, length)
        outputs = run_onnx(session, [torch.view_as_real(x)])
        assert_close([torch.from_numpy(o) for o in outputs], tree_leaves(tree_map(interleave, fft_all_norms(x))))


class _Products(nn.Module):
    def forward(self, z):
        return (z * 0.1 + 1).prod(-1), torch.cumprod(z, -1)


def test_products_along_a_dynamic_dim_are_right_at_every_size():
    """prod and cumprod along a dynamic dim: the range asked for, eager's values at other sizes
    (eager's kernel on the pairs); realify.onnx has no form for them and says so."""
    ep = realify.export(_Products(), (randc(3, 5),), dynamic_shapes=({1: Dim("n", max=100)},))
    (bounds,) = ep.range_constraints.values()
    assert bounds.upper == 100
    adapter = realify.ComplexCallAdapter(ep)
    for n in (2, 9, 64):
        z = randc(3, n)
        assert_close(adapter(z), _Products()(z))
    with pytest.raises(realify.NoOnnxFormError, match="dynamic dim"):
        to_onnx(ep)


class _RecurrentOnParts(torch.nn.Module):
    """A complex recurrent layer as such packages build it: one real layer on the real parts,
    one on the imaginary parts."""

    def __init__(self, kind: str):
        super().__init__()
        layer = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
        self.re, self.im = layer(4, 5, batch_first=True), layer(4, 5, batch_first=True)

    def forward(self, z):
        return torch.complex(self.re(z.real)[0] - self.im(z.imag)[0], self.re(z.imag)[0] + self.im(z.real)[0])


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_real_recurrent_layers_export_as_their_cells(kind):
    """Real LSTM/GRU/RNN layers leave realify.export as their cells' ops (traced to aten they
    would become the CPU kernel aten.mkldnn_rnn_layer, which torch.onnx has no translation
    for): eager's values in the program and in ONNX Runtime."""
    torch.manual_seed(0)
    module, z = _RecurrentOnParts(kind).eval(), randc(2, 3, 4)
    ep = realify.export(module, (z,))
    assert not ep.graph.find_nodes(op="call_function", target=torch.ops.aten.mkldnn_rnn_layer.default)
    with torch.no_grad():
        expected = module(z)
    assert_close(realify.ComplexCallAdapter(ep)(z), expected)
    _, session = onnx_session(ep)
    (out,) = run_onnx(session, [interleave(z)])
    assert_close(torch.from_numpy(out), interleave(expected))


class _MatrixExp(torch.nn.Module):
    def forward(self, a):
        return torch.linalg.matrix_exp(a * 1j)


def test_an_unread_value_leaves_no_form_in_onnx():
    """A value the program computes and never reads (a logcumsumexp, whose ONNX form is a scan of
    log2(n) rounds) leaves the exported program: its form, written for the example's size, made
    the ONNX model's other ops take that size (an Expand failed at every other one; found by the
    fuzzer)."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(a):
        unread = torch.logcumsumexp(torch.sqrt(a), dim=-1)  # noqa: F841
        return a.unsqueeze(0).expand(2, *a.shape).sum(dim=-2, keepdim=True)

    ep = realify.export(program, (torch.randn(3, dtype=torch.complex64),), dynamic_shapes=({0: Dim.AUTO},))
    assert not [n for n in ep.graph.nodes if n.op == "call_function" and "pointwise" in str(n.target)]
    session = onnx_session(ep)
    for n in (3, 2, 5, 9):
        a = torch.randn(n, dtype=torch.complex64)
        torch.testing.assert_close(run_session(session, ep, [a])[0], program(a), rtol=1e-5, atol=1e-5)


def test_matrix_exp_has_no_onnx_form_and_says_so():
    """The program exports with eager's values; realify.onnx names the op (torch.onnx has no
    matrix exponential, real or complex) rather than failing inside torch.onnx."""
    a = randc(3, 3)
    ep = realify.export(_MatrixExp(), (a,))
    assert_close(realify.ComplexCallAdapter(ep)(a), _MatrixExp()(a))
    with pytest.raises(realify.NoOnnxFormError, match="matrix_exp"):
        to_onnx(ep)


def test_linear_over_a_dynamic_batch_is_dynamic():
    """A complex Linear over 3-D inputs with a dynamic batch: the batch stays symbolic (ATen's
    C++ linear would read it as an integer under functionalization), right at other batches in
    the program and in ONNX Runtime."""
    torch.manual_seed(0)
    layer = nn.Linear(8, 4, dtype=C64)
    ep = realify.export(layer, (randc(3, 5, 8),), dynamic_shapes=({0: Dim("batch")},))
    assert ep.range_constraints
    adapter = realify.ComplexCallAdapter(ep)
    _, session = onnx_session(ep)
    for b in (2, 6, 11):
        x = randc(b, 5, 8)
        assert_close(adapter(x), layer(x))
        (out,) = run_onnx(session, [torch.view_as_real(x)])
        assert_close(torch.from_numpy(out), torch.view_as_real(layer(x)))


class _DataDependentSizes(nn.Module):
    def forward(self, z, mask, points):
        return torch.masked_select(z, mask), *torch.tensor_split(z, points, dim=1)


def test_data_dependent_sizes_over_a_dynamic_dim():
    """masked_select and tensor_split at points given as a tensor: sizes read from data (one
    unbacked size for both parts of each result, not one per part) over a dynamic dim; eager's
    values at other sizes, masks and points, negative, larger and descending points included."""
    n = Dim("n", max=64)
    z, mask, points = randc(3, 6), torch.rand(3, 6) > 0.5, torch.tensor([1, 4])
    ep = realify.export(_DataDependentSizes(), (z, mask, points), dynamic_shapes=({1: n}, {1: n}, None))
    adapter = realify.ComplexCallAdapter(ep)
    for size, cut in ((2, [0, 2]), (9, [3, 3]), (40, [5, 31]), (5, [2, 7]), (5, [-2, 4]), (5, [4, 1])):
        args = randc(3, size), torch.rand(3, size) > 0.5, torch.tensor(cut)
        assert_close(adapter(*args), _DataDependentSizes()(*args))


def test_masked_select_broadcasting_at_sizes_that_may_be_1_in_onnx_runtime():
    """masked_select of complex values against a mask that broadcasts, every dim from 1 up:
    realify's rule selects the elements' positions with one real masked_select (whose kernel
    checks the broadcast at run time, as eager's does, where a broadcast in the rule fixed two
    sizes equal), and torch.onnx, which has no masked_select, gets realify's translation.
    Eager's values in the program and in ONNX Runtime, at sizes 1 included."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(z, mask):
        return torch.masked_select(z, mask)

    m, n = Dim("m", min=1, max=32), Dim("n", min=1, max=32)
    z, mask = randc(3, 1, 5), torch.rand(4, 1) > 0.5
    ep = realify.export(program, (z, mask), dynamic_shapes=({0: m, 2: n}, {0: Dim("k", min=1, max=32)}))
    adapter, session = realify.ComplexCallAdapter(ep), onnx_session(ep)
    for rows, cols, k in ((3, 5, 4), (1, 7, 2), (2, 1, 1), (6, 2, 3)):
        args = randc(rows, 1, cols), torch.rand(k, 1) > 0.3
        assert_close(adapter(*args), program(*args))
        assert_close(run_session(session, ep, args)[0], program(*args))


def _unfold(z):
    return torch.nn.functional.unfold(z, (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1))


@pytest.mark.parametrize("batch", [0, 3])
def test_unfold_over_dynamic_sizes_in_onnx_runtime(batch):
    """nn.functional.unfold (aten.im2col, realify.onnx's translation) with dynamic spatial dims,
    padding, dilation and stride: eager's values in ONNX Runtime at other sizes, an empty batch
    included (torch.onnx's own Reshape to (N, C*kh*kw, -1) is refused by ONNX Runtime where N
    is 0)."""
    h, w = Dim("h", min=4, max=32), Dim("w", min=7, max=32)
    ep = realify.export(_unfold, (randc(batch, 2, 6, 9),), dynamic_shapes=({2: h, 3: w},))
    _, session = onnx_session(ep)
    for size in ((6, 9), (5, 12), (11, 7)):
        z = randc(batch, 2, *size)
        (out,) = run_onnx(session, [torch.view_as_real(z)])
        assert_close(torch.tensor(out), torch.view_as_real(_unfold(z)))


def _shifted_statistics(z):
    std, mean = torch.std_mean(z)
    flat = torch.roll(z, z.shape[1] // 2)  # no dims: a roll of the flattened tensor
    return torch.fft.fftshift(z), torch.fft.ifftshift(z, dim=1), flat, std, mean, z.mean(dim=(0, 1), keepdim=True)


def test_rolls_by_dynamic_sizes_and_means_over_every_dim_in_onnx_runtime():
    """Ops torch.onnx translates wrongly at dynamic sizes, for real programs too: a roll by a
    shift read from a dynamic size (fftshift's n // 2, which torch.onnx writes as a constant
    attribute: a TypeError) and a mean over every dim (aten.mean.dim with dim=None, which
    realify's rules write for a complex mean: a Reshape with no input). realify.onnx's
    translations: eager's values in ONNX Runtime at other sizes."""
    m, n = Dim("m", min=2, max=32), Dim("n", min=2, max=32)
    ep = realify.export(_shifted_statistics, (randc(5, 6),), dynamic_shapes=({0: m, 1: n},))
    _, session = onnx_session(ep)
    for size in ((5, 6), (4, 9), (7, 2)):
        z = randc(*size)
        outs = run_onnx(session, [torch.view_as_real(z)])
        expected = [torch.view_as_real(e) if e.is_complex() else e for e in _shifted_statistics(z)]
        assert_close([torch.from_numpy(o) for o in outs], expected)


def test_a_size_fixed_by_realify_is_refused_naming_the_dim():
    """An ONNX form unrolled over a dynamic matrix size (the LU of a solve) is refused at
    to_onnx with the size and the condition, never written for the example's size alone; the
    exported program itself (LAPACK on pairs) is right at every size."""
    def solve(a, b):
        return torch.linalg.solve(a, b)

    n = Dim("n", min=2, max=32)
    ep = realify.export(solve, (randc(5, 5), randc(5, 2)), dynamic_shapes=({0: n, 1: n}, {0: n}))
    a, b = randc(7, 7) + 4 * torch.eye(7), randc(7, 2)
    assert_close(realify.ComplexCallAdapter(ep)(a, b), solve(a, b))
    with pytest.raises(realify.NoOnnxFormError, match=r"L\['[ab]'\]\.size\(\)\[0\]"):
        to_onnx(ep)


@pytest.mark.parametrize("program,shape", [
    (lambda a: torch.exp(a[1:]), (2, 0)),
    (lambda a: torch.angle(a[..., ::2]), (0, 2)),
], ids=["exp-of-a-slice", "angle-of-a-strided-slice"])
def test_a_size_fixed_by_broadcasting_the_parts_is_refused(program, shape):
    """Of an empty tensor, plain torch.export keeps the sliced dim dynamic; realify's ops on the
    parts broadcast, and broadcasting's question "is this size 1?" answered yes for a slice of one
    element fixes the dim. realify.export refuses the program naming the condition, rather than
    returning one that fails its own run-time check at every other size."""
    from realify.tools.symbolic_sizes import _Program
    a = torch.randn(shape, dtype=torch.complex64)
    dims = (({0: Dim.AUTO, 1: Dim.AUTO},),)  # _Program takes its tensors as *args
    assert torch.export.export(_Program(program), (a,), dynamic_shapes=dims).range_constraints
    with pytest.raises(torch._dynamo.exc.UserError, match=r"Eq\(.*, 1\), for s\d+ = L\['tensors'\]\[0\]\.size\(\)"):
        realify.export(_Program(program), (a,), dynamic_shapes=dims)


@pytest.mark.parametrize("onnx", [False, True], ids=["program", "onnx-runtime"])
def test_a_convolution_whose_weight_is_dynamic_keeps_its_kernel_size_dynamic(onnx):
    """Every dim of the weight dynamic: torch.export's trace asks no question of the kernel
    size, with the convolution backends off; realify's trace of the real convolutions of the
    parts runs the same way, where fake convolution's choice of a backend ("k <= 3?", "k > 2?")
    fixed k to 3. Eager's values at other kernel sizes; where the kernel exceeds the padded
    input, the program's own input check fails, as plain torch.export's does (a bound of the
    program, which realify's trace asks in other terms and does not count as fixing a size)."""
    def conv(x, w, b):
        return torch.nn.functional.conv1d(x, w, b, stride=2, padding=2)

    x, w, b = randc(1, 4, 6), randc(3, 4, 3), randc(3)
    every = ({1: Dim.AUTO, 2: Dim.AUTO}, {0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.AUTO}, {0: Dim.AUTO})
    ep = realify.export(conv, (x, w, b), dynamic_shapes=every)
    assert len(ep.range_constraints) == 4  # channels (shared), length, output channels (shared), kernel
    if onnx:
        from realify.tools.symbolic_sizes import onnx_session, run_session
        session = onnx_session(ep)

        def run(*args):
            return run_session(session, ep, args)[0]
    else:
        run = realify.ComplexCallAdapter(ep)
    for k, length in ((2, 6), (4, 7), (5, 5)):
        args = randc(1, 4, length), randc(3, 4, k), randc(3)
        assert_close(run(*args), conv(*args))
    if not onnx:  # plain torch.export's program fails the same input check
        too_long = randc(1, 4, 2), randc(3, 4, 7), randc(3)
        with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
            conv(*too_long)
        with pytest.raises(AssertionError, match=r"Guard failed: 4 \+ x\.size\(\)\[2\] >= w\.size\(\)\[2\]"):
            run(*too_long)


class _Cross(torch.nn.Module):
    def forward(self, a, b):
        return torch.cross(a, b)


def test_cross_without_dim_over_a_dynamic_size_is_refused():
    """torch.cross without ``dim`` takes the first dim of size 3: plain torch.export keeps the
    batch dim dynamic with a run-time guard that it is not 3, which fails there. realify.export
    refuses the program at export, naming the condition and the dim."""
    a, b = randc(5, 3), randc(5, 3)
    dims = ({0: Dim.AUTO}, {0: Dim.AUTO})
    plain = torch.export.export(_Cross(), (a.real, b.real), dynamic_shapes=dims)
    with pytest.raises(AssertionError, match=r"Guard failed: a\.size\(\)\[0\] != 3"):
        plain.module()(torch.randn(3, 3), torch.randn(3, 3))
    with pytest.raises(torch._dynamo.exc.UserError, match=r"Ne\(s\d+, 3\), for s\d+ = L\['[ab]'\]\.size\(\)\[0\]"):
        realify.export(_Cross(), (a, b), dynamic_shapes=dims)


@pytest.mark.parametrize("program,shape", [
    (lambda a: a[1:] * (1 + 2j), (2, 0)),
    (lambda a: a[..., ::2] * (1 + 2j), (0, 2)),
], ids=["product-of-a-slice", "product-of-a-strided-slice"])
def test_a_size_export_specialized_traces_like_plain_export(program, shape):
    """``Dim.AUTO`` on an empty example: torch.export specializes the 0 and, here, the other
    dim, whose size stays a SymInt of a constant. C++ view kernels raise on such sizes
    ("Cannot call storage_offset() on tensor with symbolic sizes"), so realify's trace must
    take the Python dispatcher's forms for them as for any symbolic size; the program then
    has plain torch.export's ranges and eager's values."""
    from realify.tools.symbolic_sizes import _Program
    a = torch.randn(shape, dtype=torch.complex64)
    dims = (({0: Dim.AUTO, 1: Dim.AUTO},),)  # _Program takes its tensors as *args
    plain = torch.export.export(_Program(program), (a,), dynamic_shapes=dims)
    ep = realify.export(_Program(program), (a,), dynamic_shapes=dims)
    assert sorted(map(str, ep.range_constraints.values())) == sorted(map(str, plain.range_constraints.values()))
    assert_close(realify.ComplexCallAdapter(ep)(a), program(a))


@pytest.mark.parametrize("program,shapes,at_one", [
    (lambda a, b: torch.einsum("...i,ij->...j", a, b), [(2, 3, 4), (4, 5)], [(1, 1, 1), (1, 1)]),
    (lambda c, a, b: torch.addbmm(c, a, b), [(3, 5), (2, 3, 4), (2, 4, 5)], [(3, 5), (3, 3, 1), (3, 1, 5)]),
    (lambda a: torch.linalg.lu(a), [(3, 5)], [(5, 3)]),
], ids=["einsum-folding-a-batch", "addbmm-with-one-dim-in-two-inputs", "lu-of-a-tall-matrix"])
def test_a_program_exported_with_dims_from_one_runs_where_they_are_one(program, shapes, at_one):
    """Every dim a Dim from 1 up, one Dim per distinct size (dims of equal size share it), then
    called where some are 1 (or, for the LU, where the example's m < n turns round): eager's
    values, where realify's programs failed run-time checks of torch.export's trace of the real
    program: a size-1 dim's stride among symbolic ones (einsum's reshape to (1, b m, k)), a
    reshape of one input to another's sizes before the trace knew them equal (addbmm), a view of
    the first min(m, n) columns (the LU's factors)."""
    from realify.tools.symbolic_sizes import _Program, from_one_shapes
    args = [randc(*s) for s in shapes]
    dims = (from_one_shapes(args),)  # _Program takes its tensors as *args
    ep = realify.export(_Program(program), tuple(args), dynamic_shapes=dims)
    other = [randc(*s) for s in at_one]
    assert_close(realify.ComplexCallAdapter(ep)(*other), program(*other))


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_in_onnx_runtime(accumulate):
    """torch.put of complex values (realify's rule: a real put of each part, which torch.onnx
    cannot translate, for real programs too) in ONNX Runtime, with negative indices, a repeated
    index where the values add, and a dynamic size: eager's values."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(z, index, source):
        return z.put(index, source, accumulate=accumulate)

    index = torch.tensor([[0, -1], [4, 2]]) if not accumulate else torch.tensor([[0, -1], [4, -1]])
    z, source = randc(3, 4), randc(2, 2)
    ep = realify.export(program, (z, index, source), dynamic_shapes=({0: Dim("n", min=2, max=16)}, None, None))
    session = onnx_session(ep)
    for rows in (3, 6):
        args = (randc(rows, 4), index, source)
        assert_close(run_session(session, ep, args)[0], program(*args))


@pytest.mark.parametrize("value", [0j, 1 + 1j], ids=["mask-false", "mask-true"])
def test_masked_scatter_of_a_0d_tensor_in_onnx_runtime(value):
    """masked_scatter into a 0-d tensor, complex and real: torch.onnx's ScatterND, which ONNX
    Runtime refuses on 0-d data (plain torch.onnx's model of the real op fails alike), is
    written on one element (the fuzzer's long run, exporting every program it compiles, found
    it). Eager's values with the mask true and false."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(z, r):
        twice = z + z
        return (torch.zeros_like(twice).masked_scatter(twice.real > 0, torch.masked_select(twice, twice.real > 0)),
                torch.zeros_like(r).masked_scatter(r > 0, r.reshape(1) * 3))

    z = torch.tensor(value, dtype=torch.complex64)
    args = (z, z.real.clone())
    ep = realify.export(program, args)
    for have, want in zip(run_session(onnx_session(ep), ep, list(args)), program(*args)):
        assert_close(have, want)


@pytest.mark.parametrize("shape", [(0, 3), (0,), (2, 3)], ids=["rows-of-nothing", "nothing", "rows"])
def test_cat_of_empty_tensors_in_onnx_runtime(shape):
    """torch.cat of tensors with no elements, complex and real: torch.onnx's translation drops
    every empty input and failed where all were (the fuzzer's bounded run, exporting every
    program it compiles, found it); a legacy 1-d empty tensor beside others is still skipped,
    as torch.cat skips it. Eager's values and shapes in ONNX Runtime."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(z, r):
        return torch.cat([z.exp(), z], dim=0), torch.cat([r, r * 2, torch.tensor([])]), torch.cat([r, r], dim=-1)

    z = torch.randn(shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    args = (z, z.real.clone())
    ep = realify.export(program, args)
    for have, want in zip(run_session(onnx_session(ep), ep, list(args)), program(*args)):
        assert have.shape == want.shape
        assert_close(have, want)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 1)], ids=["nothing", "rows-of-nothing", "columns"])
def test_broadcast_to_no_elements_in_onnx_runtime(shape):
    """A complex quotient of an empty tensor by its sum (shape 1 where the tensor has 0):
    realify's pointwise formula expands its operands to one shape, and ONNX Runtime's
    optimizer took the Expand from 1 to 0 for a no-op and failed (the fuzzer's bounded run
    found it). Eager's shapes and values in ONNX Runtime."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(z, w):
        return w / z.sum(dim=-1, keepdim=True), z * w.sum(dim=0)

    z = torch.zeros(shape, dtype=torch.complex64)
    args = (z, z.clone())
    ep = realify.export(program, args)
    for have, want in zip(run_session(onnx_session(ep), ep, list(args)), program(*args)):
        assert have.shape == want.shape
        assert_close(have, want)


@pytest.mark.parametrize("shape, resize", [
    ((2, 3, 7), dict(size=4)), ((2, 3, 4), dict(size=9)), ((1, 2, 5), dict(scale_factor=1.5)),
    ((1, 2, 5, 6), dict(size=(3, 11))), ((1, 2, 5, 6), dict(scale_factor=(0.7, 1.6))),
    ((1, 1, 3, 4, 5), dict(size=(5, 2, 7)))], ids=["1d-down", "1d-up", "1d-scale", "2d-size", "2d-scale", "3d-size"])
def test_nearest_exact_upsampling_in_onnx_runtime(shape, resize):
    """interpolate(mode="nearest-exact"), which realify's trace writes as an ATen overload torch.onnx
    has no translation for (the real-op table found it), of a complex tensor (per part) and a real one,
    by sizes and by scales (which map indices by the scale given): eager's values in ONNX Runtime."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def nearest_exact(x):
        return torch.nn.functional.interpolate(x, mode="nearest-exact", **resize)

    def program(z, r):
        return nearest_exact(z.real) + 1j * nearest_exact(z.imag), nearest_exact(r)

    z = torch.randn(shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    args = (z, z.real.clone())
    ep = realify.export(program, args)
    for have, want in zip(run_session(onnx_session(ep), ep, list(args)), program(*args)):
        assert have.shape == want.shape
        assert torch.equal(have, want)  # a selection of elements: exact


@pytest.mark.parametrize("shape", [(0, 3), (0,)], ids=["rows-of-nothing", "nothing"])
def test_onnx_mean_of_no_elements_is_nan(shape):
    """A mean over an empty dim is eager's 0 / 0, NaN, in ONNX Runtime too, complex and real
    (torch.onnx's ReduceMean gave 0; the fuzzer's long export run found it)."""
    from realify.tools.symbolic_sizes import onnx_session, run_session

    def program(a, r):
        return a.mean(dim=0), r.mean(dim=0)

    a, r = torch.randn(shape, dtype=torch.complex64), torch.randn(shape)
    ep = realify.export(program, (a, r))
    got = run_session(onnx_session(ep), ep, [a, r])
    for g, e in zip(got, program(a, r)):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert torch.equal(torch.view_as_real(g).isnan() if g.is_complex() else g.isnan(),
                           torch.view_as_real(e).isnan() if e.is_complex() else e.isnan())


def test_adapter_handles_conj_and_noncontiguous_inputs():
    torch.manual_seed(0)
    a, b = randc(8, 6), randc(8, 6)
    ep = realify.export(docs_chain, (a, b))
    adapter = realify.ComplexCallAdapter(ep)
    assert_close(adapter(a.conj(), b.t().contiguous().t()), docs_chain(a.conj(), b))


@pytest.mark.parametrize("program", [lambda a: a.detach(), lambda a: (a * 2, a.detach()[1:])],
                         ids=["detached-input", "detached-slice-beside-a-product"])
def test_a_detached_view_of_an_input_carries_no_gradient(program):
    """An output eager returns as a detached view of an input is taken again from the input at
    each call; traced from an example that needs no grad, it must still carry none when the
    caller's input requires grad (the fuzzer's long export run found it did, with the identity
    as its gradient)."""
    a = randc(3, dtype=torch.complex128)
    ep = realify.export(program, (a,))
    x, y = a.clone().requires_grad_(), a.clone().requires_grad_()
    got, expected = realify.ComplexCallAdapter(ep)(x), program(y)
    got, expected = (got, expected) if isinstance(expected, tuple) else ((got,), (expected,))
    assert [g.requires_grad for g in got] == [e.requires_grad for e in expected]
    assert_close(got, expected)


def test_input_mutation_is_written_back():
    def scale_(z, w):
        z.mul_(w)
        return z.abs()

    torch.manual_seed(0)
    z, w = randc(6), randc(6)
    ep = realify.export(scale_, (z.clone(), w))
    assert realify.ComplexCallAdapter(ep).signature.mutated_inputs == (0,)
    expected_z = z.clone()
    expected = scale_(expected_z, w)
    # ep.module() writes into the interleaved input, hence into z through view_as_real
    got_z = z.clone()
    assert_close(ep.module()(torch.view_as_real(got_z), torch.view_as_real(w)), expected)
    assert_close(got_z, expected_z)
    # the adapter writes back a conj view's copy too
    got_z = z.clone()
    assert_close(realify.ComplexCallAdapter(ep)(got_z, w), expected)
    assert_close(got_z, expected_z)


def test_buffer_mutation():
    class Accumulate(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(3, dtype=C64))

        def forward(self, z):
            self.total.add_(z)
            return self.total * 1j

    torch.manual_seed(0)
    model = Accumulate()
    z = randc(3)
    ep = realify.export(model, (z,))
    assert_no_complex(ep)
    module = ep.module()
    expected = [model(z).clone() for _ in range(2)]
    actual = [module(torch.view_as_real(z)).clone() for _ in range(2)]
    assert_close(actual, [torch.view_as_real(e) for e in expected])
    assert_close(module.total, torch.view_as_real(model.total))


def test_kwargs_and_signature_names():
    def f(z, *, shift):
        return z + shift

    z, shift = randc(3), randc(3)
    ep = realify.export(f, (z,), {"shift": shift})
    names = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    assert names == ["z", "shift"]
    assert_close(realify.ComplexCallAdapter(ep)(z, shift=shift), f(z, shift=shift))


# ---- errors ----------------------------------------------------------------------------------


def test_missing_rule_raises_with_export_advice():
    def f(x):
        return phase_twist(x)  # a user's custom op: an exported program cannot call it

    with pytest.raises(realify.MissingRuleError) as info:
        realify.export(f, (randc(3, 3),))
    message = str(info.value)
    assert PHASE_TWIST in message
    assert "exported program cannot call back into eager" in message
    assert "strict=False" not in message  # that advice is for the compile backend


def test_unsupported_complex_dtype_is_named():
    with pytest.raises(realify.RealifyError, match="complex32"):
        realify.export(lambda z: z * 2, (torch.randn(4, dtype=torch.complex32),))


def test_adapter_needs_a_realify_program():
    ep = torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(realify.RealifyError, match=r"realify\.export"):
        realify.ComplexCallAdapter(ep)


def test_translation_table_covers_the_fft_ops():
    table = onnx_translation_table()
    assert set(table) >= {torch.ops.realify.fft_c2c.default, torch.ops.realify.fft_r2c.default,
                          torch.ops.realify.fft_c2r.default, torch.ops.realify.fft_c2c_pairs.default,
                          torch.ops.realify.fft_r2c_pairs.default}


def test_strict_capture_and_save_load(tmp_path):
    torch.manual_seed(0)
    model = FNOBlock(4, 3).eval()
    x = torch.randn(2, 4, 12, 12)
    ep = realify.export(model, (x,), strict=True)  # dynamo captures the program
    assert_no_complex(ep)
    torch.export.save(ep, tmp_path / "fno.pt2")
    loaded = torch.export.load(tmp_path / "fno.pt2")
    # the signature is not serialized with the program: pass the original's
    adapter = realify.ComplexCallAdapter(loaded, realify.ComplexCallAdapter(ep).signature)
    assert_close(adapter(x), model(x), CASES["fno_block"].tol)


def test_write_to_parameter_is_rejected():
    class ScaleWeight(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(randc(3), requires_grad=False)

        def forward(self, z):
            self.w.mul_(2)
            return self.w * z

    with pytest.raises(realify.RealifyError, match="writes in place to parameter w"):
        realify.export(ScaleWeight(), (randc(3),))


# ---- special values through ONNX ---------------------------------------------------------------

# branch cuts (log, acos, atanh: the side of the cut follows the sign of a zero), small
# arguments (sin's sinh, expm1, log1p: no cancellation), and infinities and nans in each part
ONNX_SPECIAL = ["log", "acos", "atanh", "sin", "expm1", "log1p"]


def test_onnx_special_values_and_branch_cuts():
    """The special-value table of tests/test_numerics.py through one exported program:
    values (nan/inf pattern included) from ONNX Runtime, and values with every sign of zero
    from ONNX's reference evaluator (the operators' specified semantics). ONNX Runtime's own
    kernels lose the sign of some zeros (its Where did, on branch cuts: realify.onnx.pointwise.where),
    so signs are compared on the reference evaluator."""
    from onnx.reference import ReferenceEvaluator
    from test_numerics import _left_out, assert_same_values, special_values

    z = special_values(C64)
    fns = [getattr(torch, name) for name in ONNX_SPECIAL]
    ep = realify.export(lambda z: tuple(fn(z) for fn in fns), (z,))
    model, session = onnx_session(ep)
    feed = {session.get_inputs()[0].name: torch.view_as_real(z).numpy()}
    for runner, signs in [(session, False), (ReferenceEvaluator(model), True)]:
        for name, fn, out in zip(ONNX_SPECIAL, fns, runner.run(None, feed)):
            keep, sign_ok = _left_out(name, z, C64)
            actual = torch.view_as_complex(torch.from_numpy(np.ascontiguousarray(out)))
            assert_same_values(actual, fn(z), C64, signs=signs and sign_ok, where=keep)


def test_exported_program_compiled_by_inductor_keeps_small_parts():
    """Plain Inductor on realify.export's real program, compiled inside
    realify.inductor.accurate_expm1: complex sin and cosh keep their parts near 0, which need
    expm1 (Inductor's own vectorized exp(x) - 1 gives sin(0.5 + 1e-8i) imaginary part 0 here,
    as this test does without the context). The parts come in as real tensors, so that plain
    Inductor vectorizes the kernel: a kernel that reads interleaved pairs runs as scalar code
    under its default tiling heuristic, whose std::expm1 is accurate anyway. Against eager
    complex64 at 4 eps relative, part by part: each part is a product of at most two float32
    functions accurate to 1-2 ulp, as eager's is."""
    from realify.inductor import accurate_expm1

    re = torch.tensor([0.5, -1.25, 2.0, 0.75, 3.0, -0.25, 1.5, -2.5]).repeat(8)
    im = torch.tensor([1e-8, -3e-7, 2e-6, 1e-30, -5e-5, 4e-4, -1e-12, 2e-3]).repeat_interleave(8)

    def program(re, im):  # 64 values: Inductor's vectorized loop, not its scalar tail
        z = torch.complex(re, im)
        return torch.sin(z), torch.cosh(z)

    ep = realify.export(program, (re, im))
    torch._dynamo.reset()
    with accurate_expm1():
        compiled = torch.compile(ep.module())
        actual = compiled(re, im)
    for got, want in zip(actual, program(re, im)):
        want = torch.view_as_real(want)
        error = (got - want).abs() / want.abs().clamp_min(torch.finfo(torch.float32).tiny)
        assert error.max().item() <= 4 * torch.finfo(torch.float32).eps, (got, want)


def test_adapter_runs_without_autocast():
    """Under autocast, eager's complex matmul stays complex64; so does the adapter's (its real
    GEMMs in bfloat16 gave relative error 6e-3). Bound 2e-6 against complex128: several
    times eager's own error here, far below bfloat16's 3.9e-3 rounding."""
    a, b = torch.randn(16, 64, dtype=torch.complex64), torch.randn(64, 64, dtype=torch.complex64)
    adapter = realify.ComplexCallAdapter(realify.export(torch.matmul, (a, b)))  # a builtin: no signature
    with torch.autocast("cpu", dtype=torch.bfloat16):
        actual = adapter(a, b)
    exact = a.to(torch.complex128) @ b.to(torch.complex128)
    assert ((actual - exact).abs().max() / exact.abs().max()).item() <= 2e-6


def test_a_program_plain_torch_export_fails_on_is_not_exported():
    # torch.export fails on a torch.cond of a detached operand when the inputs share memory, for
    # real programs too ("vr must not be None"); realify.export, which exports the complex
    # program with torch.export first, raises as well rather than return a program (found by
    # the long export fuzz run)
    class Program(torch.nn.Module):
        def forward(self, a, b):
            return torch.cond(b.abs().sum() >= 0, lambda z: z * 2, lambda z: z.conj() * 2, (b.detach(),))

    base = torch.randn(2, 3, dtype=torch.complex128)
    a, b = base[:-1], base[1:]
    try:
        torch.export.export(Program(), (a, b))
    except Exception as plain:  # a torch release that fails on it
        with pytest.raises(type(plain)):
            realify.export(Program(), (a, b))
        return
    # a torch release that exports it: realify's program gives eager's value
    got = realify.ComplexCallAdapter(realify.export(Program(), (a, b)))(a, b)
    torch.testing.assert_close(got, Program()(a, b))
