"""Complex linear-algebra workloads, as their users write them: a MIMO receiver, a quantum
ground state, a MUSIC direction-of-arrival estimator.

Each is an ``nn.Module`` (realify/bench/workloads.py registers them as ``mimo-mmse``,
``ground-state`` and ``music-doa``), deterministic given ``torch.manual_seed``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn as nn

C64 = torch.complex64

__all__ = ["GroundStateEnergy", "MMSEReceiver", "MusicSpectrum", "build_ground_state", "build_mimo", "build_music"]


# --------------------------------------------------------------------------- MIMO receiver
class MMSEReceiver(nn.Module):
    """Pilot-based channel estimation and MMSE detection for a batch of nr x nt channels.

    Least squares from the pilots, ``H_hat = Y_p X_p^H (X_p X_p^H)^-1``; then, for the data
    ``Y_d``, ``x_hat = (H_hat^H H_hat + s2 I)^-1 H_hat^H y`` by a Cholesky factorization of the
    Gram matrix and two triangular solves. The noise variance ``s2 = exp(log_noise)`` is
    learnable: training minimizes the detection error against the sent symbols."""

    def __init__(self, nt: int):
        super().__init__()
        self.nt = nt
        self.log_noise = nn.Parameter(torch.tensor(-2.0))

    def forward(self, y_pilot: torch.Tensor, x_pilot: torch.Tensor, y_data: torch.Tensor) -> torch.Tensor:
        gram_p = x_pilot @ x_pilot.mH
        h_hat = torch.linalg.solve(gram_p, y_pilot @ x_pilot.mH, left=False)  # Y X^H (X X^H)^-1
        eye = torch.eye(self.nt, dtype=h_hat.dtype)
        gram = h_hat.mH @ h_hat + torch.exp(self.log_noise) * eye
        factor = torch.linalg.cholesky(gram)
        return torch.cholesky_solve(h_hat.mH @ y_data, factor)


def _qpsk(*shape: int) -> torch.Tensor:
    bits = torch.randint(0, 2, (*shape, 2)).float() * 2 - 1
    return torch.complex(bits[..., 0], bits[..., 1]) / math.sqrt(2)


def _complex_normal(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=C64)


class _DetectionLoss(nn.Module):
    def __init__(self, receiver: MMSEReceiver):
        super().__init__()
        self.receiver = receiver

    def forward(self, y_pilot, x_pilot, y_data, x_data):
        return (self.receiver(y_pilot, x_pilot, y_data) - x_data).abs().pow(2).mean()


def build_mimo(batch: int, n: int, symbols: int, train: bool, snr_db: float = 15.0):
    """``batch`` n x n channels, 2n pilots and ``symbols`` QPSK data vectors each."""
    H = _complex_normal(batch, n, n) / math.sqrt(2)
    sigma = 10 ** (-snr_db / 20)
    x_pilot = _qpsk(1, n, 2 * n).expand(batch, n, 2 * n)
    x_data = _qpsk(batch, n, symbols)
    y_pilot = H @ x_pilot + sigma * _complex_normal(batch, n, 2 * n) / math.sqrt(2)
    y_data = H @ x_data + sigma * _complex_normal(batch, n, symbols) / math.sqrt(2)
    receiver = MMSEReceiver(n)
    if not train:
        return receiver, (y_pilot, x_pilot, y_data)
    return _DetectionLoss(receiver), (y_pilot, x_pilot, y_data, x_data)


# --------------------------------------------------------------------------- ground state
def _pauli_strings(qubits: int) -> torch.Tensor:
    """The terms of a spin chain with a chiral (Dzyaloshinskii-Moriya) interaction, as
    2^q x 2^q matrices: Z_i Z_{i+1}, X_i, and X_i Y_{i+1} - Y_i X_{i+1} (complex Hermitian)."""
    eye = torch.eye(2, dtype=C64)
    x = torch.tensor([[0, 1], [1, 0]], dtype=C64)
    y = torch.tensor([[0, -1j], [1j, 0]], dtype=C64)
    z = torch.tensor([[1, 0], [0, -1]], dtype=C64)

    def chain(ops: dict[int, torch.Tensor]) -> torch.Tensor:
        return functools.reduce(torch.kron, [ops.get(i, eye) for i in range(qubits)])

    terms = []
    for i in range(qubits - 1):
        terms.append(chain({i: z, i + 1: z}))
        terms.append(chain({i: x, i + 1: y}) - chain({i: y, i + 1: x}))
    terms += [chain({i: x}) for i in range(qubits)]
    return torch.stack(terms)


class GroundStateEnergy(nn.Module):
    """The ground-state energy ``eigvalsh(H(theta))[0]`` of ``H(theta) = sum_k theta_k M_k``
    for a batch of couplings ``theta``; its gradient is ``<psi_0| M_k |psi_0>`` (Hellmann-
    Feynman), eager's eigh derivative."""

    def __init__(self, qubits: int):
        super().__init__()
        self.register_buffer("terms", _pauli_strings(qubits))

    def forward(self, theta: torch.Tensor) -> torch.Tensor:
        hamiltonian = torch.einsum("bk,kij->bij", theta.to(C64), self.terms)
        return torch.linalg.eigvalsh(hamiltonian)[..., 0]


class _EnergySum(nn.Module):
    def __init__(self, model: GroundStateEnergy):
        super().__init__()
        self.model = model

    def forward(self, theta):
        return self.model(theta).sum()


def build_ground_state(batch: int, qubits: int, train: bool):
    model = GroundStateEnergy(qubits)
    theta = torch.randn(batch, model.terms.shape[0], requires_grad=train)
    return (_EnergySum(model) if train else model), (theta,)


# --------------------------------------------------------------------------- MUSIC
class MusicSpectrum(nn.Module):
    """MUSIC pseudo-spectrum of a uniform linear array (half-wavelength spacing) on a grid of
    angles: ``R = X X^H / T``, its noise subspace ``E_n`` (the eigenvectors of the
    ``sensors - sources`` smallest eigenvalues of eigh), ``P(theta) = 1 / ||E_n^H a(theta)||^2``."""

    def __init__(self, sensors: int, sources: int, grid: int):
        super().__init__()
        self.noise_dim = sensors - sources
        angles = torch.linspace(-math.pi / 2, math.pi / 2, grid)
        phase = -math.pi * torch.arange(sensors).unsqueeze(-1) * torch.sin(angles)
        self.register_buffer("steering", torch.polar(torch.ones_like(phase), phase))  # (sensors, grid)

    def forward(self, snapshots: torch.Tensor) -> torch.Tensor:
        covariance = snapshots @ snapshots.mH / snapshots.shape[-1]
        _, vectors = torch.linalg.eigh(covariance)
        noise = vectors[..., :self.noise_dim]
        return 1 / (noise.mH @ self.steering).abs().pow(2).sum(-2)


class _PeakLoss(nn.Module):
    def __init__(self, model: MusicSpectrum):
        super().__init__()
        self.model = model

    def forward(self, snapshots):
        return self.model(snapshots).log().mean()


def build_music(batch: int, sensors: int, sources: int, snapshots: int, grid: int, train: bool):
    """``sources`` plane waves at random angles in noise, ``snapshots`` samples per array."""
    model = MusicSpectrum(sensors, sources, grid)
    angles = (torch.rand(batch, 1, sources) - 0.5) * math.pi * 0.8
    phase = -math.pi * torch.arange(sensors).view(1, -1, 1) * torch.sin(angles)
    steering = torch.polar(torch.ones_like(phase), phase)  # (batch, sensors, sources)
    signals = _complex_normal(batch, sources, snapshots)
    x = steering @ signals + 0.1 * _complex_normal(batch, sensors, snapshots)
    x = x.detach().requires_grad_(train)
    return (_PeakLoss(model) if train else model), (x,)
