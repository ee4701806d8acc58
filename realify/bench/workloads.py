"""Realistic complex-valued workloads for ``python -m realify bench`` (and for tests).

Every model is a plain module-level function or ``nn.Module`` and is deterministic given
``torch.manual_seed``, so tests can import them directly::

    from realify.bench.workloads import FNOBlock, WORKLOADS
    fn, inputs = WORKLOADS["fno"].make("tiny", train=True, seed=0)

A :class:`Workload` builds ``(fn_or_module, inputs)`` for a size (``"tiny"`` for tests,
``"small"`` — seconds on 2 CPU cores — and ``"large"`` for big machines and GPUs). The
forward variant returns the model's outputs; the training variant (``train=True``) returns a
real scalar loss whose backward pass reaches every parameter and every input that requires
grad. The benchmark runner adds the backward pass and, for modules, an SGD step.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._higher_order_ops.associative_scan import associative_scan

from .imaging import build_angular_spectrum, build_mri
from .linalg_workloads import build_ground_state, build_mimo, build_music

C64 = torch.complex64

__all__ = [
    "LRU",
    "WORKLOADS",
    "Cardioid",
    "ComplexCNN",
    "ComplexTorchCNN",
    "FNOBlock",
    "LossWrapper",
    "ModReLU",
    "QuantumCircuit",
    "S4DConv",
    "S4DKernel",
    "STFTMaskModel",
    "SpectralConv2d",
    "Workload",
    "WorkloadUnavailable",
    "apply_rotary_emb",
    "complex_gemm",
    "docs_chain",
    "get",
    "names",
    "rotary_freqs",
    "rotary_loss",
]


# --------------------------------------------------------------------------- docs chain
def docs_chain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The example from the docs: a chain of complex pointwise ops."""
    return torch.atan(torch.cos(a * b) / torch.sin(a + b))


# --------------------------------------------------------------------------- GEMM
def complex_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Complex matrix product (3 real GEMMs under realify by default, 4 with ``gemm_multiplications=4``)."""
    return a @ b


# --------------------------------------------------------------------------- rotary embedding
def rotary_freqs(seq: int, dim: int, theta: float = 10000.0) -> torch.Tensor:
    """LLaMA's complex frequency table ``(seq, dim/2)``: ``polar(1, m * theta^(-2i/dim))``."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim)
    angles = torch.outer(torch.arange(seq).float(), inv)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary_emb(q: torch.Tensor, k: torch.Tensor, freqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """LLaMA rotary embedding: q, k ``(batch, seq, heads, dim)`` real; freqs ``(seq, dim/2)`` complex."""
    qc = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
    kc = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
    f = freqs[None, :, None, :]
    return torch.view_as_real(qc * f).flatten(3).type_as(q), torch.view_as_real(kc * f).flatten(3).type_as(k)


def rotary_loss(q, k, freqs, wq, wk) -> torch.Tensor:
    """A scalar to differentiate rotary embedding: fixed random projections of the outputs."""
    rq, rk = apply_rotary_emb(q, k, freqs)
    return (rq * wq).sum() + (rk * wk).sum()


# --------------------------------------------------------------------------- FNO
class SpectralConv2d(nn.Module):
    """The Fourier layer of an FNO: rfft2, mix the low ``modes x modes`` corners with complex
    weights (``einsum("bixy,ioxy->boxy")``), write them into a zero spectrum, irfft2."""

    def __init__(self, in_channels: int, out_channels: int, modes: int):
        super().__init__()
        self.out_channels, self.modes = out_channels, modes
        scale = 1.0 / (in_channels * out_channels)
        self.weight_low = nn.Parameter(scale * torch.randn(in_channels, out_channels, modes, modes, dtype=C64))
        self.weight_high = nn.Parameter(scale * torch.randn(in_channels, out_channels, modes, modes, dtype=C64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        m = self.modes
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(b, self.out_channels, h, w // 2 + 1, dtype=x_ft.dtype, device=x.device)
        out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.weight_low)
        out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.weight_high)
        return torch.fft.irfft2(out_ft, s=(h, w))


class FNOBlock(nn.Module):
    """One Fourier Neural Operator block: ``gelu(spectral_conv(x) + conv1x1(x))``."""

    def __init__(self, channels: int, modes: int):
        super().__init__()
        self.spectral = SpectralConv2d(channels, channels, modes)
        self.pointwise = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.spectral(x) + self.pointwise(x))


# --------------------------------------------------------------------------- S4D
class S4DKernel(nn.Module):
    """The S4D convolution kernel (Gu et al. 2022): diagonal complex state matrix ``A``,
    discretized by zero-order hold, Vandermonde ``exp(dtA * arange(L))``, contracted with
    ``C`` by ``einsum("hn,hnl->hl")``; ``N`` is the state size (``N/2`` conjugate pairs)."""

    def __init__(self, H: int, N: int = 64, dt_min: float = 1e-3, dt_max: float = 1e-1):
        super().__init__()
        log_dt = torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.log_dt = nn.Parameter(log_dt)
        self.C = nn.Parameter(torch.randn(H, N // 2, dtype=C64) * 0.5**0.5)
        self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(H, N // 2)))
        self.A_imag = nn.Parameter(math.pi * torch.arange(N // 2).float().repeat(H, 1))

    def forward(self, L: int) -> torch.Tensor:
        dt = torch.exp(self.log_dt)  # (H)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag  # (H, N/2)
        dtA = A * dt.unsqueeze(-1)
        K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)  # (H, N/2, L)
        C = self.C * (torch.exp(dtA) - 1.0) / A
        return 2 * torch.einsum("hn,hnl->hl", C, torch.exp(K)).real  # (H, L)


class S4DConv(nn.Module):
    """S4D layer: the kernel applied as a long convolution by rfft/irfft with ``n=2L``."""

    def __init__(self, H: int, N: int = 64):
        super().__init__()
        self.kernel = S4DKernel(H, N)
        self.D = nn.Parameter(torch.randn(H))

    def forward(self, u: torch.Tensor) -> torch.Tensor:  # u: (B, H, L)
        L = u.shape[-1]
        k = self.kernel(L)
        k_f = torch.fft.rfft(k, n=2 * L)
        u_f = torch.fft.rfft(u, n=2 * L)
        y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
        return y + u * self.D.unsqueeze(-1)


# --------------------------------------------------------------------------- LRU
class LRU(nn.Module):
    """Linear Recurrent Unit (Orvieto et al., 2023): ``x_t = lam * x_(t-1) + gamma * (B u_t)``
    with a learned complex diagonal ``lam = exp(-exp(nu) + i exp(theta_log))`` (|lam| in
    [r_min, r_max] at initialization), ``y_t = Re(C x_t) + D * u_t``. The recurrence runs as a
    parallel (log-depth) ``associative_scan`` of ``(a, b)`` pairs under the combine
    ``(a1, b1) . (a2, b2) = (a1 a2, a2 b1 + b2)``."""

    def __init__(self, H: int, N: int, r_min: float = 0.9, r_max: float = 0.999):
        super().__init__()
        u1, u2 = torch.rand(N), torch.rand(N)
        self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(u1 * (r_max ** 2 - r_min ** 2) + r_min ** 2)))
        self.theta_log = nn.Parameter(torch.log(u2 * 2 * math.pi))
        modulus = torch.exp(-torch.exp(self.nu_log.detach()))
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - modulus ** 2)))
        self.B = nn.Parameter(torch.randn(N, H, dtype=C64) / math.sqrt(2 * H))
        self.C = nn.Parameter(torch.randn(H, N, dtype=C64) / math.sqrt(N))
        self.D = nn.Parameter(torch.randn(H))

    def forward(self, u: torch.Tensor) -> torch.Tensor:  # u: (batch, L, H) real
        lam = torch.polar(torch.exp(-torch.exp(self.nu_log)), torch.exp(self.theta_log))
        bu = (u.to(self.B.dtype) @ self.B.T) * torch.exp(self.gamma_log)
        x = associative_scan(linear_recurrence_step, (lam.expand_as(bu), bu), dim=1, combine_mode="generic")[1]
        return (x @ self.C.T).real + u * self.D


def linear_recurrence_step(left, right):
    """The associative combine of h_t = a_t h_(t-1) + b_t: (a1, b1) . (a2, b2) = (a1 a2, a2 b1 + b2)."""
    (a1, b1), (a2, b2) = left, right
    return a1 * a2, a2 * b1 + b2


# --------------------------------------------------------------------------- complex CNN
class ModReLU(nn.Module):
    """modReLU (Arjovsky et al.): ``relu(|z| + b) * z / |z|`` with a learned real bias per channel."""

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        self.bias = nn.Parameter(torch.full((channels,), -0.1))
        self.eps = eps

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        mag = z.abs()
        bias = self.bias.view(-1, *([1] * (z.dim() - 2)))
        return F.relu(mag + bias) / (mag + self.eps) * z


class Cardioid(nn.Module):
    """Cardioid activation (Virtue et al.): ``0.5 * (1 + cos(angle(z))) * z``."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return 0.5 * (1 + torch.cos(torch.angle(z))) * z


class ComplexCNN(nn.Module):
    """A small complex-valued CNN for 28x28 complex images: two complex Conv2d with modReLU
    and cardioid, a complex Linear, and ``|z|`` as real logits."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, dtype=C64)
        self.act1 = ModReLU(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, dtype=C64)
        self.act2 = Cardioid()
        self.fc = nn.Linear(16 * 12 * 12, classes, dtype=C64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 1, 28, 28) complex
        z = self.act2(self.conv2(self.act1(self.conv1(x))))
        return self.fc(z.flatten(1)).abs()


# --------------------------------------------------------------------------- STFT mask
class STFTMaskModel(nn.Module):
    """Speech enhancement by a complex spectral mask: stft, a small real conv net on
    ``view_as_real`` channels, a bounded mask ``tanh(|m|) * exp(1j*angle(m))``, istft."""

    def __init__(self, n_fft: int = 512, hop: int = 128, hidden: int = 16):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.net = nn.Sequential(
            nn.Conv2d(2, hidden, 3, padding=1), nn.ReLU(),
            nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(),
            nn.Conv2d(hidden, 2, 3, padding=1),
        )

    def forward(self, wave: torch.Tensor) -> torch.Tensor:  # wave: (B, T) real
        spec = torch.stft(wave, self.n_fft, self.hop, window=self.window, return_complex=True)  # (B, F, T')
        feats = torch.view_as_real(spec).permute(0, 3, 1, 2)  # (B, 2, F, T')
        m = torch.view_as_complex(self.net(feats).permute(0, 2, 3, 1).contiguous())
        mask = torch.tanh(m.abs()) * torch.exp(1j * torch.angle(m))
        return torch.istft(spec * mask, self.n_fft, self.hop, window=self.window, length=wave.shape[-1])


# --------------------------------------------------------------------------- quantum circuit
class QuantumCircuit(nn.Module):
    """A batched state-vector simulation of a variational circuit on ``n`` qubits: data
    encoded by RY(x) rotations, then ``layers`` of RZ·RY rotations per qubit (gates built
    from cos/sin of the parameters, applied by einsum) and a ring of CZ gates. Returns
    ``<Z_q>`` for every qubit, from ``|psi|^2``."""

    def __init__(self, n_qubits: int = 10, layers: int = 4):
        super().__init__()
        self.n = n_qubits
        self.theta = nn.Parameter(torch.rand(layers, n_qubits, 2) * 2 * math.pi)
        bits = (torch.arange(2**n_qubits).unsqueeze(-1) >> torch.arange(n_qubits - 1, -1, -1)) & 1  # (2^n, n)
        self.register_buffer("z_signs", (1 - 2 * bits).float())  # Z eigenvalue of each qubit per basis state
        ring = bits * bits.roll(-1, dims=1) if n_qubits > 1 else torch.zeros_like(bits)
        self.register_buffer("cz_phase", (1 - 2 * (ring.sum(-1) % 2)).float())  # product of CZ(q, q+1) signs

    def apply_gate(self, psi: torch.Tensor, gate: torch.Tensor, q: int) -> torch.Tensor:
        """``gate`` (2, 2) or (B, 2, 2) complex on qubit ``q`` of ``psi`` (B, 2^n)."""
        b = psi.shape[0]
        s = psi.reshape(b, 2**q, 2, 2 ** (self.n - q - 1))
        eq = "bij,bajc->baic" if gate.dim() == 3 else "ij,bajc->baic"
        return torch.einsum(eq, gate, s).reshape(b, -1)

    @staticmethod
    def ry_gate(t: torch.Tensor) -> torch.Tensor:
        """RY(t) = [[cos t/2, -sin t/2], [sin t/2, cos t/2]], as complex (..., 2, 2)."""
        c, s = torch.cos(t / 2), torch.sin(t / 2)
        re = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
        return torch.complex(re, torch.zeros_like(re))

    @staticmethod
    def rzry_gate(phi: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """RZ(phi) RY(t) = [[e^{-i phi/2} c, -e^{-i phi/2} s], [e^{i phi/2} s, e^{i phi/2} c]]."""
        c, s = torch.cos(t / 2), torch.sin(t / 2)
        cp, sp = torch.cos(phi / 2), torch.sin(phi / 2)
        re = torch.stack([torch.stack([cp * c, -cp * s]), torch.stack([cp * s, cp * c])])
        im = torch.stack([torch.stack([-sp * c, sp * s]), torch.stack([sp * s, sp * c])])
        return torch.complex(re, im)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, n) real angles
        b = x.shape[0]
        psi = torch.zeros(b, 2**self.n, dtype=C64, device=x.device)
        psi[:, 0] = 1
        for q in range(self.n):
            psi = self.apply_gate(psi, self.ry_gate(x[:, q]), q)
        for layer in range(self.theta.shape[0]):
            for q in range(self.n):
                psi = self.apply_gate(psi, self.rzry_gate(self.theta[layer, q, 0], self.theta[layer, q, 1]), q)
            psi = psi * self.cz_phase
        probs = psi.abs().square()  # |psi|^2
        return probs @ self.z_signs  # (B, n) expectations of Z


# --------------------------------------------------------------------------- training wrapper
class LossWrapper(nn.Module):
    """``loss(model(*inputs[:-1]), inputs[-1])``: a module whose output is a scalar loss."""

    def __init__(self, model: nn.Module, loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.loss(self.model(*args[:-1]), args[-1])


# --------------------------------------------------------------------------- third-party models
# Models from packages people use, built as their documentation builds them (the "models"
# extra: pip install 'realify[models]'). Their graph breaks and layouts are theirs, not ours.


class WorkloadUnavailable(ImportError):
    """A workload whose package is not installed (the runner reports it as skipped)."""


def _package(module: str, distribution: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise WorkloadUnavailable(
            f"{distribution} is not installed ({e}): pip install 'realify[models]' (or pip install "
            f"{distribution}) to run this workload") from None


def _build_neuralop_fno(batch: int, grid: int, modes: int, hidden: int, layers: int, train: bool,
                        einsum: str = "opt_einsum"):
    """neuraloperator's FNO (the package's own model, as its examples build it), on a 2-D field.

    ``einsum`` is tensorly's einsum, which the spectral convolutions contract their modes with:
    ``"opt_einsum"`` is what importing neuraloperator sets (tensorly's opt_einsum plugin; dynamo
    alone cannot trace opt_einsum's ``importlib`` and ``threading`` calls and makes 15 graphs of
    the forward, one with realify's stand-ins for them, realify/library_polyfills.py),
    ``"torch"`` is ``tensorly.plugins.use_default_einsum()``: ``torch.einsum``, which dynamo
    traces. tensorly's setting is global, so every build sets it."""
    models = _package("neuralop.models", "neuraloperator")
    plugins = importlib.import_module("tensorly.plugins")
    if einsum == "torch":
        plugins.use_default_einsum()
    else:
        plugins.use_opt_einsum("optimal")  # neuraloperator's own choice, made when it is imported
    model = models.FNO(n_modes=(modes, modes), hidden_channels=hidden, n_layers=layers, in_channels=1, out_channels=1)
    return _mse_variant(model, torch.randn(batch, 1, grid, grid), train)


class ComplexTorchCNN(nn.Module):
    """A complex-valued CNN from complextorch's layers: complex Conv2d (cfloat weights),
    cardioid and modReLU activations, complex average pooling, a complex Linear, |z| logits."""

    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        cvnn = _package("complextorch.nn", "complextorch")
        self.conv1, self.act1 = cvnn.Conv2d(1, channels, 3, padding=1), cvnn.CVCardiod()
        self.conv2, self.act2 = cvnn.Conv2d(channels, 2 * channels, 3, padding=1, stride=2), cvnn.modReLU()
        self.pool = cvnn.AdaptiveAvgPool2d(4)
        self.fc = cvnn.Linear(2 * channels * 16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act2(self.conv2(self.act1(self.conv1(x))))
        return self.fc(self.pool(x).flatten(1)).abs()


def _build_complextorch_cnn(batch: int, channels: int, train: bool):
    model = ComplexTorchCNN(channels)
    x = torch.randn(batch, 1, 28, 28, dtype=C64)
    if not train:
        return model, (x,)
    return LossWrapper(model, F.cross_entropy), (x, torch.randint(0, 10, (batch,)))


def _build_auraloss_mrstft(batch: int, samples: int, train: bool):
    """auraloss's multi-resolution STFT loss (three STFTs of each signal, spectral convergence
    and log-magnitude terms), the training loss of many audio models; its training variant
    differentiates it with respect to the predicted signal."""
    freq = _package("auraloss.freq", "auraloss")
    prediction = torch.randn(batch, 1, samples, requires_grad=train)
    return freq.MultiResolutionSTFTLoss(), (prediction, torch.randn(batch, 1, samples))


# --------------------------------------------------------------------------- registry
@dataclasses.dataclass(frozen=True)
class Workload:
    """A named benchmark: ``make(size, train)`` -> ``(fn_or_module, inputs)``.

    ``sizes`` maps ``"tiny"`` / ``"small"`` / ``"large"`` to the builder's keyword arguments;
    ``trainable`` says whether a training variant exists; ``gemm`` whether the workload holds
    complex matrix products or convolutions (so ``gemm_multiplications`` matters); ``rtol``
    is the normwise relative error to eager above which a compiled result counts as wrong;
    ``third_party`` names the package whose model it runs (the "models" extra).
    """

    name: str
    description: str
    builder: Callable[..., tuple[Any, tuple]]
    sizes: dict[str, dict[str, Any]]
    trainable: bool = False
    gemm: bool = False
    rtol: float = 1e-4
    third_party: str | None = None

    def make(self, size: str = "small", train: bool = False, *, device: str | torch.device = "cpu",
             seed: int | None = None) -> tuple[Any, tuple]:
        """Build ``(fn_or_module, inputs)``; ``seed`` reseeds torch first (None: use the current RNG)."""
        if size not in self.sizes:
            raise ValueError(f"{self.name}: unknown size {size!r}; sizes are {', '.join(self.sizes)}")
        if train and not self.trainable:
            raise ValueError(f"{self.name} has no training variant")
        if seed is not None:
            torch.manual_seed(seed)
        fn, inputs = self.builder(train=train, **self.sizes[size])
        device = torch.device(device)
        if isinstance(fn, nn.Module):
            fn = fn.to(device)
        inputs = tuple(_to(x, device) for x in inputs)
        return fn, inputs

    def describe(self, size: str = "small") -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes[size].items())


def _to(x: Any, device: torch.device) -> Any:
    if not isinstance(x, torch.Tensor) or x.device == device:
        return x
    return x.detach().to(device).requires_grad_(x.requires_grad)


def _mse_variant(model: nn.Module, x: torch.Tensor, train: bool):
    """``model`` on ``x``; for training, its MSE loss against a random target shaped like ``x``."""
    if not train:
        return model, (x,)
    return LossWrapper(model, F.mse_loss), (x, torch.randn(x.shape))


def _build_docs_chain(n: int, train: bool):
    return docs_chain, (torch.randn(n, dtype=C64), torch.randn(n, dtype=C64))


def _build_gemm(n: int, batch: int | None, train: bool):
    shape = (n, n) if batch is None else (batch, n, n)
    return complex_gemm, (torch.randn(shape, dtype=C64), torch.randn(shape, dtype=C64))


def _build_rotary(batch: int, seq: int, heads: int, dim: int, train: bool):
    q = torch.randn(batch, seq, heads, dim, requires_grad=train)
    k = torch.randn(batch, seq, heads, dim, requires_grad=train)
    freqs = rotary_freqs(seq, dim)
    if not train:
        return apply_rotary_emb, (q, k, freqs)
    return rotary_loss, (q, k, freqs, torch.randn_like(q), torch.randn_like(k))


def _build_fno(batch: int, channels: int, grid: int, modes: int, train: bool):
    return _mse_variant(FNOBlock(channels, modes), torch.randn(batch, channels, grid, grid), train)


def _build_s4d(batch: int, H: int, N: int, L: int, train: bool):
    return _mse_variant(S4DConv(H, N), torch.randn(batch, H, L), train)


def _build_lru(batch: int, L: int, H: int, N: int, train: bool):
    return _mse_variant(LRU(H, N), torch.randn(batch, L, H), train)


def _build_cnn(batch: int, train: bool):
    model = ComplexCNN()
    x = torch.randn(batch, 1, 28, 28, dtype=C64)
    if not train:
        return model, (x,)
    return LossWrapper(model, F.cross_entropy), (x, torch.randint(0, 10, (batch,)))


def _build_stft(batch: int, samples: int, n_fft: int, hop: int, train: bool):
    return _mse_variant(STFTMaskModel(n_fft, hop), torch.randn(batch, samples), train)


def _build_quantum(batch: int, qubits: int, layers: int, train: bool):
    model = QuantumCircuit(qubits, layers)
    x = torch.rand(batch, qubits) * math.pi
    if not train:
        return model, (x,)
    return LossWrapper(model, F.mse_loss), (x, torch.rand(batch, qubits) * 2 - 1)


def _gemm_workload(n: int) -> Workload:
    return Workload(
        f"gemm-{n}", f"complex64 matmul {n}x{n} (large: a batch of 8)", _build_gemm,
        {"tiny": {"n": 8, "batch": None}, "small": {"n": n, "batch": None}, "large": {"n": n, "batch": 8}},
        gemm=True,
    )


_NEURALOP_FNO_SIZES = {"tiny": dict(batch=2, grid=16, modes=4, hidden=8, layers=2),
                       "small": dict(batch=8, grid=64, modes=16, hidden=32, layers=4),
                       "large": dict(batch=32, grid=128, modes=32, hidden=64, layers=4)}

# real third-party models first: what users run
WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("neuralop-fno", "neuraloperator's FNO (n_layers spectral convolutions with complex weights, "
             "contracted by opt_einsum as the package sets it)", _build_neuralop_fno,
             _NEURALOP_FNO_SIZES, trainable=True, gemm=True,
             third_party="neuraloperator"),
    Workload("neuralop-fno-torch-einsum", "the same FNO after tensorly.plugins.use_default_einsum(): its mode "
             "contractions through torch.einsum",
             functools.partial(_build_neuralop_fno, einsum="torch"),
             _NEURALOP_FNO_SIZES, trainable=True, gemm=True,
             third_party="neuraloperator"),
    Workload("complextorch-cnn", "complextorch layers: complex Conv2d, cardioid, modReLU, pooling, Linear",
             _build_complextorch_cnn,
             {"tiny": dict(batch=2, channels=4), "small": dict(batch=32, channels=16),
              "large": dict(batch=256, channels=32)},
             trainable=True, gemm=True, third_party="complextorch"),
    Workload("auraloss-mrstft", "auraloss's multi-resolution STFT loss (3 STFT sizes, spectral convergence, log "
             "magnitude)", _build_auraloss_mrstft,
             {"tiny": dict(batch=1, samples=4096), "small": dict(batch=4, samples=16000),
              "large": dict(batch=16, samples=160000)}, trainable=True, third_party="auraloss"),
    Workload("docs-chain", "atan(cos(a*b)/sin(a+b)) on complex64 vectors", _build_docs_chain,
             {"tiny": {"n": 1000}, "small": {"n": 1 << 20}, "large": {"n": 1 << 24}}),
    _gemm_workload(256),
    _gemm_workload(512),
    _gemm_workload(1024),
    Workload("rotary", "LLaMA rotary embedding on q and k", _build_rotary,
             {"tiny": dict(batch=1, seq=8, heads=2, dim=16), "small": dict(batch=4, seq=512, heads=8, dim=64),
              "large": dict(batch=16, seq=2048, heads=32, dim=128)}, trainable=True),
    Workload("fno", "Fourier Neural Operator block (rfft2, complex einsum on low modes, irfft2)", _build_fno,
             {"tiny": dict(batch=2, channels=4, grid=16, modes=4),
              "small": dict(batch=8, channels=32, grid=64, modes=16),
              "large": dict(batch=32, channels=64, grid=128, modes=32)}, trainable=True, gemm=True),
    Workload("s4d", "S4D kernel (complex Vandermonde) and FFT long convolution", _build_s4d,
             {"tiny": dict(batch=2, H=4, N=8, L=32), "small": dict(batch=4, H=64, N=64, L=1024),
              "large": dict(batch=16, H=256, N=64, L=4096)}, trainable=True, gemm=True),
    Workload("lru", "Linear Recurrent Unit: complex diagonal recurrence as a parallel associative_scan", _build_lru,
             {"tiny": dict(batch=2, L=16, H=8, N=8), "small": dict(batch=4, L=1024, H=64, N=64),
              "large": dict(batch=16, L=4096, H=256, N=256)}, trainable=True, gemm=True),
    Workload("cnn", "complex CNN: 2 complex Conv2d, modReLU, cardioid, complex Linear, |z| logits", _build_cnn,
             {"tiny": dict(batch=2), "small": dict(batch=32), "large": dict(batch=256)}, trainable=True, gemm=True),
    Workload("stft-mask", "STFT -> real conv net -> bounded complex mask -> iSTFT", _build_stft,
             {"tiny": dict(batch=1, samples=2048, n_fft=128, hop=32),
              "small": dict(batch=4, samples=16000, n_fft=512, hop=128),
              "large": dict(batch=16, samples=160000, n_fft=512, hop=128)}, trainable=True),
    Workload("quantum", "state-vector variational circuit (RY encoding, RZ·RY layers, CZ ring, <Z>)", _build_quantum,
             {"tiny": dict(batch=2, qubits=3, layers=1), "small": dict(batch=16, qubits=10, layers=4),
              "large": dict(batch=64, qubits=16, layers=4)}, trainable=True, gemm=True),
    # complex linear algebra (realify/bench/linalg_workloads.py): LAPACK in eager, LAPACK on pairs in realify
    Workload("mimo-mmse", "MIMO receiver: least-squares channel estimate from pilots (solve), MMSE detection "
             "(Cholesky, cholesky_solve) of QPSK data; learnable noise variance", build_mimo,
             {"tiny": dict(batch=4, n=4, symbols=8), "small": dict(batch=256, n=16, symbols=64),
              "large": dict(batch=1024, n=64, symbols=256)}, trainable=True, gemm=True),
    Workload("ground-state", "ground-state energy eigvalsh(sum_k theta_k M_k)[0] of a chiral spin chain, "
             "gradient with respect to the couplings", build_ground_state,
             {"tiny": dict(batch=2, qubits=3), "small": dict(batch=16, qubits=6),
              "large": dict(batch=64, qubits=8)}, trainable=True, gemm=True),
    Workload("music-doa", "MUSIC direction of arrival: covariance, eigh noise subspace, pseudo-spectrum on an "
             "angle grid", build_music,
             {"tiny": dict(batch=2, sensors=4, sources=1, snapshots=16, grid=32),
              "small": dict(batch=64, sensors=8, sources=2, snapshots=256, grid=180),
              "large": dict(batch=256, sensors=16, sources=3, snapshots=1024, grid=360)}, trainable=True, gemm=True),
    # imaging (realify/bench/imaging.py): centered FFTs, fftshift/ifftshift around fft2/ifft2
    Workload("mri", "multi-coil MRI: A x = mask * fft2c(S * x) per coil and A^H y = sum_c conj(S_c) ifft2c(y_c) "
             "(fastMRI's centered orthonormal FFTs); training: an unrolled gradient step on ||A x - y||^2",
             build_mri,
             {"tiny": dict(coils=2, size=16), "small": dict(coils=8, size=256), "large": dict(coils=16, size=320)},
             trainable=True),
    # a 532 nm beam on an 8 um pitch phase mask, propagated less than N dx^2 / lambda (where the
    # angular-spectrum method samples its transfer function without aliasing)
    Workload("angular-spectrum", "optical propagation by the angular-spectrum method: phase mask exp(i phase), "
             "centered fft2, transfer function exp(i 2 pi z sqrt(1/lambda^2 - fx^2 - fy^2)), centered ifft2, "
             "intensity |u|^2", build_angular_spectrum,
             {"tiny": dict(size=32, pixel_pitch=8e-6, wavelength=532e-9, distance=2e-3),
              "small": dict(size=512, pixel_pitch=8e-6, wavelength=532e-9, distance=5e-2),
              "large": dict(size=1024, pixel_pitch=8e-6, wavelength=532e-9, distance=1e-1)}, trainable=True),
]}


def names() -> list[str]:
    return list(WORKLOADS)


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; workloads are {', '.join(WORKLOADS)}") from None
