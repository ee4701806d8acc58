"""End-to-end models through the compile backend: a Fourier neural operator block, an S4D
kernel with FFT long convolution, a complex CNN, an STFT mask model, and the complex nn
modules (ConvNd, ConvTranspose2d, Linear), each trained or differentiated and compared with
eager complex PyTorch.

Every model runs twice: with :class:`RecordingInner` (no compilation; it records the real
forward and backward graphs, which must hold no complex dtype and must run the FFTs as the
planar ``realify::fft_*`` custom ops) and with Inductor (for the numbers a real compiler
produces). ``fullgraph=True`` everywhere: a backend failure must fail the test, not fall
back to eager behind a graph break.

The models come from :mod:`realify.bench.workloads` (the benchmark runs the same code).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from backend_support import RecordingInner

import realify
from realify.bench.workloads import ComplexCNN, FNOBlock, S4DConv, STFTMaskModel

C64 = torch.complex64
FFT_OPS = {"fft_c2c", "fft_r2c", "fft_c2r", "fft_c2c_pairs", "fft_r2c_pairs"}
INNERS = ["record", "inductor"]

pytestmark = pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd is returning a function")

# losses and parameters after a few optimizer steps: float32 values, and the compiled graph
# reorders float32 reductions (FFT lengths, einsum contractions, Inductor's fused sums)
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---- harness --------------------------------------------------------------------------------


def _inner(kind: str):
    return RecordingInner() if kind == "record" else kind


def _compiled(model: nn.Module, inner) -> Callable:
    torch._dynamo.reset()  # every model compiles afresh: its graphs are the ones recorded
    return realify.compile(model, inner=inner, fullgraph=True)


def _realify_ops(gm: torch.fx.GraphModule) -> set[str]:
    """Names of the realify:: custom ops called in ``gm`` (``fft_r2c``, ...)."""
    return {n.target._opname for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "namespace", None) == "realify"}


def _check_graphs(rec, forward_ffts: set[str] = frozenset()) -> None:
    """No complex value in any recorded graph; ``forward_ffts`` run as realify:: custom ops in
    the forward graph, and the backward graph (there must be one) differentiates them with the
    same ops."""
    if not isinstance(rec, RecordingInner):
        return
    assert rec.complex_nodes() == []
    kinds = [k for k, _ in rec.graphs]
    assert "forward" in kinds and "backward" in kinds, kinds
    fw_ops = set().union(*(_realify_ops(gm) for k, gm in rec.graphs if k == "forward"))
    bw_ops = set().union(*(_realify_ops(gm) for k, gm in rec.graphs if k == "backward"))
    assert forward_ffts <= fw_ops, f"forward graph runs {fw_ops}, expected {forward_ffts}"
    if forward_ffts:
        assert bw_ops & FFT_OPS, "the backward graph holds no realify:: FFT"
    # every graph is real: no aten FFT primitive survived
    for _, gm in rec.graphs:
        fft_nodes = [n for n in gm.graph.nodes if "_fft_" in str(n.target) and "realify" not in str(n.target)]
        assert not fft_nodes, fft_nodes


def _train(model: nn.Module, step: Callable, inputs: tuple, target, loss_fn, steps: int,
           opt: str = "adam", lr: float = 1e-2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``steps`` optimizer steps of ``loss_fn(step(*inputs), target)``: (losses, parameters)."""
    optimizer = (torch.optim.Adam if opt == "adam" else torch.optim.SGD)(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(step(*inputs), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses), {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_trains_like_eager(model: nn.Module, inner, inputs: tuple, target, loss_fn, steps: int = 3,
                              rtol: float = RTOL, atol: float = ATOL, **opt) -> None:
    eager_model, compiled_model = copy.deepcopy(model), copy.deepcopy(model)
    eager_losses, eager_params = _train(eager_model, eager_model, inputs, target, loss_fn, steps, **opt)
    losses, params = _train(compiled_model, _compiled(compiled_model, inner), inputs, target, loss_fn, steps, **opt)
    torch.testing.assert_close(losses, eager_losses, rtol=rtol, atol=atol)
    for name, p in params.items():
        assert p.dtype == eager_params[name].dtype, name
        torch.testing.assert_close(p, eager_params[name], rtol=rtol, atol=atol,
                                   msg=lambda m: f"{name}: {m}")  # noqa: B023  (called within the iteration)


def _grads(model: nn.Module, step: Callable, inputs: tuple, target, loss_fn):
    """Output and the gradient of every parameter (and input that requires grad)."""
    model.zero_grad()
    leaves = tuple(x.detach().clone().requires_grad_(x.requires_grad) for x in inputs)
    out = step(*leaves)
    loss_fn(out, target).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    grads.update({f"input{i}": x.grad for i, x in enumerate(leaves) if x.requires_grad})
    return out.detach(), grads


def _assert_grads_like_eager(model: nn.Module, inner, inputs: tuple, target, loss_fn, names=None,
                             rtol: float = RTOL, atol: float = ATOL) -> None:
    eager_model, compiled_model = copy.deepcopy(model), copy.deepcopy(model)
    expected, eager_grads = _grads(eager_model, eager_model, inputs, target, loss_fn)
    out, grads = _grads(compiled_model, _compiled(compiled_model, inner), inputs, target, loss_fn)
    torch.testing.assert_close(out, expected, rtol=rtol, atol=atol)
    for name in names or eager_grads:
        assert grads[name] is not None, f"no gradient reached {name}"
        torch.testing.assert_close(grads[name], eager_grads[name], rtol=rtol, atol=atol,
                                   msg=lambda m: f"grad of {name}: {m}")  # noqa: B023  (called within the iteration)


# ---- Fourier neural operator -------------------------------------------------------------------


@pytest.mark.parametrize("inner", INNERS)
def test_fno_block_trains_like_eager(inner):
    # rfft2 -> low-mode corners x complex weights (einsum "bixy,ioxy->boxy") -> zero spectrum
    # -> irfft2, plus a 1x1 conv and gelu; complex64 weights trained by Adam
    model = FNOBlock(channels=4, modes=4)
    assert {p.dtype for p in model.spectral.parameters()} == {C64}
    x, target = torch.randn(2, 4, 16, 16), torch.randn(2, 4, 16, 16)
    rec = _inner(inner)
    _assert_trains_like_eager(model, rec, (x,), target, F.mse_loss, steps=3)
    # only the kept modes' columns are transformed: their c2c over the rows as an FFT, the
    # columns' r2c and c2r as GEMMs with the DFT matrix of the band (realify/passes/fft_bands.py)
    _check_graphs(rec, {"fft_c2c_pairs"})


# ---- S4D ------------------------------------------------------------------------------------


def _s4d():
    model = S4DConv(H=4, N=8)
    assert model.kernel.C.dtype == C64 and model.kernel.log_A_real.dtype == torch.float32
    u, target = torch.randn(2, 4, 32), torch.randn(2, 4, 32)
    return model, (u,), target


@pytest.mark.parametrize("inner", INNERS)
def test_s4d_kernel_forward_and_gradients(inner):
    # Vandermonde exp(dtA * arange(L)) of a complex diagonal A, einsum("hn,hnl->hl") with the
    # complex C, .real, then an FFT long convolution (rfft/irfft with n = 2L); the spectra's
    # product goes straight to the inverse FFT as pairs, so both spectra are computed as pairs
    # and multiplied by ATen's complex kernel (realify/passes/layout.py, rule 3)
    model, inputs, target = _s4d()
    rec = _inner(inner)
    _assert_grads_like_eager(model, rec, inputs, target, F.mse_loss,
                             names=["kernel.C", "kernel.log_A_real", "kernel.log_dt", "D"])
    _check_graphs(rec, {"fft_r2c_pairs", "cmul_pairs", "fft_c2r"})


def test_s4d_gradient_of_imaginary_state_part():
    model, inputs, target = _s4d()
    assert (model.kernel.A_imag == 0).any()
    _assert_grads_like_eager(model, "eager", inputs, target, F.mse_loss, names=["kernel.A_imag"])


@pytest.mark.parametrize("inner", INNERS)
def test_s4d_trains_like_eager(inner):
    # all parameters, A_imag included: its gradient is off where A_imag == 0 (see above), so
    # train a model whose A_imag has no exact zero
    model, inputs, target = _s4d()
    with torch.no_grad():
        model.kernel.A_imag.add_(0.25)
    _assert_trains_like_eager(model, _inner(inner), inputs, target, F.mse_loss, steps=3)


# ---- complex CNN ----------------------------------------------------------------------------


@pytest.mark.parametrize("inner", INNERS)
def test_complex_cnn_trains_like_eager(inner):
    # complex Conv2d x2, modReLU, cardioid 0.5 (1 + cos(angle z)) z, complex Linear, |z| logits,
    # cross-entropy
    model = ComplexCNN(classes=10)
    x, labels = torch.randn(2, 1, 28, 28, dtype=C64), torch.tensor([3, 7])
    rec = _inner(inner)
    _assert_trains_like_eager(model, rec, (x,), labels, F.cross_entropy, steps=3, lr=1e-3)
    _check_graphs(rec)
    if isinstance(rec, RecordingInner):
        forward = next(gm for k, gm in rec.graphs if k == "forward")
        convs = [n for n in forward.graph.nodes if n.target == torch.ops.aten.convolution.default]
        assert convs and all(not n.meta["val"].dtype.is_complex for n in convs)


# ---- STFT mask model --------------------------------------------------------------------------


@pytest.mark.parametrize("inner", INNERS)
def test_stft_mask_model_forward_backward(inner):
    # stft(return_complex=True) -> view_as_real channels -> real conv net -> bounded mask
    # tanh(|m|) exp(i angle(m)) -> spec * mask -> istft(length=T)
    model = STFTMaskModel(n_fft=64, hop=16, hidden=8)
    wave, target = torch.randn(1, 512), torch.randn(1, 512)
    wave.requires_grad_()
    rec = _inner(inner)
    _assert_grads_like_eager(model, rec, (wave,), target, F.mse_loss)
    # the spectrum is read as pairs (view_as_real's channels, and the masked product on pairs
    # that istft's inverse transform reads): the forward FFT computes pairs
    _check_graphs(rec, {"fft_r2c_pairs", "fft_c2r"})


# ---- complex nn modules -----------------------------------------------------------------------

MODULES = {
    "Conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1, dtype=C64), (2, 3, 10)),
    "Conv2d": (lambda: nn.Conv2d(3, 4, 3, stride=2, dtype=C64), (2, 3, 9, 9)),
    "Conv3d": (lambda: nn.Conv3d(2, 3, 3, padding="same", dtype=C64), (1, 2, 5, 5, 5)),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1, dtype=C64), (2, 3, 5, 5)),
    "Linear": (lambda: nn.Linear(6, 5, dtype=C64), (4, 6)),
}


class _Modules(nn.Module):
    """The modules named in ``names``, each applied to its own input: one graph for all."""

    def __init__(self, names):
        super().__init__()
        self.names = list(names)
        self.layers = nn.ModuleList(MODULES[n][0]() for n in self.names)

    def forward(self, *xs):
        return tuple(layer(x) for layer, x in zip(self.layers, xs))


def _complex_mse(outs, targets) -> torch.Tensor:
    # sum over outputs of mean |out - target|^2
    return sum((o - t).abs().square().mean() for o, t in zip(outs, targets))


def _assert_modules_sgd_step(names, inner) -> None:
    model = _Modules(names)
    xs = tuple(torch.randn(MODULES[n][1], dtype=C64) for n in names)
    targets = tuple(torch.randn(o.shape, dtype=C64) for o in model(*xs))
    assert all(p.dtype == C64 for p in model.parameters())
    _assert_trains_like_eager(model, inner, xs, targets, _complex_mse, steps=1, opt="sgd", lr=0.1)
    _check_graphs(inner)


@pytest.mark.parametrize("name", list(MODULES))
def test_complex_module_sgd_step(name):
    _assert_modules_sgd_step([name], RecordingInner())


def test_complex_modules_sgd_step_inductor():
    # every module in one graph: one Inductor compilation (forward + backward) for all five
    _assert_modules_sgd_step(list(MODULES), "inductor")


@pytest.mark.slow(reason="one Inductor compilation per module (~12 s each on 2 cores); "
                        "test_complex_modules_sgd_step_inductor covers them in one graph")
@pytest.mark.parametrize("name", list(MODULES))
def test_complex_module_sgd_step_inductor(name):
    _assert_modules_sgd_step([name], "inductor")
